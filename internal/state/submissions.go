package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

// Kind is what a submission asks for.
type Kind string

// Submission kinds.
const (
	KindDeploy Kind = "deploy"
	KindUpdate Kind = "update"
	KindRemove Kind = "remove"
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
	// Phase is the phase the submission set: Queued or Removing.
	Phase mlsysopsv1.AppPhase
	// Existing is true when the request id had been submitted before and
	// nothing new was queued.
	Existing bool
}

// Status is the state of one application or ML deployment.
type Status struct {
	ID      string
	Phase   mlsysopsv1.AppPhase
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
	// Written is true once the application has been in Karmada (the
	// intake wrote it, or a status was mirrored or tracked from there).
	// An update of a written application that Karmada no longer has was
	// overtaken by its deletion there (kubectl delete while the update
	// waited): applying it would bring the deleted application back.
	Written bool
}

// StatusUpdate changes a status.
type StatusUpdate struct {
	// Phase is one of mlsysopsv1.AppPhases. Once a removal is requested
	// the phase stays Removing whatever an update says, so a late report
	// cannot make an application that is going away look alive again.
	Phase   mlsysopsv1.AppPhase
	Message string
	// Placement replaces the placement when not nil.
	Placement map[string]string
	// Generation, when not zero, makes the update apply only while it is
	// still the current generation (ErrStale otherwise), so work on a
	// superseded submission cannot overwrite the status of a newer one.
	Generation int64
	// TrackSince, when not zero, creates the status of an id that has
	// none instead of failing with ErrNotFound: the id was deployed at
	// that time without a submission (an MLSysOpsApp applied directly to
	// Karmada), and from now on it is listed and can be removed like a
	// submitted one. It implies Written.
	TrackSince time.Time
	// Written records that the application is in Karmada (see
	// Status.Written); it is never cleared, only forgotten with the status.
	Written bool
}

// Collection is a kind of submission (applications or ML deployments): its
// stream, statuses, specs and index.
type Collection struct {
	s    *Store
	k    collectionKeys
	name string
}

// luaReindex is shared by the scripts that change a phase: it files id
// under its new phase in the indexes (old is the phase before, or false
// for a new id).
const luaReindex = `
local function reindex(ids, phases, id, old, new)
  redis.call('ZADD', ids, 0, id)
  if old and old ~= new then redis.call('ZREM', phases, old .. ':' .. id) end
  redis.call('ZADD', phases, 0, new .. ':' .. id)
end
`

// submitScript queues a submission and sets its status in one step, and
// refuses it when it contradicts the current phase.
//
// KEYS: status, stream, spec, ids, phases. ARGV: kind, request id,
// submission JSON, now, spec JSON ("" keeps the stored one), id, the
// Queued phase, the Removing phase.
var submitScript = redis.NewScript(luaReindex + `
local phase = redis.call('HGET', KEYS[1], 'phase')
local kind, reqid = ARGV[1], ARGV[2]
local queued, removing = ARGV[7], ARGV[8]
if reqid ~= '' and phase and redis.call('HGET', KEYS[1], 'request_id') == reqid then
  return {'existing', redis.call('HGET', KEYS[1], 'stream_id'), redis.call('HGET', KEYS[1], 'generation'), phase}
end
if kind == 'deploy' then
  if phase then return {'conflict', '', '0', phase} end
else
  if not phase then return {'notfound', '', '0', ''} end
  if phase == removing then return {'conflict', '', '0', phase} end
end
local sid = redis.call('XADD', KEYS[2], '*', 'submission', ARGV[3])
local newphase = queued
if kind == 'remove' then newphase = removing end
local gen = redis.call('HINCRBY', KEYS[1], 'generation', 1)
redis.call('HSET', KEYS[1], 'phase', newphase, 'message', '', 'updated_at', ARGV[4],
  'request_id', reqid, 'stream_id', sid, 'kind', kind)
if kind == 'deploy' then
  redis.call('HSET', KEYS[1], 'submitted_at', ARGV[4])
  redis.call('HDEL', KEYS[1], 'placement')
end
if ARGV[5] ~= '' then redis.call('SET', KEYS[3], ARGV[5]) end
reindex(KEYS[4], KEYS[5], ARGV[6], phase, newphase)
return {'ok', sid, tostring(gen), newphase}
`)

