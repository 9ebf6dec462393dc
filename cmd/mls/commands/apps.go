package commands

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/mlsysops-go/mlsysops/northbound/api"
	"github.com/mlsysops-go/mlsysops/northbound/client"
)

// kindNames name the verbs of one collection as the upstream CLI does.
type kindNames struct {
	group, short, noun, suffix string
	ml                         bool
}

var (
	appNames = kindNames{group: "apps", short: "Deploy and follow applications", noun: "application", suffix: "app"}
	mlNames  = kindNames{group: "ml", short: "Deploy and follow ML model deployments", noun: "ML deployment", suffix: "ml", ml: true}
)

// collectionOptions are shared by the commands of apps and ml.
type collectionOptions struct {
	api     *APIOptions
	streams IOStreams
	names   kindNames
	output  string
}

func (o *collectionOptions) collection() (*client.Collection, error) {
	if err := checkOutput(o.output); err != nil {
		return nil, err
	}
	c, err := o.api.Client()
	if err != nil {
		return nil, err
	}
	if o.names.ml {
		return c.MLDeployments(), nil
	}
	return c.Applications(), nil
}

// NewAppsCommand builds mls apps.
func NewAppsCommand(streams IOStreams, apiOpts *APIOptions) *cobra.Command {
	cmd, _ := newCollectionCommand(streams, apiOpts, appNames)
	return cmd
}

// NewMLCommand builds mls ml: the ML deployments of the northbound API
// (deploy-ml, list-all, ...) and the ML connector's model registry,
// deployments, predictions, drift and runtimes.
func NewMLCommand(streams IOStreams, apiOpts *APIOptions) *cobra.Command {
	cmd, o := newCollectionCommand(streams, apiOpts, mlNames)
	addMLConnectorCommands(cmd, streams, apiOpts, &o.output)
	return cmd
}

