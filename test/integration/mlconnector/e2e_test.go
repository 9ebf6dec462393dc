package mlconnector_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
	"github.com/mlsysops-go/mlsysops/mlconnector/api"
	"github.com/mlsysops-go/mlsysops/mlconnector/objstore"
	nbclient "github.com/mlsysops-go/mlsysops/northbound/client"
)

// fixtures are the model server's test models (made by
// mlconnector/serving/testdata/gen.py with scikit-learn and LightGBM,
// with their reference predictions).
const fixtures = "../../../mlconnector/serving/testdata"

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtures, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// reference is a fixture's reference predictions.
type reference struct {
	Features []string `json:"features"`
	Inputs   struct {
		Input [][]float64 `json:"input"`
	} `json:"inputs"`
	Outputs struct {
		Label         []int64     `json:"label"`
		Probabilities [][]float64 `json:"probabilities"`
	} `json:"outputs"`
}

func loadReference(t *testing.T, name string) reference {
	t.Helper()
	var r reference
	if err := json.Unmarshal(fixture(t, name), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// rows are the reference inputs as the connector's data: one object of
// feature values per row, with shift added to the feature named shifted.
func (r reference) rows(shifted string, shift float64) []map[string]float64 {
	out := make([]map[string]float64, len(r.Inputs.Input))
	for i, in := range r.Inputs.Input {
		out[i] = map[string]float64{}
		for j, f := range r.Features {
			out[i][f] = in[j]
			if f == shifted {
				out[i][f] += shift
			}
		}
	}
	return out
}

// checkPrediction compares a batch prediction with the reference: the
// labels exactly, the probabilities within 1e-5 (float32 models).
func checkPrediction(t *testing.T, what string, p api.Prediction, ref reference) {
	t.Helper()
	labels, ok := p.Inference.([]any)
	if !ok || len(labels) != len(ref.Outputs.Label) {
		t.Fatalf("%s: inference %v, want %d labels", what, p.Inference, len(ref.Outputs.Label))
	}
	for i, l := range labels {
		if n, ok := l.(float64); !ok || int64(n) != ref.Outputs.Label[i] {
			t.Errorf("%s: row %d: label %v, want %d", what, i, l, ref.Outputs.Label[i])
		}
	}
	var probs []float64
	for _, raw := range p.Outputs {
		var o struct {
			Name string    `json:"name"`
			Data []float64 `json:"data"`
		}
		if json.Unmarshal(raw, &o) == nil && o.Name == "probabilities" {
			probs = o.Data
		}
	}
	if len(probs) != 3*len(ref.Outputs.Probabilities) {
		t.Fatalf("%s: %d probabilities, want %d", what, len(probs), 3*len(ref.Outputs.Probabilities))
	}
	for i, row := range ref.Outputs.Probabilities {
		for k, want := range row {
			if got := probs[3*i+k]; math.Abs(got-want) > 1e-5 {
				t.Errorf("%s: row %d class %d: probability %g, want %g", what, i, k, got, want)
			}
		}
	}
}

func predictRows(ctx context.Context, e *env, id string, rows []map[string]float64) (api.Prediction, error) {
	data, err := json.Marshal(rows)
	if err != nil {
		return api.Prediction{}, err
	}
	return e.op.Predict(ctx, id, api.PredictRequest{Data: data})
}

// TestServingEndToEnd: a real ONNX model and a real LightGBM model served
// by the model server on the testbed's real nodes. Register → upload the
// ONNX model (version 1), the LightGBM model (version 2) and the training
// data to S3 → deploy version 1 with one GPU: the agents place it on the
// real GPU node cloud-gpu-l4-1, whose containerd runs the init container
// (download from the connector, SHA-256 checked) and the server → Ready
// with its endpoint → predictions through the connector and straight at
// the pod's address on the testbed network equal the fixture's reference
// → operations recorded → explanations add up to the prediction minus the
// base value. A CPU deployment on the real node cloud-1 moves from
// version 1 to version 2 while requests run: none fails, and the answers
// become the LightGBM reference. Drift on shifted inputs is found. A
// deployment of a corrupted file, and one of a file lost from the object
// store, fail with the reason and nothing serving. Deletion leaves
// nothing in Karmada, the members, the connector's database or the object
// store.
func TestServingEndToEnd(t *testing.T) {
	e := newEnv(t)
	if len(e.tb.RealNodes) == 0 {
		t.Fatal("the shared testbed has no real nodes")
	}
	testbed.StartTestAgents(t, e.tb, testbed.TestAgentsOptions{Nodes: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	refMLP, refGBM := loadReference(t, "iris_mlp.reference.json"), loadReference(t, "iris_gbm.reference.json")

	spec := irisSpec(uniq("iris-e2e"))
	spec.DriftDetection = api.DriftList{{IsTrue: 1, Method: api.DriftKS}}
	m := e.model(t, spec, "iris_mlp.onnx", fixture(t, "iris_mlp.onnx"), fixture(t, "iris.train.csv"))
	if up, err := e.op.Upload(ctx, m.ModelID, api.FileModel, "iris_gbm.txt", bytes.NewReader(fixture(t, "iris_gbm.txt")), "lightgbm"); err != nil {
		t.Fatal(err)
	} else if up.Version == nil || up.Version.Version != 2 {
		t.Fatalf("the LightGBM upload: %+v", up)
	}
	// A model whose stored file is then corrupted (same size, other bytes).
	bad := e.model(t, irisSpec(uniq("iris-bad")), "iris_mlp.onnx", fixture(t, "iris_mlp.onnx"), nil)
	store := testbedStore(t, e)
	corruptObjects(t, store, "models/"+bad.ModelID+"/")
	// A model whose stored file is then lost.
	lost := e.model(t, irisSpec(uniq("iris-lost")), "iris_mlp.onnx", fixture(t, "iris_mlp.onnx"), nil)
	deleteObjects(t, store, "models/"+lost.ModelID+"/")

	gpuID, cpuID, badID, lostID := uniq("iris-gpu"), uniq("iris-cpu"), uniq("iris-bad"), uniq("iris-lost")
	for _, s := range []api.DeploymentSpec{
		{DeploymentID: gpuID, ModelID: m.ModelID, Version: "1", OwnerID: "alice",
			Resources: api.Resources{CPU: "100m", GPU: &api.GPU{Count: 1, Model: "NVIDIA-L4"}}},
		{DeploymentID: cpuID, ModelID: m.ModelID, Version: "1", OwnerID: "alice",
			Placement: api.Placement{ClusterID: "cloud-1", Node: "cloud-1"}, Resources: api.Resources{CPU: "100m"}},
		{DeploymentID: badID, ModelID: bad.ModelID, OwnerID: "alice",
			Placement: api.Placement{ClusterID: "cloud-1", Node: "cloud-1"}, Resources: api.Resources{CPU: "100m"}},
		{DeploymentID: lostID, ModelID: lost.ModelID, OwnerID: "alice",
			Placement: api.Placement{ClusterID: "cloud-1", Node: "cloud-1"}, Resources: api.Resources{CPU: "100m"}},
	} {
		if _, err := e.op.CreateDeployment(ctx, s); err != nil {
			t.Fatal(err)
		}
	}

	// The GPU deployment runs on the real GPU node and answers as the
	// reference says, through the connector and at its pod.
	d := e.waitPhase(t, gpuID, 5*time.Minute, func(d api.Deployment) bool { return d.Phase == api.PhaseReady })
	if len(d.Pods) != 1 || d.Pods[0].Node != "cloud-gpu-l4-1" || !d.Pods[0].Ready || d.Pods[0].ModelVersion != 1 {
		t.Fatalf("pods %+v", d.Pods)
	}
	if d.Endpoint == nil || d.Endpoint.Cluster != "cloud-1" || d.Endpoint.URL != "http://model.mls-"+gpuID+".svc:8080" {
		t.Fatalf("endpoint %+v", d.Endpoint)
	}
	_, testnet, err := net.ParseCIDR(e.tb.Network.Range)
	if err != nil || !testnet.Contains(net.ParseIP(d.Pods[0].IP)) {
		t.Fatalf("pod IP %q outside the testbed's network %s (%v)", d.Pods[0].IP, e.tb.Network.Range, err)
	}
	p, err := predictRows(ctx, e, gpuID, refMLP.rows("", 0))
	if err != nil {
		t.Fatal(err)
	}
	checkPrediction(t, "ONNX through the connector", p, refMLP)
	direct := directInfer(t, "http://"+net.JoinHostPort(d.Pods[0].IP, "8080"), refMLP.Inputs.Input)
	checkPrediction(t, "ONNX at the pod", direct, refMLP)

	// The operation is recorded with its version and owner.
	ops, err := e.view.Operations(ctx, "alice", gpuID, 10, "")
	if err != nil || len(ops.Items) != 1 || ops.Items[0].ModelVersion != 1 || ops.Items[0].OperationID != p.OperationID {
		t.Fatalf("operations %+v %v (prediction's operation %d)", ops.Items, err, p.OperationID)
	}

	// Shapley values add up to the prediction minus the base value.
	row, _ := json.Marshal(refMLP.rows("", 0)[0])
	x, err := e.op.Explain(ctx, gpuID, api.ExplainRequest{Data: row})
	if err != nil {
		t.Fatal(err)
	}
	if len(x.Features) != 4 || len(x.ShapleyValues) != 4 || len(x.Prediction) == 0 {
		t.Fatalf("explanation %+v", x)
	}
	for k := range x.Prediction {
		sum := x.BaseValue[k]
		for i := range x.ShapleyValues {
			sum += x.ShapleyValues[i][k]
		}
		if math.Abs(sum-x.Prediction[k]) > 1e-6 {
			t.Errorf("output %d: base %g + Shapley values = %g, prediction %g", k, x.BaseValue[k], sum, x.Prediction[k])
		}
	}

	// The corrupted file: Failed with the reason, no container serving.
	b := e.waitPhase(t, badID, 4*time.Minute, func(d api.Deployment) bool { return d.Phase == api.PhaseFailed })
	if b.Reason != api.ReasonChecksumMismatch || !strings.Contains(b.Message, "sha256") {
		t.Errorf("corrupted file: %s/%s: %s", b.Phase, b.Reason, b.Message)
	}
	for _, pod := range b.Pods {
		if pod.Ready {
			t.Errorf("a pod of the corrupted model serves: %+v", pod)
		}
	}
	if _, err := e.op.Predict(ctx, badID, api.PredictRequest{Data: row}); nbclient.StatusCode(err) != http.StatusConflict {
		t.Errorf("a prediction of a Failed deployment: %v, want 409", err)
	}
	// The lost file: Failed with the reason, no container serving.
	l := e.waitPhase(t, lostID, 4*time.Minute, func(d api.Deployment) bool { return d.Phase == api.PhaseFailed })
	if l.Reason != api.ReasonArtifactMissing {
		t.Errorf("lost file: %s/%s: %s", l.Phase, l.Reason, l.Message)
	}
	for _, pod := range l.Pods {
		if pod.Ready {
			t.Errorf("a pod of the lost model serves: %+v", pod)
		}
	}

	// The CPU deployment moves to the LightGBM version while requests
	// run: none fails.
	e.waitPhase(t, cpuID, 4*time.Minute, func(d api.Deployment) bool { return d.Phase == api.PhaseReady })
	var sent, failed, answered atomic.Int64
	var firstErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				sent.Add(1)
				if _, err := predictRows(ctx, e, cpuID, refMLP.rows("", 0)[:1]); err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				} else {
					answered.Add(1)
				}
			}
		}()
	}
	// Requests are running (some answered) before the move.
	for answered.Load() < 4 {
		select {
		case <-ctx.Done():
			t.Fatalf("no predictions before the rollout: %d sent, %d failed (first: %v)", sent.Load(), failed.Load(), firstErr.Load())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if _, err := e.op.PatchDeployment(ctx, cpuID, map[string]any{"version": 2}); err != nil {
		t.Fatal(err)
	}
	e.waitPhase(t, cpuID, 4*time.Minute, func(d api.Deployment) bool {
		return d.Phase == api.PhaseReady && d.Reason == "" && d.ModelVersion == 2 && len(d.Pods) == 1 && d.Pods[0].ModelVersion == 2
	})
	close(stop)
	wg.Wait()
	if failed.Load() != 0 || sent.Load() == 0 {
		t.Errorf("during the rollout %d of %d predictions failed (first: %v)", failed.Load(), sent.Load(), firstErr.Load())
	}
	t.Logf("rollout: %d predictions, %d failed", sent.Load(), failed.Load())
	p, err = predictRows(ctx, e, cpuID, refGBM.rows("", 0))
	if err != nil {
		t.Fatal(err)
	}
	checkPrediction(t, "LightGBM after the rollout", p, refGBM)

	// Live inputs with petal_length shifted by 3 cm drift from the
	// training data; the other features are those of the reference.
	if _, err := predictRows(ctx, e, cpuID, refGBM.rows("petal_length", 3)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.op.RunDrift(ctx, m.ModelID); err != nil {
		t.Fatal(err)
	}
	res, err := e.view.DriftResults(ctx, m.ModelID, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	drifting := map[string]bool{}
	for _, r := range res.Items {
		if r.PValue == nil || *r.PValue < 0 || *r.PValue > 1 {
			t.Errorf("drift result without a p-value: %+v", r)
		}
		drifting[r.Feature] = drifting[r.Feature] || r.Drift
	}
	if !drifting["petal_length"] || len(res.Items) < 4 {
		t.Errorf("drift results %+v: petal_length not drifting", res.Items)
	}

	checkDriftAgainstSciPy(t, e, refGBM)

	// Delete: nothing left in the member, the connector or the store.
	cloud := kubernetes.NewForConfigOrDie(e.tb.RESTConfig(t, "cloud-1"))
	for _, id := range []string{gpuID, cpuID, badID, lostID} {
		if err := e.op.DeleteDeployment(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	karmada := dynamic.NewForConfigOrDie(e.tb.RESTConfig(t, testbed.ContextKarmada)).
		Resource(mlsysopsv1.SchemeGroupVersion.WithResource("mlsysopsapps")).Namespace(mlsysopsv1.Namespace)
	for _, id := range []string{gpuID, cpuID, badID, lostID} {
		if err := e.waitGone(ctx, id); err != nil {
			t.Fatal(err)
		}
		if err := waitNamespaceGone(ctx, cloud, "mls-"+id); err != nil {
			t.Error(err)
		}
		if err := waitNotFound(ctx, "application "+id+" in Karmada", func() error {
			_, err := karmada.Get(ctx, id, metav1.GetOptions{})
			return err
		}); err != nil {
			t.Error(err)
		}
	}
	for _, id := range []string{m.ModelID, bad.ModelID, lost.ModelID} {
		if err := e.op.DeleteModel(ctx, id); err != nil {
			t.Fatal(err)
		}
		if n := countObjects(t, store, "models/"+id+"/"); n != 0 {
			t.Errorf("model %s: %d objects left", id, n)
		}
		if _, err := e.op.Model(ctx, id); !nbclient.IsNotFound(err) {
			t.Errorf("model %s after deletion: %v", id, err)
		}
	}
	if ops, err := e.op.Operations(ctx, "alice", gpuID, 10, ""); err != nil || len(ops.Items) != 0 {
		t.Errorf("operations of the deleted deployment: %+v %v", ops.Items, err)
	}
}

// corruptObjects flips the bytes of every object under prefix, keeping
// their sizes.
func corruptObjects(t *testing.T, s objstore.Store, prefix string) {
	t.Helper()
	ctx := context.Background()
	var keys []string
	if err := s.List(ctx, prefix, func(i objstore.Info) error { keys = append(keys, i.Key); return nil }); err != nil || len(keys) == 0 {
		t.Fatalf("objects under %s: %v %v", prefix, keys, err)
	}
	for _, k := range keys {
		r, _, err := s.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		for i := range b {
			b[i] ^= 0x5a
		}
		if err := s.Put(ctx, k, bytes.NewReader(b), int64(len(b)), "application/octet-stream"); err != nil {
			t.Fatal(err)
		}
	}
}

// deleteObjects deletes every object under prefix.
func deleteObjects(t *testing.T, s objstore.Store, prefix string) {
	t.Helper()
	ctx := context.Background()
	var keys []string
	if err := s.List(ctx, prefix, func(i objstore.Info) error { keys = append(keys, i.Key); return nil }); err != nil || len(keys) == 0 {
		t.Fatalf("objects under %s: %v %v", prefix, keys, err)
	}
	for _, k := range keys {
		if err := s.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
}

// directInfer sends the reference inputs to a model server's Open
// Inference Protocol endpoint and returns its answer as a prediction.
func directInfer(t *testing.T, base string, rows [][]float64) api.Prediction {
	t.Helper()
	var flat []float64
	for _, r := range rows {
		flat = append(flat, r...)
	}
	body, _ := json.Marshal(map[string]any{"inputs": []any{map[string]any{
		"name": "input", "datatype": "FP32", "shape": []int{len(rows), len(rows[0])}, "data": flat}}})
	resp, err := http.Post(base+"/v2/models/model/infer", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("infer at %s: %s %s", base, resp.Status, b)
	}
	var out struct {
		Outputs []json.RawMessage `json:"outputs"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	p := api.Prediction{Outputs: out.Outputs}
	for _, raw := range out.Outputs {
		var o struct {
			Name string `json:"name"`
			Data []any  `json:"data"`
		}
		if json.Unmarshal(raw, &o) == nil && o.Name == "label" {
			p.Inference = o.Data
		}
	}
	return p
}

func waitNamespaceGone(ctx context.Context, cs kubernetes.Interface, ns string) error {
	return waitNotFound(ctx, "namespace "+ns, func() error {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return err
	})
}

// waitNotFound polls get until it answers Not Found.
func waitNotFound(ctx context.Context, what string, get func() error) error {
	for {
		err := get()
		if apierrors.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s still there: %v", what, err)
		case <-time.After(time.Second):
		}
	}
}

// checkDriftAgainstSciPy: the drift check of a model whose recent inputs
// are exactly the LightGBM reference rows with petal_length shifted by 3
// (recorded as an inference service records its operations, through
// POST /deployment/add/operation, on a deployment that runs nowhere)
// stores, per feature, the statistic and p-value SciPy computes from the
// same training data file and inputs (mlconnector/drift/testdata/gen.py),
// within 1e-6: Welch's t-test, then Kolmogorov–Smirnov once the model is
// switched to it.
func checkDriftAgainstSciPy(t *testing.T, e *env, ref reference) {
	t.Helper()
	ctx := ctxT(t)
	var want struct {
		SciPy    string `json:"scipy"`
		Features map[string]map[string]struct {
			Statistic float64 `json:"statistic"`
			PValue    float64 `json:"p_value"`
		} `json:"features"`
	}
	b, err := os.ReadFile("../../../mlconnector/drift/testdata/iris_shifted.scipy.json")
	if err == nil {
		err = json.Unmarshal(b, &want)
	}
	if err != nil || len(want.Features) != 4 {
		t.Fatalf("SciPy's figures: %v (%d features)", err, len(want.Features))
	}
	spec := irisSpec(uniq("iris-drift"))
	spec.DriftDetection = api.DriftList{{IsTrue: 1, Method: api.DriftMeanShift}}
	m := e.model(t, spec, "iris_gbm.txt", fixture(t, "iris_gbm.txt"), fixture(t, "iris.train.csv"))
	id := uniq("iris-drift")
	if _, err := e.op.CreateDeployment(ctx, api.DeploymentSpec{DeploymentID: id, ModelID: m.ModelID, OwnerID: "carol",
		Resources: api.Resources{GPU: &api.GPU{Count: 1, Model: "NVIDIA-B200"}}}); err != nil {
		t.Fatal(err)
	}
	rows, err := json.Marshal(ref.rows("petal_length", 3))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.op.RecordOperation(ctx, api.OperationCreate{OwnerID: "carol", DeploymentID: id, ModelID: m.ModelID, Data: rows}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		method int
		name   string
	}{{api.DriftMeanShift, "welch_t"}, {api.DriftKS, "ks"}} {
		if c.method != api.DriftMeanShift {
			patch := fmt.Sprintf(`{"drift_detection":[{"is_true":1,"method":%d}]}`, c.method)
			if _, err := e.op.PatchModel(ctx, m.ModelID, []byte(patch)); err != nil {
				t.Fatal(err)
			}
		}
		run, err := e.op.RunDrift(ctx, m.ModelID)
		if err != nil {
			t.Fatal(err)
		}
		if run.SampleSize != len(ref.Inputs.Input) || len(run.Results) != len(want.Features) {
			t.Fatalf("%s: drift run over %d inputs with %d results: %+v", c.name, run.SampleSize, len(run.Results), run)
		}
		for _, r := range run.Results {
			w := want.Features[r.Feature][c.name]
			if r.Method != c.name || r.PValue == nil || math.Abs(r.Statistic-w.Statistic) > 1e-6 || math.Abs(*r.PValue-w.PValue) > 1e-6 {
				t.Errorf("%s of %s: %s statistic %g p-value %v; SciPy %s says %g, %g", c.name, r.Feature, r.Method, r.Statistic, r.PValue, want.SciPy, w.Statistic, w.PValue)
			}
			if r.Drift != (w.PValue < 0.05) {
				t.Errorf("%s of %s: drift %v at p = %g", c.name, r.Feature, r.Drift, w.PValue)
			}
		}
		// The stored results are the run's.
		stored, err := e.view.DriftResults(ctx, m.ModelID, 4, "")
		if err != nil || len(stored.Items) != 4 || stored.Items[0].RunID != run.ID || stored.Items[0].Method != c.name {
			t.Errorf("%s: stored results %+v, %v; want run %d's", c.name, stored.Items, err, run.ID)
		}
	}
}