// Submit queues a submission and sets its status atomically. Deploying an
// id that exists, or updating or removing one that is being removed, gives
// a *ConflictError; updating or removing an unknown id
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
	// An existing request id is a retry, maybe of a submission whose
	// replication was not confirmed: it is waited for again.
	raw, err := c.s.runReplicated(ctx, submitScript,
		[]string{c.k.status(sub.ID), c.k.stream(), c.k.spec(sub.ID), c.k.ids(), c.k.phases()},
		func(r any) bool { l, _ := r.([]any); return len(l) > 0 && (l[0] == "ok" || l[0] == "existing") },
		string(sub.Kind), sub.RequestID, string(payload), formatTime(c.s.now()), spec, sub.ID,
		string(mlsysopsv1.AppQueued), string(mlsysopsv1.AppRemoving))
	var res []string
	if err == nil {
		res, err = redis.NewCmdResult(raw, nil).StringSlice()
	}
	if err != nil {
		return Receipt{}, fmt.Errorf("submit %s %s %s: %w", sub.Kind, c.name, sub.ID, err)
	}
	if len(res) != 4 {
		return Receipt{}, fmt.Errorf("submit %s: unexpected script reply %q", sub.ID, res)
	}
	gen, _ := strconv.ParseInt(res[2], 10, 64)
	switch res[0] {
	case "ok":
		return Receipt{StreamID: res[1], Generation: gen, Phase: mlsysopsv1.AppPhase(res[3])}, nil
	case "existing":
		return Receipt{StreamID: res[1], Generation: gen, Phase: mlsysopsv1.AppPhase(res[3]), Existing: true}, nil
	case "notfound":
		return Receipt{}, fmt.Errorf("%s %s %s: %w", sub.Kind, c.name, sub.ID, ErrNotFound)
	case "conflict":
		return Receipt{}, &ConflictError{ID: sub.ID, Kind: sub.Kind, Phase: mlsysopsv1.AppPhase(res[3])}
	}
	return Receipt{}, fmt.Errorf("submit %s: unexpected script reply %q", sub.ID, res)
}

// setStatusScript updates a status if it exists (and, when asked, only
// while its generation is the expected one), or creates it when asked to
// track the id, and returns the whole hash. An update that changes
// nothing writes nothing, so mirroring the same status again is cheap and
// keeps updated_at.
//
// KEYS: status, ids, phases. ARGV: phase, message, placement JSON (""
// keeps it), now, expected generation ("" for any), id, the Removing
// phase, tracked since ("" to fail on an unknown id), "1" to mark it
// written (in Karmada).
var setStatusScript = redis.NewScript(luaReindex + `
local function reply()
  local all = redis.call('HGETALL', KEYS[1])
  table.insert(all, 1, 'ok')
  return all
end
local phase, msg, placement = ARGV[1], ARGV[2], ARGV[3]
if redis.call('EXISTS', KEYS[1]) == 0 then
  if ARGV[8] == '' then return {'notfound'} end
  redis.call('HSET', KEYS[1], 'phase', phase, 'message', msg, 'updated_at', ARGV[4],
    'submitted_at', ARGV[8], 'kind', 'deploy', 'generation', 0, 'request_id', '', 'stream_id', '', 'written', '1')
  if placement ~= '' then redis.call('HSET', KEYS[1], 'placement', placement) end
  reindex(KEYS[2], KEYS[3], ARGV[6], false, phase)
  return reply()
end
if ARGV[5] ~= '' and redis.call('HGET', KEYS[1], 'generation') ~= ARGV[5] then return {'stale'} end
if ARGV[9] == '1' and redis.call('HGET', KEYS[1], 'written') ~= '1' then
  redis.call('HSET', KEYS[1], 'written', '1')
end
local old = redis.call('HGET', KEYS[1], 'phase')
if old == ARGV[7] and redis.call('HGET', KEYS[1], 'kind') == 'remove' then
  phase, msg = old, redis.call('HGET', KEYS[1], 'message')
end
if phase == old and msg == redis.call('HGET', KEYS[1], 'message') and
   (placement == '' or placement == redis.call('HGET', KEYS[1], 'placement')) then
  return reply()
end
redis.call('HSET', KEYS[1], 'phase', phase, 'message', msg, 'updated_at', ARGV[4])
if placement ~= '' then redis.call('HSET', KEYS[1], 'placement', placement) end
reindex(KEYS[2], KEYS[3], ARGV[6], old, phase)
return reply()
`)

