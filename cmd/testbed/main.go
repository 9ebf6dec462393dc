// Command testbed runs a local MLSysOps continuum from real components:
// etcd, the Karmada host and control plane, one member cluster per cluster
// description with KWOK nodes per node description, ejabberd and Redis.
//
//	go run ./cmd/testbed up      # start or reuse, wait until Ready
//	go run ./cmd/testbed status  # one line per component
//	go run ./cmd/testbed down    # stop everything (--purge: delete state)
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/mlsysops-go/mlsysops/internal/testbed/kwoklet"
)

func main() {
	// The kwoklet runs each agent process through this binary.
	kwoklet.RunSandboxIfAsked()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newCommand().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "testbed:", err)
		os.Exit(1)
	}
}
