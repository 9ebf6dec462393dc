package testbed

import (
	"encoding/json"
	"io"
	"log/slog"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func TestNormalizeImage(t *testing.T) {
	cases := map[string]string{
		"pause":                              "docker.io/library/pause:latest",
		"mlsysops/agent:v1":                  "docker.io/mlsysops/agent:v1",
		"docker.io/mlsysops/agent:v1":        "docker.io/mlsysops/agent:v1",
		"registry.example.org/a/b:1.4.2":     "registry.example.org/a/b:1.4.2",
		"localhost:5000/x":                   "localhost:5000/x:latest",
		"localhost/x:2":                      "localhost/x:2",
		"mlsysops/agent@sha256:0123":         "docker.io/mlsysops/agent@sha256:0123",
		"registry.local:5000/mlsysops/agent": "registry.local:5000/mlsysops/agent:latest",
	}
	for in, want := range cases {
		if got := NormalizeImage(in); got != want {
			t.Errorf("NormalizeImage(%q) = %q, want %q", in, got, want)
		}
	}
}

// Pods whose every image is preloaded are left alone; the others get
// "on KWOK nodes" in every required node selector term, and the reason.
func TestAdmissionPatch(t *testing.T) {
	h := NewAdmissionHandler(func() []string { return []string{"docker.io/mlsysops/agent:v1", "docker.io/mlsysops/pause@sha256:ab"} }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	kwok := corev1.NodeSelectorRequirement{Key: KWOKLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"fake"}}
	host := corev1.NodeSelectorRequirement{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{"cloud-1"}}
	cases := map[string]struct {
		pod          corev1.PodSpec
		annotations  map[string]string
		wantAffinity *corev1.Affinity
		wantMissing  []string
	}{
		"preloaded": {pod: corev1.PodSpec{Containers: []corev1.Container{{Image: "mlsysops/agent:v1"}, {Image: "mlsysops/pause@sha256:ab"}}}},
		"example image, no affinity": {
			pod:          corev1.PodSpec{Containers: []corev1.Container{{Image: "mlsysops/agent:v1"}, {Image: "registry.example.org/web:1"}}},
			wantAffinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{kwok}}}}}},
			wantMissing:  []string{"registry.example.org/web:1"},
		},
		"init container image, two terms, annotations": {
			pod: corev1.PodSpec{
				InitContainers: []corev1.Container{{Image: "busybox"}},
				Containers:     []corev1.Container{{Image: "mlsysops/agent:v1"}},
				Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
					{MatchExpressions: []corev1.NodeSelectorRequirement{host}}, {},
				}}}},
			},
			annotations: map[string]string{"a": "b"},
			wantAffinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
				{MatchExpressions: []corev1.NodeSelectorRequirement{host, kwok}}, {MatchExpressions: []corev1.NodeSelectorRequirement{kwok}},
			}}}},
			wantMissing: []string{"busybox"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: tc.pod}
			pod.Annotations = tc.annotations
			patch, missing, err := h.patchFor(pod)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantMissing, missing); diff != "" {
				t.Errorf("missing (-want +got):\n%s", diff)
			}
			if tc.wantAffinity == nil {
				if patch != nil {
					t.Errorf("patch for a preloaded pod: %s", patch)
				}
				return
			}
			var ops []struct {
				Op    string          `json:"op"`
				Path  string          `json:"path"`
				Value json.RawMessage `json:"value"`
			}
			if err := json.Unmarshal(patch, &ops); err != nil || len(ops) != 2 {
				t.Fatalf("patch %s: %v", patch, err)
			}
			var aff corev1.Affinity
			if err := json.Unmarshal(ops[0].Value, &aff); err != nil || ops[0].Path != "/spec/affinity" {
				t.Fatalf("first op %s %s: %v", ops[0].Path, ops[0].Value, err)
			}
			if diff := cmp.Diff(tc.wantAffinity, &aff); diff != "" {
				t.Errorf("affinity (-want +got):\n%s", diff)
			}
			wantPath := "/metadata/annotations"
			if tc.annotations != nil {
				wantPath = "/metadata/annotations/testbed.mlsysops.eu~1simulated-only"
			}
			if ops[1].Path != wantPath {
				t.Errorf("annotation op path %s, want %s", ops[1].Path, wantPath)
			}
		})
	}
}

func TestNetPlan(t *testing.T) {
	n := newNetPlan(22000)
	got := []string{n.Range(), n.HostIP(), n.NodeIP(0), n.PodSubnet(1), n.PodGateway(1), n.ServiceCIDR(), n.KubernetesServiceIP(),
		n.KWOKNodeIP(0), n.KWOKCIDR(1), n.Bridge(), n.NetNS(2), n.Veth(2)}
	want := []string{"10.144.0.0/16", "10.144.0.1", "10.144.0.10", "10.144.17.0/24", "10.144.17.1", "10.144.128.0/17", "10.144.128.1",
		"10.144.1.1", "10.144.68.0/22", "mls22000", "mls22000-2", "mls22000v2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// Testbeds 500 ports apart never share a range.
	if newNetPlan(16000).Range() == newNetPlan(16500).Range() || newNetPlan(17000).Range() != "10.134.0.0/16" {
		t.Error("port bases 500 apart share a range")
	}
}
