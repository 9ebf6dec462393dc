package messaging

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"mellium.im/xmpp/stream"
)

func TestAuthorize(t *testing.T) {
	p := newPeers("parent@d", []string{"nb@d"}, []string{"child@d"}, func(j string) bool { return strings.HasPrefix(j, "node-") })
	spec := func(typ Type) Spec { s, _ := Lookup(typ); return s }
	cases := map[string]struct {
		from       string
		typ        Type
		correlated bool
		keep       bool
		refused    bool
	}{
		"command from parent":             {from: "parent@d", typ: TypeComponentPlaced, keep: true},
		"command from controller":         {from: "nb@d", typ: TypeManagementMode, keep: true},
		"command from child":              {from: "child@d", typ: TypeComponentPlaced, keep: true, refused: true},
		"command from stranger":           {from: "x@d", typ: TypeComponentPlaced, refused: true},
		"report from child":               {from: "child@d", typ: TypeApplicationStatusReport, keep: true},
		"report from parent":              {from: "parent@d", typ: TypeApplicationStatusReport, keep: true, refused: true},
		"report from stranger":            {from: "x@d", typ: TypeTelemetryReport, refused: true},
		"subscribe from accepted":         {from: "node-7@d", typ: TypeSubscribe, keep: true},
		"subscribe from refused":          {from: "x@d", typ: TypeSubscribe, refused: true},
		"other report from accepted":      {from: "node-7@d", typ: TypeTelemetryReport, refused: true},
		"ping from child":                 {from: "child@d", typ: TypePing, keep: true},
		"ping from stranger":              {from: "x@d", typ: TypePing, refused: true},
		"response from stranger we asked": {from: "x@d", typ: TypeSubscribeAck, correlated: true, keep: true},
		"error without request":           {from: "parent@d", typ: TypeError, keep: true, refused: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			keep, reason := p.authorize(tc.from, spec(tc.typ), tc.correlated)
			if keep != tc.keep || (reason != "") != tc.refused {
				t.Errorf("authorize = (%v, %q), want keep %v refused %v", keep, reason, tc.keep, tc.refused)
			}
		})
	}
	if !p.addChild("node-7@d") || p.addChild("node-7@d") {
		t.Error("addChild should report only the first addition")
	}
	if keep, reason := p.authorize("node-7@d", spec(TypeTelemetryReport), false); !keep || reason != "" {
		t.Errorf("report from a new child refused: %q", reason)
	}
	p.removeChild("node-7@d")
	if p.role("node-7@d") != RoleUnknown {
		t.Error("removed child still known")
	}
	if diff := cmp.Diff([]string{"child@d"}, p.childList()); diff != "" {
		t.Errorf("children (-want +got):\n%s", diff)
	}
}

