package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/mlsysops-go/mlsysops/internal/testbed/gen"
)

// newGenCommand writes generated descriptions of a continuum of any size.
func newGenCommand() *cobra.Command {
	o := gen.Options{Clusters: 10, Nodes: 1000, Continuum: "mls-continuum", Seed: 1}
	out := ""
	cmd := &cobra.Command{
		Use:   "gen-descriptions --out DIR [--clusters N] [--nodes N]",
		Short: "Write the descriptions of a generated continuum (cloud, edge and far-edge clusters of a realistic mix of nodes) into DIR",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return fmt.Errorf("--out: required (an empty folder, or one that does not exist yet)")
			}
			if err := gen.Write(out, o); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %d clusters of %d nodes into %s: %v\n", o.Clusters, o.Nodes, out, gen.ClusterNames(o))
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "folder to write continuum/, clusters/ and nodes/ into")
	cmd.Flags().IntVar(&o.Clusters, "clusters", o.Clusters, "member clusters")
	cmd.Flags().IntVar(&o.Nodes, "nodes", o.Nodes, "nodes per cluster, its control node included")
	cmd.Flags().StringVar(&o.Continuum, "continuum", o.Continuum, "name of the continuum (and of its agent's host)")
	cmd.Flags().Uint64Var(&o.Seed, "seed", o.Seed, "seed of the mix of nodes: the same seed writes the same files")
	return cmd
}
