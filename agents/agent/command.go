package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mlsysops-go/mlsysops/internal/agentconfig"
	"github.com/mlsysops-go/mlsysops/internal/logging"
)

// Version is the agent's build version, reported when it subscribes.
var Version = "dev"

// NewCommand returns the agent command: one binary for the three layers,
// chosen by --layer (or continuum_layer in the configuration file).
func NewCommand(ctx context.Context, log *slog.Logger) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mlsysops-agent --layer continuum|cluster|node [flags]",
		Short: "MLSysOps agent: continuum, cluster or node layer",
		Long: `The MLSysOps agent. One binary runs every layer of the hierarchy:

  continuum  on the Karmada host: MLSysOps API in Karmada, cluster placement,
             registry of cluster agents (Redis)
  cluster    one per member cluster: node registration (MLSysOpsNode CRs),
             component placement, node telemetry in Redis
  node       one per node: telemetry, node mechanisms (CPU frequency, GPU),
             plans relayed to the cluster (fluidity_proxy)

Identity: $NODE_NAME or the host name, or --node-name. The agent loads its own
description from --descriptions and refuses to start without a valid one.`,
		SilenceUsage:       true,
		SilenceErrors:      true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return run(ctx, cmd.OutOrStderr(), args, os.LookupEnv, log)
		},
	}
	cmd.SetContext(ctx)
	return cmd
}

// Run executes the command and returns the process exit code.
func Run(cmd *cobra.Command) int {
	if err := cmd.Execute(); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(cmd.ErrOrStderr(), "mlsysops-agent:", err)
		return 1
	}
	return 0
}

// flagSets returns the connection and configuration flag sets, for parsing
// and for --help.
func flagSets(conn *Connection) (*pflag.FlagSet, *pflag.FlagSet) {
	cfs := pflag.NewFlagSet("connection", pflag.ContinueOnError)
	conn.AddFlags(cfs)
	ofs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	agentconfig.NewOptions().AddFlags(ofs)
	return cfs, ofs
}

// loadOptions reads both option sets from args and env.
func loadOptions(args []string, env agentconfig.LookupEnv) (*agentconfig.Options, *Connection, []agentconfig.Warning, error) {
	conn := NewConnection()
	if err := conn.FromEnv(env); err != nil {
		return nil, nil, nil, err
	}
	cfs, ofs := flagSets(conn)
	connArgs, cfgArgs, err := splitArgs(args, cfs, ofs)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := cfs.Parse(connArgs); err != nil {
		return nil, nil, nil, err
	}
	opts, warnings, err := agentconfig.Load(cfgArgs, env)
	if err != nil {
		return nil, nil, warnings, err
	}
	if conn.Descriptions == "" {
		conn.Descriptions = opts.InstallPath + "/descriptions"
	}
	if err := conn.Validate(opts.Layer); err != nil {
		return nil, nil, warnings, err
	}
	return opts, conn, warnings, nil
}

func usage(w io.Writer) {
	conn := NewConnection()
	cfs, ofs := flagSets(conn)
	fmt.Fprintln(w, "Usage: mlsysops-agent --layer continuum|cluster|node [flags]   (--layer is --continuum-layer)")
	fmt.Fprintf(w, "This binary runs %s.\n", LayersBuilt())
	fmt.Fprintln(w, "\nAgent flags (also upstream config.yaml keys and MLSYSOPS_* variables):")
	fmt.Fprint(w, ofs.FlagUsages())
	fmt.Fprintln(w, "\nConnection flags:")
	fmt.Fprint(w, cfs.FlagUsages())
}

func run(ctx context.Context, out io.Writer, args []string, env agentconfig.LookupEnv, boot *slog.Logger) error {
	for _, a := range args {
		if a == "--help" || a == "-h" {
			usage(out)
			return pflag.ErrHelp
		}
	}
	opts, conn, warnings, err := loadOptions(args, env)
	if err != nil {
		for _, w := range warnings {
			boot.Warn("configuration", "warning", w.String())
		}
		return fmt.Errorf("configuration: %w", err)
	}
	log := NewLogger(os.Stderr, conn.LogFormat, conn.LogLevel)
	for _, w := range warnings {
		log.Warn("configuration key ignored", "warning", w.String())
	}
	rs, err := runtimeFor(opts.Layer, conn, env)
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}
	rs.apply(log)
	if conn.LeaderElect {
		return runReplica(ctx, opts, conn, env, log)
	}
	a, err := New(ctx, opts, conn, env, log)
	if err != nil {
		return err
	}
	return a.Run(ctx)
}

// NewLogger returns the agent's slog logger: JSON or text, at a level.
func NewLogger(w io.Writer, format, level string) *slog.Logger {
	return logging.New(w, format, level)
}