func TestTracker(t *testing.T) {
	t0 := time.Unix(1000, 0)
	tr := newTracker(3 * time.Second)
	tr.track("child@d", RoleChild)
	tr.track("parent@d", RoleParent)
	type step struct {
		at     time.Duration
		do     func(time.Time) []*PeerEvent
		expect string // "" or "peer online/offline"
	}
	one := func(e *PeerEvent) []*PeerEvent { return []*PeerEvent{e} }
	check := func(now time.Time) []*PeerEvent {
		var out []*PeerEvent
		evs, probes := tr.check(now)
		for _, e := range evs {
			out = append(out, &e)
		}
		for _, p := range probes {
			out = append(out, &PeerEvent{Peer: p.Peer + "/" + p.Resource, Reason: "probe"})
		}
		return out
	}
	steps := []step{
		{0, func(now time.Time) []*PeerEvent { return check(now) }, ""}, // paused: nothing
		{0, func(now time.Time) []*PeerEvent { tr.resume(now); return nil }, ""},
		{0, func(now time.Time) []*PeerEvent { return one(tr.presence("child@d", "agent", true, now)) }, "child@d online"},
		{time.Second, func(now time.Time) []*PeerEvent { return one(tr.seen("child@d", "heartbeat", now)) }, ""},
		{3 * time.Second, func(now time.Time) []*PeerEvent { return check(now) }, ""},
		// Silent, but the server shows its session: pinged, a second
		// timeout to answer.
		{5 * time.Second, func(now time.Time) []*PeerEvent { return check(now) }, "child@d/agent probed"},
		{7 * time.Second, func(now time.Time) []*PeerEvent { return check(now) }, ""},
		{7500 * time.Millisecond, func(now time.Time) []*PeerEvent { return one(tr.seen("child@d", "ping", now)) }, ""},
		{10 * time.Second, func(now time.Time) []*PeerEvent { return check(now) }, ""},
		{11 * time.Second, func(now time.Time) []*PeerEvent { return check(now) }, "child@d/agent probed"},
		{14 * time.Second, func(now time.Time) []*PeerEvent { return check(now) }, ""},
		{14100 * time.Millisecond, func(now time.Time) []*PeerEvent { return check(now) }, "child@d offline: silent for 6.6s, ping unanswered"},
		// Back by a heartbeat alone (no presence seen since): silence
		// takes it down without a ping.
		{15 * time.Second, func(now time.Time) []*PeerEvent { return one(tr.seen("child@d", "heartbeat", now)) }, "child@d online"},
		{18500 * time.Millisecond, func(now time.Time) []*PeerEvent { return check(now) }, "child@d offline: silent for 3.5s"},
		// The server answers the ping for a resource that is not there.
		{19 * time.Second, func(now time.Time) []*PeerEvent { return one(tr.presence("child@d", "agent", true, now)) }, "child@d online"},
		{22500 * time.Millisecond, func(now time.Time) []*PeerEvent { return check(now) }, "child@d/agent probed"},
		{23 * time.Second, func(now time.Time) []*PeerEvent { return one(tr.unreachable("child@d", now)) }, "child@d offline: silent for 4s, not connected"},
		{23 * time.Second, func(now time.Time) []*PeerEvent { return one(tr.unreachable("child@d", now)) }, ""},
		// Two resources: one leaving keeps the peer online.
		{26 * time.Second, func(now time.Time) []*PeerEvent { return one(tr.presence("child@d", "agent", true, now)) }, "child@d online"},
		{26 * time.Second, func(now time.Time) []*PeerEvent { return one(tr.presence("child@d", "other", true, now)) }, ""},
		{27 * time.Second, func(now time.Time) []*PeerEvent { return one(tr.presence("child@d", "other", false, now)) }, ""},
		{27 * time.Second, func(now time.Time) []*PeerEvent { return one(tr.presence("child@d", "agent", false, now)) }, "child@d offline: presence unavailable"},
		// The parent sends no heartbeats: no timeout...
		{28 * time.Second, func(now time.Time) []*PeerEvent { return one(tr.presence("parent@d", "agent", true, now)) }, "parent@d online"},
		{40 * time.Second, func(now time.Time) []*PeerEvent { return check(now) }, ""},
		// ...but after our reconnect it must show up within the timeout.
		{40 * time.Second, func(now time.Time) []*PeerEvent { tr.pause(); tr.resume(now); return nil }, ""},
		{44 * time.Second, func(now time.Time) []*PeerEvent { return check(now) }, "parent@d offline: not seen since our reconnect"},
	}
	for i, s := range steps {
		var got []string
		for _, e := range s.do(t0.Add(s.at)) {
			if e == nil {
				continue
			}
			switch {
			case e.Reason == "probe":
				got = append(got, e.Peer+" probed")
			case e.Online:
				got = append(got, e.Peer+" online")
			default:
				got = append(got, e.Peer+" offline: "+e.Reason)
			}
		}
		var want []string
		if s.expect != "" {
			want = []string{s.expect}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("step %d at %v (-want +got):\n%s", i, s.at, diff)
		}
	}
	states := tr.states()
	if len(states) != 2 || states[0].Peer != "child@d" || states[0].Online || !states[1].Online == false {
		t.Errorf("states = %+v", states)
	}
}

func TestBackoff(t *testing.T) {
	b := newBackoff(100*time.Millisecond, time.Second)
	b.rand = func() float64 { return 1 }
	var got []time.Duration
	for i := 0; i < 6; i++ {
		got = append(got, b.next())
	}
	want := []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, time.Second, time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ceilings (-want +got):\n%s", diff)
	}
	b.rand = func() float64 { return 0 }
	if d := b.next(); d != 100*time.Millisecond {
		t.Errorf("jitter below the minimum: %v", d)
	}
	b.reset()
	b.rand = func() float64 { return 1 }
	if d := b.next(); d != 100*time.Millisecond {
		t.Errorf("after reset: %v", d)
	}
	for i := 0; i < 100; i++ {
		if d := b.next(); d > time.Second {
			t.Fatalf("above the maximum: %v", d)
		}
	}
	if got := retryDelay(time.Second, 30*time.Second, 1); got != time.Second {
		t.Errorf("retryDelay(1) = %v", got)
	}
	if got := retryDelay(time.Second, 30*time.Second, 4); got != 8*time.Second {
		t.Errorf("retryDelay(4) = %v", got)
	}
	if got := retryDelay(time.Second, 30*time.Second, 40); got != 30*time.Second {
		t.Errorf("retryDelay(40) = %v", got)
	}
}