func newCollectionCommand(streams IOStreams, apiOpts *APIOptions, n kindNames) (*cobra.Command, *collectionOptions) {
	o := &collectionOptions{api: apiOpts, streams: streams, names: n}
	cmd := &cobra.Command{Use: n.group, Short: n.short, Args: cobra.NoArgs}
	outputFlag(cmd.PersistentFlags(), &o.output)
	ids := completeIDs(apiOpts, n.ml)

	var path, uri, idem string
	deploy := &cobra.Command{
		Use:   "deploy-" + n.suffix + " --path FILE | --uri URL",
		Short: "Submit an " + n.noun + " description (JSON or YAML)",
		Example: map[bool]string{
			false: "  mls apps deploy-app --path examples/apps/gpu-inference.yaml",
			true:  "  mls ml deploy-ml --path model-deployment.json",
		}[n.ml],
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			coll, err := o.collection()
			if err != nil {
				return err
			}
			body, ct, err := readDescription(cmd.Context(), path, uri)
			if err != nil {
				return err
			}
			var opts []client.SubmitOption
			if idem != "" {
				opts = append(opts, client.WithIdempotencyKey(idem))
			}
			acc, err := coll.Submit(cmd.Context(), body, ct, opts...)
			if err != nil {
				return err
			}
			return o.printAccepted(acc)
		},
	}
	deploy.Flags().StringVar(&path, "path", "", "description file")
	deploy.Flags().StringVar(&uri, "uri", "", "URL of the description (fetched by mls)")
	deploy.Flags().StringVar(&idem, "idempotency-key", "", "makes a retry of this submission safe")

	var upath, uuri string
	update := &cobra.Command{
		Use:               "update-" + n.suffix + " ID --path FILE | --uri URL",
		Short:             "Submit a new description of an " + n.noun,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: ids,
		RunE: func(cmd *cobra.Command, args []string) error {
			coll, err := o.collection()
			if err != nil {
				return err
			}
			body, ct, err := readDescription(cmd.Context(), upath, uuri)
			if err != nil {
				return err
			}
			acc, err := coll.Update(cmd.Context(), args[0], body, ct)
			if err != nil {
				return err
			}
			return o.printAccepted(acc)
		},
	}
	update.Flags().StringVar(&upath, "path", "", "description file")
	update.Flags().StringVar(&uuri, "uri", "", "URL of the description (fetched by mls)")

	var phases []string
	var limit int
	list := &cobra.Command{
		Use:   "list-all",
		Short: "List " + n.noun + "s and their phases",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			coll, err := o.collection()
			if err != nil {
				return err
			}
			var items []api.Summary
			if limit > 0 {
				page, err := coll.List(cmd.Context(), client.ListOptions{Phases: phases, Limit: limit})
				if err != nil {
					return err
				}
				items = page.Items
			} else if items, err = coll.ListAll(cmd.Context(), phases...); err != nil {
				return err
			}
			return render(o.streams.Out, o.output, items, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "ID\tPHASE\tLAST REQUEST\tGENERATION\tUPDATED\tMESSAGE")
				for _, it := range items {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", it.ID, it.Phase, it.LastRequest, it.Generation, age(it.UpdatedAt), orDash(it.Message))
				}
			})
		},
	}
	list.Flags().StringSliceVar(&phases, "phase", nil, "only these phases (repeat or comma-separate)")
	list.Flags().IntVar(&limit, "limit", 0, "show one page of this many (default: every page)")

	status := &cobra.Command{
		Use:               "get-" + n.suffix + "-status ID",
		Short:             "Show an " + n.noun + "'s phase",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: ids,
		RunE: func(cmd *cobra.Command, args []string) error {
			coll, err := o.collection()
			if err != nil {
				return err
			}
			a, err := coll.Get(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			v := map[string]string{"id": a.ID, "phase": a.Phase, "message": a.Message}
			return render(o.streams.Out, o.output, v, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "ID\tPHASE\tMESSAGE")
				fmt.Fprintf(tw, "%s\t%s\t%s\n", a.ID, a.Phase, orDash(a.Message))
			})
		},
	}

	details := &cobra.Command{
		Use:               "get-" + n.suffix + "-details ID",
		Short:             "Show an " + n.noun + ": phase, conditions, where each component runs and its endpoints",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: ids,
		RunE: func(cmd *cobra.Command, args []string) error {
			coll, err := o.collection()
			if err != nil {
				return err
			}
			a, err := coll.Get(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return render(o.streams.Out, o.output, a, func(tw *tabwriter.Writer) { printDetails(tw, a) })
		},
	}

	perf := &cobra.Command{
		Use:               "get-" + n.suffix + "-performance ID",
		Short:             "Show an " + n.noun + "'s QoS metrics against their targets",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: ids,
		RunE: func(cmd *cobra.Command, args []string) error {
			coll, err := o.collection()
			if err != nil {
				return err
			}
			p, err := coll.Performance(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return render(o.streams.Out, o.output, p, func(tw *tabwriter.Writer) { printPerformance(tw, p) })
		},
	}

	remove := &cobra.Command{
		Use:               "remove-" + n.suffix + " ID",
		Short:             "Remove an " + n.noun,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: ids,
		RunE: func(cmd *cobra.Command, args []string) error {
			coll, err := o.collection()
			if err != nil {
				return err
			}
			acc, err := coll.Remove(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return o.printAccepted(acc)
		},
	}
	cmd.AddCommand(deploy, update, list, status, details, perf, remove, newWatchCommand(streams, apiOpts, n.ml, "watch"))
	return cmd, o
}

func (o *collectionOptions) printAccepted(acc api.Accepted) error {
	return render(o.streams.Out, o.output, acc, func(tw *tabwriter.Writer) {
		verb := map[string]string{"deploy": "queued", "update": "update queued", "remove": "removal queued"}[acc.Request]
		if acc.Replayed {
			verb += " (already submitted with this idempotency key)"
		}
		fmt.Fprintf(tw, "%s %s %s, phase %s, generation %d.\n", strings.ToUpper(o.names.noun[:1])+o.names.noun[1:], acc.ID, verb, acc.Phase, acc.Generation)
		watch := "mls watch " + acc.ID
		if o.names.ml {
			watch = "mls watch --ml " + acc.ID
		}
		fmt.Fprintf(tw, "Follow it with: %s\n", watch)
	})
}

func printDetails(tw *tabwriter.Writer, a api.Application) {
	fmt.Fprintf(tw, "ID:\t%s\n", a.ID)
	fmt.Fprintf(tw, "Phase:\t%s (from the %s)\n", a.Phase, a.PhaseSource)
	if a.Message != "" {
		fmt.Fprintf(tw, "Message:\t%s\n", a.Message)
	}
	fmt.Fprintf(tw, "Last request:\t%s, generation %d, %s ago\n", a.LastRequest, a.Generation, age(a.UpdatedAt))
	if a.Resource != nil {
		fmt.Fprintf(tw, "Resource:\t%s/%s (generation %d, observed %d)\n", a.Resource.Namespace, a.Resource.Name, a.Resource.Generation, a.Resource.ObservedGeneration)
	} else {
		fmt.Fprintf(tw, "Resource:\tnot created yet\n")
	}
	for _, w := range a.Warnings {
		fmt.Fprintf(tw, "Warning:\t%s\n", w)
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "COMPONENT\tCLUSTER\tNODES\tREADY\tGPU\tMESSAGE")
	for _, c := range a.Components {
		gpu := "-"
		if c.GPUs > 0 || c.GPUModel != "" {
			gpu = fmt.Sprintf("%d x %s", c.GPUs, orDash(c.GPUModel))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\t%s\n", c.Name, orDash(c.Cluster), orDash(strings.Join(c.Nodes, ",")),
			c.ReadyReplicas, c.Replicas, gpu, orDash(c.Message))
	}
	if len(a.Endpoints) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "ENDPOINT\tCLUSTER\tSERVICE\tPORT\tADDRESS\tNODE ADDRESS\tREADY")
		for _, e := range a.Endpoints {
			port := fmt.Sprintf("%d/%s", e.Port, e.Protocol)
			if e.PortName != "" {
				port = e.PortName + " " + port
			}
			ready := "no"
			if e.Ready {
				ready = "yes"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s/%s\t%s\t%s\t%s\t%s\n", e.Component, e.Cluster, e.Namespace, e.Service, port,
				orDash(e.Address), orDash(e.NodeAddress), ready)
		}
	}
	if len(a.Conditions) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "CONDITION\tSTATUS\tREASON\tMESSAGE")
		for _, c := range a.Conditions {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Type, c.Status, orDash(c.Reason), orDash(c.Message))
		}
	}
}

