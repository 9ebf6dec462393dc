// Package commands holds the mls command tree. Each sub-command lives in
// its own file with a NewXCommand constructor taking the IOStreams, and is
// registered in NewRootCommand.
package commands

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

// IOStreams are the streams a command reads and writes.
type IOStreams struct {
	// In is standard input.
	In io.Reader
	// Out receives results.
	Out io.Writer
	// ErrOut receives errors and progress.
	ErrOut io.Writer
}

// StdStreams returns the process's standard streams.
func StdStreams() IOStreams {
	return IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
}

// errReported is returned by a command that has already told the user
// what went wrong; Execute only sets the exit code for it.
var errReported = errors.New("reported")

// NewRootCommand builds the mls command with every sub-command.
func NewRootCommand(streams IOStreams) *cobra.Command {
	root := &cobra.Command{
		Use:   "mls",
		Short: "Manage MLSysOps applications, models and infrastructure",
		Long: `mls is the command-line tool of MLSysOps.

It validates application and system descriptions, and talks to the
northbound API of a running continuum: set MLS_API_URL (or MLS_API_IP and
MLS_API_PORT) and MLS_TOKEN, which ` + "`make up`" + ` writes to .testbed/env:

  . .testbed/env
  mls apps deploy-app --path examples/apps/gpu-inference.yaml
  mls watch llm-inference

Tables are the default output; -o json and -o yaml print the API's
answers. Shell completion: mls completion bash|zsh|fish|powershell.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	apiOpts := &APIOptions{}
	apiOpts.AddFlags(root.PersistentFlags())
	root.AddCommand(
		NewValidateCommand(streams),
		NewAppsCommand(streams, apiOpts),
		NewMLCommand(streams, apiOpts),
		NewInfraCommand(streams, apiOpts),
		NewManageCommand(streams, apiOpts),
		NewAgentCommand(streams, apiOpts),
		NewWatchCommand(streams, apiOpts),
	)
	return root
}

// Execute runs the mls command with args and returns the process exit
// code: 0 on success, 1 on failure.
func Execute(ctx context.Context, streams IOStreams, args []string) int {
	root := NewRootCommand(streams)
	root.SetArgs(args)
	if err := root.ExecuteContext(ctx); err != nil {
		if !errors.Is(err, errReported) {
			fmt.Fprintf(streams.ErrOut, "Error: %v\n", err)
		}
		return 1
	}
	return 0
}
