// Package mlconnector_test runs the ML connector of the shared testbed (the
// process `make up` runs: PostgreSQL, versitygw, the northbound API) with
// the real continuum and cluster agents placing its deployments on the
// testbed's clusters. Pods on the simulated (KWOK) nodes run no container:
// their deployments reach Ready without a model server answering, so these
// tests never send a prediction to them (their addresses are not on this
// machine). The end to end test with a model server that answers needs
// the testbed's real GPU node (e2e_test.go).
package mlconnector_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/testbed"
	"github.com/mlsysops-go/mlsysops/mlconnector/api"
	mlclient "github.com/mlsysops-go/mlsysops/mlconnector/client"
	nbclient "github.com/mlsysops-go/mlsysops/northbound/client"
)

// env is the shared testbed with clients of its connector and northbound.
type env struct {
	tb       *testbed.Env
	op, view *mlclient.Client
	nb       *nbclient.Client
}

func newEnv(t *testing.T) *env {
	t.Helper()
	tb := testbed.Shared(t)
	if tb.MLConnectorURL == "" {
		t.Fatal("the shared testbed has no ML connector")
	}
	op, err := mlclient.New(mlclient.Config{URL: tb.MLConnectorURL, Token: tb.NorthboundToken, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	view, err := mlclient.New(mlclient.Config{URL: tb.MLConnectorURL, Token: tb.NorthboundViewerToken, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	nb, err := nbclient.New(nbclient.Config{URL: tb.NorthboundURL, Token: tb.NorthboundToken})
	if err != nil {
		t.Fatal(err)
	}
	return &env{tb: tb, op: op, view: view, nb: nb}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// uniq makes a name unique to this run (deployment ids are DNS labels).
func uniq(prefix string) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// irisSpec is a four-feature classifier with drift detection on (KS).
func irisSpec(name string) api.ModelSpec {
	return api.ModelSpec{ModelName: name, ModelKind: "classification",
		FeatureList: []api.Feature{
			{FeatureName: "sepal_length", Type: api.FeatureContinuous}, {FeatureName: "sepal_width", Type: api.FeatureContinuous},
			{FeatureName: "petal_length", Type: api.FeatureContinuous}, {FeatureName: "petal_width", Type: api.FeatureContinuous},
			{FeatureName: "target", Type: api.FeatureCategorical, Kind: api.FeatureTarget},
		},
		DriftDetection: api.DriftList{{IsTrue: 1, Method: api.DriftKS}},
		ModelTags:      []string{"integration"},
	}
}

// model registers a model with a model file and training data, deleted
// (with its deployments) when the test ends.
func (e *env) model(t *testing.T, spec api.ModelSpec, modelFile string, model []byte, data []byte) api.Model {
	t.Helper()
	ctx := ctxT(t)
	m, err := e.op.CreateModel(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.cleanupModel(t, m.ModelID) })
	if _, err := e.op.Upload(ctx, m.ModelID, api.FileModel, modelFile, strings.NewReader(string(model)), ""); err != nil {
		t.Fatal(err)
	}
	if data != nil {
		if _, err := e.op.Upload(ctx, m.ModelID, api.FileData, "train.csv", strings.NewReader(string(data)), ""); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// cleanupModel deletes a model's deployments, waits until they are gone,
// and deletes the model.
func (e *env) cleanupModel(t *testing.T, modelID string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p, err := e.op.Deployments(ctx, "", modelID, 0, "")
	if err == nil {
		for _, d := range p.Items {
			_ = e.op.DeleteDeployment(ctx, d.DeploymentID)
		}
		for _, d := range p.Items {
			_ = e.waitGone(ctx, d.DeploymentID)
		}
	}
	if err := e.op.DeleteModel(ctx, modelID); err != nil && nbclient.StatusCode(err) != 404 {
		t.Errorf("cleanup: delete model %s: %v", modelID, err)
	}
}

// waitGone waits until a deployment answers 404.
func (e *env) waitGone(ctx context.Context, id string) error {
	for {
		_, err := e.op.Deployment(ctx, id)
		if nbclient.IsNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("deployment %s not gone: %w", id, errors.Join(err, ctx.Err()))
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// waitPhase polls a deployment until cond holds, failing the test with the
// phases seen when it does not in time.
func (e *env) waitPhase(t *testing.T, id string, timeout time.Duration, cond func(d api.Deployment) bool) api.Deployment {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var seen []string
	for {
		d, err := e.op.Deployment(ctx, id)
		if err == nil {
			if s := d.Phase + "/" + d.Reason; len(seen) == 0 || seen[len(seen)-1] != s {
				seen = append(seen, s)
			}
			if cond(d) {
				t.Logf("deployment %s went %s", id, strings.Join(seen, " → "))
				return d
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("deployment %s: condition not met in %s; phases %v; last %+v (err %v)", id, timeout, seen, d, err)
		case <-time.After(300 * time.Millisecond):
		}
	}
}
