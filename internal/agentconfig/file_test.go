package agentconfig

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseFile(t *testing.T) {
	cases := map[string]struct {
		file         string
		want         func(o *Options)
		wantWarnings []string
		wantProblems []Problem
	}{
		"upstream node config": {
			file: "node-upstream.yaml",
			want: func(o *Options) {
				o.Mechanisms = []string{"fluidity_proxy", "CPUFrequencyConfigurator"}
				o.MechanismsDirectory = "mechanisms"
				o.PolicyDirectory = "/etc/mlsysops/policies"
				o.Layer = LayerNode
				o.DefaultTelemetryMetrics = nil
				o.NodeExporterScrapeInterval = 10 * time.Second
				o.MonitoringInterval = 5 * time.Second
				o.OtelDeployEnabled = true
				o.NodeExporterEnabled = false
				o.Behaviours = map[string]Behaviour{
					"HBReceiverBehaviour": {Enabled: false},
					"Subscribe":           {Enabled: true, Params: map[string]any{"period": int64(10)}},
				}
			},
			wantWarnings: []string{
				"node-upstream.yaml: managed_telemetry_enabled: upstream key ignored: not used by the agent",
				"node-upstream.yaml: monitor_data_retention_time: upstream key ignored: not used by the agent",
				"node-upstream.yaml: mechanisms_directory: ignored: mechanisms are built into the agent and enabled by name with mechanisms",
			},
		},
		"upstream continuum config with an empty mechanism": {
			file: "continuum-upstream.yaml",
			want: func(o *Options) {
				o.Mechanisms = []string{}
				o.MechanismsDirectory = "mechanisms"
				o.PolicyDirectory = "policies"
				o.Layer = LayerContinuum
				o.DefaultTelemetryMetrics = []string{"node_load1", "test_received_success_counter_total"}
				o.NodeExporterScrapeInterval = 30 * time.Second
				o.Behaviours = map[string]Behaviour{
					"CheckInactiveClustersBehaviour": {Enabled: true, Params: map[string]any{"period": int64(10)}},
					"HBReceiverBehaviour":            {Enabled: true},
					"ManageSubscriptionBehaviour":    {Enabled: true},
					"ProcessBehaviour":               {Enabled: true},
					"ML_process_Behaviour":           {Enabled: true},
					"FailoverBehaviour":              {Enabled: true},
					"APIPingBehaviour":               {Enabled: false},
				}
			},
			wantWarnings: []string{
				"continuum-upstream.yaml: mechanisms[0]: empty mechanism name ignored",
				"continuum-upstream.yaml: mechanisms_directory: ignored: mechanisms are built into the agent and enabled by name with mechanisms",
			},
		},
		"wrong types are all listed with their key paths": {
			file: "wrong-types.yaml",
			want: func(o *Options) {},
			wantWarnings: []string{
				"wrong-types.yaml: colour: unknown key ignored",
			},
			wantProblems: []Problem{
				{Key: "behaviours.Broken", Message: "want {enabled: true|false, ...}, got a list"},
				{Key: "behaviours.Subscribe.enabled", Message: `want a boolean (true or false), got the string "sometimes"`},
				{Key: "continuum_layer", Message: "want a string, got the number 3"},
				{Key: "default_telemetry_metrics", Message: "want a list of strings, got the number 12"},
				{Key: "mechanisms[1]", Message: "want a string, got the number 7"},
				{Key: "mechanisms[2]", Message: "want a string, got a map"},
				{Key: "monitoring_interval", Message: `interval "soon": want a duration such as 5s, 10m, 2h or 1d`},
				{Key: "node_exporter_enabled", Message: `want a boolean (true or false), got the string "maybe"`},
				{Key: "plan_log_size", Message: "want a non-negative whole number, got -4"},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			got := NewOptions()
			warnings, err := got.ParseFile(tc.file, data)
			if diff := cmp.Diff(tc.wantProblems, problemsOf(t, err)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			var ws []string
			for _, w := range warnings {
				ws = append(ws, w.String())
			}
			if diff := cmp.Diff(tc.wantWarnings, ws); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			if tc.wantProblems != nil {
				return
			}
			want := NewOptions()
			tc.want(want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseFileEdgeCases(t *testing.T) {
	cases := map[string]struct {
		data         string
		wantWarnings int
		wantErr      string
	}{
		"empty file":      {data: "\n", wantWarnings: 1},
		"only a comment":  {data: "# nothing\n", wantWarnings: 1},
		"a list":          {data: "- a\n- b\n", wantErr: "f.yaml: want a map of options at the top level, got a list"},
		"not yaml":        {data: "a: [b\n", wantErr: "f.yaml: not valid YAML"},
		"metrics none":    {data: "default_telemetry_metrics: none\n"},
		"metrics null":    {data: "default_telemetry_metrics:\n"},
		"metrics garbage": {data: "default_telemetry_metrics: all\n", wantErr: `f.yaml: default_telemetry_metrics: want a list of metric names or "None", got the string "all"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := NewOptions()
			ws, err := o.ParseFile("f.yaml", []byte(tc.data))
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if tc.wantErr == "" && gotErr != "" || tc.wantErr != "" && (len(gotErr) < len(tc.wantErr) || gotErr[:len(tc.wantErr)] != tc.wantErr) {
				t.Fatalf("error = %q, want prefix %q", gotErr, tc.wantErr)
			}
			if len(ws) != tc.wantWarnings {
				t.Errorf("warnings = %v, want %d", ws, tc.wantWarnings)
			}
		})
	}
}
