package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/members"
)

// Application namespaces orphaned in the member.
//
// The cluster agent makes a namespace per application (mls-<app>, labelled
// with the application) and deletes it when the application's copy goes,
// before it lets the copy go. The chaos soak found a namespace made in the
// same second Karmada deleted the copy: a pass that read the copy from a
// cache not yet showing its deletion created the namespace after the
// removal pass had found none. Reads that decide a removal now go to the
// API server (AppReconciler.Live), and a pass that creates a namespace
// checks there that the application is still wanted; whatever is left all
// the same (an agent killed between two steps) is swept: every
// SweepInterval the agent lists its labelled namespaces and deletes, by
// uid, those whose application has been gone from the member for
// NamespaceGrace.

// DefaultNamespaceGrace is how long an application namespace must stay
// without its application before the sweep deletes it.
const DefaultNamespaceGrace = 2 * time.Minute

// DefaultNamespaceSweep is how often the agent sweeps.
const DefaultNamespaceSweep = time.Minute

// NamespaceSweeper deletes application namespaces whose application is
// gone from the member cluster.
type NamespaceSweeper struct {
	// Live reads namespaces and applications from the API server, not a
	// cache; Writer deletes.
	Live   client.Reader
	Writer client.Writer
	// Grace; DefaultNamespaceGrace when zero.
	Grace time.Duration
	Log   *slog.Logger
	// Now; time.Now when nil.
	Now func() time.Time

	mu sync.Mutex
	// since is when each candidate (name/uid) was first seen orphaned.
	since map[string]time.Time
}

// Sweep looks at every application namespace once and returns those it
// deleted.
func (s *NamespaceSweeper) Sweep(ctx context.Context) ([]string, error) {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	grace := s.Grace
	if grace <= 0 {
		grace = DefaultNamespaceGrace
	}
	var nss corev1.NamespaceList
	if err := s.Live.List(ctx, &nss, client.MatchingLabels{mlsysopsv1.LabelManagedBy: mlsysopsv1.ManagedByValue}); err != nil {
		return nil, fmt.Errorf("list application namespaces: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.since == nil {
		s.since = map[string]time.Time{}
	}
	seen := map[string]bool{}
	var deleted []string
	var errs []error
	for i := range nss.Items {
		ns := &nss.Items[i]
		app := ns.Labels[mlsysopsv1.LabelApp]
		// Only the namespaces the agent makes: named after the
		// application they are labelled with.
		if app == "" || ns.Name != members.Namespace(app) || !ns.DeletionTimestamp.IsZero() {
			continue
		}
		err := s.Live.Get(ctx, types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: app}, &mlsysopsv1.MLSysOpsApp{})
		switch {
		case err == nil:
			continue
		case !apierrors.IsNotFound(err):
			errs = append(errs, fmt.Errorf("application %s: %w", app, err))
			continue
		}
		key := ns.Name + "/" + string(ns.UID)
		seen[key] = true
		first, ok := s.since[key]
		if !ok {
			s.since[key] = now()
			continue
		}
		if now().Sub(first) < grace {
			continue
		}
		uid := ns.UID
		if err := s.Writer.Delete(ctx, ns, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("delete namespace %s: %w", ns.Name, err))
			continue
		}
		delete(s.since, key)
		deleted = append(deleted, ns.Name)
		if s.Log != nil {
			s.Log.Warn("deleted the namespace of an application gone from this cluster",
				"namespace", ns.Name, "app", app, "orphaned_for", now().Sub(first).Round(time.Second))
		}
	}
	for k := range s.since {
		if !seen[k] {
			delete(s.since, k)
		}
	}
	return deleted, errors.Join(errs...)
}

// Run sweeps every interval (DefaultNamespaceSweep when zero) until ctx
// ends.
func (s *NamespaceSweeper) Run(ctx context.Context, every time.Duration) {
	if every <= 0 {
		every = DefaultNamespaceSweep
	}
	for {
		if deleted, err := s.Sweep(ctx); err != nil && ctx.Err() == nil && s.Log != nil {
			s.Log.Warn("sweep of orphaned application namespaces incomplete; next in a sweep interval", "err", err, "deleted", deleted)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}
