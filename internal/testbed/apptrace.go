package testbed

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	workv1alpha1 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	karmadaclientset "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	karmadainformers "github.com/karmada-io/karmada/pkg/generated/informers/externalversions"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

// The steps an application goes through on its way to Running, in the
// order they happen, as AppTracer sees them. Steps of one path only
// (namespace, decided, member-status for MLSysOps) are not seen on the
// other.
const (
	StepTemplate      = "template"       // the resource template is in Karmada (MLSysOpsApp, or each Deployment)
	StepPolicy        = "policy"         // raw Karmada: its PropagationPolicy is in Karmada (MLSysOps has one for every application, there before them)
	StepBinding       = "binding"        // Karmada's detector made the ResourceBinding
	StepDecided       = "decided"        // MLSysOps: the continuum agent's status Deploying (after it placed the binding)
	StepScheduled     = "scheduled"      // Karmada's scheduler chose its clusters
	StepWork          = "work"           // the binding controller made the Work per cluster
	StepMemberObject  = "member-object"  // the execution controller made the member's copy
	StepWorkApplied   = "work-applied"   // the Work says Applied
	StepNamespace     = "namespace"      // MLSysOps: the cluster agent made the application's namespace
	StepDeployment    = "deployment"     // a Deployment of the component is in the member
	StepReplicaSet    = "replicaset"     // its ReplicaSet
	StepPod           = "pod"            // its pod
	StepPodBound      = "pod-bound"      // kube-scheduler bound the pod
	StepPodRunning    = "pod-running"    // the pod is Running and Ready
	StepDeployReady   = "deploy-ready"   // the member's Deployment counts it ready
	StepMemberStatus  = "member-status"  // MLSysOps: the cluster agent's status Running in the member
	StepWorkStatus    = "work-status"    // Karmada reflected the member's status into the Work
	StepBindingStatus = "binding-status" // ... and into the ResourceBinding
	StepRunning       = "running"        // Running as the Karmada API shows it (the end)
)

// TraceSteps lists the steps in order.
var TraceSteps = []string{
	StepTemplate, StepPolicy, StepBinding, StepDecided, StepScheduled, StepWork, StepMemberObject, StepWorkApplied,
	StepNamespace, StepDeployment, StepReplicaSet, StepPod, StepPodBound, StepPodRunning, StepDeployReady,
	StepMemberStatus, StepWorkStatus, StepBindingStatus, StepRunning,
}

// AppTracer watches Karmada and the member clusters and records, per
// application, when each of the objects that carry it to Running first
// reached each step, at the moment its watch event arrived (milliseconds,
// where creation timestamps and managed fields say seconds). It follows
// both MLSysOpsApps and plain Karmada Deployments: TemplateApp maps a
// resource template's kind and name to its application.
type AppTracer struct {
	// TemplateApp names the application of a resource template in
	// Karmada (kind MLSysOpsApp or Deployment); the default: an
	// MLSysOpsApp is its own, a Deployment "<app>-<component>" is app's.
	TemplateApp func(kind, name string) string

	mu    sync.Mutex
	match func(app string) bool
	// at[app][step][unit] is when unit (an object of the step) got there.
	at map[string]map[string]map[string]time.Time
}

var mlsysopsAppsGVR = schema.GroupVersionResource{Group: "mlsysops.eu", Version: "v1", Resource: "mlsysopsapps"}

