package handlers

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/go-chi/chi/v5"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/internal/httpapi"
	"github.com/mlsysops-go/mlsysops/internal/resources"
	"github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/northbound/api"
	"github.com/mlsysops-go/mlsysops/northbound/infra"
)

// collection is applications or ML deployments: the same verbs on two
// Redis collections. Both become MLSysOpsApp resources in Karmada, named by
// the application name or the deployment id, so the two share one name
// space.
type collection struct {
	// what names an item in messages: "application", "ML deployment".
	what string
	base string
	// parse reads a submitted body into the id and the application.
	parse func(data []byte, format description.Format) (string, *mlsysopsv1.MLSysOpsApp, error)
	coll  func(s *state.Store) *state.Collection
	other func(s *state.Store) *state.Collection
}

var (
	appsCollection = collection{
		what: "application", base: api.PathApplications, parse: parseApplication,
		coll: (*state.Store).Applications, other: (*state.Store).MLDeployments,
	}
	mlCollection = collection{
		what: "ML deployment", base: api.PathMLDeployments, parse: parseMLDeployment,
		coll: (*state.Store).MLDeployments, other: (*state.Store).Applications,
	}
)

// validID reports whether id can name an application: a DNS-1123 label,
// since it becomes metadata.name and the mlsysops.eu/app label value.
func validID(id string) bool { return len(validation.IsDNS1123Label(id)) == 0 }

// parseApplication validates an application description with the shared
// validator: 400 when the body is not a document at all, 422 listing
// every problem otherwise.
func parseApplication(data []byte, format description.Format) (string, *mlsysopsv1.MLSysOpsApp, error) {
	app, errs := description.ParseApp(data, format)
	if len(errs) > 0 {
		return "", nil, descriptionError("application description", errs)
	}
	return app.Name, app, nil
}

// descriptionError is 400 for a body that is not JSON or YAML, else 422.
func descriptionError(what string, errs field.ErrorList) error {
	problems := problemsFrom(errs)
	syntax := true
	for _, e := range errs {
		if e.Field != "" || !(strings.HasPrefix(e.Detail, "is not valid") || e.Detail == "is empty") {
			syntax = false
		}
	}
	if syntax {
		return &Error{Status: http.StatusBadRequest, Type: api.ProblemInvalid,
			Detail: "the body is not a " + what + ": it " + errs[0].Detail, Problems: problems}
	}
	if len(problems) == 1 {
		if p := problems[0]; p.Field == "" {
			return invalid("the "+what+" "+p.Message, problems)
		}
		return invalid(fmt.Sprintf("the %s has 1 problem: %s: %s", what, problems[0].Field, problems[0].Message), problems)
	}
	return invalid(fmt.Sprintf("the %s has %d problems; each is listed with its field path", what, len(problems)), problems)
}

