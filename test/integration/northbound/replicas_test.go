package northbound_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/testbed"
	"github.com/mlsysops-go/mlsysops/internal/testbed/proc"
	"github.com/mlsysops-go/mlsysops/northbound/api"
)

// replicas starts n northbound replicas of the shared testbed's build,
// with its tokens, XMPP account (one resource each), Redis (under a
// prefix of this test, so that no agent acts on what it queues) and
// Karmada.
func replicas(t *testing.T, env *testbed.Env, n int) []*proc.Process {
	t.Helper()
	root, err := testbed.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "bin", "mlsysops-northbound")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the shared testbed builds the northbound: %v", err)
	}
	dir := t.TempDir()
	prefix := uniq("nbrep")
	base := testbed.FreePorts(t, n)
	var out []*proc.Process
	for i := 0; i < n; i++ {
		name := "northbound-" + strconv.Itoa(i)
		p := &proc.Process{
			Name: name, Path: bin, Dir: dir,
			Args: []string{
				"--listen=127.0.0.1:" + strconv.Itoa(base+i),
				"--token-file=" + filepath.Join(env.StateDir, "pki", "northbound.tokens"),
				"--redis-addr=" + env.RedisAddr, "--redis-prefix=" + prefix,
				"--kubeconfig=" + env.Kubeconfig, "--karmada-context=" + testbed.ContextKarmada, "--host-context=" + testbed.ContextHost,
				"--xmpp-jid=northbound@" + env.XMPPDomain, "--xmpp-password-file=" + filepath.Join(env.StateDir, "pki", "northbound.xmpp.password"),
				"--xmpp-server=" + env.XMPPAddr, "--xmpp-ca-file=" + env.XMPPCAFile, "--xmpp-resource=" + name,
				"--shutdown-delay=2s", "--log-format=json",
			},
			Env:     []string{"REDIS_PASSWORD=" + env.RedisPassword},
			LogFile: filepath.Join(dir, name+".log"), PIDFile: filepath.Join(dir, name+".pid"),
		}
		addr := "http://127.0.0.1:" + strconv.Itoa(base+i)
		p.Ready = func(ctx context.Context) error { return testbed.GetOK(ctx, addr+api.PathReadyz) }
		out = append(out, p)
	}
	t.Cleanup(func() {
		for _, p := range out {
			_ = p.Stop(10 * time.Second)
			if t.Failed() {
				t.Logf("--- last lines of %s:\n%s", p.Name, proc.Tail(p.LogFile, 30))
			}
		}
	})
	for _, p := range out {
		start(t, p)
	}
	return out
}

func start(t *testing.T, p *proc.Process) {
	t.Helper()
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.WaitReady(ctx); err != nil {
		t.Fatalf("%s: %v\n%s", p.Name, err, proc.Tail(p.LogFile, 20))
	}
}

func listenOf(p *proc.Process) string {
	for _, a := range p.Args {
		if v, ok := strings.CutPrefix(a, "--listen="); ok {
			return v
		}
	}
	return ""
}

// load submits applications through the service until stop closes, each
// with an Idempotency-Key, retrying a failed submission with the same key
// when retry is set. It returns the names accepted and the requests that
// failed.
type load struct {
	svc, token string
	retry      atomic.Bool
	mu         sync.Mutex
	accepted   map[string]api.Accepted
	failures   []string
	requests   atomic.Int64
}

func (l *load) submit(ctx context.Context, name string) error {
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.svc+api.PathApplications, bytes.NewReader(appJSON(name)))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+l.token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(api.HeaderIdempotencyKey, "key-"+name)
		l.requests.Add(1)
		resp, err := http.DefaultClient.Do(req)
		var acc api.Accepted
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusAccepted {
				err = fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(body))
			} else if err = json.Unmarshal(body, &acc); err == nil {
				l.mu.Lock()
				l.accepted[name] = acc
				l.mu.Unlock()
				return nil
			}
		}
		l.mu.Lock()
		l.failures = append(l.failures, name+": "+err.Error())
		l.mu.Unlock()
		if !l.retry.Load() || ctx.Err() != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (l *load) run(ctx context.Context, workers int) *sync.WaitGroup {
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				_ = l.submit(context.Background(), uniq("rep"))
			}
		}()
	}
	return &wg
}

