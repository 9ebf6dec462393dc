package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/mlsysops-go/mlsysops/internal/benchfig"
)

func newCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "benchfig",
		Short:         "Keep benchmark figures in one JSON file and generate the documentation's tables from it",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	var out string
	var appendTo bool
	run := &cobra.Command{
		Use:   "run -- COMMAND [ARGS...]",
		Short: "Run a benchmark command (go test -json -bench ..., or one printing Go's benchmark lines) and write its figures, each with the command, the time and the machine's load",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			results := &benchfig.Results{}
			if appendTo {
				r, err := benchfig.ReadResults(out)
				if err != nil && !errors.Is(err, os.ErrNotExist) {
					return err
				}
				if r != nil {
					results = r
				}
			}
			figs, runErr := benchfig.Run(cmd.Context(), args, os.Stdout)
			results.Add(figs...)
			if err := results.Write(out); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "benchfig: %d figures written to %s\n", len(figs), out)
			return runErr
		},
	}
	run.Flags().StringVar(&out, "out", "bench/results.json", "results file")
	run.Flags().BoolVar(&appendTo, "append", false, "add to the results file (replacing figures of the same benchmark and unit) instead of starting it anew")
	root.AddCommand(run)

	var resultsFile string
	var check bool
	render := &cobra.Command{
		Use:   "render FILE...",
		Short: "Rewrite the marked tables (<!-- bench:NAME --> ... <!-- /bench:NAME -->) of Markdown files from the results file",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, files []string) error {
			r, err := benchfig.ReadResults(resultsFile)
			if err != nil {
				return err
			}
			var stale []string
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					return err
				}
				doc, err := benchfig.Render(string(b), r)
				if err != nil {
					return fmt.Errorf("%s: %w", f, err)
				}
				if doc == string(b) {
					continue
				}
				if check {
					stale = append(stale, f)
					continue
				}
				if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
					return err
				}
			}
			if len(stale) > 0 {
				return fmt.Errorf("tables not generated from %s: %v (run make bench-readme)", resultsFile, stale)
			}
			return nil
		},
	}
	render.Flags().StringVar(&resultsFile, "results", "bench/results.json", "results file")
	render.Flags().BoolVar(&check, "check", false, "only check that the tables are as the results file says")
	root.AddCommand(render)
	return root
}
