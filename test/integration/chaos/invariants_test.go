//go:build chaos

package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"

	"github.com/mlsysops-go/mlsysops/agents/continuum"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/members"
	"github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/internal/testbed/proc"
	mlapi "github.com/mlsysops-go/mlsysops/mlconnector/api"
	nbclient "github.com/mlsysops-go/mlsysops/northbound/client"
)

// watch checks, every 10 s while the faults go on, what must hold at
// every moment: no agent dies but by a fault, and no application has
// more than one PropagationPolicy.
func (r *run) watch(ctx context.Context) {
	seen := map[string]bool{}
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Second):
		}
		r.mu.Lock()
		down := maps(r.down)
		r.mu.Unlock()
		for _, a := range r.agents.All {
			id := a.Layer + "/" + a.Name
			if _, ok := a.Pid(); !ok && !down[id] && !seen[id] {
				// Checked again: the fault may have begun since.
				r.mu.Lock()
				down := r.down[id]
				r.mu.Unlock()
				if _, ok := a.Pid(); !ok && !down {
					seen[id] = true
					r.violate("agent %s died without a fault:\n%s", id, proc.Tail(a.LogFile, 30))
				}
			}
		}
		// Every application is bound through the one policy of them
		// all (continuum.AppPropagation): none has a policy of its own.
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		var pps policyv1alpha1.PropagationPolicyList
		if err := r.karmada.List(cctx, &pps, client.InNamespace(mlsysopsv1.Namespace)); err == nil {
			for _, p := range pps.Items {
				if app := p.Labels[mlsysopsv1.LabelApp]; strings.HasPrefix(app, r.prefix) && !seen["pp/"+app] {
					seen["pp/"+app] = true
					r.violate("%s has a PropagationPolicy of its own (%s)", app, p.Name)
				}
			}
		}
		cancel()
	}
}

