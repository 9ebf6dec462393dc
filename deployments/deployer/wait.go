package deployer

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// workload is a Deployment, StatefulSet or DaemonSet to wait for, in the
// host cluster or (DaemonSets) in the Karmada API, where readiness is that
// of every member cluster's copy.
type workload struct {
	cluster *Cluster
	obj     *unstructured.Unstructured
}

func (w workload) ref() string {
	return ref(w.cluster.Name, w.obj.GetKind(), w.obj.GetNamespace(), w.obj.GetName())
}

// state is a workload's readiness: Ready, a one-line Summary for progress,
// and Problems saying what is not ready where and why.
type state struct {
	Ready    bool
	Summary  string
	Problems []string
}

// workloads picks the workloads among objs.
func workloads(c *Cluster, objs []*unstructured.Unstructured) []workload {
	var out []workload
	for _, o := range objs {
		switch o.GetKind() {
		case "Deployment", "StatefulSet", "DaemonSet":
			out = append(out, workload{c, o})
		}
	}
	return out
}

// waitReady waits until every workload is ready, printing a line whenever
// one's summary changes. At the timeout the error names each workload
// not ready, its cluster and the reason: pod phases, container states and
// warning events.
func (d *Deployer) waitReady(ctx context.Context, stage string, ws []workload) error {
	if len(ws) == 0 || d.opts.NoWait || d.opts.DryRun {
		return nil
	}
	deadline := time.Now().Add(d.opts.Timeout)
	last := map[string]string{}
	for {
		var pending []string
		var problems []string
		for _, w := range ws {
			st, err := d.workloadState(ctx, w)
			if err != nil {
				st = state{Summary: "unknown: " + err.Error(), Problems: []string{err.Error()}}
			}
			if last[w.ref()] != st.Summary {
				last[w.ref()] = st.Summary
				d.progress("%s: %s %s", stage, w.ref(), st.Summary)
			}
			if !st.Ready {
				pending = append(pending, w.ref())
				for _, p := range st.Problems {
					problems = append(problems, w.ref()+": "+p)
				}
			}
		}
		if len(pending) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			if len(problems) == 0 {
				problems = pending
			}
			return &NotReadyError{Stage: stage, Timeout: d.opts.Timeout, Problems: problems}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// NotReadyError says which workloads of a stage were not ready in time,
// in which cluster and why.
type NotReadyError struct {
	Stage    string
	Timeout  time.Duration
	Problems []string
}

func (e *NotReadyError) Error() string {
	return fmt.Sprintf("stage %s not ready after %s (what was applied stays; run again to continue):\n  %s",
		e.Stage, e.Timeout, strings.Join(e.Problems, "\n  "))
}

// workloadState reads a workload's readiness.
func (d *Deployer) workloadState(ctx context.Context, w workload) (state, error) {
	ri, _, err := w.cluster.resource(w.obj)
	if err != nil {
		return state{}, err
	}
	live, err := ri.Get(ctx, w.obj.GetName(), metav1.GetOptions{})
	if err != nil {
		return state{}, err
	}
	if w.cluster == d.cl.Karmada {
		return d.memberState(ctx, live)
	}
	st := localState(live)
	if !st.Ready {
		st.Problems = d.podProblems(ctx, podSource{cluster: w.cluster.Name, list: w.cluster.listPods, events: w.cluster.listEvents}, live, st.Problems)
	}
	return st, nil
}

// localState is the readiness of a workload read from its own cluster.
func localState(u *unstructured.Unstructured) state {
	gen := u.GetGeneration()
	switch u.GetKind() {
	case "DaemonSet":
		var ds appsv1.DaemonSet
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ds)
		return daemonSetState(ds.Status.ObservedGeneration >= gen, ds.Status, nodeSelectorText(ds.Spec.Template.Spec))
	case "Deployment":
		var dep appsv1.Deployment
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &dep)
		s := dep.Status
		return replicasState(dep.Spec.Replicas, s.ObservedGeneration >= gen && s.Replicas == derefOr(dep.Spec.Replicas, 1), s.AvailableReplicas, s.UpdatedReplicas)
	case "StatefulSet":
		var sts appsv1.StatefulSet
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &sts)
		s := sts.Status
		return replicasState(sts.Spec.Replicas, s.ObservedGeneration >= gen, s.ReadyReplicas, s.UpdatedReplicas)
	}
	return state{Ready: true, Summary: "not a workload"}
}

