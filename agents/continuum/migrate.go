package continuum

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	workv1alpha1 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

// From bindings to Works.
//
// A continuum agent that starts with the Works propagation where one with
// the binding propagation placed applications finds them bound through
// ResourceBindings, whose Works Karmada's binding controller keeps
// writing: two writers of one copy in the member. It moves each to Works
// of its own without touching the copies in the members: the binding is
// told to preserve its resources on deletion (Karmada's binding
// controller passes that on to its Works), then deleted (Karmada deletes
// its Works and, since they preserve their resources, only takes its
// labels and annotations off the copies), and the continuum writes its
// own Works on the same clusters, which take the copies over (they allow
// overwriting). The applications' policy is gone by then
// (EnsureAPIFor), so Karmada makes no new binding. A start cut short
// goes on at the next one: each step is found done or done again.

// MigrateWait bounds how long moving one application from its binding to
// Works may take.
const MigrateWait = 2 * time.Minute

// migrateRetry paces a write of the move refused for a conflict: Karmada
// writes the bindings' and the Works' status meanwhile.
var migrateRetry = wait.Backoff{Steps: 10, Duration: 100 * time.Millisecond, Factor: 1.5, Jitter: 0.1}

// migrateBindings moves every application bound through a ResourceBinding
// to Works of the continuum's own; c reads Karmada live.
func migrateBindings(ctx context.Context, c client.Client, log *slog.Logger) error {
	var rbs workv1alpha2.ResourceBindingList
	if err := c.List(ctx, &rbs, client.InNamespace(mlsysopsv1.Namespace)); err != nil {
		return fmt.Errorf("list the applications' ResourceBindings: %w", err)
	}
	for i := range rbs.Items {
		rb := &rbs.Items[i]
		if rb.Spec.Resource.Kind != "MLSysOpsApp" {
			continue
		}
		if err := migrateBinding(ctx, c, rb); err != nil {
			return fmt.Errorf("move application %s from its ResourceBinding to Works: %w", rb.Spec.Resource.Name, err)
		}
		log.Info("application moved from its ResourceBinding to Works", "app", rb.Spec.Resource.Name, "clusters", targetNames(rb.Spec.Clusters))
	}
	return nil
}

func migrateBinding(ctx context.Context, c client.Client, rb *workv1alpha2.ResourceBinding) error {
	clusters := movedClusters(rb)
	if rb.DeletionTimestamp.IsZero() && (rb.Spec.PreserveResourcesOnDeletion == nil || !*rb.Spec.PreserveResourcesOnDeletion) {
		patch := client.MergeFrom(rb.DeepCopy())
		rb.Spec.PreserveResourcesOnDeletion = ptr(true)
		if err := c.Patch(ctx, rb, patch); err != nil {
			return fmt.Errorf("preserve its copies: %w", err)
		}
	}
	byBinding := client.MatchingLabels{workv1alpha2.ResourceBindingPermanentIDLabel: rb.Labels[workv1alpha2.ResourceBindingPermanentIDLabel]}
	if rb.Labels[workv1alpha2.ResourceBindingPermanentIDLabel] == "" {
		// Karmada labels every binding it makes; without the label its
		// Works cannot be told from others.
		return fmt.Errorf("binding %s has no label %s", rb.Name, workv1alpha2.ResourceBindingPermanentIDLabel)
	}
	// Karmada's binding controller passes the setting on to the Works.
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, MigrateWait, true, func(ctx context.Context) (bool, error) {
		if !rb.DeletionTimestamp.IsZero() {
			return true, nil
		}
		var works workv1alpha1.WorkList
		if err := c.List(ctx, &works, byBinding); err != nil {
			return false, nil
		}
		for _, w := range works.Items {
			if w.Spec.PreserveResourcesOnDeletion == nil || !*w.Spec.PreserveResourcesOnDeletion {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("Karmada did not mark its Works to preserve the copies: %w", err)
	}
	if err := c.Delete(ctx, rb); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete its binding: %w", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, MigrateWait, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(rb), &workv1alpha2.ResourceBinding{}); !apierrors.IsNotFound(err) {
			return false, nil
		}
		var works workv1alpha1.WorkList
		if err := c.List(ctx, &works, byBinding); err != nil {
			return false, nil
		}
		return len(works.Items) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("Karmada did not remove its binding and Works: %w", err)
	}
	app := &mlsysopsv1.MLSysOpsApp{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: rb.Spec.Resource.Name}, app); err != nil {
		if apierrors.IsNotFound(err) {
			// Removed meanwhile: the sweep of orphaned copies takes
			// what Karmada left in the members.
			return nil
		}
		return err
	}
	works, err := appWorks(ctx, c, app.Name)
	if err != nil {
		return err
	}
	_, err = applyWorks(ctx, c, app, works, clusters)
	return err
}

