package commands

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mlsysops-go/mlsysops/northbound/api"
)

// NewAgentCommand builds mls agent: the agents' policies.
func NewAgentCommand(streams IOStreams, apiOpts *APIOptions) *cobra.Command {
	var output, layer string
	cmd := &cobra.Command{Use: "agent", Short: "Manage the agents' policies (hot-reloaded by the agents)", Args: cobra.NoArgs}
	outputFlag(cmd.PersistentFlags(), &output)
	layerFlag := func(fs *pflag.FlagSet) {
		fs.StringVar(&layer, "agent", "", "layer of the agents: "+strings.Join(api.Layers, ", "))
	}
	checkLayer := func() error {
		if !api.ValidLayer(layer) {
			return fmt.Errorf("--agent must be one of %s, not %q", strings.Join(api.Layers, ", "), layer)
		}
		return nil
	}

	var file string
	set := &cobra.Command{
		Use:     "set-policy --agent LAYER --file policy-NAME.star",
		Short:   "Upload a policy for the agents of a layer; it is checked first and reloaded by the agents",
		Example: `  mls agent set-policy --agent cluster --file policy-relocate.star`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			if err := checkLayer(); err != nil {
				return err
			}
			src, err := os.ReadFile(file)
			if err != nil {
				return fmt.Errorf("read the policy: %w", err)
			}
			c, err := apiOpts.Client()
			if err != nil {
				return err
			}
			p, created, err := c.PutPolicy(cmd.Context(), layer, filepath.Base(file), src)
			if err != nil {
				return err
			}
			return render(streams.Out, output, p, func(tw *tabwriter.Writer) {
				verb := "replaced"
				if created {
					verb = "added"
				}
				fmt.Fprintf(tw, "Policy %s %s for the %s agents (%s); they reload it.\n", p.Name, verb, p.Layer, p.Location)
			})
		},
	}
	layerFlag(set.Flags())
	set.Flags().StringVar(&file, "file", "", "the policy file; its name becomes the policy's name")
	_ = set.MarkFlagRequired("agent")
	_ = set.MarkFlagRequired("file")

	del := &cobra.Command{
		Use:   "delete-policy NAME --agent LAYER",
		Short: "Delete a policy of a layer",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkLayer(); err != nil {
				return err
			}
			c, err := apiOpts.Client()
			if err != nil {
				return err
			}
			if err := c.DeletePolicy(cmd.Context(), layer, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(streams.Out, "Policy %s deleted for the %s agents.\n", args[0], layer)
			return nil
		},
	}
	layerFlag(del.Flags())
	_ = del.MarkFlagRequired("agent")

	list := &cobra.Command{
		Use:   "list-policies [--agent LAYER]",
		Short: "List the policies of every layer, or of one",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			if layer != "" {
				if err := checkLayer(); err != nil {
					return err
				}
			}
			c, err := apiOpts.Client()
			if err != nil {
				return err
			}
			ps, err := c.Policies(cmd.Context(), layer)
			if err != nil {
				return err
			}
			return render(streams.Out, output, ps, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "LAYER\tPOLICY\tBYTES\tLOCATION")
				for _, p := range ps {
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", p.Layer, p.Name, p.Size, p.Location)
				}
			})
		},
	}
	layerFlag(list.Flags())

	get := &cobra.Command{
		Use:   "get-policy NAME --agent LAYER",
		Short: "Print a policy's source",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			if err := checkLayer(); err != nil {
				return err
			}
			c, err := apiOpts.Client()
			if err != nil {
				return err
			}
			p, err := c.Policy(cmd.Context(), layer, args[0])
			if err != nil {
				return err
			}
			return render(streams.Out, output, p, func(tw *tabwriter.Writer) { fmt.Fprint(tw, p.Source) })
		},
	}
	layerFlag(get.Flags())
	_ = get.MarkFlagRequired("agent")
	cmd.AddCommand(set, del, list, get)
	return cmd
}