func maps(m map[string]bool) map[string]bool {
	out := make(map[string]bool, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// settled waits, up to settleWithin after the last fault, for every
// application and ML deployment to reach its terminal state, and then
// checks that nothing is orphaned or duplicated and that every agent
// answers. Each failure is a violation.
func (r *run) settled(w *workload, last time.Time) {
	deadline := last.Add(settleWithin)
	apps, _ := w.all()
	for _, a := range apps {
		var err error
		for {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			if a.removed {
				err = r.gone(ctx, a.name, true)
			} else {
				err = r.terminal(ctx, a)
			}
			cancel()
			if err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(2 * time.Second)
		}
		if err != nil {
			what := "present"
			if a.removed {
				what = "removed"
			}
			r.violate("%s (%s, %s via %s, mark %s) not settled %s after the last fault: %v", a.name, a.kind, what, a.via, a.mark, settleWithin, err)
		}
	}
	_, mls := w.all()
	for _, d := range mls {
		var err error
		for {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			err = r.mlTerminal(ctx, d)
			cancel()
			if err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(2 * time.Second)
		}
		if err != nil {
			r.violate("ML deployment %s (removed %v) not settled %s after the last fault: %v", d.id, d.removed, settleWithin, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r.orphans(ctx, w)
	for _, a := range r.agents.All {
		if err := getOK(ctx, a.URL()+"/readyz"); err != nil {
			r.violate("agent %s/%s not ready after the faults: %v\n%s", a.Layer, a.Name, err, proc.Tail(a.LogFile, 20))
		}
	}
}

// all returns every application and ML deployment the workload touched.
func (w *workload) all() ([]*app, []*mlDeployment) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var apps []*app
	for _, a := range w.apps {
		c := *a
		apps = append(apps, &c)
	}
	var mls []*mlDeployment
	for _, d := range w.ml {
		c := *d
		mls = append(mls, &c)
	}
	sortBy(apps, func(a *app) string { return a.name })
	sortBy(mls, func(d *mlDeployment) string { return d.id })
	return apps, mls
}

// gone checks that nothing of an application is left: its resource, its
// ResourceBinding or Works (and the placement there), its namespaces in the members, its Redis keys and,
// when api says so, its entry in the API.
func (r *run) gone(ctx context.Context, name string, api bool) error {
	if err := r.karmada.Get(ctx, types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: name}, &mlsysopsv1.MLSysOpsApp{}); !apierrors.IsNotFound(err) {
		return fmt.Errorf("MLSysOpsApp still in Karmada (%v)", err)
	}
	if _, found, err := continuum.Placement(ctx, r.karmada, name); err != nil || found {
		return fmt.Errorf("its ResourceBinding or Works still in Karmada (%v)", err)
	}
	for _, c := range r.env.Clusters {
		if _, err := r.members[c].CoreV1().Namespaces().Get(ctx, members.Namespace(name), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("namespace %s still in %s (%v)", members.Namespace(name), c, err)
		}
	}
	if st, err := r.store.Applications().Status(ctx, name); !errors.Is(err, state.ErrNotFound) {
		return fmt.Errorf("Redis still has a status (%s, %v)", st.Phase, err)
	}
	if api {
		if a, err := r.nb.Applications().Get(ctx, name); !nbclient.IsNotFound(err) {
			return fmt.Errorf("the API still answers (%s, %v)", a.Phase, err)
		}
	}
	return nil
}

// terminal checks that a present application has reached its terminal
// state: Running with exactly the desired workloads (its last accepted
// description, every replica on a Ready node of the clusters placement
// chose, nothing elsewhere), or Unschedulable with a reason; and that the
// API says the same.
func (r *run) terminal(ctx context.Context, a *app) error {
	cur := &mlsysopsv1.MLSysOpsApp{}
	if err := r.karmada.Get(ctx, types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: a.name}, cur); err != nil {
		return fmt.Errorf("MLSysOpsApp: %w", err)
	}
	if got := markOf(cur); got != a.mark {
		return fmt.Errorf("the resource has mark %q, want the last accepted %q", got, a.mark)
	}
	if cur.Status.ObservedGeneration != cur.Generation {
		return fmt.Errorf("status of generation %d, resource at %d", cur.Status.ObservedGeneration, cur.Generation)
	}
	switch cur.Status.Phase {
	case mlsysopsv1.AppUnschedulable:
		if strings.TrimSpace(cur.Status.Message) == "" {
			return errors.New("Unschedulable without a reason")
		}
	case mlsysopsv1.AppRunning:
		if a.kind == kindBig {
			return fmt.Errorf("Running though no node has the CPU it asks: %+v", cur.Status.Components)
		}
		if err := r.desired(ctx, cur, a.mark); err != nil {
			return err
		}
	default:
		return fmt.Errorf("phase %s: %s", cur.Status.Phase, cur.Status.Message)
	}
	got, err := r.nb.Applications().Get(ctx, a.name)
	if err != nil {
		return fmt.Errorf("the API: %w", err)
	}
	if got.Phase != string(cur.Status.Phase) {
		return fmt.Errorf("the API says %s, the resource %s", got.Phase, cur.Status.Phase)
	}
	if a.via == "api" {
		st, err := r.store.Applications().Status(ctx, a.name)
		if err != nil {
			return fmt.Errorf("Redis status of a submission the API accepted: %w", err)
		}
		if st.Phase == mlsysopsv1.AppRemoving || st.Phase == mlsysopsv1.AppRemoved {
			return fmt.Errorf("Redis says %s of an application that was not removed", st.Phase)
		}
	}
	return nil
}

func markOf(a *mlsysopsv1.MLSysOpsApp) string {
	for _, c := range a.Spec.Components {
		for _, ct := range c.Containers {
			for _, e := range ct.Env {
				if e.Name == markEnv {
					return e.Value
				}
			}
		}
	}
	return ""
}

// desired checks the member clusters against the status's placement: one
// PropagationPolicy naming exactly the clusters in the status; in each of
// them a Deployment per component placed there, with the mark, and its
// replicas running on Ready nodes, no pod terminating; nothing of the
// application in the other clusters.
func (r *run) desired(ctx context.Context, a *mlsysopsv1.MLSysOpsApp, mark string) error {
	want := map[string][]string{} // cluster → components
	for _, c := range a.Status.Components {
		if c.Cluster == "" {
			return fmt.Errorf("component %s placed on no cluster", c.Name)
		}
		want[c.Cluster] = append(want[c.Cluster], c.Name)
	}
	// A component placed on several clusters is listed once per cluster.
	for _, c := range a.Spec.Components {
		if !slices.ContainsFunc(a.Status.Components, func(s mlsysopsv1.ComponentStatus) bool { return s.Name == c.Metadata.Name }) {
			return fmt.Errorf("component %s placed nowhere in the status", c.Metadata.Name)
		}
	}
	placed, found, err := continuum.Placement(ctx, r.karmada, a.Name)
	if err != nil || !found {
		return fmt.Errorf("no ResourceBinding or Works in Karmada (%v)", err)
	}
	var clusters []string
	for c := range want {
		clusters = append(clusters, c)
	}
	sort.Strings(clusters)
	if !slices.Equal(sorted(placed), clusters) {
		return fmt.Errorf("Karmada places it on %v, the status on %v", placed, clusters)
	}
	ns := members.Namespace(a.Name)
	for _, name := range r.env.Clusters {
		cs := r.members[name]
		deps, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		comps := want[name]
		if len(comps) == 0 {
			if len(deps.Items)+len(pods.Items) > 0 {
				return fmt.Errorf("%s hosts %d Deployments and %d pods of the application, placed elsewhere", name, len(deps.Items), len(pods.Items))
			}
			continue
		}
		var got []string
		for _, d := range deps.Items {
			got = append(got, d.Labels[mlsysopsv1.LabelComponent])
			for _, ct := range d.Spec.Template.Spec.Containers {
				if v := envValue(ct.Env, markEnv); v != mark {
					return fmt.Errorf("%s: Deployment %s container %s has mark %q, want %q", name, d.Name, ct.Name, v, mark)
				}
			}
		}
		if !slices.Equal(sorted(got), sorted(comps)) {
			return fmt.Errorf("%s: Deployments of components %v, want %v", name, got, comps)
		}
		ready := map[string]bool{}
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		for _, n := range nodes.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready[n.Name] = true
				}
			}
		}
		running := map[string]int32{}
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				return fmt.Errorf("%s: pod %s still terminating", name, p.Name)
			}
			if p.Status.Phase != corev1.PodRunning {
				return fmt.Errorf("%s: pod %s is %s", name, p.Name, p.Status.Phase)
			}
			if !ready[p.Spec.NodeName] {
				return fmt.Errorf("%s: pod %s on %s, not a Ready node", name, p.Name, p.Spec.NodeName)
			}
			running[p.Labels[mlsysopsv1.LabelComponent]]++
		}
		for _, d := range deps.Items {
			want := int32(1)
			if d.Spec.Replicas != nil {
				want = *d.Spec.Replicas
			}
			if c := d.Labels[mlsysopsv1.LabelComponent]; running[c] != want {
				return fmt.Errorf("%s: %d running pods of %s, want %d", name, running[c], c, want)
			}
		}
	}
	return nil
}

