// Command mlsysops-demo is the project's demo workload (internal/demo): a
// server and a client exchanging messages, with Prometheus metrics and a
// degradation knob keyed by node.
//
//	mlsysops-demo server [--listen :7070] [--metrics-listen :9090] [--admin]
//	mlsysops-demo client [--server host:port] [--interval 100ms]
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/mlsysops-go/mlsysops/internal/demo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newCommand().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "mlsysops-demo:", err)
		os.Exit(1)
	}
}

func newCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "mlsysops-demo",
		Short:         "MLSysOps demo workload: a server and a client exchanging messages, with QoS metrics",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	for _, mode := range []string{demo.ModeServer, demo.ModeClient} {
		o := demo.NewOptions(mode, os.Getenv)
		cmd := &cobra.Command{
			Use:   mode,
			Short: map[string]string{demo.ModeServer: "Answer the clients' messages", demo.ModeClient: "Send messages to the server and time the answers"}[mode],
			Args:  cobra.NoArgs,
			RunE:  func(cmd *cobra.Command, _ []string) error { return demo.Run(cmd.Context(), o, log) },
		}
		o.AddFlags(cmd.Flags())
		root.AddCommand(cmd)
	}
	return root
}
