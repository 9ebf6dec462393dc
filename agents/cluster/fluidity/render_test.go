package fluidity

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/demo"
	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/internal/members"
	"github.com/mlsysops-go/mlsysops/internal/placement"
	"github.com/mlsysops-go/mlsysops/internal/resources"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// exampleContinuum turns descriptions/ into placement's view of each
// cluster: one Ready node per node description, with the labels and
// capacity the testbed gives its KWOK nodes.
func exampleContinuum(t *testing.T) []placement.Cluster {
	t.Helper()
	set, err := description.LoadDir("../../../descriptions")
	if err != nil {
		t.Fatal(err)
	}
	byCluster := map[string][]placement.Node{}
	for _, n := range set.Nodes {
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: resources.NodeLabels(n)},
			Status: corev1.NodeStatus{
				Allocatable: resources.NodeCapacity(n),
				Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			},
		}
		spec := n.Spec
		byCluster[n.Spec.ClusterID] = append(byCluster[n.Spec.ClusterID], placement.Node{Node: node, Description: &spec})
	}
	var out []placement.Cluster
	for _, c := range set.Clusters {
		out = append(out, placement.Cluster{Name: c.Name, Ready: true, Index: placement.NewIndexOf(byCluster[c.Name])})
	}
	return out
}

// TestRenderGolden places every example application on the example
// continuum (descriptions/), renders each component on the nodes chosen,
// and compares with testdata/<app>.output.yaml.
func TestRenderGolden(t *testing.T) {
	files, err := filepath.Glob("../../../examples/apps/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no example apps: %v", err)
	}
	continuum := exampleContinuum(t)
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".yaml")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			app, errs := description.ParseApp(data, description.FormatYAML)
			if len(errs) > 0 {
				t.Fatalf("example does not parse: %v", errs.ToAggregate())
			}
			cd, err := placement.PlaceApp(placement.AppRequest{App: &app.Spec}, continuum)
			if err != nil || !cd.Feasible() {
				t.Fatalf("example app fits nowhere: %v %s", err, cd.Reason())
			}
			var nodes *placement.Index
			for _, c := range continuum {
				if c.Name == cd.Clusters[0] {
					nodes = c.Index
				}
			}
			var out bytes.Buffer
			fmt.Fprintf(&out, "# cluster: %s\n", cd.Clusters[0])
			for i := range app.Spec.Components {
				comp := &app.Spec.Components[i]
				d, err := nodes.Place(placement.Request{App: &app.Spec, Component: comp})
				if err != nil || !d.Feasible() {
					t.Fatalf("component %s: %v %s", comp.Metadata.Name, err, d.Reason())
				}
				objs, err := Render(app, comp, d.Nodes, nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, o := range []any{objs.Deployment, objs.Service} {
					if o == (*corev1.Service)(nil) {
						continue
					}
					b, err := yaml.Marshal(o)
					if err != nil {
						t.Fatal(err)
					}
					out.WriteString("---\n")
					out.Write(b)
				}
			}
			golden := filepath.Join("testdata", name+".output.yaml")
			if *update {
				if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), out.String()); diff != "" {
				t.Errorf("rendered objects differ from %s (-want +got):\n%s", golden, diff)
			}
		})
	}
}

func TestRenderRejectsNodesOutsidePin(t *testing.T) {
	app := &mlsysopsv1.MLSysOpsApp{}
	app.Name = "a"
	comp := mlsysopsv1.Component{Metadata: mlsysopsv1.ComponentMetadata{Name: "c"}, NodePlacement: &mlsysopsv1.NodePlacement{Node: "pinned"},
		Containers: []mlsysopsv1.Container{{Image: "i"}}}
	app.Spec.Components = []mlsysopsv1.Component{comp}
	if _, err := Render(app, &comp, []string{"other"}, nil); err == nil {
		t.Error("rendered a pinned component onto another node")
	}
}

func TestWithHostnames(t *testing.T) {
	pinned := []corev1.NodeSelectorRequirement{{Key: mlsysopsv1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}
	got := withHostnames(pinned, []string{"a", "b"})
	want := []corev1.NodeSelectorRequirement{{Key: mlsysopsv1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Error(diff)
	}
}

// TestPeerEnvFindsTheDemoServer: the demo workload finds its server
// through the environment the cluster agent gives a component for each
// component it talks to (the demo keeps its own copy of the variables'
// names, to stay free of Kubernetes libraries), also for names that are
// no valid variable names.
func TestPeerEnvFindsTheDemoServer(t *testing.T) {
	data, err := os.ReadFile("../../../examples/apps/demo-loop.yaml")
	if err != nil {
		t.Fatal(err)
	}
	app, errs := description.ParseApp(data, description.FormatYAML)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	const server = "demo-server.v2"
	for i := range app.Spec.Components {
		if app.Spec.Components[i].Metadata.Name == "server" {
			app.Spec.Components[i].Metadata.Name = server
		}
	}
	app.Spec.ComponentInteractions[0].ComponentName2 = server
	var client *mlsysopsv1.Component
	for i := range app.Spec.Components {
		if app.Spec.Components[i].Metadata.Name == "client" {
			client = &app.Spec.Components[i]
		}
	}
	objs, err := Render(app, client, []string{"cloud-1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, e := range objs.Deployment.Spec.Template.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	got, ok := demo.ServerFromEnv(server, func(k string) string { return env[k] })
	if want := members.ServiceHost(app.Name, server) + ":7070"; !ok || got != want {
		t.Errorf("the demo client finds %q (%v) in %v, want %s", got, ok, env, want)
	}
}

// TestHasService: whether a component gets a Service does not depend on
// where it runs (a component pinned to a node has one too), and agrees
// with what Render makes.
func TestHasService(t *testing.T) {
	port := []mlsysopsv1.ContainerPort{{ContainerPort: 8080}}
	for _, c := range []struct {
		name     string
		comp     mlsysopsv1.Component
		interact []mlsysopsv1.ComponentInteraction
		want     bool
	}{
		{"external with a port", mlsysopsv1.Component{ExternalAccess: true, Containers: []mlsysopsv1.Container{{Image: "i", Ports: port}}}, nil, true},
		{"external pinned to a node", mlsysopsv1.Component{ExternalAccess: true, NodePlacement: &mlsysopsv1.NodePlacement{Node: "pinned"},
			Containers: []mlsysopsv1.Container{{Image: "i", Ports: port}}}, nil, true},
		{"talked to", mlsysopsv1.Component{Containers: []mlsysopsv1.Container{{Image: "i", Ports: port}}},
			[]mlsysopsv1.ComponentInteraction{{ComponentName1: "other", Type: "egress", ComponentName2: "c"}}, true},
		{"external without ports", mlsysopsv1.Component{ExternalAccess: true, Containers: []mlsysopsv1.Container{{Image: "i"}}}, nil, false},
		{"nobody talks to it", mlsysopsv1.Component{Containers: []mlsysopsv1.Container{{Image: "i", Ports: port}}}, nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			app := &mlsysopsv1.MLSysOpsApp{}
			app.Name = "a"
			c.comp.Metadata.Name = "c"
			app.Spec.Components = []mlsysopsv1.Component{c.comp}
			app.Spec.ComponentInteractions = c.interact
			if got := HasService(app, &c.comp); got != c.want {
				t.Errorf("HasService = %v, want %v", got, c.want)
			}
			objs, err := Render(app, &c.comp, []string{"pinned"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := objs.Service != nil; got != c.want {
				t.Errorf("Render made a Service: %v, want %v", got, c.want)
			}
		})
	}
}
