package agents_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/testbed"
)

// TestAgentsMoveToAnotherXMPPNode runs the agent hierarchy (continuum,
// cluster and node agents as processes, and the accounts reconciler) on a
// two-node ejabberd cluster, every process given both nodes' addresses,
// and SIGKILLs a node the agents are logged in to. The agents on it log in
// to the surviving node by themselves: every agent is online again, heard
// from after the kill, and the nodes' telemetry reaches Redis through
// their cluster agent again. The time from the kill to the last moved
// agent's session on the other node is logged.
func TestAgentsMoveToAnotherXMPPNode(t *testing.T) {
	nodes := testbed.EjabberdCluster(t, 2)
	h := startHierarchyOn(t, nodes)
	ctx := context.Background()
	eventually(t, "every agent registered and online", 2*time.Minute, func() error { return h.allOnline(ctx, time.Time{}) })

	// The node most agents are logged in to.
	on := map[string][]string{}
	for name := range h.agents {
		srv, err := h.xmppServer(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		on[srv] = append(on[srv], name)
	}
	victim := nodes[0]
	if len(on[nodes[1].C2SAddr()]) > len(on[nodes[0].C2SAddr()]) {
		victim = nodes[1]
	}
	moved := on[victim.C2SAddr()]
	t.Logf("agents by node: %v; killing %s", on, victim.Node())

	killed := time.Now()
	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the agents of the killed node on the other one", time.Minute, func() error {
		for _, name := range moved {
			st, err := h.status(name)
			if err != nil {
				return err
			}
			srv, err := h.xmppServer(ctx, name)
			if err != nil {
				return err
			}
			if !st.Connected || srv == victim.C2SAddr() {
				return fmt.Errorf("%s: connected %v to %s", name, st.Connected, srv)
			}
		}
		return nil
	})
	t.Logf("%d agents (%s) logged in to the surviving node %v after the SIGKILL", len(moved), strings.Join(moved, ", "), time.Since(killed).Round(time.Millisecond))
	eventually(t, "everyone online after the kill", time.Minute, func() error { return h.allOnline(ctx, killed) })
	eventually(t, "telemetry flows after the kill", time.Minute, func() error { return h.freshTelemetry(ctx, killed) })
}

// xmppServer is the ejabberd c2s address an agent's /status says it uses.
func (h *hierarchy) xmppServer(ctx context.Context, name string) (string, error) {
	var st struct {
		Login struct {
			Server string `json:"server"`
		} `json:"xmpp_login"`
	}
	if err := testbed.GetJSON(ctx, h.agents[name].URL()+"/status", &st); err != nil {
		return "", err
	}
	if st.Login.Server == "" {
		return "", fmt.Errorf("%s: no XMPP server in /status", name)
	}
	return st.Login.Server, nil
}
