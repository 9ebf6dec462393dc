package messaging_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/messaging"
	"github.com/mlsysops-go/mlsysops/internal/messaging/provision"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
	"github.com/mlsysops-go/mlsysops/internal/testbed/services"
)

// TestExactlyOnceAcrossClusterNodeKill streams commands from a cluster
// agent to a node agent through a two-node ejabberd cluster (data in
// PostgreSQL, sessions and routes shared by the Erlang cluster) and kills
// (SIGKILL) a node while they flow, twice:
//
//  1. the node agent's node, while the cluster agent is logged in to the
//     other one: the node agent moves to the surviving node;
//  2. after the killed node is started again (it rejoins the cluster by
//     itself), the node where both agents now are: both move to the
//     restarted node.
//
// Every command must be acknowledged to the sender and handled exactly
// once, in the order it was sent. The failover times (from the kill to
// the agent's session on the other node, and to the next command handled)
// are logged.
func TestExactlyOnceAcrossClusterNodeKill(t *testing.T) {
	const phase = 2000 // commands per phase; a node is killed in the middle of each
	const n = 2 * phase
	nodes := testbed.EjabberdCluster(t, 2)
	a, b := nodes[0], nodes[1]
	addrs := []string{a.C2SAddr(), b.C2SAddr()}
	d := fleet(2)
	rec := startAccounts(t, a, d, provision.ReconcilerConfig{})
	// The accounts and links are in the cluster's database now; the
	// reconciler would only complain about the node the test kills.
	rec.stop()
	parentJID, childJID := d.Accounts[0], d.Accounts[1]

	parentCfg := messaging.Config{JID: parentJID, PasswordFile: rec.file(parentJID), Layer: messaging.LayerCluster,
		Children: []string{childJID}, RetryInterval: time.Second, Servers: addrs}
	childCfg := messaging.Config{JID: childJID, PasswordFile: rec.file(childJID), Layer: messaging.LayerNode,
		Parent: parentJID, RetryInterval: time.Second}
	// Each client starts on the node its identity hashes to; order the
	// child's list so that the two start on different nodes, and the
	// commands cross from one node to the other.
	parentStart := startServer(t, parentCfg)
	childCfg.Servers = addrs
	if startServer(t, childCfg) == parentStart {
		childCfg.Servers = []string{addrs[1], addrs[0]}
	}
	parent := startAgent(t, a, parentCfg)
	child := startAgent(t, a, childCfg)
	if parent.Server() == child.Server() {
		t.Fatalf("both agents logged in to %s, want one on each node", parent.Server())
	}
	nodeOf := map[string]*services.Ejabberd{a.C2SAddr(): a, b.C2SAddr(): b}
	t.Logf("cluster agent on %s (%s), node agent on %s (%s)", parent.Server(), nodeOf[parent.Server()].Node(),
		child.Server(), nodeOf[child.Server()].Node())

	cmds := handleCommands(child.Client, n)
	handled := cmds.handled
	var sent atomic.Int64

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	deliveries := make(chan *messaging.Delivery, n)
	sendErr := make(chan error, 1)
	release := make(chan struct{}) // starts the second phase
	go func() {
		defer close(deliveries)
		// A command every millisecond or so: a steady stream, so that a
		// kill finds commands on the way.
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for i := 0; i < n; i++ {
			if i == phase {
				select {
				case <-release:
				case <-ctx.Done():
					return
				}
			}
			<-tick.C
			d, err := parent.SendAsync(ctx, childJID, command(i))
			if err != nil {
				sendErr <- fmt.Errorf("SendAsync %d: %w", i, err)
				return
			}
			sent.Add(1)
			deliveries <- d
		}
	}()

	// kill SIGKILLs node e once half of the phase's commands are handled,
	// waits for the moved agents' sessions on another node and for the
	// first command sent after the kill to be handled (commands are
	// handled in order: every command sent before is then handled too),
	// and logs the times. It returns the commands in flight at the kill:
	// written and not acknowledged.
	placed := map[string]string{"type": string(messaging.TypeComponentPlaced)}
	kill := func(e *services.Ejabberd, upTo int, moved ...*agent) float64 {
		t.Helper()
		eventually(t, 2*time.Minute, fmt.Sprintf("%d commands handled", upTo-phase/2), func() bool { return handled() >= upTo-phase/2 })
		began := time.Now()
		if err := e.Kill(); err != nil {
			t.Fatalf("kill ejabberd node %s: %v", e.Node(), err)
		}
		atKill, sentAtKill := handled(), int(sent.Load())
		inFlight := parent.metric(t, "mlsysops_messaging_sent_total", placed) -
			parent.metric(t, "mlsysops_messaging_retried_total", placed) -
			parent.metric(t, "mlsysops_messaging_acked_total", nil)
		var parts []string
		for _, m := range moved {
			eventually(t, time.Minute, m.JID()+" on another node", func() bool { return m.Connected() && m.Server() != e.C2SAddr() })
			parts = append(parts, fmt.Sprintf("%s on %s after %v", m.JID(), m.Server(), time.Since(began).Round(time.Millisecond)))
		}
		eventually(t, time.Minute, "the first command sent after the kill handled", func() bool { return handled() > sentAtKill })
		t.Logf("failover after SIGKILL of %s with %d of %d handled and %v in flight: %s; every command sent before the kill handled and the stream flowing again after %v",
			e.Node(), atKill, n, inFlight, strings.Join(parts, ", "), time.Since(began).Round(time.Millisecond))
		return inFlight
	}

	// 1. The node agent's node.
	childNode := nodeOf[child.Server()]
	inFlight := kill(childNode, phase, child)
	if parent.Server() == childNode.C2SAddr() {
		t.Fatalf("the cluster agent was on the killed node too")
	}
	eventually(t, 2*time.Minute, "the first phase handled", func() bool { return handled() >= phase })
	began := time.Now()
	if err := childNode.Start(ctx); err != nil {
		t.Fatalf("start node %s again: %v", childNode.Node(), err)
	}
	t.Logf("node %s started again and back in the cluster after %v", childNode.Node(), time.Since(began).Round(time.Millisecond))

	// 2. The node both agents are on now.
	close(release)
	inFlight += kill(nodeOf[parent.Server()], n, parent, child)
	// With nothing on the way at either kill, the test would prove
	// nothing about delivery.
	if inFlight < 1 {
		t.Errorf("no command in flight at either kill")
	}

	cmds.check(t, ctx, deliveries, sendErr)
	t.Logf("parent retried %v, child dropped %v duplicates, reconnects: parent %v, child %v",
		parent.metric(t, "mlsysops_messaging_retried_total", nil),
		child.metric(t, "mlsysops_messaging_duplicates_total", nil),
		parent.metric(t, "mlsysops_messaging_reconnects_total", nil),
		child.metric(t, "mlsysops_messaging_reconnects_total", nil))
}