// Two northbound replicas behind one service address, under a steady
// stream of submissions: a rolling restart (SIGTERM, the replica drains:
// /readyz fails while it still serves, then it stops; started again)
// drops no request. Then a replica SIGKILLed under load: the requests it
// held fail, the client retries them with the same Idempotency-Key on the
// survivor, and every application is queued exactly once (generation 1,
// the retries replayed). Both replicas hold an XMPP session of the one
// account, each on its own resource.
func TestReplicasRollingRestartAndKill(t *testing.T) {
	env := testbed.Shared(t)
	rs := replicas(t, env, 2)
	var addrs []string
	for _, r := range rs {
		addrs = append(addrs, listenOf(r))
	}
	// Both replicas keep their XMPP session: the other does not take it
	// over (each binds its own resource).
	pollT(t, "both replicas connected to XMPP", 200*time.Millisecond, time.Minute, func(ctx context.Context) error {
		for _, a := range addrs {
			if err := metricIs(ctx, "http://"+a, "mlsysops_messaging_connected", "1"); err != nil {
				return err
			}
		}
		return nil
	})
	svc := testbed.NewBalancer(t, addrs, api.PathReadyz)
	pollT(t, "service sees both ready", 50*time.Millisecond, 10*time.Second, func(context.Context) error {
		if !svc.AllReady() {
			return errors.New("not yet")
		}
		return nil
	})
	l := &load{svc: svc.URL, token: env.NorthboundToken, accepted: map[string]api.Accepted{}}

	// Rolling restart: no request may fail.
	ctx, stop := context.WithCancel(context.Background())
	wg := l.run(ctx, 4)
	time.Sleep(time.Second)
	for _, r := range rs {
		if err := r.Stop(30 * time.Second); err != nil {
			t.Fatal(err)
		}
		start(t, r)
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(time.Second)
	stop()
	wg.Wait()
	if len(l.failures) > 0 || svc.Failed() > 0 {
		t.Fatalf("rolling restart: %d of %d requests failed (%d not forwarded): %v", len(l.failures), l.requests.Load(), svc.Failed(), l.failures)
	}
	t.Logf("rolling restart of 2 replicas: %d submissions, none failed", l.requests.Load())

	// SIGKILL under load: failures are retried with the same key.
	l.retry.Store(true)
	before := l.requests.Load()
	ctx, stop = context.WithCancel(context.Background())
	wg = l.run(ctx, 4)
	time.Sleep(time.Second)
	if err := rs[0].Kill(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	start(t, rs[0])
	time.Sleep(time.Second)
	stop()
	wg.Wait()
	t.Logf("replica SIGKILLed under load: %d submissions, %d failed and retried", l.requests.Load()-before, len(l.failures))

	// Every accepted application is queued once: a fresh read through the
	// service finds it at generation 1, and a replayed submission said so.
	c := newClient(t, svc.URL, env.NorthboundViewerToken)
	for name, acc := range l.accepted {
		if acc.Generation != 1 {
			t.Errorf("%s accepted at generation %d, want 1 (queued twice?)", name, acc.Generation)
		}
		got, err := c.Applications().Get(ctxT(t), name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got.Generation != 1 {
			t.Errorf("%s at generation %d, want 1", name, got.Generation)
		}
	}
	if len(l.accepted) == 0 {
		t.Fatal("no submission accepted")
	}
}

// metricIs checks the one sample of a series in a replica's /metrics,
// whatever its labels (the messaging metrics carry the account's JID).
func metricIs(ctx context.Context, base, name, want string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+api.PathMetrics, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(body), "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		if rest[0] == '{' {
			if _, rest, ok = strings.Cut(rest, "} "); !ok {
				continue
			}
		}
		if v := strings.TrimSpace(rest); v != want {
			return fmt.Errorf("%s: %s %s, want %s", base, name, v, want)
		}
		return nil
	}
	return fmt.Errorf("%s: no %s", base, name)
}

func pollT(t *testing.T, what string, interval, within time.Duration, cond func(ctx context.Context) error) {
	t.Helper()
	testbed.Poll(t, what, interval, within, cond)
}
