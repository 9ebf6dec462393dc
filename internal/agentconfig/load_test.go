package agentconfig

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func envMap(m map[string]string) LookupEnv {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestLoadPrecedence(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "config"), 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "config", "edge-1-config.yaml")
	if err := os.WriteFile(file, []byte(`
continuum_layer: node
monitoring_interval: 7s
node_exporter_scrape_interval: 20s
policy_directory: /from/file
mechanisms: [fluidity_proxy]
`), 0o644); err != nil {
		t.Fatal(err)
	}

	cases := map[string]struct {
		args []string
		env  map[string]string
		want func(o *Options)
	}{
		"file found by install path and node name": {
			env: map[string]string{"MLSYSOPS_INSTALL_PATH": dir, "NODE_NAME": "edge-1"},
			want: func(o *Options) {
				o.MonitoringInterval = 7 * time.Second
				o.NodeExporterScrapeInterval = 20 * time.Second
				o.PolicyDirectory = "/from/file"
			},
		},
		"environment overrides the file": {
			env: map[string]string{
				"MLSYSOPS_INSTALL_PATH":          dir,
				"NODE_NAME":                      "edge-1",
				"MLSYSOPS_MONITORING_INTERVAL":   "3s",
				"MLSYSOPS_MECHANISMS":            "fluidity_proxy, CPUFrequencyConfigurator",
				"MLSYSOPS_NODE_EXPORTER_ENABLED": "false",
			},
			want: func(o *Options) {
				o.MonitoringInterval = 3 * time.Second
				o.NodeExporterScrapeInterval = 20 * time.Second
				o.PolicyDirectory = "/from/file"
				o.Mechanisms = []string{"fluidity_proxy", "CPUFrequencyConfigurator"}
				o.NodeExporterEnabled = false
			},
		},
		"flags override the environment and the file": {
			args: []string{"--monitoring-interval=1s", "--policy-directory", "/from/flag", "--default-telemetry-metrics", "node_load1,node_load5",
				"--policy-max-memory-mib", "64", "--policy-max-depth=50"},
			env: map[string]string{
				"MLSYSOPS_INSTALL_PATH":        dir,
				"NODE_NAME":                    "edge-1",
				"MLSYSOPS_MONITORING_INTERVAL": "3s",
			},
			want: func(o *Options) {
				o.MonitoringInterval = time.Second
				o.NodeExporterScrapeInterval = 20 * time.Second
				o.PolicyDirectory = "/from/flag"
				o.DefaultTelemetryMetrics = []string{"node_load1", "node_load5"}
				o.PolicyMaxMemoryMiB, o.PolicyMaxDepth = 64, 50
			},
		},
		"explicit config flag and node name flag": {
			args: []string{"--config", file, "--node-name", "other"},
			want: func(o *Options) {
				o.NodeName = "other"
				o.InstallPath = "/etc/mlsysops"
				o.MonitoringInterval = 7 * time.Second
				o.NodeExporterScrapeInterval = 20 * time.Second
				o.PolicyDirectory = "/from/file"
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, _, err := Load(tc.args, envMap(tc.env))
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			want := NewOptions()
			want.InstallPath = dir
			want.NodeName = "edge-1"
			want.ConfigFile = file
			want.Layer = LayerNode
			want.Mechanisms = []string{"fluidity_proxy"}
			tc.want(want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("continuum_layer: node\nmonitoring_interval: never\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		args []string
		env  map[string]string
		want []Problem
	}{
		"missing explicit file": {
			env:  map[string]string{"CONFIG_PATH": filepath.Join(dir, "nope.yaml"), "NODE_NAME": "n"},
			want: []Problem{{Key: filepath.Join(dir, "nope.yaml"), Message: "read agent configuration: open " + filepath.Join(dir, "nope.yaml") + ": no such file or directory"}},
		},
		"bad file value and bad env value": {
			args: []string{"--config", bad},
			env:  map[string]string{"NODE_NAME": "n", "MLSYSOPS_PLAN_LOG_SIZE": "many"},
			want: []Problem{
				{Key: bad + ": monitoring_interval", Message: `interval "never": want a duration such as 5s, 10m, 2h or 1d`},
				{Key: "env MLSYSOPS_PLAN_LOG_SIZE", Message: `want a non-negative whole number, got "many"`},
			},
		},
		"bad flag": {
			args: []string{"--continuum-layer", "fog"},
			env:  map[string]string{"NODE_NAME": "n", "MLSYSOPS_INSTALL_PATH": dir},
			want: []Problem{{Message: `invalid argument "fog" for "--continuum-layer" flag: "fog" is not one of continuum, cluster, node`}},
		},
		"valid sources but no layer": {
			env:  map[string]string{"NODE_NAME": "n", "MLSYSOPS_INSTALL_PATH": dir},
			want: []Problem{{Key: "continuum_layer", Message: "is required: one of continuum, cluster, node"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			wd, _ := os.Getwd()
			// A config.yaml in the working directory would be picked up.
			if _, err := os.Stat(filepath.Join(wd, "config.yaml")); err == nil {
				t.Skip("config.yaml in the working directory")
			}
			_, _, err := Load(tc.args, envMap(tc.env))
			if diff := cmp.Diff(tc.want, problemsOf(t, err)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}
