// Command mlsysops-agent runs one MLSysOps agent: the continuum, a cluster or
// a node layer. agents/agent is what every layer shares; each layer lives in
// its own package and registers itself when imported: agents/node always,
// agents/cluster and agents/continuum in the full build only (layers.go).
package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/mlsysops-go/mlsysops/agents/agent"
	_ "github.com/mlsysops-go/mlsysops/agents/node" // every build runs the node layer
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	code := agent.Run(agent.NewCommand(ctx, log))
	stop()
	os.Exit(code)
}
