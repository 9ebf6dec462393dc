package northbound_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	karmadaclientset "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlsysops-go/mlsysops/agents/cluster/fluidity"
	"github.com/mlsysops-go/mlsysops/agents/continuum"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/internal/kube"
	"github.com/mlsysops-go/mlsysops/internal/members"
	"github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
	"github.com/mlsysops-go/mlsysops/northbound/api"
	nbclient "github.com/mlsysops-go/mlsysops/northbound/client"
	"github.com/mlsysops-go/mlsysops/northbound/handlers"
	"github.com/mlsysops-go/mlsysops/northbound/infra"
	"github.com/mlsysops-go/mlsysops/northbound/policystore"
)

// karmadaEnv is an API on a private Redis and the shared testbed's
// Karmada API, with its own namespace for MLSysOpsApp and MLSysOpsNode
// resources.
//
// The MLSysOpsApp resources of these tests live in the Karmada API, as
// the agents' do, in a namespace of their own: the agents' placement
// controllers act only on namespace mlsysops and no PropagationPolicy
// selects this one, so the statuses these tests write as stand-ins for
// the agents stay as written.
type karmadaEnv struct {
	*env
	tb *testbed.Env
	// k is the Karmada API: applications, clusters, nodes, node
	// descriptions.
	k  *infra.Karmada
	ns string
}