// SetStatus updates the status of id and returns it. Without
// u.TrackSince an unknown id is ErrNotFound.
func (c *Collection) SetStatus(ctx context.Context, id string, u StatusUpdate) (Status, error) {
	if err := checkID(c.name, id); err != nil {
		return Status{}, err
	}
	if !u.Phase.Valid() {
		return Status{}, fmt.Errorf("status of %s %s: phase %q is not one of %v", c.name, id, u.Phase, mlsysopsv1.AppPhases)
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
	since := ""
	if !u.TrackSince.IsZero() {
		since = formatTime(u.TrackSince)
	}
	written := ""
	if u.Written {
		written = "1"
	}
	res, err := setStatusScript.Run(ctx, c.s.rdb, []string{c.k.status(id), c.k.ids(), c.k.phases()},
		string(u.Phase), u.Message, placement, formatTime(c.s.now()), gen, id, string(mlsysopsv1.AppRemoving), since, written).StringSlice()
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
		ID: id, Phase: mlsysopsv1.AppPhase(m[fieldPhase]), Message: m[fieldMessage],
		SubmittedAt: parseTime(m[fieldSubmittedAt]), UpdatedAt: parseTime(m[fieldUpdatedAt]),
		RequestID: m[fieldRequestID], StreamID: m[fieldStreamID], Kind: Kind(m[fieldKind]),
		Written: m[fieldWritten] == "1",
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

// DefaultPageSize is the page size of Page when none is asked for.
const DefaultPageSize = 100

// ListOptions select a page of statuses.
type ListOptions struct {
	// Phases keeps the ids in one of these phases; empty keeps every id.
	Phases []mlsysopsv1.AppPhase
	// After starts the page after this id (the Next of the page before);
	// empty starts at the first id.
	After string
	// Limit is the most statuses on the page; DefaultPageSize when not
	// positive.
	Limit int
}

// Page is one page of statuses, sorted by id.
type Page struct {
	Items []Status
	// Total counts the ids in the phases asked for, on every page.
	Total int64
	// Next, when not empty, is the After of the next page.
	Next string
}

// Page returns the statuses of the ids after o.After, in id order, from
// the sorted-set indexes: its cost grows with the page, not with the
// collection (a lexical range of the ids index, or of the phases index
// for each phase asked for, then one HGETALL per item, in two round
// trips). An id forgotten between the two is left out.
func (c *Collection) Page(ctx context.Context, o ListOptions) (Page, error) {
	if o.Limit <= 0 {
		o.Limit = DefaultPageSize
	}
	var ranges []*redis.StringSliceCmd
	var counts []*redis.IntCmd
	_, err := c.s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		if len(o.Phases) == 0 {
			start := "-"
			if o.After != "" {
				start = "(" + o.After
			}
			ranges = append(ranges, p.ZRangeByLex(ctx, c.k.ids(), &redis.ZRangeBy{Min: start, Max: "+", Count: int64(o.Limit) + 1}))
			counts = append(counts, p.ZCard(ctx, c.k.ids()))
			return nil
		}
		for _, ph := range o.Phases {
			first, end := "["+phaseMember(ph, ""), "("+string(ph)+phaseBound
			start := first
			if o.After != "" {
				start = "(" + phaseMember(ph, o.After)
			}
			ranges = append(ranges, p.ZRangeByLex(ctx, c.k.phases(), &redis.ZRangeBy{Min: start, Max: end, Count: int64(o.Limit) + 1}))
			counts = append(counts, p.ZLexCount(ctx, c.k.phases(), first, end))
		}
		return nil
	})
	if err != nil {
		return Page{}, fmt.Errorf("list %ss: %w", c.name, err)
	}
	var page Page
	var ids []string
	for i := range ranges {
		page.Total += counts[i].Val()
		for _, m := range ranges[i].Val() {
			if len(o.Phases) == 0 {
				ids = append(ids, m)
			} else if _, id, ok := splitPhaseMember(m); ok {
				ids = append(ids, id)
			}
		}
	}
	if len(ranges) > 1 {
		// An id is in one phase only: merging the ranges is sorting them.
		sort.Strings(ids)
	}
	if len(ids) > o.Limit {
		ids = ids[:o.Limit]
		page.Next = ids[o.Limit-1]
	}
	page.Items, err = c.statuses(ctx, ids)
	return page, err
}