// replicasState is the readiness of a Deployment or StatefulSet: current
// (the controller saw the latest spec), and as many ready and updated
// replicas as wanted.
func replicasState(replicas *int32, current bool, ready, updated int32) state {
	want := derefOr(replicas, 1)
	return state{
		Summary: fmt.Sprintf("%d/%d ready, %d updated", ready, want, updated),
		Ready:   current && ready == want && updated == want,
	}
}

func derefOr(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

// daemonSetState is the readiness of one cluster's DaemonSet.
func daemonSetState(current bool, s appsv1.DaemonSetStatus, selector string) state {
	st := state{Summary: fmt.Sprintf("%d/%d ready, %d updated", s.NumberAvailable, s.DesiredNumberScheduled, s.UpdatedNumberScheduled)}
	switch {
	case !current:
		st.Summary += " (rolling out)"
		st.Problems = []string{"the DaemonSet controller has not caught up with the latest spec yet"}
	case s.DesiredNumberScheduled == 0:
		st.Summary = "no node to run on"
		st.Problems = []string{"no node matches " + selector + ": label the node(s) that should run it"}
	case s.UpdatedNumberScheduled == s.DesiredNumberScheduled && s.NumberAvailable == s.DesiredNumberScheduled:
		st.Ready = true
	}
	return st
}

// memberStatus is what Karmada reflects of a member's DaemonSet
// (its default interpreter: the status plus both generations).
type memberStatus struct {
	appsv1.DaemonSetStatus
	Generation                 int64 `json:"generation,omitempty"`
	ResourceTemplateGeneration int64 `json:"resourceTemplateGeneration,omitempty"`
}

// memberState is the readiness of a DaemonSet of the Karmada API in every
// member cluster Karmada placed it in, from its ResourceBinding's
// aggregated status. A described cluster where no node matches is a
// problem; a joined cluster that is not described may have none.
func (d *Deployer) memberState(ctx context.Context, tmpl *unstructured.Unstructured) (state, error) {
	rbName := strings.ToLower(tmpl.GetName() + "-" + tmpl.GetKind())
	rb, err := d.cl.KarmadaClient.WorkV1alpha2().ResourceBindings(tmpl.GetNamespace()).Get(ctx, rbName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return state{Summary: "not bound to any cluster yet", Problems: []string{"Karmada has not bound it yet (ResourceBinding " + rbName + ")"}}, nil
	}
	if err != nil {
		return state{}, err
	}
	var ds appsv1.DaemonSet
	_ = runtime.DefaultUnstructuredConverter.FromUnstructured(tmpl.Object, &ds)
	selector := nodeSelectorText(ds.Spec.Template.Spec)
	items := map[string]workv1alpha2.AggregatedStatusItem{}
	for _, it := range rb.Status.AggregatedStatus {
		items[it.ClusterName] = it
	}
	var targets []string
	for _, t := range rb.Spec.Clusters {
		targets = append(targets, t.Name)
	}
	sort.Strings(targets)
	st := state{Ready: true}
	if len(targets) == 0 {
		return state{Summary: "no member cluster", Problems: []string{"Karmada placed it in no cluster: is any member cluster joined and Ready?"}}, nil
	}
	var parts []string
	for _, c := range targets {
		it, ok := items[c]
		var cs state
		switch {
		case !ok || it.Status == nil:
			cs = state{Summary: "no status yet"}
			if ok && !it.Applied {
				cs.Summary, cs.Problems = "not applied", []string{"not applied: " + it.AppliedMessage}
			} else {
				cs.Problems = []string{"Karmada has no status from the cluster yet"}
			}
		default:
			var ms memberStatus
			if err := json.Unmarshal(it.Status.Raw, &ms); err != nil {
				return state{}, fmt.Errorf("status of %s in %s: %w", tmpl.GetName(), c, err)
			}
			current := ms.ObservedGeneration >= ms.Generation && ms.ResourceTemplateGeneration >= tmpl.GetGeneration()
			cs = daemonSetState(current, ms.DaemonSetStatus, selector)
			if ms.DesiredNumberScheduled == 0 && d.plan != nil && d.plan.Clusters[c] == nil {
				// Not described: nothing to run there.
				cs = state{Ready: true, Summary: "not described, no node"}
			}
		}
		parts = append(parts, c+" "+cs.Summary)
		if !cs.Ready {
			st.Ready = false
			problems := cs.Problems
			if ok && it.Status != nil {
				problems = d.podProblems(ctx, podSource{cluster: c, list: d.memberPods(c), events: d.memberEvents(c)}, tmpl, problems)
			}
			for _, p := range problems {
				st.Problems = append(st.Problems, "cluster "+c+": "+p)
			}
		}
	}
	st.Summary = strings.Join(parts, "; ")
	return st, nil
}

// nodeSelectorText describes where a pod template may run.
func nodeSelectorText(spec corev1.PodSpec) string {
	var terms []string
	for k, v := range spec.NodeSelector {
		terms = append(terms, k+"="+v)
	}
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, e := range t.MatchExpressions {
				terms = append(terms, fmt.Sprintf("%s %s (%s)", e.Key, strings.ToLower(string(e.Operator)), strings.Join(e.Values, ", ")))
			}
		}
	}
	sort.Strings(terms)
	if len(terms) == 0 {
		return "any node"
	}
	return strings.Join(terms, ", ")
}

