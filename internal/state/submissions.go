package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Kind is what a submission asks for.
type Kind string

// Submission kinds.
const (
	KindDeploy Kind = "deploy"
	KindUpdate Kind = "update"
	KindRemove Kind = "remove"
)

// Phase is the lifecycle phase of an application or ML deployment.
type Phase string

// Phases. Submit sets Queued (deploy, update) or Removing (remove); the
// continuum and cluster agents move it on with SetStatus.
const (
	PhaseQueued    Phase = "Queued"
	PhaseScheduled Phase = "Scheduled"
	PhaseDeploying Phase = "Deploying"
	PhaseRunning   Phase = "Running"
	PhaseFailed    Phase = "Failed"
	PhaseRemoving  Phase = "Removing"
	PhaseRemoved   Phase = "Removed"
)

// Submission is one request from a user, as queued for the continuum agent.
type Submission struct {
	// ID is the application name or model id.
	ID   string `json:"id"`
	Kind Kind   `json:"kind"`
	// Spec is the description (JSON) for deploy and update; empty for
	// remove.
	Spec json.RawMessage `json:"spec,omitempty"`
	// RequestID makes a retried submission idempotent: submitting again
	// with the same request id returns the first receipt.
	RequestID   string    `json:"request_id,omitempty"`
	SubmittedBy string    `json:"submitted_by,omitempty"`
	SubmittedAt time.Time `json:"submitted_at"`
}

// Receipt confirms a submission.
type Receipt struct {
	// StreamID is the submission's stream entry.
	StreamID string
	// Generation counts the accepted submissions of this id.
	Generation int64
	// Phase is the phase the submission set.
	Phase Phase
	// Existing is true when the request id had been submitted before and
	// nothing new was queued.
	Existing bool
}

// Status is the state of one application or ML deployment.
type Status struct {
	ID      string
	Phase   Phase
	Message string
	// Placement maps a component (or the model) to where it runs, e.g. a
	// cluster name or "cluster/node".
	Placement   map[string]string
	SubmittedAt time.Time
	UpdatedAt   time.Time
	// RequestID, StreamID, Generation and Kind describe the latest accepted
	// submission.
	RequestID  string
	StreamID   string
	Generation int64
	Kind       Kind
}

// StatusUpdate changes a status.
type StatusUpdate struct {
	Phase   Phase
	Message string
	// Placement replaces the placement when not nil.
	Placement map[string]string
	// Generation, when not zero, makes the update apply only while it is
	// still the current generation (ErrStale otherwise), so work on a
	// superseded submission cannot overwrite the status of a newer one.
	Generation int64
}

// Collection is a kind of submission (applications or ML deployments): its
// stream, statuses, specs and index.
type Collection struct {
	s    *Store
	k    collectionKeys
	name string
}

// submitScript queues a submission and sets its status in one step, and
// refuses it when it contradicts the current phase.
//
// KEYS: status, stream, spec, index. ARGV: kind, request id, submission
// JSON, now, spec JSON ("" keeps the stored one), id.
var submitScript = redis.NewScript(`
local phase = redis.call('HGET', KEYS[1], 'phase')
local kind, reqid = ARGV[1], ARGV[2]
if reqid ~= '' and phase and redis.call('HGET', KEYS[1], 'request_id') == reqid then
  return {'existing', redis.call('HGET', KEYS[1], 'stream_id'), redis.call('HGET', KEYS[1], 'generation'), phase}
end
if kind == 'deploy' then
  if phase and phase ~= 'Removed' then return {'conflict', '', '0', phase} end
else
  if not phase then return {'notfound', '', '0', ''} end
  if phase == 'Removing' or phase == 'Removed' then return {'conflict', '', '0', phase} end
end
local sid = redis.call('XADD', KEYS[2], '*', 'submission', ARGV[3])
local newphase = 'Queued'
if kind == 'remove' then newphase = 'Removing' end
local gen = redis.call('HINCRBY', KEYS[1], 'generation', 1)
redis.call('HSET', KEYS[1], 'phase', newphase, 'message', '', 'updated_at', ARGV[4],
  'request_id', reqid, 'stream_id', sid, 'kind', kind)
if kind == 'deploy' then
  redis.call('HSET', KEYS[1], 'submitted_at', ARGV[4])
  redis.call('HDEL', KEYS[1], 'placement')
end
if ARGV[5] ~= '' then redis.call('SET', KEYS[3], ARGV[5]) end
redis.call('SADD', KEYS[4], ARGV[6])
return {'ok', sid, tostring(gen), newphase}
`)

