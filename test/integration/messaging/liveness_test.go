package messaging_test

import (
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/messaging"
)

// proxy forwards TCP connections to ejabberd and can cut them (as a crash
// would) or stop forwarding while keeping them open (as a network partition
// or a hung agent would).
type proxy struct {
	l      net.Listener
	target string
	frozen atomic.Bool
	// refuse makes the proxy drop new connections at once, like a host
	// that is down.
	refuse atomic.Bool
	mu     sync.Mutex
	conns  []*net.TCPConn
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{l: l, target: target}
	t.Cleanup(func() { l.Close(); p.cut() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			if p.refuse.Load() {
				c.Close()
				continue
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c.(*net.TCPConn), s.(*net.TCPConn))
			p.mu.Unlock()
			go p.pipe(c, s)
			go p.pipe(s, c)
		}
	}()
	return p
}

func (p *proxy) addr() string { return p.l.Addr().String() }

func (p *proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		for p.frozen.Load() {
			time.Sleep(10 * time.Millisecond)
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				dst.Close()
			}
			return
		}
	}
}

// cut resets every proxied connection, like a crashed host.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.SetLinger(0)
		c.Close()
	}
	p.conns = nil
}

// waitEvent waits for the event of peer going online or offline, at or
// after since (events queued from before are not the one the caller waits
// for).
func waitEvent(t *testing.T, a *agent, peer string, online bool, since time.Time, within time.Duration) messaging.PeerEvent {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		select {
		case ev := <-a.Events():
			if ev.Peer == peer && ev.Online == online && !ev.Time.Before(since) {
				return ev
			}
		case <-timer.C:
			t.Fatalf("%s was not reported online=%v within %v; states: %+v", peer, online, within, a.PeerStates())
		}
	}
}

// TestChildLiveness checks that a cluster agent reports a node agent gone
// within its liveness timeout when the node agent crashes, goes silent, or
// stops, and reports it back when it returns.
func TestChildLiveness(t *testing.T) {
	const timeout = 1500 * time.Millisecond
	// A bound for a test that would otherwise hang, not a measure: the
	// latencies are logged. Without the liveness tracking a silent peer
	// stays online far longer (ejabberd notices no dead TCP connection).
	const within = 30 * time.Second

	e := startEjabberd(t)
	p := provisioner(t, e)
	parentJID, parentPW := account(t, p, "cluster-1")
	childJID, childPW := account(t, p, "node-1")
	link(t, p, parentJID, childJID)
	px := startProxy(t, e.C2SAddr())

	parent := startAgent(t, e, messaging.Config{JID: parentJID, Password: parentPW, Layer: messaging.LayerCluster,
		Children: []string{childJID}, LivenessTimeout: timeout})
	childCfg := messaging.Config{JID: childJID, Password: childPW, Layer: messaging.LayerNode, Parent: parentJID,
		Servers: []string{px.addr()}, HeartbeatInterval: 300 * time.Millisecond, MaxBackoff: 500 * time.Millisecond}
	child := startAgent(t, e, childCfg)
	waitEvent(t, parent, childJID, true, time.Time{}, within)

	t.Run("crash", func(t *testing.T) {
		began := time.Now()
		px.refuse.Store(true)
		px.cut()
		ev := waitEvent(t, parent, childJID, false, began, within)
		t.Logf("gone after %v (%s)", time.Since(began).Round(time.Millisecond), ev.Reason)
		px.refuse.Store(false)
		ev = waitEvent(t, parent, childJID, true, began, within)
		t.Logf("back after %v (%s)", time.Since(began).Round(time.Millisecond), ev.Reason)
	})

	t.Run("silent", func(t *testing.T) {
		began := time.Now()
		px.frozen.Store(true)
		ev := waitEvent(t, parent, childJID, false, began, within)
		if !strings.HasPrefix(ev.Reason, "silent") {
			t.Errorf("a frozen connection reported gone for %q, want the liveness timeout (silent for ...)", ev.Reason)
		}
		t.Logf("gone after %v (%s)", time.Since(began).Round(time.Millisecond), ev.Reason)
		px.frozen.Store(false)
		ev = waitEvent(t, parent, childJID, true, began, within)
		t.Logf("back after %v (%s)", time.Since(began).Round(time.Millisecond), ev.Reason)
	})

	t.Run("stop and restart", func(t *testing.T) {
		began := time.Now()
		child.stop()
		ev := waitEvent(t, parent, childJID, false, began, within)
		t.Logf("gone after %v (%s)", time.Since(began).Round(time.Millisecond), ev.Reason)
		startAgent(t, e, childCfg)
		ev = waitEvent(t, parent, childJID, true, began, within)
		t.Logf("back after %v (%s)", time.Since(began).Round(time.Millisecond), ev.Reason)
	})

	states := parent.PeerStates()
	if len(states) != 1 || states[0].Peer != childJID || !states[0].Online || states[0].Role != messaging.RoleChild {
		t.Errorf("PeerStates = %+v, want %s online as a child", states, childJID)
	}
}

// TestQuietChildThatAnswersStaysOnline checks that a child whose
// heartbeats do not come (late behind a loaded server, here not sent at
// all) but whose session is up and answers stays online: the parent pings
// it at the end of each liveness timeout rather than reporting it gone,
// which under a connection storm took children down and up again, each
// change a write of its parent.
func TestQuietChildThatAnswersStaysOnline(t *testing.T) {
	const timeout = 1 * time.Second
	e := startEjabberd(t)
	p := provisioner(t, e)
	parentJID, parentPW := account(t, p, "cluster-1")
	childJID, childPW := account(t, p, "node-1")
	link(t, p, parentJID, childJID)

	parent := startAgent(t, e, messaging.Config{JID: parentJID, Password: parentPW, Layer: messaging.LayerCluster,
		Children: []string{childJID}, LivenessTimeout: timeout})
	startAgent(t, e, messaging.Config{JID: childJID, Password: childPW, Layer: messaging.LayerNode, Parent: parentJID,
		HeartbeatInterval: time.Hour})
	waitEvent(t, parent, childJID, true, time.Time{}, 30*time.Second)

	// Six timeouts without a heartbeat.
	quiet := time.After(6 * timeout)
	for waiting := true; waiting; {
		select {
		case ev := <-parent.Events():
			if ev.Peer == childJID && !ev.Online {
				t.Fatalf("a quiet child whose session answers reported gone (%s)", ev.Reason)
			}
		case <-quiet:
			waiting = false
		}
	}
	if n := parent.metric(t, "mlsysops_messaging_liveness_probes_total", map[string]string{"result": "answered"}); n < 2 {
		t.Errorf("%v answered liveness pings in six timeouts, want at least 2", n)
	}
	if states := parent.PeerStates(); len(states) != 1 || !states[0].Online {
		t.Errorf("PeerStates = %+v, want %s online", states, childJID)
	}
}
