package commands

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/mlsysops-go/mlsysops/northbound/api"
)

// NewManageCommand builds mls manage.
func NewManageCommand(streams IOStreams, apiOpts *APIOptions) *cobra.Command {
	var output string
	cmd := &cobra.Command{Use: "manage", Short: "Check and steer the agents", Args: cobra.NoArgs}
	outputFlag(cmd.PersistentFlags(), &output)

	var agent string
	ping := &cobra.Command{
		Use:   "ping-agent [--agent JID]",
		Short: "Ping an agent over XMPP (the continuum agent by default) and show the round-trip time",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := apiOpts.Client()
			if err != nil {
				return err
			}
			var res api.PingResult
			if agent == "" {
				res, err = c.PingContinuum(cmd.Context())
			} else {
				res, err = c.Ping(cmd.Context(), agent)
			}
			if err != nil {
				return err
			}
			return render(streams.Out, output, res, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "Agent %s is alive: round trip %.1f ms.\n", res.JID, res.LatencyMillis)
			})
		},
	}
	ping.Flags().StringVar(&agent, "agent", "", "JID of the agent to ping")

	var mode int
	var agents []string
	setMode := &cobra.Command{
		Use:   "set-mode --mode 0|1 [--agent JID]...",
		Short: "Switch the management mode of agents: 0 heuristic policies, 1 ML-driven",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			if mode != 0 && mode != 1 {
				return fmt.Errorf("--mode must be 0 (heuristic) or 1 (ML), not %d", mode)
			}
			c, err := apiOpts.Client()
			if err != nil {
				return err
			}
			res, err := c.SetMode(cmd.Context(), mode, agents...)
			if err != nil {
				return err
			}
			if err := render(streams.Out, output, res, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "AGENT\tMODE\tRESULT")
				for _, r := range res.Results {
					result := "switched"
					if !r.OK {
						result = "failed: " + r.Error
					}
					fmt.Fprintf(tw, "%s\t%d\t%s\n", r.JID, res.Mode, result)
				}
			}); err != nil {
				return err
			}
			if res.Failed > 0 {
				return fmt.Errorf("%d of %d agent(s) did not take mode %d", res.Failed, len(res.Results), mode)
			}
			return nil
		},
	}
	setMode.Flags().IntVar(&mode, "mode", -1, "0 (heuristic) or 1 (ML)")
	_ = setMode.MarkFlagRequired("mode")
	setMode.Flags().StringSliceVar(&agents, "agent", nil, "JIDs of the agents to switch (default: every registered agent)")

	var layer string
	list := &cobra.Command{
		Use:   "list-agents",
		Short: "List the registered agents and whether they are online",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := apiOpts.Client()
			if err != nil {
				return err
			}
			as, err := c.Agents(cmd.Context(), layer)
			if err != nil {
				return err
			}
			return render(streams.Out, output, as, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "AGENT\tLAYER\tCLUSTER\tNODE\tONLINE\tLAST SEEN\tVERSION")
				for _, a := range as {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%t\t%s\t%s\n", a.JID, a.Layer, orDash(a.Cluster), orDash(a.Node), a.Online, age(a.LastSeen), orDash(a.Version))
				}
			})
		},
	}
	list.Flags().StringVar(&layer, "layer", "", "only agents of this layer: "+strings.Join(api.Layers, ", "))
	cmd.AddCommand(ping, setMode, list)
	return cmd
}
