package cluster

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/mlsysops-go/mlsysops/agents/cluster/fluidity"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/kube"
)

// apply creates or updates the rendered objects.
func (r *AppReconciler) apply(ctx context.Context, objs fluidity.Objects) error {
	want := objs.Deployment
	th, err := fluidity.TemplateHash(&want.Spec.Template)
	if err != nil {
		return err
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: want.Name, Namespace: want.Namespace}}
	// Not from a live read when the cache lags: the pass decided the nodes
	// in dep on the cache's view (see made).
	op, err := controllerutil.CreateOrUpdate(ctx, r.client, dep, func() error {
		// Merge: the deployment controller keeps its revision annotation
		// here.
		dep.Labels = merge(dep.Labels, want.Labels)
		dep.Annotations = merge(dep.Annotations, want.Annotations)
		if _, ok := want.Annotations[mlsysopsv1.AnnotationOverride]; !ok {
			delete(dep.Annotations, mlsysopsv1.AnnotationOverride)
		}
		dep.Spec.Replicas = want.Spec.Replicas
		dep.Spec.Strategy = want.Spec.Strategy
		if dep.CreationTimestamp.IsZero() {
			dep.Spec.Selector = want.Spec.Selector
		}
		// The template as the API server defaulted it stays unless ours
		// changed: no write on a pass that changes nothing.
		if dep.CreationTimestamp.IsZero() || dep.Annotations[mlsysopsv1.AnnotationTemplateHash] != th {
			dep.Spec.Template = want.Spec.Template
		}
		dep.Annotations[mlsysopsv1.AnnotationTemplateHash] = th
		return nil
	})
	if err != nil {
		return fmt.Errorf("deployment %s/%s: %w", want.Namespace, want.Name, err)
	}
	if op == controllerutil.OperationResultCreated {
		r.made.Expect(madeKey(want.Namespace, want.Labels[mlsysopsv1.LabelComponent]))
	}
	if s := objs.Service; s != nil {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace}}
		if _, err := kube.CreateOrUpdate(ctx, r.client, r.live(), svc, func() error {
			svc.Labels = merge(svc.Labels, s.Labels)
			svc.Spec.Selector = s.Spec.Selector
			svc.Spec.Type = s.Spec.Type
			// Keep allocated node ports across updates.
			for i := range s.Spec.Ports {
				for _, old := range svc.Spec.Ports {
					if old.Port == s.Spec.Ports[i].Port && old.Protocol == s.Spec.Ports[i].Protocol {
						s.Spec.Ports[i].NodePort = old.NodePort
					}
				}
			}
			svc.Spec.Ports = s.Spec.Ports
			return nil
		}); err != nil {
			return fmt.Errorf("service %s/%s: %w", s.Namespace, s.Name, err)
		}
	}
	return nil
}

// prune deletes the Deployments and Services of components no longer in
// the application.
func (r *AppReconciler) prune(ctx context.Context, ns string, app *mlsysopsv1.MLSysOpsApp) error {
	keep := map[string]bool{}
	svcKeep := map[string]bool{}
	for i := range app.Spec.Components {
		keep[app.Spec.Components[i].Metadata.Name] = true
	}
	var deps appsv1.DeploymentList
	if err := r.client.List(ctx, &deps, client.InNamespace(ns), client.MatchingLabels{mlsysopsv1.LabelManagedBy: mlsysopsv1.ManagedByValue}); err != nil {
		return err
	}
	for i := range deps.Items {
		if name := deps.Items[i].Labels[mlsysopsv1.LabelComponent]; !keep[name] {
			if err := r.client.Delete(ctx, &deps.Items[i]); client.IgnoreNotFound(err) != nil {
				return err
			}
			// The component left the application: it runs nowhere now.
			if r.Placed != nil {
				r.Placed(ctx, app, &mlsysopsv1.Component{Metadata: mlsysopsv1.ComponentMetadata{Name: name}}, nil)
			}
		}
	}
	for i := range app.Spec.Components {
		// Whatever nodes it runs on: a component pinned to a node keeps
		// its Service too.
		if comp := &app.Spec.Components[i]; fluidity.HasService(app, comp) {
			svcKeep[comp.Metadata.Name] = true
		}
	}
	var svcs corev1.ServiceList
	if err := r.client.List(ctx, &svcs, client.InNamespace(ns), client.MatchingLabels{mlsysopsv1.LabelManagedBy: mlsysopsv1.ManagedByValue}); err != nil {
		return err
	}
	for i := range svcs.Items {
		if !svcKeep[svcs.Items[i].Labels[mlsysopsv1.LabelComponent]] {
			if err := r.client.Delete(ctx, &svcs.Items[i]); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
	}
	return nil
}

// componentPods lists the pods of a component.
func (r *AppReconciler) componentPods(ctx context.Context, ns, comp string) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := r.client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{mlsysopsv1.LabelComponent: comp}); err != nil {
		return nil, err
	}
	return pods.Items, nil
}