// Submit queues a submission and sets its status atomically. Deploying an
// id that exists (and is not Removed), or updating or removing one that is
// being removed, gives a *ConflictError; updating or removing an unknown id
// gives ErrNotFound. Two concurrent deploys of one id: exactly one wins.
func (c *Collection) Submit(ctx context.Context, sub Submission) (Receipt, error) {
	if err := checkID(c.name, sub.ID); err != nil {
		return Receipt{}, err
	}
	switch sub.Kind {
	case KindDeploy, KindUpdate:
		if len(sub.Spec) == 0 || !json.Valid(sub.Spec) {
			return Receipt{}, fmt.Errorf("%s %s: %s needs a JSON spec", c.name, sub.ID, sub.Kind)
		}
	case KindRemove:
	default:
		return Receipt{}, fmt.Errorf("%s %s: unknown kind %q", c.name, sub.ID, sub.Kind)
	}
	if sub.SubmittedAt.IsZero() {
		sub.SubmittedAt = c.s.now()
	}
	payload, err := json.Marshal(sub)
	if err != nil {
		return Receipt{}, fmt.Errorf("encode submission %s: %w", sub.ID, err)
	}
	spec := ""
	if sub.Kind != KindRemove {
		spec = string(sub.Spec)
	}
	res, err := submitScript.Run(ctx, c.s.rdb,
		[]string{c.k.status(sub.ID), c.k.stream(), c.k.spec(sub.ID), c.k.index()},
		string(sub.Kind), sub.RequestID, string(payload), formatTime(c.s.now()), spec, sub.ID).StringSlice()
	if err != nil {
		return Receipt{}, fmt.Errorf("submit %s %s %s: %w", sub.Kind, c.name, sub.ID, err)
	}
	if len(res) != 4 {
		return Receipt{}, fmt.Errorf("submit %s: unexpected script reply %q", sub.ID, res)
	}
	gen, _ := strconv.ParseInt(res[2], 10, 64)
	switch res[0] {
	case "ok":
		return Receipt{StreamID: res[1], Generation: gen, Phase: Phase(res[3])}, nil
	case "existing":
		return Receipt{StreamID: res[1], Generation: gen, Phase: Phase(res[3]), Existing: true}, nil
	case "notfound":
		return Receipt{}, fmt.Errorf("%s %s %s: %w", sub.Kind, c.name, sub.ID, ErrNotFound)
	case "conflict":
		return Receipt{}, &ConflictError{ID: sub.ID, Kind: sub.Kind, Phase: Phase(res[3])}
	}
	return Receipt{}, fmt.Errorf("submit %s: unexpected script reply %q", sub.ID, res)
}

