package agent

import (
	"strings"
	"testing"

	"github.com/mlsysops-go/mlsysops/internal/agentconfig"
)

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"1024": 1024, "512B": 512, "64KiB": 64 << 10, "32MiB": 32 << 20, " 2 GiB": 2 << 30, "1TiB": 1 << 40} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "-5MiB", "32MB", "1.5GiB", "9999999TiB"} {
		if _, err := parseBytes(in); err == nil {
			t.Errorf("parseBytes(%q) succeeded", in)
		}
	}
}

func TestRuntimeFor(t *testing.T) {
	env := func(vars ...string) agentconfig.LookupEnv {
		return func(k string) (string, bool) {
			for _, v := range vars {
				if name, val, _ := strings.Cut(v, "="); name == k {
					return val, true
				}
			}
			return "", false
		}
	}
	cases := map[string]struct {
		layer agentconfig.Layer
		conn  Connection
		env   agentconfig.LookupEnv
		want  runtimeSettings
	}{
		"node default":         {layer: agentconfig.LayerNode, env: env(), want: runtimeSettings{gcPercent: nodeGCPercent}},
		"cluster keeps Go's":   {layer: agentconfig.LayerCluster, env: env()},
		"node keeps $GOGC":     {layer: agentconfig.LayerNode, env: env("GOGC=200")},
		"flag wins over $GOGC": {layer: agentconfig.LayerNode, conn: Connection{GCPercent: 80}, env: env("GOGC=200"), want: runtimeSettings{gcPercent: 80}},
		"memory limit":         {layer: agentconfig.LayerContinuum, conn: Connection{MemoryLimit: "64MiB"}, env: env(), want: runtimeSettings{memoryLimit: 64 << 20}},
	}
	for name, tc := range cases {
		got, err := runtimeFor(tc.layer, &tc.conn, tc.env)
		if err != nil || got != tc.want {
			t.Errorf("%s: runtimeFor = %+v, %v; want %+v", name, got, err, tc.want)
		}
	}
	c := NewConnection()
	c.GCPercent, c.MemoryLimit = -2, "lots"
	err := c.Validate(agentconfig.LayerNode)
	for _, want := range []string{"--gc-percent: want a positive percentage", "--memory-limit: want a positive size"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate = %v, want %q", err, want)
		}
	}
}
