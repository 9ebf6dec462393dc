package continuum

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/internal/state"
)

// Intake turns the application (or ML deployment) submissions the
// northbound API queues in Redis into MLSysOpsApp objects in the Karmada API, where the placement
// controller takes over. Entries are acknowledged only once the object is
// written, so a crash re-delivers them; handling is idempotent (create or
// update by name, delete if present), so a re-delivery changes nothing.
type Intake struct {
	// Live reads Karmada past any cache (the manager's API reader), for
	// the checks a stale cache would get wrong; nil reads through the
	// client.
	Live client.Reader

	queue  *state.Queue
	apps   *state.Collection
	client client.Client
	log    *slog.Logger

	// policyID is AppPropagationPolicy's permanent id, read once; when
	// it could not be read (or has none: Karmada's webhook gives it),
	// policyTried is when that was, and it is tried again a minute on.
	policyMu    sync.Mutex
	policyID    string
	policyTried time.Time
}

// IntakeWorkers is how many submissions of different applications the
// intake writes to Karmada at once: one at a time, a burst of 50
// submissions through the API waited 12 s (p50) for its MLSysOpsApp at a
// load of 20 on 2 cores, each write taking a round trip through Karmada's
// API server and Redis.
const IntakeWorkers = 8

// ConsumerGroup is the Redis consumer group of continuum agents.
const ConsumerGroup = "continuum"

// NewIntake joins the consumer group of the applications stream as
// consumer (one name per agent instance).
func NewIntake(ctx context.Context, store *state.Store, c client.Client, consumer string, log *slog.Logger) (*Intake, error) {
	return newIntake(ctx, store.Applications(), c, consumer, log)
}

// NewMLIntake joins the consumer group of the ML deployments stream: an
// ML deployment becomes an MLSysOpsApp named by its id, like an
// application.
func NewMLIntake(ctx context.Context, store *state.Store, c client.Client, consumer string, log *slog.Logger) (*Intake, error) {
	return newIntake(ctx, store.MLDeployments(), c, consumer, log.With("collection", "ml"))
}

func newIntake(ctx context.Context, coll *state.Collection, c client.Client, consumer string, log *slog.Logger) (*Intake, error) {
	q, err := coll.Queue(ctx, ConsumerGroup, consumer, state.QueueOptions{Workers: IntakeWorkers})
	if err != nil {
		return nil, err
	}
	return &Intake{queue: q, apps: coll, client: c, log: log}, nil
}

// Run consumes submissions until ctx ends.
func (in *Intake) Run(ctx context.Context) error { return in.queue.Run(ctx, in.Handle) }

// Handle applies one submission. A submission that cannot become an
// application (invalid spec) is recorded as Failed and acknowledged; only
// errors worth a retry (the Karmada API unreachable) are returned.
func (in *Intake) Handle(ctx context.Context, e state.Entry) error {
	sub := e.Submission
	log := in.log.With("app", sub.ID, "kind", sub.Kind, "entry", e.ID)
	st, stale, err := in.superseded(ctx, e)
	if err != nil {
		return err
	} else if stale {
		log.Info("submission superseded by a later one of the application; dropped")
		return nil
	}
	switch sub.Kind {
	case state.KindRemove:
		app := &mlsysopsv1.MLSysOpsApp{ObjectMeta: metav1.ObjectMeta{Name: sub.ID, Namespace: mlsysopsv1.Namespace}}
		if err := in.client.Delete(ctx, app); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete application %s: %w", sub.ID, err)
		} else if apierrors.IsNotFound(err) {
			// Nothing in Karmada: nothing will report the removal.
			return in.forget(ctx, sub.ID)
		}
		log.Info("application removal requested")
		return in.status(ctx, sub.ID, mlsysopsv1.AppRemoving, "removing from its clusters")
	case state.KindDeploy, state.KindUpdate:
		parsed, errs := description.ParseApp(sub.Spec, description.FormatJSON)
		if len(errs) > 0 {
			msg := "invalid application: " + errs.ToAggregate().Error()
			log.Warn("submission rejected", "reason", msg)
			return in.status(ctx, sub.ID, mlsysopsv1.AppFailed, msg)
		}
		app := &mlsysopsv1.MLSysOpsApp{ObjectMeta: metav1.ObjectMeta{Name: sub.ID, Namespace: mlsysopsv1.Namespace}}
		if sub.Kind == state.KindUpdate && st.Written {
			if gone, err := in.deletedMeanwhile(ctx, app); err != nil {
				return err
			} else if gone {
				// Deleted from Karmada (kubectl delete) after this update
				// was accepted, while it waited for this agent: the
				// deletion came last, so the update is not applied (it
				// would create the application again, chaos soak seed
				// 28001) and the status goes with the application.
				log.Info("application deleted from Karmada after the update was accepted; update dropped")
				_, err := in.apps.ForgetIf(ctx, sub.ID, e.ID)
				return err
			}
		}
		op, err := controllerutil.CreateOrUpdate(ctx, in.client, app, func() error {
			if app.CreationTimestamp.IsZero() {
				in.claim(ctx, app)
			}
			app.Spec = parsed.Spec
			app.Spec.Name = sub.ID
			if app.Labels == nil {
				app.Labels = map[string]string{}
			}
			for k, v := range parsed.Labels {
				app.Labels[k] = v
			}
			if app.Annotations == nil {
				app.Annotations = map[string]string{}
			}
			if sub.SubmittedBy != "" {
				app.Annotations[mlsysopsv1.AnnotationSubmittedBy] = sub.SubmittedBy
			}
			return nil
		})
		if err != nil {
			if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
				// Nothing a retry changes.
				return in.status(ctx, sub.ID, mlsysopsv1.AppFailed, "rejected by the Karmada API: "+err.Error())
			}
			return fmt.Errorf("write application %s: %w", sub.ID, err)
		}
		log.Info("application submitted to Karmada", "operation", op)
		if op == controllerutil.OperationResultCreated {
			return in.setStatus(ctx, sub.ID, state.StatusUpdate{
				Phase: mlsysopsv1.AppScheduling, Message: "handed to placement", Written: true,
			})
		}
		return nil
	default:
		log.Warn("submission of unknown kind dropped")
		return nil
	}
}

