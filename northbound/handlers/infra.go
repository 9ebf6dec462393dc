package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/go-chi/chi/v5"
	"k8s.io/apimachinery/pkg/util/validation"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/northbound/api"
	"github.com/mlsysops-go/mlsysops/northbound/infra"
)

func (a *API) needInfra() error {
	if a.cfg.Infra == nil {
		return newError(http.StatusServiceUnavailable, api.ProblemUnavailable,
			"this server has no Karmada connection; start it with --kubeconfig")
	}
	return nil
}

// inventory is the infrastructure with its agents and descriptions.
type inventory struct {
	clusters []infra.ClusterState
	agents   []state.Agent
	// described holds the names of registered node descriptions.
	described map[string]string // node -> cluster_id
}

func (a *API) inventory(ctx context.Context, clusters []infra.ClusterState) (*inventory, error) {
	inv := &inventory{clusters: clusters, described: map[string]string{}}
	agents, err := a.cfg.Store.Agents().List(ctx)
	if err != nil {
		return nil, backend("the shared state (Redis)", err)
	}
	inv.agents = agents
	descs, err := a.cfg.Infra.NodeDescriptions(ctx)
	switch {
	case err == nil:
		for _, d := range descs {
			inv.described[d.Name] = d.Spec.ClusterID
		}
	case errors.Is(err, infra.ErrAPIMissing):
	default:
		return nil, backend("Karmada", err)
	}
	return inv, nil
}

func agentState(ag state.Agent) *api.AgentState {
	s := &api.AgentState{JID: ag.JID, Online: ag.Online}
	if !ag.LastSeen.IsZero() {
		t := ag.LastSeen
		s.LastSeen = &t
	}
	return s
}

func localpart(jid string) string {
	l, _, _ := strings.Cut(jid, "@")
	return l
}

func (inv *inventory) agent(layer, cluster, node string) *api.AgentState {
	for _, ag := range inv.agents {
		if ag.Layer != layer {
			continue
		}
		switch layer {
		case "continuum":
			return agentState(ag)
		case "cluster":
			if ag.Cluster == cluster || (ag.Cluster == "" && (ag.Node == cluster || localpart(ag.JID) == cluster)) {
				return agentState(ag)
			}
		case "node":
			if (ag.Node == node || (ag.Node == "" && localpart(ag.JID) == node)) && (ag.Cluster == "" || ag.Cluster == cluster) {
				return agentState(ag)
			}
		}
	}
	return nil
}

func (inv *inventory) node(cs infra.ClusterState, i int) api.Node {
	n := cs.Nodes[i]
	labels := n.Node.Labels
	if labels == nil {
		labels = map[string]string{}
	}
	_, described := inv.described[n.Name()]
	return api.Node{
		Name: n.Name(), Cluster: cs.Name, Layer: labels[mlsysopsv1.LabelLayer], Ready: infra.NodeReady(n.Node),
		Agent: inv.agent("node", cs.Name, n.Name()), Labels: labels, Resources: infra.NodeResources(n),
		Described: described,
	}
}

func (inv *inventory) cluster(cs infra.ClusterState, withNodes bool) api.Cluster {
	c := api.Cluster{Name: cs.Name, Ready: cs.Ready, Message: cs.Message, Agent: inv.agent("cluster", cs.Name, ""), NodeCount: len(cs.Nodes)}
	if cs.NodesError != nil {
		c.Message = "nodes unreadable through the Karmada cluster proxy: " + cs.NodesError.Error()
	}
	for i := range cs.Nodes {
		n := inv.node(cs, i)
		infra.AddResources(&c.Resources, n.Resources)
		if withNodes {
			c.Nodes = append(c.Nodes, n)
		}
	}
	if withNodes && c.Nodes == nil {
		c.Nodes = []api.Node{}
	}
	return c
}

// continuum answers with the whole infrastructure.
func (a *API) continuum(w http.ResponseWriter, r *http.Request) error {
	c, err := a.continuumState(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}

func (a *API) continuumState(ctx context.Context) (api.Continuum, error) {
	if err := a.needInfra(); err != nil {
		return api.Continuum{}, err
	}
	clusters, err := a.cfg.Infra.Clusters(ctx)
	if err != nil {
		return api.Continuum{}, backend("Karmada", err)
	}
	inv, err := a.inventory(ctx, clusters)
	if err != nil {
		return api.Continuum{}, err
	}
	out := api.Continuum{ID: a.cfg.ContinuumID, Agent: inv.agent("continuum", "", ""), Clusters: []api.Cluster{}}
	for _, cs := range clusters {
		c := inv.cluster(cs, false)
		if c.Ready {
			infra.AddResources(&out.Totals, c.Resources)
		}
		out.Clusters = append(out.Clusters, c)
	}
	return out, nil
}

func (a *API) listClusters(w http.ResponseWriter, r *http.Request) error {
	c, err := a.continuumState(r.Context())
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, api.ClusterList{Items: c.Clusters})
	return nil
}

