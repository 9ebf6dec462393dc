// Command deployments installs MLSysOps on a Karmada federation:
//
//	go run ./deployments [install|upgrade|uninstall|status|render] [flags]
//
// See deployments/deployer and docs/install.md.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/mlsysops-go/mlsysops/deployments/deployer"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := deployer.NewCommand(ctx, os.Stdout).Execute()
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "deployments:", err)
		os.Exit(1)
	}
}