// StartAppTracer starts the watches on Karmada and the members named
// (their contexts in env's kubeconfig) and returns once they have
// synced. They stop with ctx.
func StartAppTracer(ctx context.Context, env *Env, members []string) (*AppTracer, error) {
	tr := &AppTracer{at: map[string]map[string]map[string]time.Time{}, match: func(string) bool { return false }}
	kcfg, err := env.ClientConfig(ContextKarmada)
	if err != nil {
		return nil, err
	}
	var synced []cache.InformerSynced
	add := func(inf cache.SharedIndexInformer, h func(obj any)) error {
		_ = inf.SetTransform(crcache.TransformStripManagedFields())
		_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    h,
			UpdateFunc: func(_, obj any) { h(obj) },
		})
		synced = append(synced, inf.HasSynced)
		return err
	}
	kc, err := karmadaclientset.NewForConfig(kcfg)
	if err != nil {
		return nil, err
	}
	kf := karmadainformers.NewSharedInformerFactory(kc, 0)
	if err := add(kf.Policy().V1alpha1().PropagationPolicies().Informer(), tr.onPolicy); err != nil {
		return nil, err
	}
	if err := add(kf.Work().V1alpha2().ResourceBindings().Informer(), tr.onBinding); err != nil {
		return nil, err
	}
	if err := add(kf.Work().V1alpha1().Works().Informer(), tr.onWork); err != nil {
		return nil, err
	}
	kcs, err := kubernetes.NewForConfig(kcfg)
	if err != nil {
		return nil, err
	}
	kkf := informers.NewSharedInformerFactory(kcs, 0)
	if err := add(kkf.Apps().V1().Deployments().Informer(), tr.onKarmadaDeployment); err != nil {
		return nil, err
	}
	kdyn, err := dynamic.NewForConfig(kcfg)
	if err != nil {
		return nil, err
	}
	kdf := dynamicinformer.NewDynamicSharedInformerFactory(kdyn, 0)
	if err := add(kdf.ForResource(mlsysopsAppsGVR).Informer(), tr.onKarmadaApp); err != nil {
		return nil, err
	}
	starts := []func(<-chan struct{}){kf.Start, kkf.Start, kdf.Start}
	for _, m := range members {
		cfg, err := env.ClientConfig(m)
		if err != nil {
			return nil, err
		}
		if err := tr.watchMember(m, cfg, add, &starts); err != nil {
			return nil, err
		}
	}
	for _, s := range starts {
		s(ctx.Done())
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return nil, fmt.Errorf("trace watches: %w", ctx.Err())
	}
	return tr, nil
}

func (tr *AppTracer) watchMember(cluster string, cfg *rest.Config, add func(cache.SharedIndexInformer, func(any)) error, starts *[]func(<-chan struct{})) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	f := informers.NewSharedInformerFactory(cs, 0)
	for _, w := range []struct {
		inf cache.SharedIndexInformer
		h   func(string, any)
	}{
		{f.Core().V1().Namespaces().Informer(), tr.onNamespace},
		{f.Apps().V1().Deployments().Informer(), tr.onMemberDeployment},
		{f.Apps().V1().ReplicaSets().Informer(), tr.onReplicaSet},
		{f.Core().V1().Pods().Informer(), tr.onPod},
	} {
		h := w.h
		if err := add(w.inf, func(o any) { h(cluster, o) }); err != nil {
			return err
		}
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	df := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	if err := add(df.ForResource(mlsysopsAppsGVR).Informer(), func(o any) { tr.onMemberApp(cluster, o) }); err != nil {
		return err
	}
	*starts = append(*starts, f.Start, df.Start)
	return nil
}

// Follow makes the tracer record the applications match accepts (the
// names of one run) and forget all others.
func (tr *AppTracer) Follow(match func(app string) bool) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.match = match
	tr.at = map[string]map[string]map[string]time.Time{}
}

func (tr *AppTracer) mark(app, step, unit string) {
	if app == "" {
		return
	}
	now := time.Now()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if !tr.match(app) {
		return
	}
	steps := tr.at[app]
	if steps == nil {
		steps = map[string]map[string]time.Time{}
		tr.at[app] = steps
	}
	units := steps[step]
	if units == nil {
		units = map[string]time.Time{}
		steps[step] = units
	}
	if _, ok := units[unit]; !ok {
		units[unit] = now
	}
}

func (tr *AppTracer) templateApp(kind, name string) string {
	if tr.TemplateApp != nil {
		return tr.TemplateApp(kind, name)
	}
	if kind == "Deployment" {
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			return name[:i]
		}
	}
	return name
}

func (tr *AppTracer) onPolicy(o any) {
	pp, ok := o.(*policyv1alpha1.PropagationPolicy)
	if !ok || len(pp.Spec.ResourceSelectors) == 0 || slices.ContainsFunc(pp.Spec.ResourceSelectors, func(s policyv1alpha1.ResourceSelector) bool {
		return s.Name == "" && s.LabelSelector == nil
	}) {
		// Not one application's (MLSysOps's policy takes every one).
		return
	}
	tr.mark(pp.Name, StepPolicy, pp.Namespace+"/"+pp.Name)
}

