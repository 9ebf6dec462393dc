// Command mlsysops-accounts keeps the MLSysOps agents' XMPP accounts and
// roster links in place on ejabberd (see internal/accounts).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/mlsysops-go/mlsysops/internal/accounts"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := accounts.NewCommand().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}