func (a *API) getCluster(w http.ResponseWriter, r *http.Request) error {
	if err := a.needInfra(); err != nil {
		return err
	}
	name := chi.URLParam(r, "name")
	if len(validation.IsDNS1123Subdomain(name)) > 0 {
		return notFound("no member cluster named %q; list them with GET %s", name, api.PathClusters)
	}
	cs, err := a.cfg.Infra.Cluster(r.Context(), name)
	if errors.Is(err, infra.ErrNotFound) {
		return notFound("no member cluster named %q; list them with GET %s", name, api.PathClusters)
	}
	if err != nil {
		return backend("Karmada", err)
	}
	inv, err := a.inventory(r.Context(), []infra.ClusterState{cs})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, inv.cluster(cs, true))
	return nil
}

// nodes lists the nodes of every cluster, or of one.
func (a *API) nodes(ctx context.Context, cluster string) ([]api.Node, error) {
	if err := a.needInfra(); err != nil {
		return nil, err
	}
	var clusters []infra.ClusterState
	if cluster != "" {
		if len(validation.IsDNS1123Subdomain(cluster)) > 0 {
			return nil, notFound("no member cluster named %q", cluster)
		}
		cs, err := a.cfg.Infra.Cluster(ctx, cluster)
		if errors.Is(err, infra.ErrNotFound) {
			return nil, notFound("no member cluster named %q; list them with GET %s", cluster, api.PathClusters)
		}
		if err != nil {
			return nil, backend("Karmada", err)
		}
		clusters = []infra.ClusterState{cs}
	} else {
		var err error
		if clusters, err = a.cfg.Infra.Clusters(ctx); err != nil {
			return nil, backend("Karmada", err)
		}
	}
	inv, err := a.inventory(ctx, clusters)
	if err != nil {
		return nil, err
	}
	out := []api.Node{}
	seen := map[string]bool{}
	for _, cs := range clusters {
		for i := range cs.Nodes {
			n := inv.node(cs, i)
			seen[n.Name] = true
			out = append(out, n)
		}
	}
	// Registered descriptions of nodes that are not (yet) in their cluster.
	for name, c := range inv.described {
		if !seen[name] && (cluster == "" || cluster == c) {
			out = append(out, api.Node{Name: name, Cluster: c, Labels: map[string]string{}, Described: true,
				Agent: inv.agent("node", c, name)})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Cluster != out[j].Cluster {
			return out[i].Cluster < out[j].Cluster
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

func (a *API) listNodes(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	layer := q.Get("layer")
	if layer != "" && !validLayer(layer) {
		return &Error{Status: http.StatusBadRequest, Type: api.ProblemInvalid, Detail: "invalid query parameters",
			Problems: []api.FieldProblem{{Field: "layer", Type: "FieldValueNotSupported",
				Message: fmt.Sprintf("Unsupported value: %q: supported values: cloud, edge_infrastructure, edge, far_edge", layer)}}}
	}
	nodes, err := a.nodes(r.Context(), q.Get("cluster"))
	if err != nil {
		return err
	}
	out := []api.Node{}
	for _, n := range nodes {
		if layer == "" || n.Layer == layer {
			out = append(out, n)
		}
	}
	writeJSON(w, http.StatusOK, api.NodeList{Items: out})
	return nil
}

func validLayer(l string) bool {
	switch mlsysopsv1.ContinuumLayer(l) {
	case "cloud", "edge_infrastructure", "edge", "far_edge":
		return true
	}
	return false
}

func (a *API) getNode(w http.ResponseWriter, r *http.Request) error {
	name := chi.URLParam(r, "name")
	if len(validation.IsDNS1123Subdomain(name)) > 0 {
		return notFound("no node named %q; list them with GET %s", name, api.PathNodes)
	}
	nodes, err := a.nodes(r.Context(), r.URL.Query().Get("cluster"))
	if err != nil {
		return err
	}
	var found []api.Node
	for _, n := range nodes {
		if n.Name == name {
			found = append(found, n)
		}
	}
	switch len(found) {
	case 0:
		return notFound("no node named %q; list them with GET %s", name, api.PathNodes)
	case 1:
		writeJSON(w, http.StatusOK, found[0])
		return nil
	}
	var cs []string
	for _, n := range found {
		cs = append(cs, n.Cluster)
	}
	return conflict("nodes named %q exist in clusters %s; add ?cluster=<name>", name, strings.Join(cs, ", "))
}

// registerNode registers a node description (POST).
func (a *API) registerNode(w http.ResponseWriter, r *http.Request) error {
	return a.putNode(w, r, "")
}

// replaceNode registers or replaces a node description (PUT).
func (a *API) replaceNode(w http.ResponseWriter, r *http.Request) error {
	name := chi.URLParam(r, "name")
	if len(validation.IsDNS1123Subdomain(name)) > 0 {
		return notFound("%q is not a node name", name)
	}
	return a.putNode(w, r, name)
}

func (a *API) putNode(w http.ResponseWriter, r *http.Request, want string) error {
	if err := a.needInfra(); err != nil {
		return err
	}
	data, format, err := a.readBody(r, bodyDescription, a.cfg.MaxBodyBytes)
	if err != nil {
		return err
	}
	node, err := a.parseNode(r.Context(), data, format, want)
	if err != nil {
		return err
	}
	created, err := a.cfg.Infra.RegisterNode(r.Context(), node)
	if err != nil {
		return backend("Karmada", err)
	}
	a.log.Info("node description registered", "node", node.Name, "cluster", node.Spec.ClusterID, "created", created, "request_id", requestID(r.Context()))
	out := api.NodeRegistered{Name: node.Name, Cluster: node.Spec.ClusterID, Created: created, Href: api.ItemPath(api.PathNodes, node.Name)}
	w.Header().Set("Location", out.Href)
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, out)
	return nil
}

// parseNode validates a node description with the shared validator, and
// that it names a member cluster.
func (a *API) parseNode(ctx context.Context, data []byte, format description.Format, want string) (*mlsysopsv1.MLSysOpsNode, error) {
	doc, ok := decodeObject(data, format)
	if ok {
		// The upstream /infra/register wrapper: {"yaml": {...}}.
		if inner, wrapped := doc["yaml"]; wrapped && len(doc) == 1 {
			if b, err := json.Marshal(inner); err == nil {
				data, doc = b, nil
				if m, isMap := inner.(map[string]any); isMap {
					doc = m
				}
			}
		} else if _, isURI := doc["uri"]; isURI && len(doc) == 1 {
			return nil, invalid("registration by URI is not supported", []api.FieldProblem{{Field: "uri", Type: "FieldValueForbidden",
				Message: "Forbidden: the server does not fetch URLs; send the description itself (mls fetches --uri on your side)"}})
		}
	}
	obj, errs := description.Parse("", data)
	if len(errs) > 0 {
		return nil, descriptionError("node description", errs)
	}
	node, isNode := obj.(*mlsysopsv1.MLSysOpsNode)
	if !isNode {
		return nil, invalid("only node descriptions can be registered", []api.FieldProblem{{Field: "kind", Type: "FieldValueNotSupported",
			Message: fmt.Sprintf("Unsupported value: %q: supported values: %q", description.KindOf(obj), mlsysopsv1.KindNode)}})
	}
	prefix := "spec"
	if _, upstream := doc[mlsysopsv1.KindNode]; upstream {
		prefix = mlsysopsv1.KindNode
	}
	if want != "" && node.Name != want {
		return nil, invalid("the description names another node", []api.FieldProblem{{Field: prefix + ".name", Type: "FieldValueInvalid",
			Message: fmt.Sprintf("Invalid value: %q: must equal the node in the path, %q", node.Name, want)}})
	}
	if node.Spec.ClusterID == "" {
		return nil, invalid("the node description names no cluster", []api.FieldProblem{{Field: prefix + ".cluster_id", Type: "FieldValueRequired",
			Message: "Required value: the member cluster the node belongs to"}})
	}
	ok, err := a.cfg.Infra.ClusterExists(ctx, node.Spec.ClusterID)
	if err != nil {
		return nil, backend("Karmada", err)
	}
	if !ok {
		return nil, invalid("the node description names an unknown cluster", []api.FieldProblem{{Field: prefix + ".cluster_id", Type: "FieldValueNotFound",
			Message: fmt.Sprintf("Not found: %q: no member cluster has this name (GET %s lists them)", node.Spec.ClusterID, api.PathClusters)}})
	}
	return node, nil
}

func (a *API) unregisterNode(w http.ResponseWriter, r *http.Request) error {
	if err := a.needInfra(); err != nil {
		return err
	}
	name := chi.URLParam(r, "name")
	if len(validation.IsDNS1123Subdomain(name)) > 0 {
		return notFound("no node description named %q", name)
	}
	err := a.cfg.Infra.UnregisterNode(r.Context(), name)
	switch {
	case errors.Is(err, infra.ErrNotFound):
		return notFound("no node description named %q is registered", name)
	case err != nil:
		return backend("Karmada", err)
	}
	a.log.Info("node description unregistered", "node", name, "request_id", requestID(r.Context()))
	w.WriteHeader(http.StatusNoContent)
	return nil
}