// movedClusters are the clusters an application bound by rb goes on
// with, on Works: those it is scheduled on or, placed but not scheduled
// (a start with the bindings cut short while moving it off its Works,
// for migrateWorks records the placement before it deletes them), those
// of its placement.
func movedClusters(rb *workv1alpha2.ResourceBinding) []string {
	if clusters := targetNames(rb.Spec.Clusters); len(clusters) > 0 {
		return clusters
	}
	placed, _ := PlacedClusters(rb)
	return placed
}

// From Works to bindings.
//
// A continuum agent that starts with the binding propagation where one
// with the Works propagation placed applications finds them carried by
// Works of its own (LabelWorkApp), while Karmada's detector binds them
// again to the applications' policy (EnsureAPIFor made it): once their
// bindings were scheduled, Karmada's binding controller would write Works
// of other names beside the continuum's, two writers of one copy in the
// member. It moves each application to its binding without touching the
// copies:
//
//  1. the clusters of the application's Works are recorded on its
//     binding as its placement (AnnotationPlacement), which schedules
//     nothing yet: the binding controller writes no Work, and the
//     placement outlives the continuum's Works;
//  2. each of those Works is told to preserve its resources on deletion
//     and deleted: Karmada's execution controller then only takes the
//     labels and annotations that claim the copy off it and lets the
//     Work go;
//  3. once they are gone, the binding is scheduled on those clusters,
//     and the binding controller's Works take the copies over (the
//     policy allows overwriting: Karmada updates a copy it no longer
//     manages only so).
//
// The Works go before the binding is scheduled, not after: the execution
// controller strips the copy of whichever Work claims it then (it writes
// the going Work's manifest, its claim taken out, over what the member
// has), so a binding's Work that had taken the copy over first would lose
// its claim, and Karmada neither updates nor deletes a copy it does not
// claim. A start cut short goes on at the next one: a Work being deleted
// with its copy preserved means the move began and the binding's record
// stands; a binding placed but not scheduled is scheduled by the binding
// scheduler should this start not get there. Works of an application gone
// from Karmada are deleted with their copies, as the Works propagation
// would have.

// migrateWorks moves every application placed through the continuum's
// own Works to its ResourceBinding; c reads Karmada live.
func migrateWorks(ctx context.Context, c client.Client, log *slog.Logger) error {
	var list workv1alpha1.WorkList
	if err := c.List(ctx, &list, client.HasLabels{LabelWorkApp}); err != nil {
		return fmt.Errorf("list the applications' Works: %w", err)
	}
	apps := map[string]bool{}
	for _, w := range list.Items {
		apps[w.Labels[LabelWorkApp]] = true
	}
	for _, name := range slices.Sorted(maps.Keys(apps)) {
		clusters, moved, err := migrateAppWorks(ctx, c, log, name)
		if err != nil {
			return fmt.Errorf("move application %s from its Works to its ResourceBinding: %w", name, err)
		}
		if moved {
			log.Info("application moved from its Works to its ResourceBinding", "app", name, "clusters", clusters)
		}
	}
	return nil
}