// podNodes returns the nodes pods run on, sorted.
func podNodes(pods []corev1.Pod) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range pods {
		if p.Spec.NodeName != "" && p.DeletionTimestamp.IsZero() && !seen[p.Spec.NodeName] {
			seen[p.Spec.NodeName] = true
			out = append(out, p.Spec.NodeName)
		}
	}
	sort.Strings(out)
	return out
}

// writeStatus writes the application's status in the member, but for an
// application's first status while it is Deploying, which waits until its
// components had FirstStatusDelay to start (wait says how much longer;
// the pass is repeated then, and on any change of its Deployments before).
// Every status written here is carried to Karmada (the Work, the
// ResourceBinding) and into the application's status there: one that
// only says the components are starting cost a burst of applications
// three more writes each to Karmada's API server, the resource that
// bounds a burst, for an application Running a moment later.
func (r *AppReconciler) writeStatus(ctx context.Context, app *mlsysopsv1.MLSysOpsApp, statuses map[string]*mlsysopsv1.ComponentStatus, unschedulable bool) (wait time.Duration, err error) {
	var comps []mlsysopsv1.ComponentStatus
	allReady, stopped := true, 0
	for i := range app.Spec.Components {
		st := statuses[app.Spec.Components[i].Metadata.Name]
		comps = append(comps, *st)
		if st.Replicas == 0 {
			// A plan stopped it: it is where it was asked to be.
			stopped++
		}
		if st.ReadyReplicas < st.Replicas {
			allReady = false
		}
	}
	phase, msg := mlsysopsv1.AppDeploying, "components starting"
	switch {
	case unschedulable:
		phase, msg = mlsysopsv1.AppUnschedulable, "some components fit no node of "+r.cluster
	case stopped == len(comps) && stopped > 0:
		phase, msg = mlsysopsv1.AppDegraded, "every component stopped by a plan"
	case allReady && stopped > 0:
		phase, msg = mlsysopsv1.AppRunning, fmt.Sprintf("all components ready but %d stopped by a plan", stopped)
	case allReady:
		phase, msg = mlsysopsv1.AppRunning, "all components ready"
	case app.Status.Phase == mlsysopsv1.AppRunning || app.Status.Phase == mlsysopsv1.AppDegraded:
		phase, msg = mlsysopsv1.AppDegraded, "components lost ready replicas"
	}
	if phase == mlsysopsv1.AppDeploying && app.Status.Phase == "" {
		if wait = r.firstStatus.wait(app.Name, r.FirstStatusDelay, time.Now()); wait > 0 {
			return wait, nil
		}
	}
	before := app.DeepCopy()
	patch := client.MergeFrom(before)
	app.Status.Components = comps
	app.Status.Phase, app.Status.Message = phase, msg
	app.Status.ObservedGeneration = app.Generation
	meta.SetStatusCondition(&app.Status.Conditions, metav1.Condition{
		Type: mlsysopsv1.ConditionReady, Status: kube.ConditionStatus(phase == mlsysopsv1.AppRunning), Reason: string(phase), Message: msg,
		ObservedGeneration: app.Generation,
	})
	// The cache may not show this controller's last status write yet
	// (its echo brings no pass): then what it shows is no ground to write
	// nothing, nor to patch from without a lock.
	current := r.ownStatus.Current(before)
	if current && equality.Semantic.DeepEqual(before.Status, app.Status) {
		return 0, nil // nothing to write
	}
	if !current {
		if r.ownStatus.Behind(before) {
			// A locked write on this copy could only be refused: again
			// once the cache has caught up.
			return kube.OwnStatusRetry, nil
		}
		patch = client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})
	}
	if err := r.client.Status().Patch(ctx, app, patch); err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return 0, nil
		case apierrors.IsConflict(err):
			// The cache is behind: again once it has caught up.
			return kube.OwnStatusRetry, nil
		}
		return 0, fmt.Errorf("status of %s: %w", app.Name, err)
	}
	r.ownStatus.Wrote(app)
	if r.StatusWritten != nil {
		r.StatusWritten(ctx, app)
	}
	return 0, nil
}

// firstSeen remembers when the controller first handled each
// application, for the delay of its first status.
type firstSeen struct {
	mu sync.Mutex
	at map[string]time.Time
}

// wait returns how much of delay is left for app, seen first now if not
// before.
func (f *firstSeen) wait(app string, delay time.Duration, now time.Time) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.at == nil {
		f.at = map[string]time.Time{}
	}
	at, ok := f.at[app]
	if !ok {
		f.at[app], at = now, now
	}
	return max(at.Add(delay).Sub(now), 0)
}

func (f *firstSeen) forget(app string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.at, app)
}