func newKarmadaEnv(t *testing.T, cfg handlers.Config) *karmadaEnv {
	t.Helper()
	tb := testbed.Shared(t)
	ctx := ctxT(t)
	kcfg := tb.RESTConfig(t, testbed.ContextKarmada)
	if err := continuum.EnsureAPI(ctx, kcfg); err != nil {
		t.Fatal(err)
	}
	ns := uniq("nb-test")
	cs := kubernetes.NewForConfigOrDie(kcfg)
	if err := kube.EnsureNamespace(ctx, cs, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	k, err := infra.New(kcfg, infra.Options{Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Infra = k
	return &karmadaEnv{env: newEnv(t, cfg), tb: tb, k: k, ns: ns}
}

// placeApp creates the MLSysOpsApp in Karmada with a status, as the
// continuum and cluster agents would.
func (ke *karmadaEnv) placeApp(t *testing.T, file string, status mlsysopsv1.MLSysOpsAppStatus) *mlsysopsv1.MLSysOpsApp {
	t.Helper()
	obj, errs := description.Parse("", repoFile(t, file))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	app := obj.(*mlsysopsv1.MLSysOpsApp)
	app.Namespace = ke.ns
	ctx := ctxT(t)
	if err := ke.k.Client().Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	app.Status = status
	if err := ke.k.Client().Status().Update(ctx, app); err != nil {
		t.Fatal(err)
	}
	return app
}

func TestApplicationStatusFromResource(t *testing.T) {
	ke := newKarmadaEnv(t, handlers.Config{})
	ctx := ctxT(t)
	if _, err := ke.op.Applications().Submit(ctx, repoFile(t, "examples/apps/gpu-inference.yaml"), nbclient.YAML); err != nil {
		t.Fatal(err)
	}
	app, err := ke.view.Applications().Get(ctx, "llm-inference")
	if err != nil || app.PhaseSource != "submission" || app.Resource != nil || len(app.Warnings) != 0 {
		t.Fatalf("before the resource exists: %+v %v", app, err)
	}

	now := metav1.Now()
	ke.placeApp(t, "examples/apps/gpu-inference.yaml", mlsysopsv1.MLSysOpsAppStatus{
		Phase: mlsysopsv1.AppRunning, Message: "every component is ready",
		Components: []mlsysopsv1.ComponentStatus{
			{Name: "llm-server", Cluster: "cloud-1", Nodes: []string{"cloud-gpu-h100-1"}, Replicas: 1, ReadyReplicas: 1},
			{Name: "gateway", Cluster: "cloud-1", Nodes: []string{"cloud-1"}, Replicas: 1, ReadyReplicas: 1},
		},
		Conditions: []metav1.Condition{
			{Type: "Placed", Status: metav1.ConditionTrue, Reason: "ClusterChosen", Message: "cloud-1", LastTransitionTime: now},
			{Type: "Ready", Status: metav1.ConditionTrue, Reason: "ComponentsReady", LastTransitionTime: now},
		},
	})
	app, err = ke.view.Applications().Get(ctx, "llm-inference")
	if err != nil {
		t.Fatal(err)
	}
	if app.Phase != "Running" || app.PhaseSource != "resource" || app.Message != "every component is ready" ||
		app.Resource == nil || app.Resource.Namespace != ke.ns || len(app.Conditions) != 2 || app.Conditions[0].Type != "Placed" {
		t.Errorf("from the resource: %+v", app)
	}
	want := []api.ComponentPlacement{
		{Name: "llm-server", Cluster: "cloud-1", Nodes: []string{"cloud-gpu-h100-1"}, Replicas: 1, ReadyReplicas: 1, GPUModel: "NVIDIA-H100-80GB-HBM3", GPUs: 1},
		{Name: "gateway", Cluster: "cloud-1", Nodes: []string{"cloud-1"}, Replicas: 1, ReadyReplicas: 1},
	}
	if len(app.Components) != 2 || app.Components[0].GPUModel != want[0].GPUModel || app.Components[0].Nodes[0] != "cloud-gpu-h100-1" ||
		app.Components[1].ReadyReplicas != 1 || app.Components[1].GPUModel != "" {
		t.Errorf("components: %+v, want %+v", app.Components, want)
	}
	if st := decode[api.UpstreamAppStatus](t, ke.do(t, "GET", "/apps/status/llm-inference", viewerToken, "", nil), 200); st.Status != "Running" {
		t.Errorf("upstream status: %+v", st)
	}
	details := decode[api.UpstreamAppDetails](t, ke.do(t, "GET", "/apps/apps/details/llm-inference", viewerToken, "", nil), 200)
	if details.State != "Running" || len(details.Components) != 2 || details.Components[0].Cluster != "cloud-1" {
		t.Errorf("upstream details: %+v", details)
	}

	// Performance follows the nodes of the resource's status.
	if err := ke.store.Telemetry().Put(ctx, state.Sample{Node: "cloud-gpu-h100-1", Time: time.Now(),
		Metrics: map[string]float64{"llm_request_latency_p95_ms": 650}}, time.Minute); err != nil {
		t.Fatal(err)
	}
	perf, err := ke.view.Applications().Performance(ctx, "llm-inference")
	if err != nil || perf.Metrics[0].Value == nil || *perf.Metrics[0].Value != 650 || *perf.Metrics[0].Satisfied ||
		perf.GlobalSatisfaction.Value == nil || *perf.GlobalSatisfaction.Value != 0 || *perf.GlobalSatisfaction.Satisfied {
		t.Errorf("performance: %+v %v", perf, err)
	}

	// A removal shows at once, before the agents act on it.
	if _, err := ke.op.Applications().Remove(ctx, "llm-inference"); err != nil {
		t.Fatal(err)
	}
	app, err = ke.view.Applications().Get(ctx, "llm-inference")
	if err != nil || app.Phase != "Removing" || app.PhaseSource != "submission" || app.Resource == nil {
		t.Errorf("removing: %+v %v", app, err)
	}
}

func TestResourceOnlyApplication(t *testing.T) {
	ke := newKarmadaEnv(t, handlers.Config{})
	ctx := ctxT(t)
	// Applied with kubectl: in Karmada, not in Redis.
	app := ke.placeApp(t, "examples/apps/edge-camera-arm64.yaml", mlsysopsv1.MLSysOpsAppStatus{})
	got, err := ke.view.Applications().Get(ctx, "edge-camera")
	if err != nil {
		t.Fatal(err)
	}
	if got.Phase != "Queued" || got.PhaseSource != "resource" || got.LastRequest != "deploy" || len(got.Components) != 2 || len(got.Description) == 0 {
		t.Errorf("resource-only application: %+v", got)
	}
	if _, err := ke.view.MLDeployments().Get(ctx, "no-such-model"); !nbclient.IsNotFound(err) {
		t.Errorf("unknown ML deployment: %v", err)
	}

	// The continuum agent mirrors the status of every MLSysOpsApp into
	// Redis on each reconcile (stood in for here): from then on it is
	// listed and can be removed like a submitted application.
	sink := continuum.RedisStatus{Apps: ke.store.Applications(), ML: ke.store.MLDeployments()}
	app.Status = mlsysopsv1.MLSysOpsAppStatus{Phase: mlsysopsv1.AppRunning, Message: "running on [edge-1]",
		Components: []mlsysopsv1.ComponentStatus{{Name: "detector", Cluster: "edge-1", Nodes: []string{"edge-1"}, Replicas: 1, ReadyReplicas: 1}}}
	if err := ke.k.Client().Status().Update(ctx, app); err != nil {
		t.Fatal(err)
	}
	if err := sink.Update(ctx, app); err != nil {
		t.Fatal(err)
	}
	list, err := ke.view.Applications().List(ctx, nbclient.ListOptions{Phases: []string{"Running"}})
	if err != nil || list.Total != 1 || len(list.Items) != 1 || list.Items[0].ID != "edge-camera" || list.Items[0].LastRequest != "deploy" ||
		list.Items[0].Placement["detector"] != "edge-1/edge-1" || !list.Items[0].SubmittedAt.Equal(app.CreationTimestamp.Time) {
		t.Errorf("listed by phase: %+v %v", list, err)
	}
	if m := decode[api.UpstreamStatusMap](t, ke.do(t, "GET", "/apps/list_all/", viewerToken, "", nil), 200); m.SystemStatus["edge-camera"] != "Running" {
		t.Errorf("upstream list_all: %+v", m)
	}
	t.Setenv("MLS_API_URL", ke.srv.URL)
	t.Setenv("MLS_TOKEN", operatorToken)
	if out := mustMLS(t, "apps", "list-all"); !strings.Contains(out, "edge-camera  Running  deploy") {
		t.Errorf("mls apps list-all:\n%s", out)
	}
	got, err = ke.view.Applications().Get(ctx, "edge-camera")
	if err != nil || got.Phase != "Running" || got.PhaseSource != "resource" || got.Generation != 0 {
		t.Errorf("tracked application: %+v %v", got, err)
	}
	// Tracked, it cannot be deployed again under its name, and it can be
	// removed.
	problem(t, ke.do(t, "POST", "/v1/applications", operatorToken, "application/yaml", repoFile(t, "examples/apps/edge-camera-arm64.yaml")), 409)
	if out := mustMLS(t, "apps", "remove-app", "edge-camera"); !strings.Contains(out, "removal queued, phase Removing") {
		t.Errorf("mls apps remove-app:\n%s", out)
	}
	// A late report does not undo the removal; once the resource is gone
	// the application is forgotten.
	if err := sink.Update(ctx, app); err != nil {
		t.Fatal(err)
	}
	if got, err := ke.view.Applications().Get(ctx, "edge-camera"); err != nil || got.Phase != "Removing" {
		t.Errorf("removing: %+v %v", got, err)
	}
	if err := ke.k.Client().Delete(ctx, app); err != nil {
		t.Fatal(err)
	}
	if err := sink.Removed(ctx, "edge-camera"); err != nil {
		t.Fatal(err)
	}
	if list, err := ke.view.Applications().List(ctx, nbclient.ListOptions{}); err != nil || list.Total != 0 {
		t.Errorf("after removal: %+v %v", list, err)
	}
}

// TestRemoveBeforeMirrored: an application applied with kubectl is in
// Karmada but not in Redis until the continuum agent mirrors its first
// status (it may be down, or not have reconciled it yet). Removing or
// updating it through the API then finds it in Karmada, tracks it and
// queues the request: a 404 would tell the user that an application that
// runs does not exist (the chaos soak's client took it as "already
// removed", and the application ran on for good).
func TestRemoveBeforeMirrored(t *testing.T) {
	ke := newKarmadaEnv(t, handlers.Config{})
	ctx := ctxT(t)
	app := ke.placeApp(t, "examples/apps/edge-camera-arm64.yaml", mlsysopsv1.MLSysOpsAppStatus{})
	apps := ke.store.Applications()
	// The precondition: Redis does not know it.
	if _, err := apps.Status(ctx, "edge-camera"); !errors.Is(err, state.ErrNotFound) {
		t.Fatalf("status in Redis before any mirror: %v; want %v", err, state.ErrNotFound)
	}
	// Nothing in Karmada either: still 404.
	problem(t, ke.do(t, "DELETE", "/v1/applications/no-such-app", operatorToken, "", nil), 404)
	problem(t, ke.do(t, "PUT", "/v1/applications/edge-camera-2", operatorToken, "application/yaml",
		[]byte(strings.Replace(string(repoFile(t, "examples/apps/edge-camera-arm64.yaml")), "name: edge-camera", "name: edge-camera-2", 1))), 404)

	// An update first: tracked, queued.
	acc := decode[api.Accepted](t, ke.do(t, "PUT", "/v1/applications/edge-camera", operatorToken, "application/yaml", repoFile(t, "examples/apps/edge-camera-arm64.yaml")), 202)
	if acc.Request != "update" {
		t.Errorf("update accepted as %+v", acc)
	}
	st, err := apps.Status(ctx, "edge-camera")
	if err != nil || !st.SubmittedAt.Equal(app.CreationTimestamp.Time) {
		t.Fatalf("tracked status %+v, %v; want one submitted at the resource's creation %s", st, err, app.CreationTimestamp)
	}
	acc = decode[api.Accepted](t, ke.do(t, "DELETE", "/v1/applications/edge-camera", operatorToken, "", nil), 202)
	if acc.Request != "remove" || acc.Phase != "Removing" {
		t.Errorf("removal accepted as %+v", acc)
	}
	// Both requests are queued for the continuum agent, in order.
	q, err := apps.Queue(ctx, "", "continuum-0", state.QueueOptions{Block: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for len(kinds) < 2 {
		es, err := q.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if e.Submission.ID != "edge-camera" {
				t.Errorf("queued %s %s", e.Submission.Kind, e.Submission.ID)
			}
			kinds = append(kinds, string(e.Submission.Kind))
		}
	}
	if strings.Join(kinds, ",") != "update,remove" {
		t.Errorf("queued %v; want [update remove]", kinds)
	}
	if n, err := apps.Backlog(ctx); err != nil || n != 2 {
		t.Errorf("stream length %d, %v; want 2", n, err)
	}
}

// TestMLDeploymentEndpoints: once the cluster agent created the Service
// of an ML deployment, its GET gives the inference endpoint (stood in for
// here: the MLSysOpsApp status, and the Service in cloud-1).
func TestMLDeploymentEndpoints(t *testing.T) {
	ke := newKarmadaEnv(t, handlers.Config{})
	ctx := ctxT(t)
	id := uniq("model")
	legacy := []byte(`{"MLSysOpsApplication": {"name": "ml-app-1", "mlsysops-id": "` + id + `",
	  "clusterPlacement": {"clusterID": ["cloud-1"], "instances": 1},
	  "components": [{"Component": {"name": "ml-comp", "uid": "` + id + `"}, "nodePlacement": {"continuumLayer": ["cloud"]},
	    "containers": [{"image": "registry.example.org/models/` + id + `:0.0.1", "ports": [{"containerPort": 8000}]}]}]}}`)
	if _, err := ke.op.MLDeployments().Submit(ctx, legacy, nbclient.JSON); err != nil {
		t.Fatal(err)
	}
	got, err := ke.view.MLDeployments().Get(ctx, id)
	if err != nil || len(got.Endpoints) != 0 || !strings.Contains(string(got.Description), `"external_access":true`) {
		t.Fatalf("before placement: %+v %v", got, err)
	}

	var app mlsysopsv1.MLSysOpsApp
	if err := json.Unmarshal(got.Description, &app); err != nil {
		t.Fatal(err)
	}
	app.Namespace, app.ResourceVersion = ke.ns, ""
	if err := ke.k.Client().Create(ctx, &app); err != nil {
		t.Fatal(err)
	}
	app.Status = mlsysopsv1.MLSysOpsAppStatus{Phase: mlsysopsv1.AppRunning,
		Components: []mlsysopsv1.ComponentStatus{{Name: "ml-comp", Cluster: "cloud-1", Nodes: []string{"cloud-gpu-h100-1"}, Replicas: 1, ReadyReplicas: 1}}}
	if err := ke.k.Client().Status().Update(ctx, &app); err != nil {
		t.Fatal(err)
	}
	// What the cluster agent renders for the component (fluidity.Render).
	member := kubernetes.NewForConfigOrDie(ke.tb.RESTConfig(t, "cloud-1"))
	ns := members.Namespace(id)
	if err := kube.EnsureNamespace(ctx, member, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = member.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	objs, err := fluidity.Render(&app, &app.Spec.Components[0], []string{"cloud-gpu-h100-1"}, nil)
	if err != nil || objs.Service == nil {
		t.Fatalf("render: %+v %v", objs, err)
	}
	svc, err := member.CoreV1().Services(ns).Create(ctx, objs.Service, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node, err := member.CoreV1().Nodes().Get(ctx, "cloud-gpu-h100-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodeIP := ""
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			nodeIP = a.Address
		}
	}

	got, err = ke.view.MLDeployments().Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	nodePort := svc.Spec.Ports[0].NodePort
	want := []api.Endpoint{{
		Component: "ml-comp", Cluster: "cloud-1", Namespace: ns, Service: "ml-comp", Type: "NodePort", PortName: svc.Spec.Ports[0].Name,
		Protocol: "TCP", Port: 8000, ClusterIP: svc.Spec.ClusterIP, Address: svc.Spec.ClusterIP + ":8000",
		URL: "http://ml-comp." + ns + ".svc:8000", NodePort: nodePort, Ready: true,
	}}
	if nodeIP != "" {
		want[0].NodeAddress = fmt.Sprintf("%s:%d", nodeIP, nodePort)
		want[0].ExternalURL = "http://" + want[0].NodeAddress
	}
	if diff := cmp.Diff(want, got.Endpoints); diff != "" || nodePort == 0 || svc.Spec.ClusterIP == "" || len(got.Warnings) != 0 {
		t.Errorf("endpoints (-want +got):\n%s\nwarnings %q", diff, got.Warnings)
	}
	var st map[string]string
	if err := json.Unmarshal(ke.do(t, "GET", "/ml/status/"+id, viewerToken, "", nil).Body, &st); err != nil ||
		st["status"] != "Running" || st["local_endpoint"] != want[0].Address || st["global_endpoint"] != want[0].NodeAddress {
		t.Errorf("upstream ML status: %v %v", st, err)
	}
	t.Setenv("MLS_API_URL", ke.srv.URL)
	t.Setenv("MLS_TOKEN", viewerToken)
	if out := mustMLS(t, "ml", "get-ml-details", id); !strings.Contains(out, "ml-comp   cloud-1  "+ns+"/ml-comp") || !strings.Contains(out, want[0].Address) {
		t.Errorf("mls ml get-ml-details:\n%s", out)
	}
}

func TestInfrastructure(t *testing.T) {
	ke := newKarmadaEnv(t, handlers.Config{ContinuumID: "mls-continuum"})
	ctx := ctxT(t)
	for _, a := range []state.Agent{
		{JID: "cloud-1@mlsysops.local", Layer: "cluster", Cluster: "cloud-1", Online: true},
		{JID: "edge-1@mlsysops.local", Layer: "node", Cluster: "edge-1", Node: "edge-1", Online: false},
	} {
		if err := ke.store.Agents().Register(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	cont, err := ke.view.Continuum(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cont.ID != "mls-continuum" || cont.Agent != nil || len(cont.Clusters) != len(ke.tb.Clusters) {
		t.Fatalf("continuum: %+v", cont)
	}
	nodes := 0
	for i, c := range cont.Clusters {
		if c.Name != ke.tb.Clusters[i] || !c.Ready || c.NodeCount == 0 || c.Resources.CPU.Allocatable <= 0 ||
			c.Resources.CPU.Free > c.Resources.CPU.Allocatable || c.Resources.Memory.Free > c.Resources.Memory.Allocatable {
			t.Errorf("cluster %d: %+v", i, c)
		}
		nodes += c.NodeCount
	}
	if nodes != len(ke.tb.Nodes) {
		t.Errorf("%d nodes in the clusters, %d described", nodes, len(ke.tb.Nodes))
	}
	cloud := cont.Clusters[0]
	if cloud.Name != "cloud-1" || cloud.Agent == nil || !cloud.Agent.Online {
		t.Errorf("cloud-1 and its agent: %+v", cloud)
	}
	if h := cloud.Resources.GPUs["NVIDIA-H100-80GB-HBM3"]; h.Allocatable != 8 || h.Free > 8 || h.MemoryMiB != 80*1024 {
		t.Errorf("H100s of cloud-1: %+v (all: %+v)", h, cloud.Resources.GPUs)
	}
	if cont.Totals.CPU.Allocatable < cloud.Resources.CPU.Allocatable {
		t.Errorf("totals %+v below cloud-1's", cont.Totals)
	}

	cl, err := ke.view.Cluster(ctx, "edge-1")
	if err != nil || len(cl.Nodes) != cl.NodeCount || cl.Agent != nil {
		t.Fatalf("edge-1: %+v %v", cl, err)
	}
	var edge api.Node
	for _, n := range cl.Nodes {
		if n.Name == "edge-1" {
			edge = n
		}
		if n.Cluster != "edge-1" || n.Labels[mlsysopsv1.LabelCluster] != "edge-1" {
			t.Errorf("node %s of edge-1: %+v", n.Name, n)
		}
	}
	if edge.Agent == nil || edge.Agent.Online || edge.Layer == "" || !edge.Ready {
		t.Errorf("node edge-1: %+v", edge)
	}
	far, err := ke.view.Nodes(ctx, "", "far_edge")
	if err != nil || len(far) != 1 || far[0].Name != "far-edge-rpi-1" {
		t.Errorf("far_edge nodes: %+v %v", far, err)
	}
	n, err := ke.view.Node(ctx, "cloud-gpu-a100-1")
	if err != nil || n.Cluster != "cloud-1" || len(n.Resources.GPUs) != 1 {
		t.Errorf("A100 node: %+v %v", n, err)
	}
	for _, p := range []string{"/v1/infrastructure/clusters/ghost", "/v1/infrastructure/clusters/Bad_Name", "/v1/infrastructure/nodes/ghost",
		"/v1/infrastructure/nodes?cluster=ghost", "/infra/list/?type=Datacenter", "/infra/list/?type=Node&name=ghost"} {
		problem(t, ke.do(t, "GET", p, viewerToken, "", nil), 404)
	}
	problem(t, ke.do(t, "GET", "/v1/infrastructure/nodes?layer=fog", viewerToken, "", nil), 400)
	problem(t, ke.do(t, "GET", "/infra/list/?type=Galaxy", viewerToken, "", nil), 400)
	up := decode[api.Cluster](t, ke.do(t, "GET", "/infra/list/?type=Cluster&name=cloud-1", viewerToken, "", nil), 200)
	if up.Name != "cloud-1" || len(up.Nodes) == 0 {
		t.Errorf("upstream infra list of a cluster: %+v", up)
	}
	upNodes := decode[api.NodeList](t, ke.do(t, "GET", "/infra/list?id_type=node&id_value=edge-1", viewerToken, "", nil), 200)
	if len(upNodes.Items) != 1 {
		t.Errorf("upstream infra list with id_type: %+v", upNodes)
	}
}

func TestRegisterNodeDescriptions(t *testing.T) {
	ke := newKarmadaEnv(t, handlers.Config{})
	ctx := ctxT(t)
	desc := repoFile(t, "descriptions/nodes/edge-t4-1.yaml")
	reg, err := ke.op.RegisterNode(ctx, desc, nbclient.YAML)
	if err != nil || !reg.Created || reg.Name != "edge-t4-1" || reg.Cluster != "edge-1" {
		t.Fatalf("register: %+v %v", reg, err)
	}
	if reg, err := ke.op.RegisterNode(ctx, desc, nbclient.YAML); err != nil || reg.Created {
		t.Errorf("register again: %+v %v", reg, err)
	}
	var cr mlsysopsv1.MLSysOpsNode
	if err := ke.k.Client().Get(ctx, client.ObjectKey{Namespace: ke.ns, Name: "edge-t4-1"}, &cr); err != nil ||
		cr.Labels[mlsysopsv1.LabelCluster] != "edge-1" || cr.Spec.ClusterID != "edge-1" {
		t.Fatalf("MLSysOpsNode in Karmada: %+v %v", cr.ObjectMeta, err)
	}
	var pp policyv1alpha1.PropagationPolicy
	if err := ke.k.Client().Get(ctx, client.ObjectKey{Namespace: ke.ns, Name: "mlsysops-nodes-edge-1"}, &pp); err != nil ||
		pp.Spec.Placement.ClusterAffinity == nil || pp.Spec.Placement.ClusterAffinity.ClusterNames[0] != "edge-1" {
		t.Fatalf("PropagationPolicy: %+v %v", pp.Spec, err)
	}
	// Karmada carries the description to edge-1, where its cluster agent
	// reads it.
	member, err := client.New(ke.tb.RESTConfig(t, "edge-1"), client.Options{Scheme: ke.k.Client().Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var got mlsysopsv1.MLSysOpsNode
		return member.Get(ctx, client.ObjectKey{Namespace: ke.ns, Name: "edge-t4-1"}, &got) == nil, nil
	})
	if err != nil {
		t.Errorf("the description never reached edge-1: %v", err)
	}
	n, err := ke.view.Node(ctx, "edge-t4-1")
	if err != nil || !n.Described {
		t.Errorf("described node: %+v %v", n, err)
	}
	// A description may come before its node joins.
	future := bytes.Replace(desc, []byte("name: edge-t4-1"), []byte("name: edge-future-1"), 1)
	if _, err := ke.op.RegisterNode(ctx, future, nbclient.YAML); err != nil {
		t.Fatal(err)
	}
	n, err = ke.view.Node(ctx, "edge-future-1")
	if err != nil || !n.Described || n.Ready || n.Cluster != "edge-1" {
		t.Errorf("node described ahead: %+v %v", n, err)
	}
	// The upstream path with its {"yaml": ...} wrapper.
	wrapped := `{"yaml": {"MLSysOpsNode": {"name": "edge-wrapped-1", "cluster_id": "edge-1", "continuum_layer": "edge", "environment": {"os": "ubuntu"}}}}`
	if r := ke.do(t, "POST", "/infra/register", operatorToken, "application/json", []byte(wrapped)); r.StatusCode != 201 {
		t.Errorf("/infra/register: %d %s", r.StatusCode, r.Body)
	}

	cases := map[string]struct {
		method, path, ct, body string
		status                 int
		fields                 []string
	}{
		"unknown cluster": {"POST", "/v1/infrastructure/nodes", "application/yaml",
			"MLSysOpsNode: {name: n1, cluster_id: ghost, continuum_layer: edge, environment: {}}", 422, []string{"MLSysOpsNode.cluster_id"}},
		"no cluster": {"POST", "/v1/infrastructure/nodes", "application/yaml",
			"MLSysOpsNode: {name: n1, continuum_layer: edge, environment: {}}", 422, []string{"MLSysOpsNode.cluster_id"}},
		"resource form, unknown cluster": {"POST", "/v1/infrastructure/nodes", "application/json",
			`{"apiVersion": "mlsysops.eu/v1", "kind": "MLSysOpsNode", "metadata": {"name": "n1"}, "spec": {"cluster_id": "ghost", "continuum_layer": "edge", "environment": {}}}`,
			422, []string{"spec.cluster_id"}},
		"an application": {"POST", "/v1/infrastructure/nodes", "application/json", string(appJSON("x")), 422, []string{"kind"}},
		"invalid description": {"POST", "/v1/infrastructure/nodes", "application/yaml",
			"MLSysOpsNode: {name: n1, cluster_id: edge-1, continuum_layer: fog, environment: {os: dos}}", 422,
			[]string{"MLSysOpsNode.continuum_layer", "MLSysOpsNode.environment.os"}},
		"name differs from the path": {"PUT", "/v1/infrastructure/nodes/other", "application/yaml", string(desc), 422, []string{"MLSysOpsNode.name"}},
		"by URI":                     {"POST", "/infra/register", "application/json", `{"uri": "http://169.254.169.254/latest/meta-data"}`, 422, []string{"uri"}},
		"not YAML":                   {"POST", "/v1/infrastructure/nodes", "application/yaml", "a: [", 400, nil},
		"wrong media type":           {"POST", "/v1/infrastructure/nodes", "text/csv", "a,b", 415, nil},
	}
	for name, tc := range cases {
		p := problem(t, ke.do(t, tc.method, tc.path, operatorToken, tc.ct, []byte(tc.body)), tc.status)
		if tc.fields != nil {
			got := strings.Join(fields(p.Problems), ",")
			if got != strings.Join(tc.fields, ",") {
				t.Errorf("%s: fields %s, want %s (%+v)", name, got, strings.Join(tc.fields, ","), p.Problems)
			}
		}
	}
	if err := ke.op.UnregisterNode(ctx, "edge-t4-1"); err != nil {
		t.Fatal(err)
	}
	if err := ke.op.UnregisterNode(ctx, "edge-t4-1"); !nbclient.IsNotFound(err) {
		t.Errorf("second unregister: %v", err)
	}
	if n, err := ke.view.Node(ctx, "edge-t4-1"); err != nil || n.Described {
		t.Errorf("after unregister: %+v %v", n, err)
	}
}

func TestPolicyConfigMaps(t *testing.T) {
	tb := testbed.Shared(t)
	ctx := ctxT(t)
	kcfg := tb.RESTConfig(t, testbed.ContextKarmada)
	host := kubernetes.NewForConfigOrDie(tb.RESTConfig(t, testbed.ContextHost))
	karmada := kubernetes.NewForConfigOrDie(kcfg)
	store := policystore.NewConfigMapStore(policystore.DefaultTargets(host, karmada, karmadaclientset.NewForConfigOrDie(kcfg)))
	e := newEnv(t, handlers.Config{Policies: store})
	src := []byte("def initialize():\n    return {}\n" +
		"def analyze(context, a, s, m, t, ml):\n    return False, context\n" +
		"def plan(context, a, s, m, t, ml):\n    return {}, context\n")
	name := "policy-" + uniq("nbtest") + ".star"
	for _, layer := range []string{"continuum", "cluster"} {
		if _, created, err := e.op.PutPolicy(ctx, layer, name, src); err != nil || !created {
			t.Fatalf("put %s: %v %v", layer, created, err)
		}
		t.Cleanup(func() { _ = e.op.DeletePolicy(context.Background(), layer, name) })
	}
	cm, err := host.CoreV1().ConfigMaps(policystore.FrameworkNamespace).Get(ctx, policystore.ContinuumPolicyConfigMap, metav1.GetOptions{})
	if err != nil || cm.Data[name] != string(src) {
		t.Fatalf("continuum policy ConfigMap on the host: %v", err)
	}
	cm, err = karmada.CoreV1().ConfigMaps(policystore.FrameworkNamespace).Get(ctx, policystore.ClusterPolicyConfigMap, metav1.GetOptions{})
	if err != nil || cm.Data[name] != string(src) {
		t.Fatalf("cluster policy ConfigMap in Karmada: %v", err)
	}
	// Karmada carries it to every member cluster, where the agents mount it.
	for _, cluster := range tb.Clusters {
		mc := kubernetes.NewForConfigOrDie(tb.RESTConfig(t, cluster))
		err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			cm, err := mc.CoreV1().ConfigMaps(policystore.FrameworkNamespace).Get(ctx, policystore.ClusterPolicyConfigMap, metav1.GetOptions{})
			return err == nil && cm.Data[name] == string(src), nil
		})
		if err != nil {
			t.Errorf("policy never reached %s: %v", cluster, err)
		}
	}
	list, err := e.view.Policies(ctx, "cluster")
	found := false
	for _, p := range list {
		found = found || (p.Name == name && p.Location == "configmap mlsysops-framework/cluster-agents-policies")
	}
	if err != nil || !found {
		t.Errorf("list: %+v %v", list, err)
	}
	if err := e.op.DeletePolicy(ctx, "cluster", name); err != nil {
		t.Fatal(err)
	}
	if _, err := e.view.Policy(ctx, "cluster", name); !nbclient.IsNotFound(err) {
		t.Errorf("deleted policy: %v", err)
	}
}
