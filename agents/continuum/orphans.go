package continuum

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

// Member copies orphaned by Karmada.
//
// Karmada propagates an application to a member as a copy there, through
// a Work; removing the application deletes the Work and, with it, the
// copy, whose finalizer lets the cluster agent remove the application's
// namespace first. The chaos soak found copies Karmada left behind: a
// create retried while the member's API server was down landed after the
// application's removal had deleted the Work, so no Work named the copy
// any more and the application ran on in the member for good. The
// continuum agent therefore sweeps, every SweepInterval, the copies that
// Karmada manages (label karmada.io/managed) whose application is gone
// from Karmada, and deletes those still orphaned after OrphanGrace (a
// removal in progress deletes its copy itself meanwhile).

// LabelKarmadaManaged marks the objects Karmada propagated to a member.
const LabelKarmadaManaged = "karmada.io/managed"

// DefaultOrphanGrace is how long a member copy must stay without its
// application in Karmada before the sweep deletes it.
const DefaultOrphanGrace = 2 * time.Minute

// MemberApps reads and deletes the application copies in member clusters
// (*members.Reader, through Karmada's cluster proxy).
type MemberApps interface {
	Apps(ctx context.Context, cluster string) ([]mlsysopsv1.MLSysOpsApp, error)
	DeleteApp(ctx context.Context, cluster, name string, uid types.UID) error
}

// OrphanSweeper deletes member copies of applications gone from Karmada.
type OrphanSweeper struct {
	// Karmada is read live: clusters and applications.
	Karmada client.Reader
	Members MemberApps
	// Grace; DefaultOrphanGrace when zero.
	Grace time.Duration
	Log   *slog.Logger
	// Now; time.Now when nil.
	Now func() time.Time

	mu sync.Mutex
	// since is when each candidate (cluster/name/uid) was first seen
	// orphaned.
	since map[string]time.Time
}

// Sweep looks at every Ready member once and returns the copies it
// deleted ("cluster/name"). A member it cannot read is skipped and named
// in the error; the others are still swept.
func (o *OrphanSweeper) Sweep(ctx context.Context) ([]string, error) {
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	grace := o.Grace
	if grace <= 0 {
		grace = DefaultOrphanGrace
	}
	var clusters clusterv1alpha1.ClusterList
	if err := o.Karmada.List(ctx, &clusters); err != nil {
		return nil, fmt.Errorf("list clusters: %w", err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.since == nil {
		o.since = map[string]time.Time{}
	}
	seen := map[string]bool{}
	var deleted []string
	var errs []error
	for i := range clusters.Items {
		c := &clusters.Items[i]
		if !meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady) {
			// Its candidates keep their time: not swept, not forgotten.
			for k := range o.since {
				if clusterOf(k) == c.Name {
					seen[k] = true
				}
			}
			continue
		}
		copies, err := o.Members.Apps(ctx, c.Name)
		if err != nil {
			errs = append(errs, err)
			for k := range o.since {
				if clusterOf(k) == c.Name {
					seen[k] = true
				}
			}
			continue
		}
		for j := range copies {
			cp := &copies[j]
			if cp.Labels[LabelKarmadaManaged] != "true" || !cp.DeletionTimestamp.IsZero() {
				continue
			}
			err := o.Karmada.Get(ctx, types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: cp.Name}, &mlsysopsv1.MLSysOpsApp{})
			switch {
			case err == nil:
				continue
			case !apierrors.IsNotFound(err):
				errs = append(errs, fmt.Errorf("application %s: %w", cp.Name, err))
				continue
			}
			key := c.Name + "/" + cp.Name + "/" + string(cp.UID)
			seen[key] = true
			first, ok := o.since[key]
			if !ok {
				o.since[key] = now()
				continue
			}
			if now().Sub(first) < grace {
				continue
			}
			if err := o.Members.DeleteApp(ctx, c.Name, cp.Name, cp.UID); err != nil {
				errs = append(errs, err)
				continue
			}
			delete(o.since, key)
			deleted = append(deleted, c.Name+"/"+cp.Name)
			if o.Log != nil {
				o.Log.Warn("deleted a member's copy of an application gone from Karmada (Karmada left it behind)",
					"app", cp.Name, "cluster", c.Name, "orphaned_for", now().Sub(first).Round(time.Second))
			}
		}
	}
	for k := range o.since {
		if !seen[k] {
			delete(o.since, k)
		}
	}
	return deleted, errors.Join(errs...)
}

func clusterOf(key string) string {
	c, _, _ := strings.Cut(key, "/")
	return c
}
