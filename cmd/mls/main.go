// Command mls is the MLSysOps command-line tool.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/mlsysops-go/mlsysops/cmd/mls/commands"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := commands.Execute(ctx, commands.StdStreams(), os.Args[1:])
	stop()
	os.Exit(code)
}
