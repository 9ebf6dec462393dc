package testbed

import (
	"maps"
	"testing"
)

func TestNodeLabelsKeepsWhatKubernetesAdds(t *testing.T) {
	cur := map[string]string{
		"beta.kubernetes.io/arch":  "amd64", // the controller manager's
		"kubernetes.io/hostname":   "n1",
		"mlsysops.eu/layer":        "edge", // changed in the description
		"mlsysops.eu/label.old":    "x",    // gone from the description
		"nvidia.com/gpu.product":   "T4",   // GPU removed
		"example.com/someone-else": "keep",
	}
	want := map[string]string{
		"kubernetes.io/hostname": "n1",
		"mlsysops.eu/layer":      "far_edge",
		KWOKLabel:                "fake", // a test had removed it
	}
	got := nodeLabels(cur, want)
	expect := map[string]string{
		"beta.kubernetes.io/arch":  "amd64",
		"kubernetes.io/hostname":   "n1",
		"mlsysops.eu/layer":        "far_edge",
		KWOKLabel:                  "fake",
		"example.com/someone-else": "keep",
	}
	if !maps.Equal(got, expect) {
		t.Errorf("nodeLabels = %v, want %v", got, expect)
	}
	if again := nodeLabels(got, want); !maps.Equal(again, got) {
		t.Errorf("not stable: %v then %v", got, again)
	}
}