// startServer is the c2s address a client with cfg tries first.
func startServer(t testing.TB, cfg messaging.Config) string {
	t.Helper()
	c, err := messaging.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c.Server()
}

// BenchmarkClusterNodeFailover measures what a SIGKILL of an ejabberd node
// costs the agents on it, with the messaging defaults: a cluster agent on
// one node of a two-node cluster sends a command every millisecond to a
// node agent on the other; the node agent's node is killed. Reported:
// s/reconnect, from the kill to the node agent's session on the surviving
// node, and s/resumed, from the kill to the first command sent after it
// handled (commands are handled in order: the ones lost with the node
// have been re-sent and handled by then). The killed node is started
// again between iterations, outside the measurement. Run with
//
//	go test -run '^$' -bench ClusterNodeFailover -benchtime 3x ./test/integration/messaging/
func BenchmarkClusterNodeFailover(b *testing.B) {
	nodes := testbed.EjabberdCluster(b, 2)
	addrs := []string{nodes[0].C2SAddr(), nodes[1].C2SAddr()}
	nodeOf := map[string]*services.Ejabberd{addrs[0]: nodes[0], addrs[1]: nodes[1]}
	d := fleet(2)
	rec := startAccounts(b, nodes[0], d, provision.ReconcilerConfig{})
	rec.stop()
	parentJID, childJID := d.Accounts[0], d.Accounts[1]
	ctx := context.Background()
	var reconnect, resumed time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		parent := startAgent(b, nodes[0], messaging.Config{JID: parentJID, PasswordFile: rec.file(parentJID), Layer: messaging.LayerCluster,
			Children: []string{childJID}, Servers: addrs, Logger: benchLogger(b).Logger})
		// The node agent starts on the other node.
		other := []string{addrs[1], addrs[0]}
		if startServer(b, messaging.Config{JID: childJID, Password: "-", Layer: messaging.LayerNode, Servers: other}) == parent.Server() {
			other = addrs
		}
		child := startAgent(b, nodes[0], messaging.Config{JID: childJID, PasswordFile: rec.file(childJID), Layer: messaging.LayerNode,
			Parent: parentJID, Servers: other, Logger: benchLogger(b).Logger})
		if parent.Server() == child.Server() {
			b.Fatalf("both agents on %s", parent.Server())
		}
		var handled atomic.Int64
		messaging.HandleFunc(child.Client, func(ctx context.Context, env *messaging.Envelope, m *messaging.ComponentPlaced) (messaging.Message, error) {
			handled.Add(1)
			return nil, nil
		})
		victim := nodeOf[child.Server()]
		var sent atomic.Int64
		stop := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			tick := time.NewTicker(time.Millisecond)
			defer tick.Stop()
			var ds []*messaging.Delivery
			for {
				select {
				case <-stop:
					for _, d := range ds {
						if err := d.Wait(ctx); err != nil {
							done <- err
							return
						}
					}
					done <- nil
					return
				case <-tick.C:
				}
				d, err := parent.SendAsync(ctx, childJID, &messaging.ComponentPlaced{Name: "app-1", ComponentName: "c"})
				if err != nil {
					done <- err
					return
				}
				sent.Add(1)
				ds = append(ds, d)
			}
		}()
		eventually(b, time.Minute, "commands flowing", func() bool { return handled.Load() > 200 })
		b.StartTimer()
		began := time.Now()
		if err := victim.Kill(); err != nil {
			b.Fatal(err)
		}
		sentAtKill := sent.Load()
		eventually(b, time.Minute, "the node agent on the other node", func() bool { return child.Connected() && child.Server() != victim.C2SAddr() })
		reconnect += time.Since(began)
		eventually(b, time.Minute, "a command sent after the kill handled", func() bool { return handled.Load() > sentAtKill })
		resumed += time.Since(began)
		b.StopTimer()
		close(stop)
		if err := <-done; err != nil {
			b.Fatalf("delivery: %v", err)
		}
		parent.stop()
		child.stop()
		if err := victim.Start(ctx); err != nil {
			b.Fatalf("start %s again: %v", victim.Node(), err)
		}
		b.StartTimer()
	}
	b.ReportMetric(reconnect.Seconds()/float64(b.N), "s/reconnect")
	b.ReportMetric(resumed.Seconds()/float64(b.N), "s/resumed")
}