func envValue(env []corev1.EnvVar, name string) string {
	for _, e := range env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}

// mlTerminal checks an ML deployment: Ready, or gone everywhere once
// removed.
func (r *run) mlTerminal(ctx context.Context, d *mlDeployment) error {
	got, err := r.ml.Deployment(ctx, d.id)
	if d.removed {
		if !nbclient.IsNotFound(err) {
			return fmt.Errorf("the ML connector still answers (%s, %v)", got.Phase, err)
		}
		return r.gone(ctx, d.id, false)
	}
	if err != nil {
		return err
	}
	if got.Phase != mlapi.PhaseReady {
		return fmt.Errorf("phase %s (%s)", got.Phase, got.Reason)
	}
	return nil
}

// orphans checks that nothing of this run exists that the workload does
// not expect: member namespaces, PropagationPolicies, MLSysOpsApps and
// Redis keys of applications that are not present.
func (r *run) orphans(ctx context.Context, w *workload) {
	apps, mls := w.all()
	present := map[string]bool{}
	for _, a := range apps {
		if !a.removed {
			present[a.name] = true
		}
	}
	for _, d := range mls {
		if !d.removed {
			present[d.id] = true
		}
	}
	mine := func(name string) bool { return strings.HasPrefix(name, r.prefix+"-") }
	for _, c := range r.env.Clusters {
		nss, err := r.members[c].CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			r.violate("list namespaces of %s: %v", c, err)
			continue
		}
		for _, ns := range nss.Items {
			if app, ok := strings.CutPrefix(ns.Name, "mls-"); ok && mine(app) && !present[app] {
				r.violate("orphan namespace %s in %s", ns.Name, c)
			}
		}
	}
	var rbs workv1alpha2.ResourceBindingList
	if err := r.karmada.List(ctx, &rbs, client.InNamespace(mlsysopsv1.Namespace)); err != nil {
		r.violate("list ResourceBindings: %v", err)
	}
	for _, rb := range rbs.Items {
		if app := rb.Spec.Resource.Name; rb.Spec.Resource.Kind == "MLSysOpsApp" && mine(app) && !present[app] {
			r.violate("orphan ResourceBinding %s of %s", rb.Name, app)
		}
	}
	var works workv1alpha1.WorkList
	if err := r.karmada.List(ctx, &works, client.HasLabels{continuum.LabelWorkApp}); err != nil {
		r.violate("list Works: %v", err)
	}
	for _, w := range works.Items {
		if app := w.Labels[continuum.LabelWorkApp]; mine(app) && !present[app] {
			r.violate("orphan Work %s/%s of %s", w.Namespace, w.Name, app)
		}
	}
	var list mlsysopsv1.MLSysOpsAppList
	if err := r.karmada.List(ctx, &list, client.InNamespace(mlsysopsv1.Namespace)); err != nil {
		r.violate("list MLSysOpsApps: %v", err)
	}
	count := map[string]int{}
	for _, a := range list.Items {
		count[a.Name]++
		if mine(a.Name) && !present[a.Name] {
			r.violate("orphan MLSysOpsApp %s (%s)", a.Name, a.Status.Phase)
		}
	}
	for _, pattern := range []string{"*{apps}:status:" + r.prefix + "-*", "*{apps}:spec:" + r.prefix + "-*", "*{ml}:status:" + r.prefix + "-*", "*{ml}:spec:" + r.prefix + "-*"} {
		keys, err := r.rdb.Keys(ctx, pattern).Result()
		if err != nil {
			r.violate("Redis KEYS %s: %v", pattern, err)
			continue
		}
		for _, k := range keys {
			id := k[strings.LastIndex(k, ":")+1:]
			if !present[id] {
				r.violate("orphan Redis key %s", k)
			}
		}
	}
	// The API lists each present application once and nothing removed.
	listed, err := r.nb.Applications().ListAll(ctx)
	if err != nil {
		r.violate("list the API's applications: %v", err)
		return
	}
	seen := map[string]int{}
	for _, s := range listed {
		seen[s.ID]++
	}
	for id, n := range seen {
		if !mine(id) {
			continue
		}
		if n > 1 {
			r.violate("the API lists %s %d times", id, n)
		}
		if !present[id] {
			r.violate("the API lists %s, which was removed", id)
		}
	}
	for _, a := range apps {
		if !a.removed && seen[a.name] == 0 {
			r.violate("the API does not list %s", a.name)
		}
	}
}