func fmtFloat(f *float64) string {
	if f == nil {
		return "-"
	}
	return strconv.FormatFloat(*f, 'g', 6, 64)
}

func fmtBool(b *bool) string {
	switch {
	case b == nil:
		return "unknown"
	case *b:
		return "yes"
	}
	return "no"
}

func printPerformance(tw *tabwriter.Writer, p api.Performance) {
	fmt.Fprintln(tw, "COMPONENT\tMETRIC\tVALUE\tTARGET\tRELATION\tSATISFIED\tNOTE")
	ms := append([]api.MetricValue(nil), p.Metrics...)
	sort.SliceStable(ms, func(i, j int) bool { return ms[i].Component < ms[j].Component })
	for _, m := range ms {
		note := m.Reason
		if m.Node != "" {
			note = "on " + m.Node
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Component, m.Metric, fmtFloat(m.Value), fmtFloat(m.Target),
			orDash(m.Relation), fmtBool(m.Satisfied), orDash(note))
	}
	if len(ms) == 0 {
		fmt.Fprintln(tw, "(the description defines no qos_metrics)")
	}
	if g := p.GlobalSatisfaction; g != nil {
		fmt.Fprintf(tw, "\nGlobal satisfaction:\t%s (threshold %s, %s): %s\n", fmtFloat(g.Value), fmtFloat(g.Threshold), orDash(g.Relation), fmtBool(g.Satisfied))
	}
}
