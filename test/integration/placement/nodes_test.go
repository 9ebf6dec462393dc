package placement_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
)

// watchSpecPolicy is a node policy of application scope that asks the
// cluster, through fluidity_proxy, for the image %s at every run,
// recording in each plan the image it saw (seen_image). It plans every
// time because the agents discard a plan that meets another for the same
// mechanism (one per mechanism and application in flight, the first of a
// tick wins), as upstream does: a policy that planned only when the image
// changed could lose the very plan the test waits for.
const watchSpecPolicy = `
def initialize():
    return {"scope": "application", "configuration": {"analyze_interval": "1s"}, "mechanisms": ["fluidity_proxy"]}

def analyze(context, application_description, system_description, mechanisms, telemetry, ml_connector):
    return True, context

def plan(context, application_description, system_description, mechanisms, telemetry, ml_connector):
    app = application_description[0]
    image = None
    for c in (app.get("spec") or {}).get("components") or []:
        if c["metadata"]["name"] == "worker":
            image = c["containers"][0]["image"]
    if image == None:
        return {}, context
    node = system_description["MLSysOpsNode"]["name"]
    return {"fluidity_proxy": {"name": app["name"], "seen_image": image, "deployment_plan": {
        "worker": [{"action": "change_spec", "host": node, "new_spec": {"containers": [{"image": "%[1]s"}]}}], "initial_plan": False}}}, context
`

// nodeStatus is the part of a node agent's /status this test reads.
type nodeStatus struct {
	Plans []struct {
		Policy, State string
		Plan          map[string]map[string]any
	} `json:"plans"`
}

// A change_spec executed by the cluster agent reaches the node agent that
// runs the component (application_component_updated, with the new spec):
// the node's application policy, which asked for the change through
// fluidity_proxy, sees the new image in its application description. The
// agents are the real processes.
func TestChangeSpecReachesTheNodeAgent(t *testing.T) {
	a := startProcessAgents(t)
	// A KWOK node: the example image cannot run on cloud-1, a real node
	// of the testbed, so the testbed keeps its pods off it.
	const cluster, node = "cloud-1", "cloud-fpga-1"
	const want = "registry.example/worker:2"
	agent := a.processes.Get(testbed.LayerNode, node)
	if err := os.WriteFile(filepath.Join(agent.PolicyDir, "policy-watchSpec.star"), []byte(fmt.Sprintf(watchSpecPolicy, want)), 0o644); err != nil {
		t.Fatal(err)
	}
	app := &mlsysopsv1.MLSysOpsApp{
		ObjectMeta: metav1.ObjectMeta{Name: "upd-" + rand.String(6), Namespace: mlsysopsv1.Namespace},
		Spec: mlsysopsv1.MLSysOpsAppSpec{
			ClusterPlacement: &mlsysopsv1.ClusterPlacement{ClusterID: []string{cluster}},
			Components: []mlsysopsv1.Component{{
				Metadata:      mlsysopsv1.ComponentMetadata{Name: "worker"},
				NodePlacement: &mlsysopsv1.NodePlacement{Node: node},
				Containers:    []mlsysopsv1.Container{{Image: "registry.example/worker:1"}},
			}},
			PermittedActions: []string{mlsysopsv1.AppActionChangeContainerImage},
		},
	}
	app.Spec.Name = app.Name
	if err := a.karmada.Create(context.Background(), app); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.karmada.Delete(context.Background(), app) })

	seen := func() ([]string, error) {
		resp, err := http.Get(agent.URL() + "/status")
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var st nodeStatus
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			return nil, err
		}
		var out []string
		for _, p := range st.Plans {
			if img, _ := p.Plan["fluidity_proxy"]["seen_image"].(string); p.Policy == "watchSpec" && p.State == "Completed" {
				out = append(out, img)
			}
		}
		return out, nil
	}
	var images []string
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 4*time.Minute, true, func(context.Context) (bool, error) {
		var err error
		images, err = seen()
		return err == nil && slices.Contains(images, want), nil
	})
	if err != nil {
		t.Fatalf("the node's policy never saw %s after its change_spec completed; completed plans saw %v\n--- node agent log:\n%s\n--- cluster agent log:\n%s",
			want, images, a.processes.Log(testbed.LayerNode, node, 40), a.processes.Log(testbed.LayerCluster, cluster, 40))
	}
	if !slices.Contains(images, "registry.example/worker:1") {
		t.Errorf("the node's policy never saw the first image: %v", images)
	}
	var running []string
	for _, p := range runningPods(t, a.member(t, cluster), app.Name, "worker") {
		running = append(running, p.Spec.Containers[0].Image)
	}
	if !slices.Equal(running, []string{want}) {
		t.Errorf("worker pods run %v, want [%s]", running, want)
	}
}
