package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/mlsysops-go/mlsysops/northbound/api"
)

// Collection is applications or ML deployments.
type Collection struct {
	c    *Client
	base string
}

// Applications are the applications.
func (c *Client) Applications() *Collection { return &Collection{c: c, base: api.PathApplications} }

// MLDeployments are the ML deployments.
func (c *Client) MLDeployments() *Collection { return &Collection{c: c, base: api.PathMLDeployments} }

// SubmitOption tunes a submission.
type SubmitOption func(http.Header)

// WithIdempotencyKey makes a retried submission safe: the server answers a
// repeat with the first receipt.
func WithIdempotencyKey(key string) SubmitOption {
	return func(h http.Header) { h.Set(api.HeaderIdempotencyKey, key) }
}

func headerOf(opts []SubmitOption) http.Header {
	h := http.Header{}
	for _, o := range opts {
		o(h)
	}
	return h
}

// Submit queues a description (JSON or YAML, as contentType says).
func (s *Collection) Submit(ctx context.Context, description []byte, contentType string, opts ...SubmitOption) (api.Accepted, error) {
	var acc api.Accepted
	_, err := s.c.call(ctx, http.MethodPost, s.base, description, contentType, headerOf(opts), &acc)
	return acc, err
}

// Update queues a new description of id.
func (s *Collection) Update(ctx context.Context, id string, description []byte, contentType string, opts ...SubmitOption) (api.Accepted, error) {
	var acc api.Accepted
	_, err := s.c.call(ctx, http.MethodPut, api.ItemPath(s.base, id), description, contentType, headerOf(opts), &acc)
	return acc, err
}

// Remove queues the removal of id.
func (s *Collection) Remove(ctx context.Context, id string, opts ...SubmitOption) (api.Accepted, error) {
	var acc api.Accepted
	_, err := s.c.call(ctx, http.MethodDelete, api.ItemPath(s.base, id), nil, "", headerOf(opts), &acc)
	return acc, err
}

// ListOptions filter and page a list.
type ListOptions struct {
	// Phases keeps items in one of these phases.
	Phases []string
	// Limit is the page size (default the server's, 100).
	Limit int
	// Continue is the token of the previous page.
	Continue string
}

// List returns one page.
func (s *Collection) List(ctx context.Context, o ListOptions) (api.List, error) {
	q := url.Values{}
	if len(o.Phases) > 0 {
		q.Set("phase", strings.Join(o.Phases, ","))
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Continue != "" {
		q.Set("continue", o.Continue)
	}
	path := s.base
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var l api.List
	return l, s.c.get(ctx, path, &l)
}

// ListAll follows every page.
func (s *Collection) ListAll(ctx context.Context, phases ...string) ([]api.Summary, error) {
	out := []api.Summary{}
	o := ListOptions{Phases: phases, Limit: api.MaxLimit}
	for {
		page, err := s.List(ctx, o)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Items...)
		if page.Continue == "" {
			return out, nil
		}
		o.Continue = page.Continue
	}
}

// Get returns one item in detail.
func (s *Collection) Get(ctx context.Context, id string) (api.Application, error) {
	var a api.Application
	return a, s.c.get(ctx, api.ItemPath(s.base, id), &a)
}

// Performance returns the QoS metrics of id against their targets.
func (s *Collection) Performance(ctx context.Context, id string) (api.Performance, error) {
	var p api.Performance
	return p, s.c.get(ctx, api.ItemPath(s.base, id)+"/performance", &p)
}

// Continuum returns the whole infrastructure.
func (c *Client) Continuum(ctx context.Context) (api.Continuum, error) {
	var out api.Continuum
	return out, c.get(ctx, api.PathInfrastructure, &out)
}

// Clusters lists the member clusters.
func (c *Client) Clusters(ctx context.Context) ([]api.Cluster, error) {
	var out api.ClusterList
	return out.Items, c.get(ctx, api.PathClusters, &out)
}

// Cluster returns one cluster with its nodes.
func (c *Client) Cluster(ctx context.Context, name string) (api.Cluster, error) {
	var out api.Cluster
	return out, c.get(ctx, api.ItemPath(api.PathClusters, name), &out)
}

// Nodes lists nodes, of one cluster and layer when given.
func (c *Client) Nodes(ctx context.Context, cluster, layer string) ([]api.Node, error) {
	q := url.Values{}
	if cluster != "" {
		q.Set("cluster", cluster)
	}
	if layer != "" {
		q.Set("layer", layer)
	}
	path := api.PathNodes
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out api.NodeList
	return out.Items, c.get(ctx, path, &out)
}