// podSource lists a cluster's pods and events.
type podSource struct {
	cluster string
	list    func(ctx context.Context, ns, selector string) ([]corev1.Pod, error)
	events  func(ctx context.Context, ns, pod string) ([]corev1.Event, error)
}

// podProblems adds, for every pod of the workload that is not ready, where
// it is and why: not scheduled (and the scheduler's reason), a container
// waiting (image, crash loop and its last exit), failing its readiness
// probe, and the pod's latest warning events.
func (d *Deployer) podProblems(ctx context.Context, src podSource, w *unstructured.Unstructured, problems []string) []string {
	sel, found, _ := unstructured.NestedStringMap(w.Object, "spec", "selector", "matchLabels")
	if !found {
		return problems
	}
	pods, err := src.list(ctx, w.GetNamespace(), labels.SelectorFromSet(sel).String())
	if err != nil {
		return append(problems, "pods unreadable: "+err.Error())
	}
	var out []string
	for i := range pods {
		p := &pods[i]
		if podReady(p) {
			continue
		}
		why := podWhy(p)
		if evs, err := src.events(ctx, p.Namespace, p.Name); err == nil {
			why = append(why, warnings(evs, 3)...)
		}
		where := "not scheduled"
		if p.Spec.NodeName != "" {
			where = "on node " + p.Spec.NodeName
		}
		out = append(out, fmt.Sprintf("pod %s (%s, %s): %s", p.Name, where, p.Status.Phase, strings.Join(why, "; ")))
	}
	if len(out) == 0 {
		return problems
	}
	return out
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podWhy explains a pod that is not ready from its status.
func podWhy(p *corev1.Pod) []string {
	var why []string
	scheduled := false
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			scheduled = c.Status == corev1.ConditionTrue
			if !scheduled {
				why = append(why, fmt.Sprintf("not scheduled: %s: %s", c.Reason, c.Message))
			}
		}
	}
	if p.Spec.NodeName == "" && !scheduled && len(why) == 0 {
		why = append(why, "not scheduled yet: no scheduler has bound it to a node")
	}
	if p.Spec.NodeName != "" && len(p.Status.ContainerStatuses) == 0 && p.Status.Phase == corev1.PodPending {
		why = append(why, "no container started yet: is the node's kubelet running?")
	}
	for _, cs := range append(append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
		switch {
		case cs.State.Waiting != nil:
			s := fmt.Sprintf("container %s waiting: %s", cs.Name, cs.State.Waiting.Reason)
			if m := cs.State.Waiting.Message; m != "" {
				s += ": " + m
			}
			if t := cs.LastTerminationState.Terminated; t != nil {
				s += fmt.Sprintf(" (last exit %d %s %s)", t.ExitCode, t.Reason, strings.TrimSpace(t.Message))
			}
			why = append(why, s)
		case cs.State.Terminated != nil:
			why = append(why, fmt.Sprintf("container %s exited %d: %s %s", cs.Name, cs.State.Terminated.ExitCode, cs.State.Terminated.Reason, strings.TrimSpace(cs.State.Terminated.Message)))
		case cs.State.Running != nil && !cs.Ready:
			why = append(why, fmt.Sprintf("container %s running, not ready (readiness probe)", cs.Name))
		}
	}
	if len(why) == 0 {
		why = append(why, "not ready")
	}
	return why
}