// submit queues a deploy.
func (c collection) submit(a *API, w http.ResponseWriter, r *http.Request) error {
	data, format, err := a.readBody(r, bodyDescription, a.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	id, app, err := c.parse(data, format)
	if err != nil {
		return err
	}
	acc, err := c.queue(a, r, state.KindDeploy, id, app)
	if err != nil {
		return err
	}
	w.Header().Set("Location", acc.Href)
	writeJSON(w, http.StatusAccepted, acc)
	return nil
}

// update queues a new description of an existing item.
func (c collection) update(a *API, w http.ResponseWriter, r *http.Request) error {
	id := chi.URLParam(r, "id")
	if !validID(id) {
		return c.notFound(id)
	}
	data, format, err := a.readBody(r, bodyDescription, a.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	got, app, err := c.parse(data, format)
	if err != nil {
		return err
	}
	if got != id {
		return invalid(fmt.Sprintf("the description names %s %q, the path %q", c.what, got, id), []api.FieldProblem{{
			Field: "metadata.name", Type: "FieldValueInvalid",
			Message: fmt.Sprintf("Invalid value: %q: must equal the %s in the path, %q", got, c.what, id),
		}})
	}
	acc, err := c.queue(a, r, state.KindUpdate, id, app)
	if err != nil {
		return err
	}
	w.Header().Set("Location", acc.Href)
	writeJSON(w, http.StatusAccepted, acc)
	return nil
}

// remove queues the removal.
func (c collection) remove(a *API, w http.ResponseWriter, r *http.Request) error {
	id := chi.URLParam(r, "id")
	if !validID(id) {
		return c.notFound(id)
	}
	acc, err := c.queue(a, r, state.KindRemove, id, nil)
	if err != nil {
		return err
	}
	w.Header().Set("Location", acc.Href)
	writeJSON(w, http.StatusAccepted, acc)
	return nil
}

func (c collection) notFound(id string) *Error {
	return notFound("no %s named %q; list them with GET %s", c.what, id, c.base)
}

// queue submits to Redis: the description and its status in one step.
func (c collection) queue(a *API, r *http.Request, kind state.Kind, id string, app *mlsysopsv1.MLSysOpsApp) (api.Accepted, error) {
	ctx := r.Context()
	// The request id recorded with the submission makes a retry
	// idempotent, so it is unique unless the client asks for a replay
	// with an Idempotency-Key (which counts per kind of request: a
	// removal is never mistaken for the deploy before it).
	sub := state.Submission{ID: id, Kind: kind, RequestID: "req:" + requestID(ctx) + ":" + newRequestID()}
	if key := r.Header.Get(api.HeaderIdempotencyKey); key != "" {
		if !httpapi.ValidToken(key) {
			return api.Accepted{}, badRequest("the %s header must be 1 to 128 letters, digits or . _ : -", api.HeaderIdempotencyKey)
		}
		sub.RequestID = "idem:" + string(kind) + ":" + key
	}
	if id, ok := identity(ctx); ok {
		sub.SubmittedBy = id.Name
	}
	if app != nil {
		app.TypeMeta.APIVersion = mlsysopsv1.SchemeGroupVersion.String()
		app.TypeMeta.Kind = mlsysopsv1.KindApp
		spec, err := json.Marshal(app)
		if err != nil {
			return api.Accepted{}, fmt.Errorf("encode %s %s: %w", c.what, id, err)
		}
		sub.Spec = spec
	}
	if kind == state.KindDeploy {
		// Applications and ML deployments both become MLSysOpsApp
		// resources named by their id.
		st, err := c.other(a.cfg.Store).Status(ctx, id)
		switch {
		case err == nil:
			other := "an ML deployment"
			if c.what != "application" {
				other = "an application"
			}
			return api.Accepted{}, conflict("%s named %q exists (phase %s); applications and ML deployments share one name space", other, id, st.Phase)
		case err != nil && !errors.Is(err, state.ErrNotFound):
			return api.Accepted{}, backend("the shared state (Redis)", err)
		}
	}
	rec, err := c.coll(a.cfg.Store).Submit(ctx, sub)
	if errors.Is(err, state.ErrNotFound) && kind != state.KindDeploy {
		// Applied with kubectl and not mirrored into Redis yet (the
		// continuum agent tracks such applications from their first
		// status, and may be down): found in Karmada, it is tracked now
		// and the request goes on, rather than a 404 for an application
		// that runs.
		var tracked bool
		if tracked, err = c.trackFromKarmada(a, ctx, id); err != nil {
			return api.Accepted{}, err
		}
		if tracked {
			rec, err = c.coll(a.cfg.Store).Submit(ctx, sub)
		} else {
			err = state.ErrNotFound
		}
	}
	if err != nil {
		var ce *state.ConflictError
		switch {
		case errors.As(err, &ce) && kind == state.KindDeploy:
			return api.Accepted{}, conflict("%s %q already exists (phase %s); update it with PUT %s or remove it first",
				c.what, id, ce.Phase, api.ItemPath(c.base, id))
		case errors.As(err, &ce):
			return api.Accepted{}, conflict("%s %q is %s; it cannot be %sd now", c.what, id, ce.Phase, kind)
		case errors.Is(err, state.ErrNotFound):
			return api.Accepted{}, c.notFound(id)
		}
		return api.Accepted{}, backend("the shared state (Redis)", err)
	}
	a.log.Info("submission queued", "app", id, "collection", c.what, "request", string(kind),
		"generation", rec.Generation, "replayed", rec.Existing, "request_id", requestID(ctx))
	return api.Accepted{
		ID: id, Request: string(kind), Phase: string(rec.Phase), Generation: rec.Generation,
		Replayed: rec.Existing, Href: api.ItemPath(c.base, id),
	}, nil
}

// trackFromKarmada starts tracking an application that Redis does not know
// but Karmada has (applied directly, e.g. with kubectl), as the continuum
// agent does once it sees its first status; false when Karmada has none
// either (or it is being deleted), or for ML deployments, which are
// created only through the API.
func (c collection) trackFromKarmada(a *API, ctx context.Context, id string) (bool, error) {
	if a.cfg.Infra == nil || c.what != "application" {
		return false, nil
	}
	app, err := a.cfg.Infra.App(ctx, id)
	switch {
	case errors.Is(err, infra.ErrNotFound), errors.Is(err, infra.ErrAPIMissing):
		return false, nil
	case err != nil:
		return false, backend("the Karmada API", err)
	case !app.DeletionTimestamp.IsZero():
		return false, nil
	}
	phase := app.Status.Phase
	if phase == "" {
		phase = mlsysopsv1.AppScheduling
	}
	_, err = c.coll(a.cfg.Store).SetStatus(ctx, id, state.StatusUpdate{Phase: phase, Message: app.Status.Message, TrackSince: app.CreationTimestamp.Time})
	if err != nil {
		return false, backend("the shared state (Redis)", err)
	}
	a.log.Info("application applied to Karmada directly is tracked from now on", "app", id)
	return true, nil
}

func summaryOf(st state.Status) api.Summary {
	return api.Summary{
		ID: st.ID, Phase: string(st.Phase), Message: st.Message, LastRequest: string(st.Kind),
		Generation: st.Generation, Placement: st.Placement, SubmittedAt: st.SubmittedAt, UpdatedAt: st.UpdatedAt,
	}
}

// list returns a page of summaries, optionally filtered by phase. The
// continue token is the last id of the page before.
func (c collection) list(a *API, w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var problems []api.FieldProblem
	var phases []mlsysopsv1.AppPhase
	seen := map[mlsysopsv1.AppPhase]bool{}
	for _, v := range q["phase"] {
		for _, p := range strings.Split(v, ",") {
			phase := mlsysopsv1.AppPhase(strings.TrimSpace(p))
			switch {
			case phase == "" || seen[phase]:
			case !phase.Valid():
				problems = append(problems, api.FieldProblem{Field: "phase", Type: "FieldValueNotSupported",
					Message: fmt.Sprintf("Unsupported value: %q: supported values: %s", phase, phaseList())})
			default:
				seen[phase] = true
				phases = append(phases, phase)
			}
		}
	}
	limit := api.DefaultLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > api.MaxLimit {
			problems = append(problems, api.FieldProblem{Field: "limit", Type: "FieldValueInvalid",
				Message: fmt.Sprintf("Invalid value: %q: must be a whole number from 1 to %d", v, api.MaxLimit)})
		} else {
			limit = n
		}
	}
	after := ""
	if v := q.Get("continue"); v != "" {
		b, err := base64.RawURLEncoding.DecodeString(v)
		if err != nil || !validToken(string(b)) {
			problems = append(problems, api.FieldProblem{Field: "continue", Type: "FieldValueInvalid",
				Message: "Invalid value: not a continue token from a previous page"})
		} else {
			after = string(b)
		}
	}
	if len(problems) > 0 {
		return &Error{Status: http.StatusBadRequest, Type: api.ProblemInvalid, Detail: "invalid query parameters", Problems: problems}
	}
	page, err := c.coll(a.cfg.Store).Page(r.Context(), state.ListOptions{Phases: phases, After: after, Limit: limit})
	if err != nil {
		return backend("the shared state (Redis)", err)
	}
	out := api.List{Items: make([]api.Summary, 0, len(page.Items)), Total: int(page.Total)}
	for _, st := range page.Items {
		out.Items = append(out.Items, summaryOf(st))
	}
	if page.Next != "" {
		out.Continue = base64.RawURLEncoding.EncodeToString([]byte(page.Next))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// phaseList names the phases a list can be filtered by.
func phaseList() string {
	names := make([]string, len(mlsysopsv1.AppPhases))
	for i, p := range mlsysopsv1.AppPhases {
		names[i] = string(p)
	}
	return strings.Join(names, ", ")
}

// validToken reports whether a decoded continue token can be an id: ids
// of applications applied directly to Karmada are resource names, which
// may be longer than a DNS label and contain dots.
func validToken(id string) bool {
	return id != "" && len(id) <= 253 && !strings.ContainsFunc(id, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) })
}

// view is everything known about one item: its state in Redis and its
// resource in Karmada.
type view struct {
	status   *state.Status
	spec     *mlsysopsv1.MLSysOpsApp
	raw      json.RawMessage
	resource *mlsysopsv1.MLSysOpsApp
	warnings []string
}

// load reads an item from Redis and Karmada; 404 when neither has it.
func (c collection) load(a *API, ctx context.Context, id string) (*view, error) {
	if !validID(id) {
		return nil, c.notFound(id)
	}
	v := &view{}
	st, err := c.coll(a.cfg.Store).Status(ctx, id)
	switch {
	case err == nil:
		v.status = &st
	case !errors.Is(err, state.ErrNotFound):
		return nil, backend("the shared state (Redis)", err)
	}
	if v.status != nil {
		raw, err := c.coll(a.cfg.Store).Spec(ctx, id)
		switch {
		case err == nil:
			var app mlsysopsv1.MLSysOpsApp
			if json.Unmarshal(raw, &app) == nil {
				v.spec, v.raw = &app, raw
			}
		case !errors.Is(err, state.ErrNotFound):
			return nil, backend("the shared state (Redis)", err)
		}
	}
	if a.cfg.Infra == nil {
		v.warnings = append(v.warnings, "Karmada is not configured; placement and conditions are unknown")
	} else {
		res, err := a.cfg.Infra.App(ctx, id)
		switch {
		case err == nil:
			v.resource = res
		case errors.Is(err, infra.ErrNotFound), errors.Is(err, infra.ErrAPIMissing):
		default:
			a.log.Warn("read MLSysOpsApp", "app", id, "err", err, "request_id", requestID(ctx))
			v.warnings = append(v.warnings, "Karmada did not answer; placement and conditions are unknown")
		}
	}
	if v.status == nil && v.resource == nil {
		return nil, c.notFound(id)
	}
	if v.spec == nil && v.resource != nil {
		v.spec = v.resource.DeepCopy()
		v.spec.Status = mlsysopsv1.MLSysOpsAppStatus{}
		v.spec.ManagedFields = nil
		v.raw, _ = json.Marshal(v.spec)
	}
	return v, nil
}

// phase is the phase to show: the user's latest intent while it is not
// visible in the resource, else the resource's status.
func (v *view) phase() (phase, message, source string) {
	switch {
	case v.status != nil && v.status.Phase == mlsysopsv1.AppRemoving:
		return string(v.status.Phase), v.status.Message, "submission"
	case v.resource != nil && v.resource.Status.Phase != "":
		return string(v.resource.Status.Phase), v.resource.Status.Message, "resource"
	case v.status != nil:
		return string(v.status.Phase), v.status.Message, "submission"
	}
	return string(mlsysopsv1.AppQueued), "the resource exists; no agent has reported on it yet", "resource"
}

// get returns one item in detail.
func (c collection) get(a *API, w http.ResponseWriter, r *http.Request) error {
	v, err := c.load(a, r.Context(), chi.URLParam(r, "id"))
	if err != nil {
		return err
	}
	out := c.detail(a, r.Context(), v)
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (c collection) detail(a *API, ctx context.Context, v *view) api.Application {
	out := api.Application{Components: []api.ComponentPlacement{}, Conditions: []api.Condition{}, Description: v.raw}
	if v.status != nil {
		out.Summary = summaryOf(*v.status)
	} else {
		out.Summary = api.Summary{ID: v.resource.Name, LastRequest: "deploy", SubmittedAt: v.resource.CreationTimestamp.Time}
	}
	out.Phase, out.Message, out.PhaseSource = v.phase()
	if res := v.resource; res != nil {
		out.Resource = &api.Resource{
			Namespace: res.Namespace, Name: res.Name, Phase: string(res.Status.Phase), Message: res.Status.Message,
			Generation: res.Generation, ObservedGeneration: res.Status.ObservedGeneration, CreatedAt: res.CreationTimestamp.Time,
		}
		for _, cnd := range res.Status.Conditions {
			out.Conditions = append(out.Conditions, api.Condition{
				Type: cnd.Type, Status: string(cnd.Status), Reason: cnd.Reason, Message: cnd.Message,
				LastTransitionTime: cnd.LastTransitionTime.Time,
			})
		}
	}
	m := a.members()
	out.Components = a.components(ctx, v, m)
	for i := range out.Components {
		cp := &out.Components[i]
		if cp.Cluster == "" {
			continue
		}
		for j := range m.pods(ctx, cp.Cluster, out.ID) {
			p := &m.pods(ctx, cp.Cluster, out.ID)[j]
			if p.Labels[mlsysopsv1.LabelComponent] == cp.Name {
				cp.Pods = append(cp.Pods, podOf(p))
			}
		}
		sort.Slice(cp.Pods, func(x, y int) bool { return cp.Pods[x].CreatedAt.Before(cp.Pods[y].CreatedAt) })
	}
	out.Endpoints = a.endpoints(ctx, out.ID, out.Components, m)
	out.Events = a.events(ctx, out.ID, out.Components, m)
	out.Warnings = append(v.warnings, m.warnings()...)
	return out
}

// components merges the description's components with their placement in
// the resource's status, and the GPU product of the nodes they run on.
func (a *API) components(ctx context.Context, v *view, m *members) []api.ComponentPlacement {
	out := []api.ComponentPlacement{}
	type gpuNeed struct {
		model string
		count int64
	}
	needs := map[string]gpuNeed{}
	var order []string
	if v.spec != nil {
		for _, comp := range v.spec.Spec.Components {
			var g gpuNeed
			for _, ctr := range comp.Containers {
				if pr := ctr.PlatformRequirements; pr != nil && pr.GPU != nil {
					g.count += resources.GPUCount(pr.GPU)
					if g.model == "" {
						g.model = pr.GPU.Model
					}
				}
			}
			needs[comp.Metadata.Name] = g
			order = append(order, comp.Metadata.Name)
		}
	}
	placed := map[string]bool{}
	if v.resource != nil {
		for _, cs := range v.resource.Status.Components {
			placed[cs.Name] = true
			cp := api.ComponentPlacement{
				Name: cs.Name, Cluster: cs.Cluster, Nodes: append([]string{}, cs.Nodes...),
				Replicas: cs.Replicas, ReadyReplicas: cs.ReadyReplicas, Message: cs.Message,
				GPUModel: needs[cs.Name].model, GPUs: needs[cs.Name].count,
			}
			out = append(out, cp)
		}
	}
	for _, name := range order {
		if placed[name] {
			continue
		}
		cp := api.ComponentPlacement{Name: name, Nodes: []string{}, GPUModel: needs[name].model, GPUs: needs[name].count}
		if v.status != nil {
			if where := v.status.Placement[name]; where != "" {
				cluster, node, ok := strings.Cut(where, "/")
				cp.Cluster = cluster
				if ok && node != "" {
					cp.Nodes = []string{node}
				}
			}
		}
		out = append(out, cp)
	}
	gpuModels(ctx, out, m)
	return out
}

// gpuModels replaces the requested GPU model by the product of the nodes a
// component runs on, read from their nvidia.com/gpu.product label.
func gpuModels(ctx context.Context, comps []api.ComponentPlacement, m *members) {
	for i := range comps {
		cp := &comps[i]
		if cp.GPUs == 0 || cp.Cluster == "" || len(cp.Nodes) == 0 {
			continue
		}
		byNode := map[string]string{}
		for _, n := range m.nodes(ctx, cp.Cluster) {
			byNode[n.Name()] = n.Node.Labels[mlsysopsv1.LabelGPUProduct]
		}
		seen := map[string]bool{}
		var models []string
		for _, n := range cp.Nodes {
			if p := byNode[n]; p != "" && !seen[p] {
				seen[p] = true
				models = append(models, p)
			}
		}
		if len(models) > 0 {
			sort.Strings(models)
			cp.GPUModel = strings.Join(models, ",")
		}
	}
}
