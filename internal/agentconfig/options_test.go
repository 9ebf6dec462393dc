package agentconfig

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// validOptions returns options that pass Validate.
func validOptions() *Options {
	o := NewOptions()
	o.NodeName = "node-1"
	o.Layer = LayerNode
	return o
}

func TestValidate(t *testing.T) {
	cases := map[string]struct {
		mutate func(o *Options)
		want   []Problem
	}{
		"defaults with a layer and a name are valid": {
			mutate: func(*Options) {},
		},
		"missing layer and name": {
			mutate: func(o *Options) { o.Layer = ""; o.NodeName = "" },
			want: []Problem{
				{Key: "continuum_layer", Message: "is required: one of continuum, cluster, node"},
				{Key: "node_name", Message: "is empty; set NODE_NAME or --node-name"},
			},
		},
		"unknown layer": {
			mutate: func(o *Options) { o.Layer = "edge" },
			want:   []Problem{{Key: "continuum_layer", Message: `"edge" is not one of continuum, cluster, node`}},
		},
		"empty and duplicate names": {
			mutate: func(o *Options) {
				o.Mechanisms = []string{"fluidity_proxy", "", "fluidity_proxy"}
				o.DefaultTelemetryMetrics = []string{"node_load1", "node_load1"}
			},
			want: []Problem{
				{Key: "default_telemetry_metrics[1]", Message: `"node_load1" is listed twice`},
				{Key: "mechanisms[1]", Message: "is empty"},
				{Key: "mechanisms[2]", Message: `"fluidity_proxy" is listed twice`},
			},
		},
		"every limit wrong at once": {
			mutate: func(o *Options) {
				o.MonitoringInterval = 0
				o.NodeExporterScrapeInterval = -time.Second
				o.PolicyTimeout = 0
				o.PolicyPollInterval = 0
				o.PendingTimeout = 0
				o.PolicyMaxSteps = 0
				o.PlanLogSize = 0
				o.SysfsRoot = ""
				o.ProcfsRoot = ""
				o.Behaviours = map[string]Behaviour{"": {Enabled: true}}
			},
			want: []Problem{
				{Key: "behaviours", Message: "has an entry with an empty name"},
				{Key: "monitoring_interval", Message: "must be positive, got 0s"},
				{Key: "node_exporter_scrape_interval", Message: "must be positive, got -1s"},
				{Key: "pending_timeout", Message: "must be positive, got 0s"},
				{Key: "plan_log_size", Message: "must be between 1 and 1000000, got 0"},
				{Key: "policy_max_steps", Message: "must be positive"},
				{Key: "policy_poll_interval", Message: "must be positive, got 0s"},
				{Key: "policy_timeout", Message: "must be positive, got 0s"},
				{Key: "procfs_root", Message: "is empty"},
				{Key: "sysfs_root", Message: "is empty"},
			},
		},
		"policy memory and depth out of range": {
			mutate: func(o *Options) { o.PolicyMaxMemoryMiB, o.PolicyMaxDepth = 0, 20_000 },
			want: []Problem{
				{Key: "policy_max_depth", Message: "must be between 1 and 10000, got 20000"},
				{Key: "policy_max_memory_mib", Message: "must be between 1 and 1048576, got 0"},
			},
		},
		"plan log too large": {
			mutate: func(o *Options) { o.PlanLogSize = 2_000_000 },
			want:   []Problem{{Key: "plan_log_size", Message: "must be between 1 and 1000000, got 2000000"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := validOptions()
			tc.mutate(o)
			if diff := cmp.Diff(tc.want, problemsOf(t, o.Validate())); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func problemsOf(t *testing.T, err error) []Problem {
	t.Helper()
	if err == nil {
		return nil
	}
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v is a %T, want *Error", err, err)
	}
	return e.Problems
}

func TestEnabledMechanisms(t *testing.T) {
	cases := map[string]struct {
		layer      Layer
		mechanisms []string
		want       []string
	}{
		"node default":        {layer: LayerNode, want: []string{"fluidity_proxy"}},
		"cluster default":     {layer: LayerCluster, want: []string{"fluidity"}},
		"continuum default":   {layer: LayerContinuum, want: []string{"clusterPlacement"}},
		"configured list":     {layer: LayerNode, mechanisms: []string{"CPUFrequencyConfigurator"}, want: []string{"CPUFrequencyConfigurator"}},
		"explicitly none":     {layer: LayerNode, mechanisms: []string{}, want: nil},
		"unknown layer, none": {layer: "", want: nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := validOptions()
			o.Layer, o.Mechanisms = tc.layer, tc.mechanisms
			if diff := cmp.Diff(tc.want, o.EnabledMechanisms()); diff != "" {
				t.Errorf("mechanisms (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseInterval(t *testing.T) {
	cases := map[string]struct {
		in      any
		want    time.Duration
		wantErr string
	}{
		"upstream seconds":   {in: "5s", want: 5 * time.Second},
		"upstream minutes":   {in: "10m", want: 10 * time.Minute},
		"upstream days":      {in: "1d", want: 24 * time.Hour},
		"go duration":        {in: "1m30s", want: 90 * time.Second},
		"milliseconds":       {in: "250ms", want: 250 * time.Millisecond},
		"bare number string": {in: "3", want: 3 * time.Second},
		"integer":            {in: 4, want: 4 * time.Second},
		"float":              {in: 0.5, want: 500 * time.Millisecond},
		"zero means once":    {in: "0", want: 0},
		"negative":           {in: "-5s", wantErr: `interval "-5s" is negative`},
		"garbage":            {in: "soon", wantErr: `interval "soon": want a duration such as 5s, 10m, 2h or 1d`},
		"empty":              {in: " ", wantErr: "interval is empty"},
		"wrong type":         {in: true, wantErr: `interval must be a string such as "5s" or a number of seconds, got bool`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseInterval(tc.in)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tc.wantErr {
				t.Fatalf("error = %q, want %q", gotErr, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("ParseInterval(%v) = %s, want %s", tc.in, got, tc.want)
			}
		})
	}
}