// warnings returns the latest n warning events' reasons and messages.
func warnings(evs []corev1.Event, n int) []string {
	sort.Slice(evs, func(i, j int) bool { return eventTime(evs[i]).After(eventTime(evs[j])) })
	var out []string
	for _, e := range evs {
		if e.Type != corev1.EventTypeWarning {
			continue
		}
		out = append(out, fmt.Sprintf("event %s: %s", e.Reason, strings.TrimSpace(e.Message)))
		if len(out) == n {
			break
		}
	}
	return out
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.CreationTimestamp.Time
}

func (c *Cluster) listPods(ctx context.Context, ns, selector string) ([]corev1.Pod, error) {
	l, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

func (c *Cluster) listEvents(ctx context.Context, ns, pod string) ([]corev1.Event, error) {
	l, err := c.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// proxyGet reads a member cluster's API through Karmada's cluster proxy.
func (d *Deployer) proxyGet(ctx context.Context, cluster, path string, params map[string]string, into any) error {
	req := d.cl.Karmada.Kube.Discovery().RESTClient().Get().AbsPath("/apis/cluster.karmada.io/v1alpha1/clusters", cluster, "proxy", path)
	for k, v := range params {
		req = req.Param(k, v)
	}
	b, err := req.DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("cluster %s through the Karmada proxy: %w", cluster, err)
	}
	if err := json.Unmarshal(b, into); err != nil {
		return fmt.Errorf("cluster %s: %s: %w", cluster, path, err)
	}
	return nil
}

func (d *Deployer) memberPods(cluster string) func(context.Context, string, string) ([]corev1.Pod, error) {
	return func(ctx context.Context, ns, selector string) ([]corev1.Pod, error) {
		var l corev1.PodList
		err := d.proxyGet(ctx, cluster, "api/v1/namespaces/"+ns+"/pods", map[string]string{"labelSelector": selector}, &l)
		return l.Items, err
	}
}

func (d *Deployer) memberEvents(cluster string) func(context.Context, string, string) ([]corev1.Event, error) {
	return func(ctx context.Context, ns, pod string) ([]corev1.Event, error) {
		var l corev1.EventList
		err := d.proxyGet(ctx, cluster, "api/v1/namespaces/"+ns+"/events", map[string]string{"fieldSelector": "involvedObject.name=" + pod}, &l)
		return l.Items, err
	}
}