// claim gives a new application the metadata Karmada's resource detector
// writes on an application it binds to AppPropagationPolicy (the
// policy's permanent id label, its namespace and name annotations), so
// that the detector, finding it claimed already, binds it without writing
// it first: one write to Karmada less per application submitted through
// the API. When the policy cannot be read the application goes without
// (the detector claims it, as for one applied with kubectl); a policy made
// again under a new id is claimed over by the detector the same way.
func (in *Intake) claim(ctx context.Context, app *mlsysopsv1.MLSysOpsApp) {
	in.policyMu.Lock()
	defer in.policyMu.Unlock()
	if in.policyID == "" {
		if time.Since(in.policyTried) < time.Minute {
			return
		}
		in.policyTried = time.Now()
		var r client.Reader = in.client
		if in.Live != nil {
			// The agent may read that one policy, not list policies.
			r = in.Live
		}
		pp := &policyv1alpha1.PropagationPolicy{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: mlsysopsv1.Namespace, Name: AppPropagationPolicy}, pp); err != nil {
			in.log.Debug("applications' propagation policy not read; Karmada claims the application itself", "err", err)
			return
		}
		in.policyID = pp.Labels[policyv1alpha1.PropagationPolicyPermanentIDLabel]
		if in.policyID == "" {
			return
		}
	}
	if app.Labels == nil {
		app.Labels = map[string]string{}
	}
	if app.Annotations == nil {
		app.Annotations = map[string]string{}
	}
	app.Labels[policyv1alpha1.PropagationPolicyPermanentIDLabel] = in.policyID
	app.Annotations[policyv1alpha1.PropagationPolicyNamespaceAnnotation] = mlsysopsv1.Namespace
	app.Annotations[policyv1alpha1.PropagationPolicyNameAnnotation] = AppPropagationPolicy
}

// superseded reports whether a later submission of the same application
// was accepted after e: its status names another stream entry, or (for a
// deploy or update) the application was removed and forgotten since. Such
// an entry is one delivered again out of order (its consumer died, or its
// acknowledgement was lost, before a later submission was handled);
// applying it would undo what the user asked last, e.g. bring back a
// removed application.
// It returns the application's status too.
func (in *Intake) superseded(ctx context.Context, e state.Entry) (state.Status, bool, error) {
	st, err := in.apps.Status(ctx, e.Submission.ID)
	if errors.Is(err, state.ErrNotFound) {
		return st, e.Submission.Kind != state.KindRemove, nil
	}
	if err != nil {
		return st, false, fmt.Errorf("status of %s: %w", e.Submission.ID, err)
	}
	return st, st.StreamID != "" && st.StreamID != e.ID, nil
}

