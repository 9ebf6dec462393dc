package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/go-chi/chi/v5"

	"github.com/mlsysops-go/mlsysops/internal/messaging"
	"github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/northbound/api"
)

func agentOf(ag state.Agent) api.Agent {
	return api.Agent{
		JID: ag.JID, Layer: ag.Layer, Cluster: ag.Cluster, Node: ag.Node, Version: ag.Version,
		Online: ag.Online, RegisteredAt: ag.RegisteredAt, LastSeen: ag.LastSeen,
	}
}

// validJID accepts what can be a bare JID: local@domain, no blanks or
// control characters, no resource.
func validJID(s string) bool {
	local, domain, ok := strings.Cut(s, "@")
	if !ok || local == "" || domain == "" || len(s) > 1023 || strings.ContainsAny(domain, "@/") {
		return false
	}
	return strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) < 0
}

func (a *API) listAgents(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var problems []api.FieldProblem
	layer := q.Get("layer")
	if layer != "" && !api.ValidLayer(layer) {
		problems = append(problems, api.FieldProblem{Field: "layer", Type: "FieldValueNotSupported",
			Message: fmt.Sprintf("Unsupported value: %q: supported values: %s", layer, strings.Join(api.Layers, ", "))})
	}
	online := q.Get("online")
	if online != "" && online != "true" && online != "false" {
		problems = append(problems, api.FieldProblem{Field: "online", Type: "FieldValueNotSupported",
			Message: fmt.Sprintf("Unsupported value: %q: supported values: true, false", online)})
	}
	if len(problems) > 0 {
		return &Error{Status: http.StatusBadRequest, Type: api.ProblemInvalid, Detail: "invalid query parameters", Problems: problems}
	}
	agents, err := a.cfg.Store.Agents().List(r.Context())
	if err != nil {
		return backend("the shared state (Redis)", err)
	}
	out := api.AgentList{Items: []api.Agent{}}
	for _, ag := range agents {
		if (layer == "" || ag.Layer == layer) && (online == "" || (online == "true") == ag.Online) {
			out.Items = append(out.Items, agentOf(ag))
		}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// registered returns a registered agent, or the 404 to answer.
func (a *API) registered(ctx context.Context, jid string) (state.Agent, error) {
	if !validJID(jid) {
		return state.Agent{}, notFound("%q is not an agent JID (local@domain); list the agents with GET %s", jid, api.PathAgents)
	}
	ag, err := a.cfg.Store.Agents().Get(ctx, jid)
	if errors.Is(err, state.ErrNotFound) {
		return state.Agent{}, notFound("no agent %q is registered; list the agents with GET %s", jid, api.PathAgents)
	}
	if err != nil {
		return state.Agent{}, backend("the shared state (Redis)", err)
	}
	return ag, nil
}

func (a *API) getAgent(w http.ResponseWriter, r *http.Request) error {
	ag, err := a.registered(r.Context(), chi.URLParam(r, "jid"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, agentOf(ag))
	return nil
}

func (a *API) needMessenger() error {
	if a.cfg.Messenger == nil {
		return newError(http.StatusServiceUnavailable, api.ProblemUnavailable,
			"this server has no XMPP connection; start it with --xmpp-jid and its password")
	}
	return nil
}

// messagingError explains a failed exchange with an agent.
func messagingError(jid string, err error, timeout time.Duration) *Error {
	var (
		rej *messaging.RejectedError
		rem *messaging.RemoteError
	)
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, messaging.ErrDeliveryTimeout):
		e := newError(http.StatusGatewayTimeout, api.ProblemTimeout,
			"agent %s did not answer within %s: is it online (GET %s), and does it accept this server's XMPP account as a controller (agents drop messages from strangers)?",
			jid, timeout, api.ItemPath(api.PathAgents, jid))
		e.Cause = err
		return e
	case errors.As(err, &rej):
		e := newError(http.StatusBadGateway, api.ProblemUnavailable,
			"agent %s refused the message (%v); it must accept this server's JID as a controller", jid, rej)
		e.Cause = err
		return e
	case errors.As(err, &rem):
		e := newError(http.StatusBadGateway, api.ProblemUnavailable, "agent %s failed to handle the message: %v", jid, rem)
		e.Cause = err
		return e
	}
	return unavailable("XMPP", err)
}

// ping makes one round trip to an agent.
func (a *API) ping(ctx context.Context, jid string) (api.PingResult, error) {
	if err := a.needMessenger(); err != nil {
		return api.PingResult{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.PingTimeout)
	defer cancel()
	start := time.Now()
	resp, _, err := a.cfg.Messenger.Request(ctx, jid, &messaging.Ping{Note: requestID(ctx)})
	elapsed := time.Since(start)
	if err != nil {
		return api.PingResult{}, messagingError(jid, err, a.cfg.PingTimeout)
	}
	out := api.PingResult{JID: jid, LatencyMillis: float64(elapsed.Microseconds()) / 1000}
	if pong, ok := resp.(*messaging.Pong); ok {
		out.Note = pong.Note
	}
	return out, nil
}

func (a *API) pingAgent(w http.ResponseWriter, r *http.Request) error {
	ag, err := a.registered(r.Context(), chi.URLParam(r, "jid"))
	if err != nil {
		return err
	}
	res, err := a.ping(r.Context(), ag.JID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, res)
	return nil
}

// modeProblems checks a requested management mode.
func modeProblems(mode *int) []api.FieldProblem {
	switch {
	case mode == nil:
		return []api.FieldProblem{{Field: "mode", Type: "FieldValueRequired", Message: "Required value: 0 (heuristic) or 1 (ML)"}}
	case *mode != messaging.ModeHeuristic && *mode != messaging.ModeML:
		return []api.FieldProblem{{Field: "mode", Type: "FieldValueNotSupported",
			Message: fmt.Sprintf("Unsupported value: %d: supported values: 0 (heuristic), 1 (ML)", *mode)}}
	}
	return nil
}

// setMode sends the mode to each agent at once and collects the outcomes.
func (a *API) setMode(ctx context.Context, mode int, reason string, jids []string) api.ModeResult {
	out := api.ModeResult{Mode: mode, Results: make([]api.AgentModeResult, len(jids))}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.PingTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for i, j := range jids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := api.AgentModeResult{JID: j, OK: true}
			if err := a.cfg.Messenger.Send(ctx, j, &messaging.ManagementMode{Mode: mode, Reason: reason}); err != nil {
				res.OK = false
				res.Error = messagingError(j, err, a.cfg.PingTimeout).Detail
			}
			out.Results[i] = res
		}()
	}
	wg.Wait()
	for _, r := range out.Results {
		if !r.OK {
			out.Failed++
		}
	}
	a.log.Info("management mode sent", "mode", mode, "agents", len(jids), "failed", out.Failed, "request_id", requestID(ctx))
	return out
}