func TestClassifyDisconnect(t *testing.T) {
	cases := map[string]struct {
		err  error
		want disconnectKind
	}{
		"shutdown":    {stream.SystemShutdown, disconnectShutdown},
		"reset":       {stream.Reset, disconnectShutdown},
		"conflict":    {stream.Conflict, disconnectConflict},
		"auth":        {errors.Join(errAuth, errors.New("x")), disconnectAuth},
		"no password": {fmt.Errorf("%w: %w", errNoCredentials, ErrNoPassword), disconnectAuth},
		"eof":         {errors.New("unexpected EOF"), disconnectOther},
	}
	for name, tc := range cases {
		if got := classifyDisconnect(tc.err); got != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{JID: "node-1@mlsysops.local", Password: "pw", Layer: LayerNode, Parent: "cluster-1@mlsysops.local"}
	cases := map[string]struct {
		mutate func(*Config)
		want   []string
	}{
		"valid":            {mutate: func(*Config) {}},
		"missing identity": {mutate: func(c *Config) { c.JID, c.Password, c.Layer = "", "", "" }, want: []string{"JID is required", "password or password file is required", "layer"}},
		"password file":    {mutate: func(c *Config) { c.Password, c.PasswordFile = "", "/run/secrets/xmpp/password" }},
		"full JID":         {mutate: func(c *Config) { c.JID = "node-1@d/agent" }, want: []string{"want a bare JID"}},
		"bad parent":       {mutate: func(c *Config) { c.Parent = "@@" }, want: []string{"parent"}},
		"bad child":        {mutate: func(c *Config) { c.Children = []string{"d"} }, want: []string{"child"}},
		"server":           {mutate: func(c *Config) { c.Servers = []string{"a:5222", "nohost"} }, want: []string{`servers[1] "nohost": want host:port`}},
		"negative":         {mutate: func(c *Config) { c.RetryInterval = -1 }, want: []string{"retry interval"}},
		"backoff order":    {mutate: func(c *Config) { c.MinBackoff, c.MaxBackoff = time.Minute, time.Second }, want: []string{"exceeds max backoff"}},
		"window":           {mutate: func(c *Config) { c.Window, c.QueueSize = 100, 10 }, want: []string{"window 100 exceeds"}},
		"liveness":         {mutate: func(c *Config) { c.HeartbeatInterval, c.LivenessTimeout = time.Second, time.Second }, want: []string{"must exceed the heartbeat"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := ok
			tc.mutate(&c)
			err := c.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate() = nil")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %v, want it to mention %q", err, w)
				}
			}
		})
	}
	d := ok.withDefaults()
	if d.Resource != DefaultResource || !cmp.Equal(d.Servers, []string{"mlsysops.local:5222"}) || d.LivenessTimeout != 3*DefaultHeartbeatInterval {
		t.Errorf("defaults: resource %q servers %q liveness %v", d.Resource, d.Servers, d.LivenessTimeout)
	}
}

// TestClientQueuesWhileDisconnected checks, without a server, that sends
// queue while there is no session, apply back-pressure when the queue is
// full and fail at their deadline. No deadline here bounds the test's own
// progress: the queued messages have the default delivery timeout, and the
// message that must time out is alone in a client of its own.
func TestClientQueuesWhileDisconnected(t *testing.T) {
	start := func(t *testing.T) (*Client, context.Context) {
		c, err := New(Config{JID: "node-1@d", Password: "pw", Layer: LayerNode, Parent: "cluster-1@d",
			Servers: []string{"127.0.0.1:1"}, QueueSize: 2, Window: 2, HeartbeatInterval: -1,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- c.Run(ctx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run = %v", err)
			}
			if c.Connected() {
				t.Error("connected to nothing")
			}
		})
		return c, ctx
	}

	t.Run("queue and back-pressure", func(t *testing.T) {
		c, ctx := start(t)
		if _, err := c.SendAsync(ctx, "cluster-1@d", &ApplicationStatusReport{Application: "a", Phase: "Running"}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.SendAsync(ctx, "cluster-1@d", &Heartbeat{Name: "n"}); err != nil {
			t.Fatal(err)
		}
		if c.QueueDepth() != 2 {
			t.Errorf("depth %d, want 2", c.QueueDepth())
		}
		// However long this takes, the queue stays full: the send waits
		// until its context ends.
		blocked, bcancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer bcancel()
		if _, err := c.SendAsync(blocked, "cluster-1@d", &Ping{}); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("send into a full queue: %v, want back-pressure until the context's deadline", err)
		}
		if _, err := c.SendAsync(ctx, "node-1@d", &Ping{}); err == nil {
			t.Error("sending to itself accepted")
		}
		if _, err := c.SendAsync(ctx, "not a jid@@", &Ping{}); err == nil {
			t.Error("invalid destination accepted")
		}
		if _, err := c.SendAsync(ctx, "cluster-1@d", &Ack{}); err == nil {
			t.Error("transport type accepted from the application")
		}
	})

	t.Run("deadline", func(t *testing.T) {
		c, ctx := start(t)
		short, scancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer scancel()
		d, err := c.SendAsync(short, "cluster-1@d", &ApplicationStatusReport{Application: "a", Phase: "Running"})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Wait(ctx); !errors.Is(err, ErrDeliveryTimeout) {
			t.Errorf("undeliverable message: %v, want ErrDeliveryTimeout", err)
		}
		if c.QueueDepth() != 0 {
			t.Errorf("depth %d after the message timed out, want 0", c.QueueDepth())
		}
	})
}