// Node returns one node.
func (c *Client) Node(ctx context.Context, name string) (api.Node, error) {
	var out api.Node
	return out, c.get(ctx, api.ItemPath(api.PathNodes, name), &out)
}

// RegisterNode registers (or replaces) a node description.
func (c *Client) RegisterNode(ctx context.Context, description []byte, contentType string) (api.NodeRegistered, error) {
	var out api.NodeRegistered
	_, err := c.call(ctx, http.MethodPost, api.PathNodes, description, contentType, nil, &out)
	return out, err
}

// UnregisterNode deletes a node description.
func (c *Client) UnregisterNode(ctx context.Context, name string) error {
	_, err := c.call(ctx, http.MethodDelete, api.ItemPath(api.PathNodes, name), nil, "", nil, nil)
	return err
}

// Agents lists the registered agents, of one layer when given.
func (c *Client) Agents(ctx context.Context, layer string) ([]api.Agent, error) {
	path := api.PathAgents
	if layer != "" {
		path += "?layer=" + url.QueryEscape(layer)
	}
	var out api.AgentList
	return out.Items, c.get(ctx, path, &out)
}

// Agent returns one agent.
func (c *Client) Agent(ctx context.Context, jid string) (api.Agent, error) {
	var out api.Agent
	return out, c.get(ctx, api.ItemPath(api.PathAgents, jid), &out)
}

// Ping makes a round trip to an agent over XMPP.
func (c *Client) Ping(ctx context.Context, jid string) (api.PingResult, error) {
	var out api.PingResult
	_, err := c.call(ctx, http.MethodPost, api.ItemPath(api.PathAgents, jid)+"/ping", nil, "", nil, &out)
	return out, err
}

// SetMode switches the management mode of the named agents, or of every
// registered agent when none is named.
func (c *Client) SetMode(ctx context.Context, mode int, agents ...string) (api.ModeResult, error) {
	body, _ := json.Marshal(api.ModeRequest{Mode: &mode, Agents: agents})
	var out api.ModeResult
	_, err := c.call(ctx, http.MethodPut, api.PathAgentsMode, body, JSON, nil, &out)
	return out, err
}

// Policies lists the policies of a layer, or of every layer.
func (c *Client) Policies(ctx context.Context, layer string) ([]api.Policy, error) {
	path := api.PathPolicies
	if layer != "" {
		path += "?layer=" + url.QueryEscape(layer)
	}
	var out api.PolicyList
	return out.Items, c.get(ctx, path, &out)
}

func policyPath(layer, name string) string {
	return api.PathPolicies + "/" + url.PathEscape(layer) + "/" + url.PathEscape(name)
}

// Policy returns a policy with its source.
func (c *Client) Policy(ctx context.Context, layer, name string) (api.Policy, error) {
	var out api.Policy
	return out, c.get(ctx, policyPath(layer, name), &out)
}

// PutPolicy uploads a policy and reports whether it is new.
func (c *Client) PutPolicy(ctx context.Context, layer, name string, source []byte) (api.Policy, bool, error) {
	var out api.Policy
	resp, err := c.call(ctx, http.MethodPut, policyPath(layer, name), source, Text, nil, &out)
	return out, err == nil && resp.StatusCode == http.StatusCreated, err
}

// DeletePolicy deletes a policy.
func (c *Client) DeletePolicy(ctx context.Context, layer, name string) error {
	_, err := c.call(ctx, http.MethodDelete, policyPath(layer, name), nil, "", nil, nil)
	return err
}

// SetAgentMode switches one agent's management mode.
func (c *Client) SetAgentMode(ctx context.Context, jid string, mode int) (api.ModeResult, error) {
	body, _ := json.Marshal(api.ModeRequest{Mode: &mode})
	var out api.ModeResult
	_, err := c.call(ctx, http.MethodPut, api.ItemPath(api.PathAgents, jid)+"/mode", body, JSON, nil, &out)
	return out, err
}

// PingContinuum pings the continuum agent through the upstream path
// /manage/ping, which finds the agent itself.
func (c *Client) PingContinuum(ctx context.Context) (api.PingResult, error) {
	var out struct {
		Status   string         `json:"status"`
		Response api.PingResult `json:"response"`
	}
	return out.Response, c.get(ctx, "/manage/ping", &out)
}
