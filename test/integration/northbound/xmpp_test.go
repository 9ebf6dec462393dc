package northbound_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/messaging"
	"github.com/mlsysops-go/mlsysops/internal/messaging/provision"
	"github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
	"github.com/mlsysops-go/mlsysops/northbound/api"
	"github.com/mlsysops-go/mlsysops/northbound/handlers"
)

// xmppAccount provisions an account on the shared testbed's ejabberd.
func xmppAccount(t *testing.T, tb *testbed.Env, name string) (string, string) {
	t.Helper()
	pem, err := os.ReadFile(tb.XMPPCAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	p := provision.NewHTTPAPI(tb.XMPPAdminURL, tb.XMPPAdminJID, tb.XMPPAdminPassword, hc)
	jid := name + "@" + tb.XMPPDomain
	pw, err := provision.Agent(context.Background(), p, jid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.DeleteAccount(context.Background(), jid) })
	return jid, pw
}

// runClient connects a messaging client until the test ends.
func runClient(t *testing.T, cfg messaging.Config, setup func(*messaging.Client)) *messaging.Client {
	t.Helper()
	cfg.Logger = testLogger(t)
	c, err := messaging.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(c)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	wctx, wcancel := context.WithTimeout(ctx, time.Minute)
	defer wcancel()
	if err := c.WaitConnected(wctx); err != nil {
		t.Fatalf("%s did not connect: %v", cfg.JID, err)
	}
	return c
}

// TestPingAndModeOverXMPP: ping is a real round trip to an agent through
// ejabberd, and the management mode reaches it. The agent here is a
// messaging client standing in for a continuum agent: it accepts the API's
// JID as a controller, as real agents must be configured to.
func TestPingAndModeOverXMPP(t *testing.T) {
	tb := testbed.Shared(t)
	ctx := ctxT(t)
	nbJID, nbPW := xmppAccount(t, tb, uniq("northbound"))
	agentJID, agentPW := xmppAccount(t, tb, uniq("continuum"))
	silentJID, _ := xmppAccount(t, tb, uniq("silent"))

	var (
		mu    sync.Mutex
		modes []int
	)
	runClient(t, messaging.Config{
		JID: agentJID, Password: agentPW, Layer: messaging.LayerContinuum, Servers: []string{tb.XMPPAddr}, CAFile: tb.XMPPCAFile,
		Controllers: []string{nbJID}, HeartbeatInterval: -1,
	}, func(c *messaging.Client) {
		messaging.HandleFunc(c, func(_ context.Context, _ *messaging.Envelope, p *messaging.Ping) (messaging.Message, error) {
			return &messaging.Pong{Note: "pong " + p.Note}, nil
		})
		messaging.HandleFunc(c, func(_ context.Context, _ *messaging.Envelope, m *messaging.ManagementMode) (messaging.Message, error) {
			mu.Lock()
			modes = append(modes, m.Mode)
			mu.Unlock()
			return nil, nil
		})
	})
	nb := runClient(t, messaging.Config{
		JID: nbJID, Password: nbPW, Layer: messaging.LayerService, Servers: []string{tb.XMPPAddr}, CAFile: tb.XMPPCAFile, HeartbeatInterval: -1,
	}, nil)

	e := newEnv(t, handlers.Config{Messenger: nb, PingTimeout: 5 * time.Second})
	for _, a := range []state.Agent{
		{JID: agentJID, Layer: "continuum", Online: true},
		{JID: silentJID, Layer: "cluster", Cluster: "cloud-1"},
	} {
		if err := e.store.Agents().Register(ctx, a); err != nil {
			t.Fatal(err)
		}
	}

	r := e.do(t, "POST", "/v1/agents/"+agentJID+"/ping", viewerToken, "", nil, "X-Request-Id", "ping-1")
	res := decode[api.PingResult](t, r, 200)
	if res.JID != agentJID || res.LatencyMillis <= 0 || res.Note != "pong ping-1" {
		t.Errorf("ping: %+v", res)
	}
	up := decode[api.UpstreamResult](t, e.do(t, "GET", "/manage/ping", viewerToken, "", nil), 200)
	if up.Status != "success" || up.Message != "Agent Alive" {
		t.Errorf("/manage/ping: %+v", up)
	}
	// An agent that never answers: a timeout, not an error of the server.
	p := problem(t, e.do(t, "POST", "/v1/agents/"+silentJID+"/ping", viewerToken, "", nil), 504)
	if p.Type != api.ProblemTimeout {
		t.Errorf("silent agent: %+v", p)
	}

	res1, err := e.op.SetAgentMode(ctx, agentJID, 1)
	if err != nil || res1.Failed != 0 || len(res1.Results) != 1 || !res1.Results[0].OK {
		t.Fatalf("set mode: %+v %v", res1, err)
	}
	all, err := e.op.SetMode(ctx, 0)
	if err != nil || all.Failed != 1 || len(all.Results) != 2 {
		t.Errorf("set mode on every agent (one silent): %+v %v", all, err)
	}
	for _, r := range all.Results {
		if (r.JID == agentJID) != r.OK {
			t.Errorf("mode result: %+v", r)
		}
	}
	mu.Lock()
	got := append([]int(nil), modes...)
	mu.Unlock()
	if len(got) != 2 || got[0] != 1 || got[1] != 0 {
		t.Errorf("modes the agent received: %v, want [1 0]", got)
	}
	upMode := decode[api.UpstreamResult](t, e.do(t, "PUT", "/manage/mode/1", operatorToken, "", nil), 200)
	if upMode.Status != "partial" {
		t.Errorf("/manage/mode with a silent agent: %+v", upMode)
	}
	p = problem(t, e.do(t, "PUT", "/v1/agents/mode", operatorToken, "application/json", []byte(`{"mode": 1, "agents": ["ghost@x"]}`)), 422)
	if len(p.Problems) != 1 || p.Problems[0].Field != "agents[0]" {
		t.Errorf("unknown agent in a mode request: %+v", p.Problems)
	}
}
