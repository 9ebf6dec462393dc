package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/northbound/api"
	"github.com/mlsysops-go/mlsysops/northbound/client"
)

// WatchOptions are the options of mls watch.
type WatchOptions struct {
	ML       bool
	Interval time.Duration
	Timeout  time.Duration
	// Until are the phases that end the watch of one item.
	Until  []string
	Output string

	api     *APIOptions
	streams IOStreams
	// sleep waits between polls; tests shorten it.
	sleep func(context.Context, time.Duration)
}

// Phases that end a watch by default; Failed and Unschedulable end it with
// an error.
var (
	defaultUntil = []string{string(mlsysopsv1.AppRunning), string(mlsysopsv1.AppFailed), string(mlsysopsv1.AppUnschedulable)}
	badPhases    = map[string]bool{string(mlsysopsv1.AppFailed): true, string(mlsysopsv1.AppUnschedulable): true}
)

// NewWatchCommand builds mls watch.
func NewWatchCommand(streams IOStreams, apiOpts *APIOptions) *cobra.Command {
	return newWatchCommand(streams, apiOpts, false, "watch")
}

// event is one change a watch reports.
type event struct {
	Time    time.Time `json:"time"`
	ID      string    `json:"id"`
	Phase   string    `json:"phase"`
	Was     string    `json:"was,omitempty"`
	Ready   string    `json:"ready,omitempty"`
	Message string    `json:"message,omitempty"`
}

func newWatchCommand(streams IOStreams, apiOpts *APIOptions, ml bool, use string) *cobra.Command {
	o := &WatchOptions{ML: ml, Interval: 2 * time.Second, Until: defaultUntil, Output: outputTable, api: apiOpts, streams: streams, sleep: sleepCtx}
	top := use == "watch" && !ml
	cmd := &cobra.Command{
		Use:   use + " [ID]",
		Short: "Follow an application (or every application) as its phase changes",
		Long: `Follow one application or ML deployment: print a line whenever its phase,
ready replicas or message change, until it reaches one of --until
(Running, Failed or Unschedulable by default; the last two exit with an
error) or is removed (printed as phase Removed). Without an ID, print
every change of any item until interrupted or --timeout.`,
		Example: `  mls watch llm-inference
  mls watch --until Running --timeout 5m llm-inference
  mls watch -o json`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: completeIDs(apiOpts, ml),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(o.Output); err != nil {
				return err
			}
			if o.Interval <= 0 {
				return fmt.Errorf("--interval must be positive")
			}
			for _, p := range o.Until {
				if !mlsysopsv1.AppPhase(p).Valid() {
					return fmt.Errorf("--until %q is not a phase; phases are %v", p, mlsysopsv1.AppPhases)
				}
			}
			ctx := cmd.Context()
			if o.Timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, o.Timeout)
				defer cancel()
			}
			c, err := o.api.Client()
			if err != nil {
				return err
			}
			coll := c.Applications()
			if o.ML {
				coll = c.MLDeployments()
			}
			if len(args) == 1 {
				return o.watchOne(ctx, coll, args[0])
			}
			return o.watchAll(ctx, coll)
		},
	}
	if top {
		cmd.Flags().BoolVar(&o.ML, "ml", false, "watch ML deployments instead of applications")
		outputFlag(cmd.Flags(), &o.Output)
	} else {
		cmd.PreRun = func(cmd *cobra.Command, _ []string) {
			if f := cmd.Flags().Lookup("output"); f != nil {
				o.Output = f.Value.String()
			}
		}
	}
	cmd.Flags().DurationVar(&o.Interval, "interval", o.Interval, "time between two looks")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 0, "give up after this long (0: never)")
	cmd.Flags().StringSliceVar(&o.Until, "until", o.Until, "phases that end the watch of one item")
	return cmd
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (o *WatchOptions) emit(e event) {
	switch o.Output {
	case outputJSON:
		b, _ := json.Marshal(e)
		fmt.Fprintln(o.streams.Out, string(b))
	case outputYAML:
		b, _ := yaml.Marshal(e)
		fmt.Fprintf(o.streams.Out, "---\n%s", b)
	default:
		line := fmt.Sprintf("%s  %-24s %-14s", e.Time.Format("15:04:05"), e.ID, e.Phase)
		if e.Ready != "" {
			line += "  ready " + e.Ready
		}
		if e.Was != "" {
			line += "  (was " + e.Was + ")"
		}
		if e.Message != "" {
			line += "  " + e.Message
		}
		fmt.Fprintln(o.streams.Out, strings.TrimRight(line, " "))
	}
}

func readyOf(a api.Application) string {
	if len(a.Components) == 0 {
		return ""
	}
	var ready, want int32
	for _, c := range a.Components {
		ready += c.ReadyReplicas
		want += c.Replicas
	}
	return fmt.Sprintf("%d/%d", ready, want)
}

// done reports whether a watch ended because its time is up or the user
// interrupted it.
func done(ctx context.Context, err error) bool {
	return ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}

func (o *WatchOptions) watchOne(ctx context.Context, coll *client.Collection, id string) error {
	until := map[string]bool{}
	for _, p := range o.Until {
		until[p] = true
	}
	var last *event
	for {
		a, err := coll.Get(ctx, id)
		switch {
		case client.IsNotFound(err) && last != nil:
			o.emit(event{Time: time.Now(), ID: id, Phase: string(mlsysopsv1.AppRemoved), Was: last.Phase})
			return nil
		case done(ctx, err):
			if errors.Is(ctx.Err(), context.DeadlineExceeded) && last != nil {
				return fmt.Errorf("%s is still %s after %s", id, last.Phase, o.Timeout)
			}
			return nil
		case err != nil:
			return err
		}
		e := event{Time: time.Now(), ID: id, Phase: a.Phase, Ready: readyOf(a), Message: a.Message}
		if last == nil || e.Phase != last.Phase || e.Ready != last.Ready || e.Message != last.Message {
			if last != nil && last.Phase != e.Phase {
				e.Was = last.Phase
			}
			o.emit(e)
			last = &e
		}
		if until[a.Phase] {
			if badPhases[a.Phase] {
				return fmt.Errorf("%s is %s: %s", id, a.Phase, orDash(a.Message))
			}
			return nil
		}
		o.sleep(ctx, o.Interval)
	}
}

func (o *WatchOptions) watchAll(ctx context.Context, coll *client.Collection) error {
	seen := map[string]api.Summary{}
	first := true
	for {
		items, err := coll.ListAll(ctx)
		if done(ctx, err) {
			return nil
		}
		if err != nil {
			return err
		}
		now := time.Now()
		current := map[string]bool{}
		for _, it := range items {
			current[it.ID] = true
			prev, ok := seen[it.ID]
			switch {
			case !ok:
				o.emit(event{Time: now, ID: it.ID, Phase: it.Phase, Message: it.Message})
			case prev.Phase != it.Phase || prev.Message != it.Message:
				e := event{Time: now, ID: it.ID, Phase: it.Phase, Message: it.Message}
				if prev.Phase != it.Phase {
					e.Was = prev.Phase
				}
				o.emit(e)
			}
			seen[it.ID] = it
		}
		for id, prev := range seen {
			if !current[id] {
				o.emit(event{Time: now, ID: id, Phase: string(mlsysopsv1.AppRemoved), Was: prev.Phase})
				delete(seen, id)
			}
		}
		if first && len(items) == 0 && o.Output == outputTable {
			fmt.Fprintln(o.streams.ErrOut, "no items yet; waiting for changes (Ctrl-C to stop)")
		}
		first = false
		o.sleep(ctx, o.Interval)
	}
}
