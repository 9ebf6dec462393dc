package commands

import (
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/mlsysops-go/mlsysops/northbound/api"
)

// NewInfraCommand builds mls infra.
func NewInfraCommand(streams IOStreams, apiOpts *APIOptions) *cobra.Command {
	var output string
	cmd := &cobra.Command{Use: "infra", Short: "Show the continuum's clusters and nodes, and register node descriptions", Args: cobra.NoArgs}
	outputFlag(cmd.PersistentFlags(), &output)

	var typ, name string
	list := &cobra.Command{
		Use:   "list-infra",
		Short: "Show the continuum, its clusters or its nodes with their live state",
		Long: `Show the infrastructure with its live state: whether each cluster is Ready
in Karmada and its agent online, and the allocatable and free CPU, memory
and GPUs (by model) of each cluster or node.`,
		Example: `  mls infra list-infra
  mls infra list-infra --type Cluster --name cloud-1
  mls infra list-infra --type Node -o yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := apiOpts.Client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			switch strings.ToLower(typ) {
			case "all", "continuum", "":
				cont, err := c.Continuum(ctx)
				if err != nil {
					return err
				}
				return render(streams.Out, output, cont, func(tw *tabwriter.Writer) {
					if cont.ID != "" {
						fmt.Fprintf(tw, "Continuum:\t%s\n", cont.ID)
					}
					fmt.Fprintf(tw, "Continuum agent:\t%s\n", agentText(cont.Agent))
					fmt.Fprintf(tw, "Free of Ready clusters:\t%s\n\n", resourcesText(cont.Totals))
					printClusters(tw, cont.Clusters)
				})
			case "cluster":
				if name == "" {
					cs, err := c.Clusters(ctx)
					if err != nil {
						return err
					}
					return render(streams.Out, output, cs, func(tw *tabwriter.Writer) { printClusters(tw, cs) })
				}
				cl, err := c.Cluster(ctx, name)
				if err != nil {
					return err
				}
				return render(streams.Out, output, cl, func(tw *tabwriter.Writer) {
					printClusters(tw, []api.Cluster{cl})
					fmt.Fprintln(tw)
					printNodes(tw, cl.Nodes)
				})
			case "node":
				var nodes []api.Node
				if name != "" {
					n, err := c.Node(ctx, name)
					if err != nil {
						return err
					}
					nodes = []api.Node{n}
				} else if nodes, err = c.Nodes(ctx, "", ""); err != nil {
					return err
				}
				return render(streams.Out, output, nodes, func(tw *tabwriter.Writer) { printNodes(tw, nodes) })
			case "datacenter":
				return fmt.Errorf("datacenters are not tracked; use --type Cluster or --type Node")
			}
			return fmt.Errorf("--type must be All, Continuum, Cluster or Node, not %q", typ)
		},
	}
	list.Flags().StringVar(&typ, "type", "All", "what to show: All, Continuum, Cluster or Node")
	list.Flags().StringVar(&name, "name", "", "one cluster or node")

	var path, uri string
	register := &cobra.Command{
		Use:   "register-node --path FILE | --uri URL",
		Short: "Register (or replace) a node description; its cluster_id must name a member cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := apiOpts.Client()
			if err != nil {
				return err
			}
			body, ct, err := readDescription(cmd.Context(), path, uri)
			if err != nil {
				return err
			}
			res, err := c.RegisterNode(cmd.Context(), body, ct)
			if err != nil {
				return err
			}
			return render(streams.Out, output, res, func(tw *tabwriter.Writer) {
				verb := "replaced"
				if res.Created {
					verb = "registered"
				}
				fmt.Fprintf(tw, "Node description %s of cluster %s %s.\n", res.Name, res.Cluster, verb)
			})
		},
	}
	register.Flags().StringVar(&path, "path", "", "node description file")
	register.Flags().StringVar(&uri, "uri", "", "URL of the node description (fetched by mls)")

	unregister := &cobra.Command{
		Use:   "unregister-node NAME",
		Short: "Delete a registered node description",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := apiOpts.Client()
			if err != nil {
				return err
			}
			if err := c.UnregisterNode(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(streams.Out, "Node description %s unregistered.\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(list, register, unregister)
	return cmd
}

func agentText(a *api.AgentState) string {
	switch {
	case a == nil:
		return "none registered"
	case a.Online:
		return a.JID + " online"
	}
	return a.JID + " offline"
}

func cpuText(m int64) string {
	if m%1000 == 0 {
		return fmt.Sprintf("%d", m/1000)
	}
	return fmt.Sprintf("%.1f", float64(m)/1000)
}

func bytesText(b int64) string {
	const gi = 1 << 30
	if b >= gi {
		return fmt.Sprintf("%.1fGi", float64(b)/gi)
	}
	return fmt.Sprintf("%dMi", b>>20)
}

func gpusText(g map[string]api.GPUs) string {
	if len(g) == 0 {
		return "-"
	}
	models := make([]string, 0, len(g))
	for m := range g {
		models = append(models, m)
	}
	sort.Strings(models)
	var parts []string
	for _, m := range models {
		parts = append(parts, fmt.Sprintf("%d/%d %s", g[m].Free, g[m].Allocatable, m))
	}
	return strings.Join(parts, ", ")
}

func resourcesText(r api.Resources) string {
	return fmt.Sprintf("CPU %s/%s, memory %s/%s, GPUs %s", cpuText(r.CPU.Free), cpuText(r.CPU.Allocatable),
		bytesText(r.Memory.Free), bytesText(r.Memory.Allocatable), gpusText(r.GPUs))
}

func printClusters(tw *tabwriter.Writer, cs []api.Cluster) {
	fmt.Fprintln(tw, "CLUSTER\tREADY\tAGENT\tNODES\tCPU FREE/ALLOC\tMEMORY FREE/ALLOC\tGPUS FREE/ALLOC")
	for _, c := range cs {
		fmt.Fprintf(tw, "%s\t%t\t%s\t%d\t%s/%s\t%s/%s\t%s\n", c.Name, c.Ready, agentText(c.Agent), c.NodeCount,
			cpuText(c.Resources.CPU.Free), cpuText(c.Resources.CPU.Allocatable),
			bytesText(c.Resources.Memory.Free), bytesText(c.Resources.Memory.Allocatable), gpusText(c.Resources.GPUs))
	}
}

func printNodes(tw *tabwriter.Writer, ns []api.Node) {
	fmt.Fprintln(tw, "NODE\tCLUSTER\tLAYER\tREADY\tAGENT\tDESCRIBED\tCPU FREE/ALLOC\tMEMORY FREE/ALLOC\tGPUS FREE/ALLOC")
	for _, n := range ns {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%t\t%s\t%t\t%s/%s\t%s/%s\t%s\n", n.Name, n.Cluster, orDash(n.Layer), n.Ready, agentText(n.Agent), n.Described,
			cpuText(n.Resources.CPU.Free), cpuText(n.Resources.CPU.Allocatable),
			bytesText(n.Resources.Memory.Free), bytesText(n.Resources.Memory.Allocatable), gpusText(n.Resources.GPUs))
	}
}
