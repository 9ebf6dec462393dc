package continuum

import (
	"context"
	"encoding/json"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/kube"
	"github.com/mlsysops-go/mlsysops/internal/mape"
)

// FeedEngine makes the reconciler keep the engine's applications in step
// with the MLSysOpsApps of the Karmada API, so that the continuum agent's
// application-scope policies (clusterPlacement) get one instance per
// application.
func (r *AppReconciler) FeedEngine(e *mape.Engine) {
	// The description is built from the spec alone: a pass over the
	// same generation hands over nothing new.
	var handed mape.Versions
	r.AppSeen = func(ctx context.Context, app *mlsysopsv1.MLSysOpsApp) {
		if err := handed.Hand(ctx, e, app.Name, kube.SpecVersion(app), func() map[string]any { return AppDescription(app) }); err != nil {
			r.log.Warn("application not handed to the policies", "app", app.Name, "err", err)
		}
	}
	r.AppGone = func(_ context.Context, name string) { handed.Remove(e, name) }
}

// AppDescription is an application as the continuum's policies see it:
// the upstream MLSysOpsApp description, flat (name, cluster_placement,
// components, ... at the top, snake_case fields).
func AppDescription(app *mlsysopsv1.MLSysOpsApp) map[string]any {
	b, _ := json.Marshal(app.Spec)
	desc := map[string]any{}
	_ = json.Unmarshal(b, &desc)
	desc["name"] = app.Name
	return desc
}

func (r *AppReconciler) gone(ctx context.Context, name string) {
	if r.AppGone != nil {
		r.AppGone(ctx, name)
	}
}
