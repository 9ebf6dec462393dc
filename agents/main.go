// Command mlsysops-agent runs one MLSysOps agent: the continuum, a cluster or
// a node layer (see agents/agent).
package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/mlsysops-go/mlsysops/agents/agent"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	code := agent.Run(agent.NewCommand(ctx, log))
	stop()
	os.Exit(code)
}
