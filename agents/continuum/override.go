package continuum

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/placement"
)

// ClusterPin is a clusterPlacement plan's choice of clusters for an
// application. The placement controller honours it while the clusters are
// Ready, their agents alive and the application's cluster_id lists them;
// otherwise it drops the pin and places the application as usual.
type ClusterPin struct {
	// Plan is the plan that chose the clusters.
	Plan string `json:"plan"`
	// Clusters host the whole application.
	Clusters []string `json:"clusters"`
}

// readPin returns the pin recorded on an application, nil when there is
// none.
func readPin(app *mlsysopsv1.MLSysOpsApp) (*ClusterPin, error) {
	v := app.Annotations[mlsysopsv1.AnnotationClusters]
	if v == "" {
		return nil, nil
	}
	p := &ClusterPin{}
	if err := json.Unmarshal([]byte(v), p); err != nil || len(p.Clusters) == 0 {
		return nil, fmt.Errorf("annotation %s is not {plan, clusters}: %q", mlsysopsv1.AnnotationClusters, v)
	}
	return p, nil
}

func (p *ClusterPin) encode() string {
	b, _ := json.Marshal(p)
	return string(b)
}

// userConflict says why clusters contradict the application's own
// cluster_placement.cluster_id, "" when they do not.
func userConflict(app *mlsysopsv1.MLSysOpsApp, clusters []string) string {
	if respects(app, clusters) {
		return ""
	}
	return fmt.Sprintf("the application's cluster_placement.cluster_id %v does not list %v; the user's choice wins (edit cluster_id to move the application)",
		app.Spec.ClusterPlacement.ClusterID, clusters)
}

// pinProblem says why an application cannot run on the clusters wanted,
// "" when it can: they must be as many as the copies it asks
// (cluster_placement.instances), each must be a Ready member whose agent
// is alive (gone lists those that are not), the user's cluster_id must
// list it and, for a cluster the application does not run on yet
// (current), placement's filters must accept it.
func pinProblem(app *mlsysopsv1.MLSysOpsApp, wanted []string, clusters []placement.Cluster, gone map[string]string, current []string) string {
	if why := userConflict(app, wanted); why != "" {
		return why
	}
	if n := placement.Copies(&app.Spec); len(wanted) != n {
		copies := "copies"
		if n == 1 {
			copies = "copy"
		}
		return fmt.Sprintf("%d cluster(s) %v for an application of %d %s (cluster_placement.instances); the user's choice wins",
			len(wanted), wanted, n, copies)
	}
	byName := map[string]*placement.Cluster{}
	for i := range clusters {
		byName[clusters[i].Name] = &clusters[i]
	}
	var problems []string
	for _, name := range wanted {
		c := byName[name]
		switch why, down := gone[name]; {
		case c == nil:
			problems = append(problems, fmt.Sprintf("cluster %s is not a member cluster of Karmada", name))
		case down:
			problems = append(problems, fmt.Sprintf("cluster %s: %s", name, why))
		case !c.Ready:
			problems = append(problems, fmt.Sprintf("cluster %s is not Ready (or has not got the MLSysOpsApp API yet)", name))
		case !slices.Contains(current, name):
			d, err := placement.PlaceApp(placement.AppRequest{App: &app.Spec}, []placement.Cluster{*c})
			if err != nil {
				return err.Error()
			}
			if !d.Feasible() {
				problems = append(problems, fmt.Sprintf("cluster %s is not eligible: %s", name, strings.Join(d.Rejected[name], "; ")))
			}
		}
	}
	return strings.Join(problems, "; ")
}

// pinned returns the clusters a plan pinned the application to, nil when
// there is no pin to honour. A pin that no longer holds is dropped: the
// annotation goes, the reason is recorded (mlsysopsv1.AnnotationClustersDropped) and
// the application is placed as if no plan had chosen.
func (r *AppReconciler) pinned(ctx context.Context, app *mlsysopsv1.MLSysOpsApp, clusters []placement.Cluster, gone map[string]string, current []string, log *slog.Logger) ([]string, error) {
	pin, err := readPin(app)
	why := ""
	switch {
	case err != nil:
		why = err.Error()
	case pin == nil:
		return nil, nil
	default:
		if why = pinProblem(app, pin.Clusters, clusters, gone, current); why == "" {
			return sortedClusters(pin.Clusters), nil
		}
	}
	plan := ""
	if pin != nil {
		plan = pin.Plan
	}
	log.Info("cluster pin dropped", "plan", plan, "reason", why)
	delete(app.Annotations, mlsysopsv1.AnnotationClusters)
	app.Annotations[mlsysopsv1.AnnotationClustersDropped] = plan + ": " + why
	if err := r.client.Update(ctx, app); err != nil {
		return nil, fmt.Errorf("drop the cluster pin of %s: %w", app.Name, err)
	}
	return nil, nil
}

func sortedClusters(list []string) []string {
	out := slices.Clone(list)
	sort.Strings(out)
	return slices.Compact(out)
}

func sameClusters(a, b []string) bool {
	return slices.Equal(sortedClusters(a), sortedClusters(b))
}