func (tr *AppTracer) onBinding(o any) {
	rb, ok := o.(*workv1alpha2.ResourceBinding)
	if !ok {
		return
	}
	app := tr.templateApp(rb.Spec.Resource.Kind, rb.Spec.Resource.Name)
	tr.mark(app, StepBinding, rb.Name)
	if len(rb.Spec.Clusters) > 0 {
		tr.mark(app, StepScheduled, rb.Name)
	}
	if len(rb.Status.AggregatedStatus) == 0 || len(rb.Status.AggregatedStatus) < len(rb.Spec.Clusters) {
		return
	}
	for _, s := range rb.Status.AggregatedStatus {
		if !readyStatus(rb.Spec.Resource.Kind, s.Status) {
			return
		}
	}
	tr.mark(app, StepBindingStatus, rb.Name)
}

// readyStatus tells whether a member's reflected status says ready: an
// MLSysOpsApp Running, a Deployment with its replicas ready.
func readyStatus(kind string, raw *runtime.RawExtension) bool {
	if raw == nil {
		return false
	}
	b := raw.Raw
	s := string(b)
	if kind == "MLSysOpsApp" {
		return strings.Contains(s, `"phase":"Running"`)
	}
	// Deployment: readyReplicas equal to replicas, and some.
	u := map[string]any{}
	if err := json.Unmarshal(b, &u); err != nil {
		return false
	}
	ready, _ := u["readyReplicas"].(float64)
	want, ok := u["replicas"].(float64)
	return ok && ready >= want && want > 0
}

func (tr *AppTracer) onWork(o any) {
	w, ok := o.(*workv1alpha1.Work)
	if !ok {
		return
	}
	rb := w.Annotations[workv1alpha2.ResourceBindingNameAnnotationKey]
	kind, name := "MLSysOpsApp", strings.TrimSuffix(rb, "-mlsysopsapp")
	switch {
	case rb == "" && w.Labels[mlsysopsv1.LabelPrefix+"app"] != "":
		// A Work the continuum agent wrote itself (works propagation).
		name = w.Labels[mlsysopsv1.LabelPrefix+"app"]
	case rb == "":
		return
	case strings.HasSuffix(rb, "-deployment"):
		kind, name = "Deployment", strings.TrimSuffix(rb, "-deployment")
	case !strings.HasSuffix(rb, "-mlsysopsapp"):
		return
	}
	app := tr.templateApp(kind, name)
	unit := w.Namespace + "/" + w.Name
	tr.mark(app, StepWork, unit)
	if meta.IsStatusConditionTrue(w.Status.Conditions, workv1alpha1.WorkApplied) {
		tr.mark(app, StepWorkApplied, unit)
	}
	for _, ms := range w.Status.ManifestStatuses {
		if ms.Status != nil && readyStatus(kind, ms.Status) {
			tr.mark(app, StepWorkStatus, unit)
		}
	}
}

func (tr *AppTracer) onKarmadaDeployment(o any) {
	d, ok := o.(*appsv1.Deployment)
	if !ok {
		return
	}
	app := tr.templateApp("Deployment", d.Name)
	tr.mark(app, StepTemplate, d.Namespace+"/"+d.Name)
	// Karmada sums the members' status into the template.
	if d.Spec.Replicas != nil && d.Status.ReadyReplicas > 0 && d.Status.ReadyReplicas >= d.Status.Replicas {
		tr.mark(app, StepRunning, d.Namespace+"/"+d.Name)
	}
}

func (tr *AppTracer) onKarmadaApp(o any) {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return
	}
	tr.mark(u.GetName(), StepTemplate, u.GetName())
	switch phase, _, _ := unstructured.NestedString(u.Object, "status", "phase"); phase {
	case "Running":
		tr.mark(u.GetName(), StepDecided, u.GetName())
		tr.mark(u.GetName(), StepRunning, u.GetName())
	case "Deploying":
		tr.mark(u.GetName(), StepDecided, u.GetName())
	}
}