// statuses reads the status of each id in one round trip, leaving out
// those that have none.
func (c *Collection) statuses(ctx context.Context, ids []string) ([]Status, error) {
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	_, err := c.s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
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

// Phases returns the phase of every id, from the phases index alone (one
// command, however many ids): what a list of every id with its phase
// needs.
func (c *Collection) Phases(ctx context.Context) (map[string]mlsysopsv1.AppPhase, error) {
	members, err := c.s.rdb.ZRange(ctx, c.k.phases(), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("list %s phases: %w", c.name, err)
	}
	out := make(map[string]mlsysopsv1.AppPhase, len(members))
	for _, m := range members {
		if phase, id, ok := splitPhaseMember(m); ok {
			out[id] = phase
		}
	}
	return out, nil
}

// phaseBound follows the separator of phase members: "<phase>:<id>" sorts
// below "<phase>" + phaseBound for every id.
const phaseBound = ";"

// phaseMember is the member of the phases index for id in phase.
func phaseMember(phase mlsysopsv1.AppPhase, id string) string { return string(phase) + ":" + id }

// splitPhaseMember splits a member of the phases index; phase names have
// no colon, ids may.
func splitPhaseMember(m string) (mlsysopsv1.AppPhase, string, bool) {
	phase, id, ok := strings.Cut(m, ":")
	return mlsysopsv1.AppPhase(phase), id, ok && id != ""
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

// forgetScript deletes a status, its spec and its index entries; when
// asked, only while its latest submission is still the one expected.
//
// KEYS: status, spec, ids, phases. ARGV: id, "1" to check the
// submission, the expected stream id.
var forgetScript = redis.NewScript(`
if ARGV[2] == '1' and redis.call('HGET', KEYS[1], 'stream_id') ~= ARGV[3] then return 0 end
local phase = redis.call('HGET', KEYS[1], 'phase')
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('ZREM', KEYS[3], ARGV[1])
if phase then redis.call('ZREM', KEYS[4], phase .. ':' .. ARGV[1]) end
return 1
`)

// Forget deletes the status, spec and index entries of id, once it is
// removed and nobody needs its history.
func (c *Collection) Forget(ctx context.Context, id string) error {
	_, err := c.forget(ctx, id, false, "")
	return err
}

// ForgetIf is Forget unless a submission of id was accepted since its
// status was read with stream id streamID (or id is gone already): it
// reports whether it forgot id.
func (c *Collection) ForgetIf(ctx context.Context, id, streamID string) (bool, error) {
	return c.forget(ctx, id, true, streamID)
}

func (c *Collection) forget(ctx context.Context, id string, check bool, streamID string) (bool, error) {
	if err := checkID(c.name, id); err != nil {
		return false, err
	}
	checkArg := "0"
	if check {
		checkArg = "1"
	}
	raw, err := c.s.runReplicated(ctx, forgetScript, []string{c.k.status(id), c.k.spec(id), c.k.ids(), c.k.phases()},
		func(r any) bool { n, _ := r.(int64); return n == 1 }, id, checkArg, streamID)
	n, _ := raw.(int64)
	if err != nil {
		return false, fmt.Errorf("forget %s %s: %w", c.name, id, err)
	}
	return n == 1, nil
}