// agentMetrics reads the goroutines and resident memory of every agent.
func (r *run) agentMetrics(t *testing.T) map[string][2]float64 {
	out := map[string][2]float64{}
	for _, a := range r.agents.All {
		g, m, err := goroutinesAndRSS(a.URL() + "/metrics")
		if err != nil {
			t.Fatalf("metrics of %s/%s: %v", a.Layer, a.Name, err)
		}
		out[a.Layer+"/"+a.Name] = [2]float64{g, m}
	}
	return out
}

// Bounds of growth over the run: an agent may double its goroutines and
// memory plus a margin (caches fill, connections pool), not more.
const (
	goroutineMargin = 200
	memoryMargin    = 256 << 20
)

// checkGrowth compares every agent's goroutines and memory with the
// baseline.
func (r *run) checkGrowth(t *testing.T, baseline map[string][2]float64) {
	for _, a := range r.agents.All {
		id := a.Layer + "/" + a.Name
		g, m, err := goroutinesAndRSS(a.URL() + "/metrics")
		if err != nil {
			r.violate("metrics of %s: %v", id, err)
			continue
		}
		b := baseline[id]
		if g > 2*b[0]+goroutineMargin {
			r.violate("%s: %0.f goroutines, %0.f before the faults", id, g, b[0])
		}
		if m > 2*b[1]+memoryMargin {
			r.violate("%s: %.0f MiB resident, %.0f MiB before the faults", id, m/(1<<20), b[1]/(1<<20))
		}
	}
}

func goroutinesAndRSS(url string) (float64, float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, 0, err
	}
	var g, m float64
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "go_goroutines "); ok {
			g, _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
		if v, ok := strings.CutPrefix(line, "process_resident_memory_bytes "); ok {
			m, _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	if g == 0 || m == 0 {
		return 0, 0, fmt.Errorf("%s has no go_goroutines or process_resident_memory_bytes", url)
	}
	return g, m, nil
}

func getOK(ctx context.Context, url string) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

// cleanup removes what the run left and checks that it goes.
func (r *run) cleanup(w *workload) {
	apps, mls := w.all()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, d := range mls {
		if !d.removed {
			_ = r.ml.DeleteDeployment(ctx, d.id)
		}
	}
	for _, a := range apps {
		if !a.removed {
			_ = r.karmada.Delete(ctx, &mlsysopsv1.MLSysOpsApp{ObjectMeta: metav1.ObjectMeta{Namespace: mlsysopsv1.Namespace, Name: a.name}})
		}
	}
	for _, a := range apps {
		var err error
		for ctx.Err() == nil {
			if err = r.gone(ctx, a.name, false); err == nil {
				break
			}
			time.Sleep(time.Second)
		}
		if err != nil {
			r.violate("%s not gone after its removal at the end: %v", a.name, err)
		}
	}
	if r.modelID != "" {
		for _, d := range mls {
			for ctx.Err() == nil {
				if _, err := r.ml.Deployment(ctx, d.id); nbclient.IsNotFound(err) {
					break
				}
				time.Sleep(time.Second)
			}
		}
		if err := r.ml.DeleteModel(ctx, r.modelID); err != nil && !nbclient.IsNotFound(err) {
			r.t.Errorf("delete model %s: %v", r.modelID, err)
		}
	}
}