// modeTargets resolves the agents a mode change goes to: the named ones,
// which must be registered, or every registered agent.
func (a *API) modeTargets(ctx context.Context, named []string) ([]string, error) {
	agents, err := a.cfg.Store.Agents().List(ctx)
	if err != nil {
		return nil, backend("the shared state (Redis)", err)
	}
	known := map[string]bool{}
	var all []string
	for _, ag := range agents {
		known[ag.JID] = true
		all = append(all, ag.JID)
	}
	if len(named) == 0 {
		if len(all) == 0 && a.cfg.ContinuumJID != "" {
			all = []string{a.cfg.ContinuumJID}
		}
		if len(all) == 0 {
			return nil, conflict("no agent is registered; nothing to switch")
		}
		return all, nil
	}
	var problems []api.FieldProblem
	seen := map[string]bool{}
	var out []string
	for i, j := range named {
		if !known[j] {
			problems = append(problems, api.FieldProblem{Field: fmt.Sprintf("agents[%d]", i), Type: "FieldValueNotFound",
				Message: fmt.Sprintf("Not found: %q: no agent with this JID is registered", j)})
			continue
		}
		if !seen[j] {
			seen[j] = true
			out = append(out, j)
		}
	}
	if len(problems) > 0 {
		return nil, invalid("the request names unknown agents", problems)
	}
	sort.Strings(out)
	return out, nil
}

// setModeAll switches the mode of the named agents, or of all of them.
func (a *API) setModeAll(w http.ResponseWriter, r *http.Request) error {
	data, _, err := a.readBody(r, bodyJSON, 64<<10)
	if err != nil {
		return err
	}
	var req api.ModeRequest
	if err := decodeJSON(data, &req); err != nil {
		return err
	}
	if ps := modeProblems(req.Mode); ps != nil {
		return invalid("invalid management mode", ps)
	}
	if err := a.needMessenger(); err != nil {
		return err
	}
	jids, err := a.modeTargets(r.Context(), req.Agents)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a.setMode(r.Context(), *req.Mode, req.Reason, jids))
	return nil
}

// setModeOne switches the mode of one agent.
func (a *API) setModeOne(w http.ResponseWriter, r *http.Request) error {
	ag, err := a.registered(r.Context(), chi.URLParam(r, "jid"))
	if err != nil {
		return err
	}
	data, _, err := a.readBody(r, bodyJSON, 64<<10)
	if err != nil {
		return err
	}
	var req api.ModeRequest
	if err := decodeJSON(data, &req); err != nil {
		return err
	}
	var problems []api.FieldProblem
	problems = append(problems, modeProblems(req.Mode)...)
	if len(req.Agents) > 0 {
		problems = append(problems, api.FieldProblem{Field: "agents", Type: "FieldValueForbidden",
			Message: "Forbidden: the agent is in the path; use PUT " + api.PathAgentsMode + " for several"})
	}
	if len(problems) > 0 {
		return invalid("invalid management mode", problems)
	}
	if err := a.needMessenger(); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, a.setMode(r.Context(), *req.Mode, req.Reason, []string{ag.JID}))
	return nil
}