// migrateAppWorks moves application app; moved is false when there was
// nothing to move (the application is gone, or its Works were all being
// removed from their clusters).
func migrateAppWorks(ctx context.Context, c client.Client, log *slog.Logger, app string) (clusters []string, moved bool, err error) {
	works, err := appWorks(ctx, c, app)
	if err != nil {
		return nil, false, err
	}
	if err := c.Get(ctx, types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: app}, &mlsysopsv1.MLSysOpsApp{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, false, removeWorks(ctx, c, log, app, works)
		}
		return nil, false, err
	}
	rb := &workv1alpha2.ResourceBinding{}
	key := types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: BindingName(app)}
	// Karmada's detector binds the application as soon as it sees the
	// policy, made a moment ago.
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, MigrateWait, true, func(ctx context.Context) (bool, error) {
		return c.Get(ctx, key, rb) == nil, nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("Karmada did not bind it to PropagationPolicy %s/%s: %w", mlsysopsv1.Namespace, AppPropagationPolicy, err)
	}
	clusters = worksPlacement(works, rb)
	if len(clusters) == 0 {
		// Its Works were all being removed (with their copies): there is
		// nothing to keep, and the placement controller places it.
		return nil, false, nil
	}
	err = retry.RetryOnConflict(migrateRetry, func() error {
		if err := c.Get(ctx, key, rb); err != nil {
			return err
		}
		if recorded, placed := PlacedClusters(rb); placed && slices.Equal(slices.Sorted(slices.Values(recorded)), clusters) {
			return nil
		}
		patch := client.MergeFromWithOptions(rb.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if rb.Annotations == nil {
			rb.Annotations = map[string]string{}
		}
		rb.Annotations[mlsysopsv1.AnnotationPlacement] = strings.Join(clusters, ",")
		return c.Patch(ctx, rb, patch)
	})
	if err != nil {
		return nil, false, fmt.Errorf("record its placement on its binding: %w", err)
	}
	for cl, w := range works {
		if err := releaseWork(ctx, c, w); err != nil {
			return nil, false, fmt.Errorf("release its copy in %s: %w", cl, err)
		}
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, MigrateWait, true, func(ctx context.Context) (bool, error) {
		left, err := appWorks(ctx, c, app)
		if err != nil {
			return false, nil
		}
		for _, w := range left {
			if preservesCopy(w) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("Karmada did not let its Works go: %w", err)
	}
	var members clusterv1alpha1.ClusterList
	if err := c.List(ctx, &members); err != nil {
		return nil, false, fmt.Errorf("list the clusters: %w", err)
	}
	// As the binding scheduler binds a placed binding.
	err = retry.RetryOnConflict(migrateRetry, func() error {
		if err := c.Get(ctx, key, rb); err != nil {
			return err
		}
		_, why, err := bind(ctx, c, log, rb, clusters, members.Items)
		if err != nil {
			return err
		}
		return markScheduled(ctx, c, rb, why)
	})
	if err != nil {
		return nil, false, fmt.Errorf("schedule its binding: %w", err)
	}
	return clusters, true, nil
}

// worksPlacement returns the clusters, sorted, whose copies of an
// application its Works hand over to binding rb: those of the Works not
// being deleted and of those being deleted with their copies preserved
// (a move cut short). Once a move began the binding's placement stands:
// the Works gone since are in it, not among works. A Work being deleted
// without preserving its copy was removing the application from its
// cluster, copy and all: that cluster is not handed over.
func worksPlacement(works map[string]*workv1alpha1.Work, rb *workv1alpha2.ResourceBinding) []string {
	var out []string
	began := false
	for cl, w := range works {
		deleting := !w.DeletionTimestamp.IsZero()
		began = began || deleting && preservesCopy(w)
		if !deleting || preservesCopy(w) {
			out = append(out, cl)
		}
	}
	if recorded, placed := PlacedClusters(rb); began && placed {
		out = recorded
	}
	return slices.Compact(slices.Sorted(slices.Values(out)))
}

func preservesCopy(w *workv1alpha1.Work) bool {
	return w.Spec.PreserveResourcesOnDeletion != nil && *w.Spec.PreserveResourcesOnDeletion
}

// releaseWork tells Work w to preserve its copy and deletes it, that
// Work as marked only (a conflict reads it again); one being deleted is
// left as it is.
func releaseWork(ctx context.Context, c client.Client, w *workv1alpha1.Work) error {
	key := client.ObjectKeyFromObject(w)
	return retry.RetryOnConflict(migrateRetry, func() error {
		cur := &workv1alpha1.Work{}
		if err := c.Get(ctx, key, cur); err != nil {
			return client.IgnoreNotFound(err)
		}
		if !cur.DeletionTimestamp.IsZero() {
			return nil
		}
		if !preservesCopy(cur) {
			patch := client.MergeFromWithOptions(cur.DeepCopy(), client.MergeFromWithOptimisticLock{})
			cur.Spec.PreserveResourcesOnDeletion = ptr(true)
			if err := c.Patch(ctx, cur, patch); err != nil {
				return err
			}
		}
		// Karmada writes the Work's status meanwhile (the patch makes its
		// execution controller apply it again): a conflict, and again.
		err := c.Delete(ctx, cur, client.Preconditions{UID: &cur.UID, ResourceVersion: &cur.ResourceVersion})
		return client.IgnoreNotFound(err)
	})
}

// removeWorks deletes the Works of application app, gone from Karmada,
// with their copies (one a move cut short marked to preserve its copy is
// unmarked first).
func removeWorks(ctx context.Context, c client.Client, log *slog.Logger, app string, works map[string]*workv1alpha1.Work) error {
	for cl, w := range works {
		if !w.DeletionTimestamp.IsZero() {
			continue
		}
		if preservesCopy(w) {
			patch := client.MergeFrom(w.DeepCopy())
			w.Spec.PreserveResourcesOnDeletion = ptr(false)
			if err := c.Patch(ctx, w, patch); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("remove %s from %s: %w", app, cl, err)
			}
		}
		if err := c.Delete(ctx, w); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("remove %s from %s: %w", app, cl, err)
		}
		log.Info("work of an application gone from Karmada removed", "app", app, "work", w.Namespace+"/"+w.Name)
	}
	return nil
}
