package handlers

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/northbound/api"
)

// The upstream paths keep upstream's request and response bodies (and 200
// where upstream answered 200), without upstream's bugs: unknown ids are
// 404 rather than 500, duplicates 409, the details and performance are
// filled in, and the mode is really sent.

func (a *API) upstreamDeploy(w http.ResponseWriter, r *http.Request) error {
	data, format, err := a.readBody(r, bodyDescription, a.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	id, app, err := parseApplication(data, format)
	if err != nil {
		return err
	}
	acc, err := appsCollection.queue(a, r, state.KindDeploy, id, app)
	if err != nil {
		return err
	}
	w.Header().Set("Location", acc.Href)
	writeJSON(w, http.StatusOK, api.UpstreamDeployed{AppID: id, Status: "Queued successfully"})
	return nil
}

func (c collection) upstreamListAll(a *API, w http.ResponseWriter, r *http.Request) error {
	phases, err := c.coll(a.cfg.Store).Phases(r.Context())
	if err != nil {
		return backend("the shared state (Redis)", err)
	}
	out := api.UpstreamStatusMap{SystemStatus: make(map[string]string, len(phases))}
	for id, phase := range phases {
		out.SystemStatus[id] = string(phase)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (a *API) upstreamAppStatus(w http.ResponseWriter, r *http.Request) error {
	v, err := appsCollection.load(a, r.Context(), chi.URLParam(r, "app_id"))
	if err != nil {
		return err
	}
	phase, _, _ := v.phase()
	writeJSON(w, http.StatusOK, api.UpstreamAppStatus{AppID: chi.URLParam(r, "app_id"), Status: phase})
	return nil
}

// upstreamAppDetails lists each component's pods, read from the member
// clusters through Karmada.
func (a *API) upstreamAppDetails(w http.ResponseWriter, r *http.Request) error {
	id := chi.URLParam(r, "app_id")
	v, err := appsCollection.load(a, r.Context(), id)
	if err != nil {
		return err
	}
	phase, _, _ := v.phase()
	out := api.UpstreamAppDetails{AppID: id, State: phase, Components: []api.UpstreamComponentState{}}
	pods := map[string][]api.UpstreamPod{} // cluster/component -> pods
	read := map[string]bool{}
	for _, cp := range a.components(r.Context(), v, a.members()) {
		cs := api.UpstreamComponentState{Name: cp.Name, Cluster: cp.Cluster, Details: api.UpstreamComponentDetails{Pods: []api.UpstreamPod{}}}
		if cp.Cluster != "" && a.cfg.Infra != nil && !read[cp.Cluster] {
			read[cp.Cluster] = true
			list, err := a.cfg.Infra.AppPods(r.Context(), cp.Cluster, id)
			if err != nil {
				return backend("Karmada", err)
			}
			for _, p := range list {
				key := cp.Cluster + "/" + p.Labels[mlsysopsv1.LabelComponent]
				status := string(p.Status.Phase)
				if p.DeletionTimestamp != nil {
					status = "Terminating"
				}
				pods[key] = append(pods[key], api.UpstreamPod{PodName: p.Name, Node: p.Spec.NodeName, Status: status})
			}
		}
		if ps := pods[cp.Cluster+"/"+cp.Name]; ps != nil {
			cs.Details.Pods = ps
		}
		out.Components = append(out.Components, cs)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// upstreamAppPerformance answers in the shape the upstream CLI reads:
// [[metric, {value, ...}], ...].
func (a *API) upstreamAppPerformance(w http.ResponseWriter, r *http.Request) error {
	v, err := appsCollection.load(a, r.Context(), chi.URLParam(r, "app_id"))
	if err != nil {
		return err
	}
	p, err := a.performanceOf(r.Context(), v)
	if err != nil {
		return err
	}
	out := make([][2]any, 0, len(p.Metrics))
	for _, m := range p.Metrics {
		out = append(out, [2]any{m.Metric, map[string]any{
			"value": m.Value, "component": m.Component, "target": m.Target, "relation": m.Relation, "satisfied": m.Satisfied,
		}})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (a *API) upstreamAppRemove(w http.ResponseWriter, r *http.Request) error {
	id := chi.URLParam(r, "app_id")
	if !validID(id) {
		return appsCollection.notFound(id)
	}
	if _, err := appsCollection.queue(a, r, state.KindRemove, id, nil); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.UpstreamRemoved{AppID: id, Message: "Application removal requested"})
	return nil
}

func (a *API) upstreamDeployML(w http.ResponseWriter, r *http.Request) error {
	data, format, err := a.readBody(r, bodyDescription, a.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	id, app, err := parseMLDeployment(data, format)
	if err != nil {
		return err
	}
	acc, err := mlCollection.queue(a, r, state.KindDeploy, id, app)
	if err != nil {
		return err
	}
	w.Header().Set("Location", acc.Href)
	writeJSON(w, http.StatusOK, api.UpstreamResult{Status: "success", Message: "Deployment request added to queue", DeploymentID: id})
	return nil
}

func (a *API) upstreamMLStatus(w http.ResponseWriter, r *http.Request) error {
	id := chi.URLParam(r, "model_uid")
	v, err := mlCollection.load(a, r.Context(), id)
	if err != nil {
		return err
	}
	phase, _, _ := v.phase()
	out := api.UpstreamModelStatus{Model: id, ModelLegacy: id, Status: phase}
	m := a.members()
	for _, e := range a.endpoints(r.Context(), id, a.components(r.Context(), v, m), m) {
		if out.LocalEndpoint == "" {
			out.LocalEndpoint = e.Address
		}
		if out.GlobalEndpoint == "" {
			out.GlobalEndpoint = e.NodeAddress
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (a *API) upstreamMLRemove(w http.ResponseWriter, r *http.Request) error {
	id := chi.URLParam(r, "model_uid")
	if !validID(id) {
		return mlCollection.notFound(id)
	}
	if _, err := mlCollection.queue(a, r, state.KindRemove, id, nil); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.UpstreamModelRemoved{ModelUID: id, Message: "ML deployment removal requested"})
	return nil
}

// upstreamRegister validates and registers a description: a node
// description itself, or upstream's {"yaml": {...}} wrapper.
func (a *API) upstreamRegister(w http.ResponseWriter, r *http.Request) error {
	return a.putNode(w, r, "")
}

// upstreamInfraList answers with the continuum, a cluster or a node; it
// takes the CLI's type and name or the server's id_type and id_value.
func (a *API) upstreamInfraList(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	typ := strings.ToLower(firstNonEmpty(q.Get("type"), q.Get("id_type")))
	name := firstNonEmpty(q.Get("name"), q.Get("id_value"))
	switch typ {
	case "", "all", "continuum":
		c, err := a.continuumState(r.Context())
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, c)
	case "cluster":
		if name == "" {
			return a.listClusters(w, r)
		}
		rctx := chi.RouteContext(r.Context())
		rctx.URLParams.Add("name", name)
		return a.getCluster(w, r)
	case "node":
		nodes, err := a.nodes(r.Context(), "")
		if err != nil {
			return err
		}
		out := []api.Node{}
		for _, n := range nodes {
			if name == "" || n.Name == name {
				out = append(out, n)
			}
		}
		if name != "" && len(out) == 0 {
			return notFound("no node named %q", name)
		}
		writeJSON(w, http.StatusOK, api.NodeList{Items: out})
	case "datacenter":
		return notFound("datacenters are not tracked; list clusters (type=Cluster) or nodes (type=Node)")
	default:
		return &Error{Status: http.StatusBadRequest, Type: api.ProblemInvalid, Detail: "invalid query parameters",
			Problems: []api.FieldProblem{{Field: "type", Type: "FieldValueNotSupported",
				Message: fmt.Sprintf("Unsupported value: %q: supported values: All, Continuum, Cluster, Node", typ)}}}
	}
	return nil
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

// upstreamPing pings the continuum agent.
func (a *API) upstreamPing(w http.ResponseWriter, r *http.Request) error {
	jid := a.cfg.ContinuumJID
	agents, err := a.cfg.Store.Agents().List(r.Context())
	if err != nil {
		return backend("the shared state (Redis)", err)
	}
	for _, ag := range agents {
		if ag.Layer == "continuum" {
			jid = ag.JID
			break
		}
	}
	if jid == "" {
		return notFound("no continuum agent is registered and none is configured (--continuum-jid)")
	}
	res, err := a.ping(r.Context(), jid)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.UpstreamResult{Status: "success", Message: "Agent Alive", Response: res})
	return nil
}

// upstreamMode switches every registered agent (and the continuum agent)
// to mode 0 or 1.
func (a *API) upstreamMode(w http.ResponseWriter, r *http.Request) error {
	raw := chi.URLParam(r, "mode")
	mode, err := strconv.Atoi(raw)
	if err != nil || (mode != 0 && mode != 1) {
		return &Error{Status: http.StatusBadRequest, Type: api.ProblemInvalid, Detail: "the mode must be 0 (heuristic) or 1 (ML)",
			Problems: []api.FieldProblem{{Field: "mode", Type: "FieldValueNotSupported",
				Message: fmt.Sprintf("Unsupported value: %q: supported values: 0, 1", raw)}}}
	}
	if err := a.needMessenger(); err != nil {
		return err
	}
	jids, err := a.modeTargets(r.Context(), nil)
	if err != nil {
		return err
	}
	res := a.setMode(r.Context(), mode, "", jids)
	out := api.UpstreamResult{Status: "success", Message: fmt.Sprintf("Management mode changed to %d on %d agent(s)", mode, len(jids)), Response: res}
	if res.Failed > 0 {
		out.Status = "partial"
		out.Message = fmt.Sprintf("Management mode %d reached %d of %d agent(s)", mode, len(jids)-res.Failed, len(jids))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