// setStatusScript updates a status if it exists (and, when asked, only
// while its generation is the expected one) and returns the whole hash.
//
// KEYS: status. ARGV: phase, message, placement JSON ("" keeps it), now,
// expected generation ("" for any).
var setStatusScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return {'notfound'} end
if ARGV[5] ~= '' and redis.call('HGET', KEYS[1], 'generation') ~= ARGV[5] then return {'stale'} end
redis.call('HSET', KEYS[1], 'phase', ARGV[1], 'message', ARGV[2], 'updated_at', ARGV[4])
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'placement', ARGV[3]) end
local all = redis.call('HGETALL', KEYS[1])
table.insert(all, 1, 'ok')
return all
`)

// SetStatus updates the status of id and returns it.
func (c *Collection) SetStatus(ctx context.Context, id string, u StatusUpdate) (Status, error) {
	if err := checkID(c.name, id); err != nil {
		return Status{}, err
	}
	if u.Phase == "" {
		return Status{}, fmt.Errorf("status of %s %s: phase is required", c.name, id)
	}
	placement := ""
	if u.Placement != nil {
		b, err := json.Marshal(u.Placement)
		if err != nil {
			return Status{}, fmt.Errorf("encode placement of %s: %w", id, err)
		}
		placement = string(b)
	}
	gen := ""
	if u.Generation != 0 {
		gen = strconv.FormatInt(u.Generation, 10)
	}
	res, err := setStatusScript.Run(ctx, c.s.rdb, []string{c.k.status(id)},
		string(u.Phase), u.Message, placement, formatTime(c.s.now()), gen).StringSlice()
	if err != nil {
		return Status{}, fmt.Errorf("set status of %s %s: %w", c.name, id, err)
	}
	switch {
	case len(res) == 0:
	case res[0] == "notfound":
		return Status{}, fmt.Errorf("set status of %s %s: %w", c.name, id, ErrNotFound)
	case res[0] == "stale":
		return Status{}, fmt.Errorf("set status of %s %s at generation %d: %w", c.name, id, u.Generation, ErrStale)
	case res[0] == "ok" && len(res)%2 == 1:
		m := make(map[string]string, len(res)/2)
		for i := 1; i+1 < len(res); i += 2 {
			m[res[i]] = res[i+1]
		}
		return parseStatus(id, m), nil
	}
	return Status{}, fmt.Errorf("set status of %s: unexpected script reply", id)
}

func parseStatus(id string, m map[string]string) Status {
	st := Status{
		ID: id, Phase: Phase(m[fieldPhase]), Message: m[fieldMessage],
		SubmittedAt: parseTime(m[fieldSubmittedAt]), UpdatedAt: parseTime(m[fieldUpdatedAt]),
		RequestID: m[fieldRequestID], StreamID: m[fieldStreamID], Kind: Kind(m[fieldKind]),
	}
	st.Generation, _ = strconv.ParseInt(m[fieldGeneration], 10, 64)
	if p := m[fieldPlacement]; p != "" {
		_ = json.Unmarshal([]byte(p), &st.Placement)
	}
	return st
}

// Status returns the status of id.
func (c *Collection) Status(ctx context.Context, id string) (Status, error) {
	if err := checkID(c.name, id); err != nil {
		return Status{}, err
	}
	m, err := c.s.rdb.HGetAll(ctx, c.k.status(id)).Result()
	if err != nil {
		return Status{}, fmt.Errorf("status of %s %s: %w", c.name, id, err)
	}
	if len(m) == 0 {
		return Status{}, fmt.Errorf("status of %s %s: %w", c.name, id, ErrNotFound)
	}
	return parseStatus(id, m), nil
}

// Spec returns the latest submitted description of id.
func (c *Collection) Spec(ctx context.Context, id string) (json.RawMessage, error) {
	if err := checkID(c.name, id); err != nil {
		return nil, err
	}
	b, err := c.s.rdb.Get(ctx, c.k.spec(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("spec of %s %s: %w", c.name, id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("spec of %s %s: %w", c.name, id, err)
	}
	return b, nil
}

// List returns every status, sorted by id.
func (c *Collection) List(ctx context.Context) ([]Status, error) {
	ids, err := c.s.rdb.SMembers(ctx, c.k.index()).Result()
	if err != nil {
		return nil, fmt.Errorf("list %ss: %w", c.name, err)
	}
	sort.Strings(ids)
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	_, err = c.s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGetAll(ctx, c.k.status(id))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %ss: %w", c.name, err)
	}
	out := make([]Status, 0, len(ids))
	for i, id := range ids {
		if m := cmds[i].Val(); len(m) > 0 {
			out = append(out, parseStatus(id, m))
		}
	}
	return out, nil
}

// Backlog returns the number of entries in the submissions stream: queued
// or delivered and not yet acknowledged.
func (c *Collection) Backlog(ctx context.Context) (int64, error) {
	n, err := c.s.rdb.XLen(ctx, c.k.stream()).Result()
	if err != nil {
		return 0, fmt.Errorf("backlog of %ss: %w", c.name, err)
	}
	return n, nil
}

// Forget deletes the status, spec and index entry of id, once it is
// removed and nobody needs its history.
func (c *Collection) Forget(ctx context.Context, id string) error {
	if err := checkID(c.name, id); err != nil {
		return err
	}
	_, err := c.s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, c.k.status(id), c.k.spec(id))
		p.SRem(ctx, c.k.index(), id)
		return nil
	})
	if err != nil {
		return fmt.Errorf("forget %s %s: %w", c.name, id, err)
	}
	return nil
}