// deletedMeanwhile reports whether Karmada has no application app.
func (in *Intake) deletedMeanwhile(ctx context.Context, app *mlsysopsv1.MLSysOpsApp) (bool, error) {
	var r client.Reader = in.client
	if in.Live != nil {
		// A cache can lag behind the write of this application's deploy
		// just before.
		r = in.Live
	}
	err := r.Get(ctx, client.ObjectKeyFromObject(app), &mlsysopsv1.MLSysOpsApp{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("read application %s: %w", app.Name, err)
	}
	return false, nil
}

func (in *Intake) status(ctx context.Context, id string, phase mlsysopsv1.AppPhase, msg string) error {
	return in.setStatus(ctx, id, state.StatusUpdate{Phase: phase, Message: msg})
}

func (in *Intake) setStatus(ctx context.Context, id string, u state.StatusUpdate) error {
	_, err := in.apps.SetStatus(ctx, id, u)
	if errors.Is(err, state.ErrNotFound) {
		// Submitted straight to Karmada or already forgotten: nothing to update.
		return nil
	}
	return err
}

func (in *Intake) forget(ctx context.Context, id string) error { return in.apps.Forget(ctx, id) }

// RedisStatus mirrors application status from Karmada into Redis, where the
// northbound API lists and reads it, and forgets an application once it is
// gone. An MLSysOpsApp that Redis does not know (applied directly to
// Karmada, e.g. with kubectl) is tracked from its first status on, so that
// it is listed, and can be removed, like a submitted one.
type RedisStatus struct {
	// Apps are the applications.
	Apps *state.Collection
	// ML are the ML deployments, which become MLSysOpsApps too: an
	// application known there is mirrored there; nil when there are none.
	ML *state.Collection
}

// Update writes an application's phase, message and placement; an
// application without a phase yet is left for its first status.
func (s RedisStatus) Update(ctx context.Context, app *mlsysopsv1.MLSysOpsApp) error {
	if app.Status.Phase == "" {
		return nil
	}
	placement := map[string]string{}
	for _, c := range app.Status.Components {
		where := c.Cluster
		if len(c.Nodes) > 0 {
			where += "/" + strings.Join(c.Nodes, ",")
		}
		placement[c.Name] = where
	}
	u := state.StatusUpdate{Phase: app.Status.Phase, Message: app.Status.Message, Placement: placement, Written: true}
	if s.ML != nil {
		_, err := s.ML.SetStatus(ctx, app.Name, u)
		if !errors.Is(err, state.ErrNotFound) {
			return err
		}
	}
	if app.DeletionTimestamp.IsZero() {
		// Not while it is being deleted: tracking it then would outlive it.
		u.TrackSince = app.CreationTimestamp.Time
	}
	_, err := s.Apps.SetStatus(ctx, app.Name, u)
	if errors.Is(err, state.ErrNotFound) {
		return nil
	}
	return err
}

var _ StatusSweeper = RedisStatus{}

// sweptPhases are the phases whose status says the application's
// MLSysOpsApp was written to Karmada. Queued (accepted, not written yet,
// unless the intake handled its entry: see Sweep) and Failed (also what
// the intake records for a submission it could not write) are not: the
// intake or a removal through the API ends those.
var sweptPhases = []mlsysopsv1.AppPhase{
	mlsysopsv1.AppScheduling, mlsysopsv1.AppDeploying, mlsysopsv1.AppRunning, mlsysopsv1.AppDegraded,
	mlsysopsv1.AppUnschedulable, mlsysopsv1.AppRemoving,
}

// Sweep forgets the statuses, in a phase that says their application was
// in Karmada, of applications exists does not list, unless a submission of
// theirs was accepted meanwhile. Queued statuses count too once the intake
// has handled their submission (its entry left the stream): an update
// written to Karmada leaves the status Queued until the placement
// controller mirrors the next one, and an application deleted from Karmada
// before that (with kubectl, while this agent was down and the Karmada API
// failing) was listed Queued for good (chaos soak, seed 16001). The
// statuses, then the stream, are read before exists is called, so an
// application written to Karmada in between is listed.
func (s RedisStatus) Sweep(ctx context.Context, exists func(context.Context) (map[string]bool, error)) ([]string, error) {
	colls := []*state.Collection{s.Apps}
	if s.ML != nil {
		colls = append(colls, s.ML)
	}
	read := make([][]state.Status, len(colls))
	for i, coll := range colls {
		if err := pages(ctx, coll, sweptPhases, func(st state.Status) { read[i] = append(read[i], st) }); err != nil {
			return nil, err
		}
		var queued []state.Status
		var entries []string
		err := pages(ctx, coll, []mlsysopsv1.AppPhase{mlsysopsv1.AppQueued}, func(st state.Status) {
			if st.StreamID != "" {
				queued, entries = append(queued, st), append(entries, st.StreamID)
			}
		})
		if err != nil {
			return nil, err
		}
		in, err := coll.InStream(ctx, entries)
		if err != nil {
			return nil, err
		}
		for _, st := range queued {
			if !in[st.StreamID] {
				read[i] = append(read[i], st)
			}
		}
	}
	live, err := exists(ctx)
	if err != nil {
		return nil, err
	}
	var gone []string
	for i, coll := range colls {
		for _, st := range read[i] {
			if live[st.ID] {
				continue
			}
			forgot, err := coll.ForgetIf(ctx, st.ID, st.StreamID)
			if err != nil {
				return gone, err
			}
			if forgot {
				gone = append(gone, st.ID)
			}
		}
	}
	return gone, nil
}

// pages calls fn with every status in one of phases.
func pages(ctx context.Context, coll *state.Collection, phases []mlsysopsv1.AppPhase, fn func(state.Status)) error {
	for after := ""; ; {
		page, err := coll.Page(ctx, state.ListOptions{Phases: phases, After: after, Limit: 500})
		if err != nil {
			return err
		}
		for _, st := range page.Items {
			fn(st)
		}
		if after = page.Next; after == "" {
			return nil
		}
	}
}

// Removed forgets an application that is gone from Karmada.
func (s RedisStatus) Removed(ctx context.Context, name string) error {
	if s.ML != nil {
		if err := s.ML.Forget(ctx, name); err != nil {
			return err
		}
	}
	return s.Apps.Forget(ctx, name)
}