func (tr *AppTracer) onMemberApp(cluster string, o any) {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return
	}
	tr.mark(u.GetName(), StepMemberObject, cluster)
	if phase, _, _ := unstructured.NestedString(u.Object, "status", "phase"); phase == "Running" {
		tr.mark(u.GetName(), StepMemberStatus, cluster)
	}
}

// appLabel is the application of a member workload: MLSysOps' label, or
// the plain "app" label the side-by-side benchmark's Deployments carry.
func appLabel(labels map[string]string) string {
	if a := labels["mlsysops.eu/app"]; a != "" {
		return a
	}
	return labels["app"]
}

func (tr *AppTracer) onNamespace(cluster string, o any) {
	ns, ok := o.(*corev1.Namespace)
	if !ok {
		return
	}
	tr.mark(ns.Labels["mlsysops.eu/app"], StepNamespace, cluster)
}

func (tr *AppTracer) onMemberDeployment(cluster string, o any) {
	d, ok := o.(*appsv1.Deployment)
	if !ok {
		return
	}
	app, unit := appLabel(d.Labels), cluster+"/"+d.Namespace+"/"+d.Name
	if d.Labels["mlsysops.eu/app"] == "" {
		// A plain Deployment is the member's copy of the template.
		tr.mark(app, StepMemberObject, unit)
	}
	tr.mark(app, StepDeployment, unit)
	if d.Spec.Replicas != nil && d.Status.ReadyReplicas >= *d.Spec.Replicas && *d.Spec.Replicas > 0 {
		tr.mark(app, StepDeployReady, unit)
	}
}

func (tr *AppTracer) onReplicaSet(cluster string, o any) {
	rs, ok := o.(*appsv1.ReplicaSet)
	if !ok {
		return
	}
	tr.mark(appLabel(rs.Labels), StepReplicaSet, cluster+"/"+rs.Namespace+"/"+rs.Name)
}

func (tr *AppTracer) onPod(cluster string, o any) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return
	}
	app, unit := appLabel(p.Labels), cluster+"/"+p.Namespace+"/"+p.Name
	tr.mark(app, StepPod, unit)
	if p.Spec.NodeName != "" {
		tr.mark(app, StepPodBound, unit)
	}
	if p.Status.Phase == corev1.PodRunning {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				tr.mark(app, StepPodRunning, unit)
			}
		}
	}
}

// StepTimes are, per step, when an application got there: the last of
// the step's objects, as an offset from its submission.
type StepTimes map[string]time.Duration

// Times returns the steps of app relative to submitted.
func (tr *AppTracer) Times(app string, submitted time.Time) StepTimes {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := StepTimes{}
	for step, units := range tr.at[app] {
		var last time.Time
		for _, t := range units {
			if t.After(last) {
				last = t
			}
		}
		out[step] = last.Sub(submitted)
	}
	return out
}

// StepSummary is a step's p50 and p99 over the applications of a run.
type StepSummary struct {
	Step     string
	Apps     int
	P50, P99 time.Duration
}

// SummariseSteps gives, for each step that some application reached, the
// p50 and p99 of its offsets, in the order of TraceSteps.
func SummariseSteps(all []StepTimes) []StepSummary {
	var out []StepSummary
	for _, step := range TraceSteps {
		var ds []time.Duration
		for _, st := range all {
			if d, ok := st[step]; ok {
				ds = append(ds, d)
			}
		}
		if len(ds) == 0 {
			continue
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		out = append(out, StepSummary{Step: step, Apps: len(ds), P50: ds[(len(ds)-1)/2], P99: ds[int(float64(len(ds)-1)*0.99)]})
	}
	return out
}

// FormatSteps prints summaries as one line per step, with the p50's
// growth since the step before.
func FormatSteps(sums []StepSummary) string {
	var b strings.Builder
	var prev time.Duration
	for _, s := range sums {
		fmt.Fprintf(&b, "  %-15s p50 %7.3f s (%+7.3f)  p99 %7.3f s  (%d apps)\n", s.Step, s.P50.Seconds(), (s.P50 - prev).Seconds(), s.P99.Seconds(), s.Apps)
		prev = s.P50
	}
	return b.String()
}
