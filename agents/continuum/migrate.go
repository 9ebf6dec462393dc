package continuum

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	workv1alpha1 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
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
	clusters := targetNames(rb.Spec.Clusters)
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
