package cluster

import (
	"context"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/kube"
	"github.com/mlsysops-go/mlsysops/internal/mape"
)

// FeedEngine makes the reconciler keep the engine's applications in step
// with the applications placed in this cluster, so that the cluster
// agent's application-scope policies get one instance per application.
func (r *AppReconciler) FeedEngine(e *mape.Engine) {
	// The description is built from the spec alone: a pass over the
	// same generation hands over nothing new.
	var handed mape.Versions
	r.AppSeen = func(ctx context.Context, app *mlsysopsv1.MLSysOpsApp) {
		if err := handed.Hand(ctx, e, app.Name, kube.SpecVersion(app), func() map[string]any { return AppDescription(app, r.cluster) }); err != nil {
			r.log.Warn("application not handed to the policies", "app", app.Name, "err", err)
		}
	}
	r.AppGone = func(_ context.Context, name string) { handed.Remove(e, name) }
}

// AppDescription is an application as the cluster layer's policies see
// it: {"name", "cluster", "spec"} with the spec in the upstream form
// (snake_case fields).
func AppDescription(app *mlsysopsv1.MLSysOpsApp, cluster string) map[string]any {
	spec, _ := toData(app.Spec)
	if spec == nil {
		spec = map[string]any{}
	}
	return map[string]any{"name": app.Name, "cluster": cluster, "spec": spec}
}

// toData converts a typed value to plain data (maps, lists, strings,
// float64s, bools) through JSON.
func toData(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	err = json.Unmarshal(b, &m)
	return m, err
}

func nodeIsReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
