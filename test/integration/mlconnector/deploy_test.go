package mlconnector_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/mlsysops-go/mlsysops/internal/testbed"
	"github.com/mlsysops-go/mlsysops/mlconnector/api"
	"github.com/mlsysops-go/mlsysops/mlconnector/objstore"
	nbclient "github.com/mlsysops-go/mlsysops/northbound/client"
)

var irisCSV = []byte("sepal_length,sepal_width,petal_length,petal_width,target\n5.1,3.5,1.4,0.2,0\n6.2,2.9,4.3,1.3,1\n7.7,3.0,6.1,2.3,2\n")

// memberDeployment waits for the model server's Deployment in a member
// cluster and returns it.
func memberDeployment(t *testing.T, cs kubernetes.Interface, id string, cond func(*appsv1.Deployment) bool) *appsv1.Deployment {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		d, err := cs.AppsV1().Deployments("mls-"+id).Get(context.Background(), "model", metav1.GetOptions{})
		if err == nil && cond(d) {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("Deployment mls-%s/model: %v (condition not met)", id, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// TestDeploymentLifecycle: register → upload → deploy with one GPU of 40
// GB → the agents place it on a big enough GPU node with the toleration,
// the init container and the readiness probe → Ready with its endpoint →
// the init container's downloads work with their token only → a new
// version rolls out → operations recorded → delete removes the
// application, its namespace in the member, and its operations; deleting
// the model empties the object store of its files.
func TestDeploymentLifecycle(t *testing.T) {
	e := newEnv(t)
	testbed.StartTestAgents(t, e.tb, testbed.TestAgentsOptions{Nodes: true})
	ctx := ctxT(t)
	// Real models: wherever the agents place them (a simulated node or one
	// of the testbed's real nodes), the model server can load them.
	m := e.model(t, irisSpec(uniq("iris")), "iris.onnx", fixture(t, "iris_mlp.onnx"), irisCSV)
	id := uniq("iris")
	d, err := e.op.CreateDeployment(ctx, api.DeploymentSpec{DeploymentID: id, ModelID: m.ModelID, OwnerID: "alice",
		Placement: api.Placement{ClusterID: "cloud-1"},
		Resources: api.Resources{CPU: "500m", GPU: &api.GPU{Count: 1, MinMemoryGB: 40}}})
	if err != nil {
		t.Fatal(err)
	}
	if d.Phase != api.PhasePending && d.Phase != api.PhasePlacing {
		t.Errorf("a new deployment is %s", d.Phase)
	}
	d = e.waitPhase(t, id, 3*time.Minute, func(d api.Deployment) bool { return d.Phase == api.PhaseReady })
	if d.Endpoint == nil || d.Endpoint.Cluster != "cloud-1" || d.Endpoint.Service != "model" || d.Endpoint.Namespace != "mls-"+id ||
		d.Endpoint.URL != "http://model.mls-"+id+".svc:8080" || d.Endpoint.ExternalAddress == "" {
		t.Fatalf("endpoint %+v", d.Endpoint)
	}
	if len(d.Pods) != 1 || d.Pods[0].ModelVersion != 1 || !strings.HasPrefix(d.Pods[0].Node, "cloud-gpu-") {
		t.Fatalf("pods %+v", d.Pods)
	}

	// What the cluster agent created in the member.
	cloud := kubernetes.NewForConfigOrDie(e.tb.RESTConfig(t, "cloud-1"))
	dep := memberDeployment(t, cloud, id, func(*appsv1.Deployment) bool { return true })
	pod := dep.Spec.Template.Spec
	if len(pod.InitContainers) != 1 || !slices.Equal(pod.InitContainers[0].Args, []string{"fetch", "--dest", "/models"}) {
		t.Fatalf("init containers %+v", pod.InitContainers)
	}
	if !slices.ContainsFunc(pod.Tolerations, func(tl corev1.Toleration) bool {
		return tl.Key == "nvidia.com/gpu" && tl.Operator == corev1.TolerationOpExists && tl.Effect == corev1.TaintEffectNoSchedule
	}) {
		t.Errorf("no toleration of GPU nodes' taint: %+v", pod.Tolerations)
	}
	ctr := pod.Containers[0]
	if q := ctr.Resources.Limits["nvidia.com/gpu"]; q.Value() != 1 {
		t.Errorf("GPU limit %v", ctr.Resources.Limits)
	}
	if ctr.ReadinessProbe == nil || ctr.ReadinessProbe.HTTPGet == nil || ctr.ReadinessProbe.HTTPGet.Path != "/v2/health/ready" {
		t.Errorf("readiness probe %+v", ctr.ReadinessProbe)
	}
	if len(pod.Volumes) != 1 || pod.Volumes[0].EmptyDir == nil {
		t.Errorf("volumes %+v", pod.Volumes)
	}

	// The init container's manifest: every file downloads with its token
	// and matches its checksum; a wrong token is refused.
	var man struct {
		Artifacts []struct {
			Name, URI, SHA256 string
			Size              int64
		} `json:"artifacts"`
	}
	if err := json.Unmarshal([]byte(pod.InitContainers[0].Env[0].Value), &man); err != nil || len(man.Artifacts) != 2 {
		t.Fatalf("manifest %s: %v", pod.InitContainers[0].Env[0].Value, err)
	}
	for _, a := range man.Artifacts {
		resp, err := http.Get(a.URI)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		sum := sha256.Sum256(b)
		if resp.StatusCode != 200 || hex.EncodeToString(sum[:]) != a.SHA256 || int64(len(b)) != a.Size {
			t.Errorf("download %s: %d, %d bytes, sha256 %x (want %s)", a.Name, resp.StatusCode, len(b), sum, a.SHA256)
		}
		u, _ := url.Parse(a.URI)
		q := u.Query()
		q.Set("token", "forged"+q.Get("token")[6:])
		u.RawQuery = q.Encode()
		if resp, err := http.Get(u.String()); err != nil || resp.StatusCode != http.StatusForbidden {
			t.Errorf("a forged token: %v %v", resp.Status, err)
		}
	}

	// A new version rolls out: the member's Deployment moves to it.
	if _, err := e.op.Upload(ctx, m.ModelID, api.FileModel, "iris_gbm.txt", bytes.NewReader(fixture(t, "iris_gbm.txt")), "lightgbm"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.op.PatchDeployment(ctx, id, map[string]any{"version": "latest"}); err != nil {
		t.Fatal(err)
	}
	memberDeployment(t, cloud, id, func(d *appsv1.Deployment) bool {
		return slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "2")
	})
	d = e.waitPhase(t, id, 3*time.Minute, func(d api.Deployment) bool {
		return d.Phase == api.PhaseReady && d.ModelVersion == 2 && len(d.Pods) == 1 && d.Pods[0].ModelVersion == 2
	})

	// Operations recorded for the deployment (as upstream's inference
	// services record them) are listed per owner and deployment.
	for i := 0; i < 3; i++ {
		if _, err := e.op.RecordOperation(ctx, api.OperationCreate{OwnerID: "alice", DeploymentID: id, ModelID: m.ModelID,
			Data: json.RawMessage(`{"sepal_length": 5.1}`), Result: json.RawMessage(`"setosa"`)}); err != nil {
			t.Fatal(err)
		}
	}
	p, err := e.view.Operations(ctx, "alice", id, 2, "")
	if err != nil || len(p.Items) != 2 || p.Continue == "" || p.Items[0].ModelVersion != 2 {
		t.Fatalf("operations page: %+v %v", p, err)
	}

	// Delete: everything goes.
	if err := e.op.DeleteDeployment(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := e.waitGone(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := e.nb.MLDeployments().Get(ctx, id); !nbclient.IsNotFound(err) {
		t.Errorf("the northbound still knows %s: %v", id, err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, err := cloud.CoreV1().Namespaces().Get(ctx, "mls-"+id, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("namespace mls-%s still there: %v", id, err)
		}
		time.Sleep(time.Second)
	}
	if p, err := e.op.Operations(ctx, "", id, 0, ""); err != nil || len(p.Items) != 0 {
		t.Errorf("operations of the removed deployment: %d, %v", len(p.Items), err)
	}

	// Deleting the model empties the object store of its files.
	store := testbedStore(t, e)
	if n := countObjects(t, store, "models/"+m.ModelID+"/"); n != 3 {
		t.Fatalf("%d objects of the model before deletion, want 3", n)
	}
	if err := e.op.DeleteModel(ctx, m.ModelID); err != nil {
		t.Fatal(err)
	}
	if n := countObjects(t, store, "models/"+m.ModelID+"/"); n != 0 {
		t.Errorf("%d objects left after deleting the model", n)
	}
}

// testbedStore opens the testbed's S3 bucket with its keys.
func testbedStore(t *testing.T, e *env) objstore.Store {
	t.Helper()
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(e.tb.StateDir, "pki", "s3", name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	s, err := objstore.NewS3(objstore.S3Config{Endpoint: e.tb.S3URL, Bucket: testbed.S3Bucket, AccessKey: read("access-key"), SecretKey: read("secret-key")})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func countObjects(t *testing.T, s objstore.Store, prefix string) int {
	t.Helper()
	n := 0
	if err := s.List(context.Background(), prefix, func(objstore.Info) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestUnschedulable: a GPU model no cluster has, and a model too big for
// every GPU's memory, are Failed with the agents' per-cluster reasons.
func TestUnschedulable(t *testing.T) {
	e := newEnv(t)
	testbed.StartTestAgents(t, e.tb, testbed.TestAgentsOptions{Nodes: true})
	ctx := ctxT(t)
	big := irisSpec(uniq("llm"))
	big.RunResource = []api.Resource{{ResourceName: "gpu_memory", Value: api.Scalar("200")}}
	m := e.model(t, big, "llm.onnx", []byte("weights"), nil)
	cases := map[string]struct {
		gpu  api.GPU
		want []string
	}{
		"no such GPU":      {api.GPU{Count: 1, Model: "NVIDIA-B200"}, []string{"cloud-1:", "edge-1:", "want in NVIDIA-B200"}},
		"too big for GPUs": {api.GPU{Count: 1}, []string{"too small: the component needs GPUs of at least 204800 MiB"}},
	}
	for name, c := range cases {
		gpu := c.gpu
		id := uniq("nowhere")
		if _, err := e.op.CreateDeployment(ctx, api.DeploymentSpec{DeploymentID: id, ModelID: m.ModelID, OwnerID: "bob",
			Resources: api.Resources{GPU: &gpu}}); err != nil {
			t.Fatal(err)
		}
		d := e.waitPhase(t, id, 3*time.Minute, func(d api.Deployment) bool { return d.Phase == api.PhaseFailed })
		if d.Reason != api.ReasonUnschedulable || d.Endpoint != nil {
			t.Errorf("%s: %s %s", name, d.Reason, d.Message)
		}
		for _, w := range c.want {
			if !strings.Contains(d.Message, w) {
				t.Errorf("%s: message %q lacks %q", name, d.Message, w)
			}
		}
		// Not Ready: predictions are refused with the phase and reason.
		_, err := e.op.Predict(ctx, id, api.PredictRequest{Data: json.RawMessage(`{"sepal_length": 1}`)})
		if nbclient.StatusCode(err) != http.StatusConflict || !strings.Contains(err.Error(), "Unschedulable") {
			t.Errorf("%s: predict on a failed deployment: %v", name, err)
		}
	}
}

// TestUpstreamDeploymentPaths: upstream's /deployment paths with
// upstream's bodies.
func TestUpstreamDeploymentPaths(t *testing.T) {
	e := newEnv(t)
	testbed.StartTestAgents(t, e.tb, testbed.TestAgentsOptions{Nodes: true})
	m := e.model(t, irisSpec(uniq("iris")), "iris.onnx", fixture(t, "iris_mlp.onnx"), nil)
	call := func(method, path string, body string, want int) []byte {
		t.Helper()
		req, _ := http.NewRequest(method, e.tb.MLConnectorURL+path, bytes.NewReader([]byte(body)))
		req.Header.Set("Authorization", "Bearer "+e.tb.NorthboundToken)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, b, want)
		}
		return b
	}
	// Upstream's MLDeploymentCreate: deployment_id "" asks for one.
	b := call("POST", "/deployment/add", `{"modelid": "`+m.ModelID+`", "ownerid": "carol", "deployment_id": "",
		"placement": {"clusterID": "*", "node": "*", "continuum": "Cloud"}, "inference_data": 0}`, http.StatusCreated)
	var d api.Deployment
	if err := json.Unmarshal(b, &d); err != nil || !strings.HasPrefix(d.DeploymentID, "ml-") || d.Status == "" || d.Placement.Continuum != "cloud" {
		t.Fatalf("created %s: %v", b, err)
	}
	e.waitPhase(t, d.DeploymentID, 3*time.Minute, func(d api.Deployment) bool { return d.Phase == api.PhaseReady })
	var all []api.Deployment
	_ = json.Unmarshal(call("GET", "/deployment/all?skip=0&limit=1000", "", 200), &all)
	if !slices.ContainsFunc(all, func(x api.Deployment) bool { return x.DeploymentID == d.DeploymentID }) {
		t.Errorf("/deployment/all lacks %s", d.DeploymentID)
	}
	var st api.UpstreamStatus
	_ = json.Unmarshal(call("GET", "/deployment/get/status/"+d.DeploymentID, "", 200), &st)
	if st.Status != api.PhaseReady || st.Response.Endpoint == nil {
		t.Errorf("status %+v", st)
	}
	var op api.Operation
	_ = json.Unmarshal(call("POST", "/deployment/add/operation", `{"ownerid": "carol", "deploymentid": "`+d.DeploymentID+`",
		"modelid": "`+m.ModelID+`", "data": "{'sepal_length': 5.1}", "result": "[0]", "timestamp": "2024-06-01T10:00:00Z"}`, http.StatusCreated), &op)
	if op.OperationID == 0 || !op.Timestamp.Equal(time.Date(2024, 6, 1, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("operation %+v", op)
	}
	var ops []api.Operation
	_ = json.Unmarshal(call("GET", "/deployment/get/opos/carol", "", 200), &ops)
	if len(ops) != 1 {
		t.Errorf("carol's operations %+v", ops)
	}
	_ = json.Unmarshal(call("GET", "/deployment/get/opos/nobody", "", 200), &ops)
	if len(ops) != 0 {
		t.Errorf("nobody's operations %+v (want [] rather than upstream's 404)", ops)
	}
	call("POST", "/deployment/add/operation", `{"ownerid": "carol", "deploymentid": "no-such", "modelid": "`+m.ModelID+`", "data": 1}`, http.StatusUnprocessableEntity)
	call("DELETE", "/deployment/"+d.DeploymentID, "", http.StatusAccepted)
	ctx := ctxT(t)
	if err := e.waitGone(ctx, d.DeploymentID); err != nil {
		t.Fatal(err)
	}
	call("GET", "/deployment/get/status/"+d.DeploymentID, "", http.StatusNotFound)
	call("DELETE", "/deployment/"+d.DeploymentID, "", http.StatusNotFound)
}
