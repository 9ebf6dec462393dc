package testbed

import (
	"strings"
	"testing"
)

func TestOptionsValidate(t *testing.T) {
	cases := map[string]struct {
		opts    Options
		wantErr []string
	}{
		"defaults":         {opts: Options{Descriptions: "d", StateDir: "s", PortBase: DefaultPortBase}},
		"privileged port":  {opts: Options{Descriptions: "d", StateDir: "s", PortBase: 80}, wantErr: []string{"port base 80"}},
		"too high":         {opts: Options{Descriptions: "d", StateDir: "s", PortBase: 65000}, wantErr: []string{"port base 65000"}},
		"every problem":    {opts: Options{PortBase: 1}, wantErr: []string{"port base 1", "state directory", "descriptions directory"}},
		"empty state only": {opts: Options{Descriptions: "d", PortBase: 20000}, wantErr: []string{"state directory"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := tc.opts.Validate()
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tc.wantErr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestKwokNodeAgentLayer(t *testing.T) {
	n := kwokNode("cloud-1", "cloud-1", map[string]string{"a": "b"}, nil)
	if got := n.Labels["mlsysops.eu/continuumLayer"]; got != "cluster" {
		t.Errorf("cluster host layer = %q, want cluster", got)
	}
	n = kwokNode("gpu-1", "cloud-1", map[string]string{"kubernetes.io/arch": "arm64"}, nil)
	if got := n.Labels["mlsysops.eu/continuumLayer"]; got != "node" {
		t.Errorf("node layer = %q, want node", got)
	}
	if n.Status.NodeInfo.Architecture != "arm64" || n.Labels[KWOKLabel] != "fake" {
		t.Errorf("node info %+v labels %v", n.Status.NodeInfo, n.Labels)
	}
}
