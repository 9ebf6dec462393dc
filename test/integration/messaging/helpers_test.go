// Package messaging_test runs the messaging library against a real ejabberd
// (Debian's 23.01, started privately per test by the testbed's services).
package messaging_test

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/mlsysops-go/mlsysops/internal/messaging"
	"github.com/mlsysops-go/mlsysops/internal/messaging/provision"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
	"github.com/mlsysops-go/mlsysops/internal/testbed/services"
)

// startEjabberd starts a private ejabberd for the test (stopped at cleanup).
func startEjabberd(t testing.TB) *services.Ejabberd {
	t.Helper()
	return testbed.Ejabberd(t)
}

func provisioner(t testing.TB, e *services.Ejabberd) *provision.HTTPAPI {
	t.Helper()
	hc, err := e.HTTPClient()
	if err != nil {
		t.Fatal(err)
	}
	if tr, ok := hc.Transport.(*http.Transport); ok {
		// Keep connections for parallel provisioning (the default keeps 2).
		tr.MaxIdleConnsPerHost = 16
	}
	hc.Timeout = time.Minute
	return provision.NewHTTPAPI(e.APIURL(), e.AdminJID(), e.AdminPassword(), hc)
}

// account provisions name@domain with a generated password.
func account(t testing.TB, p provision.Provisioner, name string) (string, string) {
	t.Helper()
	j := name + "@" + testbed.DefaultXMPPDomain
	pw, err := provision.Agent(context.Background(), p, j)
	if err != nil {
		t.Fatal(err)
	}
	return j, pw
}

func link(t testing.TB, p provision.Provisioner, a, b string) {
	t.Helper()
	if err := p.Link(context.Background(), a, b); err != nil {
		t.Fatal(err)
	}
}

// testLogger writes warnings and errors into the test log.
func testLogger(t testing.TB) *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("MESSAGING_TEST_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: level}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// agent is a running client with its own metrics registry.
type agent struct {
	*messaging.Client
	reg    *prometheus.Registry
	cancel context.CancelFunc
	done   chan struct{}
}

// stop shuts the client down and waits for Run to return.
func (a *agent) stop() {
	a.cancel()
	<-a.done
}

// startAgent creates and runs a client; cfg needs only the identity and
// peers, the server settings are filled in.
func startAgent(t testing.TB, e *services.Ejabberd, cfg messaging.Config) *agent {
	t.Helper()
	a, err := startAgentErr(t, e, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// startAgentErr is startAgent for goroutines other than the test's.
func startAgentErr(t testing.TB, e *services.Ejabberd, cfg messaging.Config) (*agent, error) {
	a, err := launchAgent(t, e, cfg)
	if err != nil {
		return nil, err
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer wcancel()
	if err := a.WaitConnected(wctx); err != nil {
		return nil, err
	}
	return a, nil
}

// launchAgent creates and runs a client without waiting for its session.
func launchAgent(t testing.TB, e *services.Ejabberd, cfg messaging.Config) (*agent, error) {
	if len(cfg.Servers) == 0 {
		cfg.Servers = []string{e.C2SAddr()}
	}
	cfg.CAFile = e.CAFile()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	reg := prometheus.NewRegistry()
	cfg.Registerer = reg
	c, err := messaging.New(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	a := &agent{Client: c, reg: reg, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		if err := c.Run(ctx); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	var once sync.Once
	t.Cleanup(func() { once.Do(a.stop) })
	return a, nil
}

// metric sums the values of a metric family in the agent's registry whose
// labels include want.
func (a *agent) metric(t testing.TB, name string, want map[string]string) float64 {
	t.Helper()
	return gather(t, a.reg, name, want)
}

// gather sums the values of a metric family of reg whose labels include
// want.
func gather(t testing.TB, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !labelsMatch(m, want) {
				continue
			}
			switch {
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
			}
		}
	}
	return sum
}

func labelsMatch(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == k && l.GetValue() == v {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// accounts is an accounts reconciler running in the test, with its own
// metrics registry and password files.
type accounts struct {
	*provision.Reconciler
	secrets *provision.SecretFiles
	reg     *prometheus.Registry
	stop    func()
}

// startAccounts runs a reconciler that keeps the accounts and links of d
// on e, with generated passwords in files of a temporary folder, and waits
// for its first full pass.
func startAccounts(t testing.TB, e *services.Ejabberd, d provision.Desired, cfg provision.ReconcilerConfig) *accounts {
	t.Helper()
	dir := t.TempDir()
	secrets := &provision.SecretFiles{Files: map[string]string{}, Generate: true}
	for _, j := range d.Accounts {
		secrets.Files[j] = filepath.Join(dir, provision.PasswordFileName(j))
	}
	return startAccountsWith(t, e, d, secrets, cfg)
}

// startAccountsWith is startAccounts with given password files.
func startAccountsWith(t testing.TB, e *services.Ejabberd, d provision.Desired, secrets *provision.SecretFiles, cfg provision.ReconcilerConfig) *accounts {
	t.Helper()
	a := &accounts{secrets: secrets, reg: prometheus.NewRegistry()}
	cfg.Server, cfg.Secrets, cfg.Desired, cfg.Registerer = provisioner(t, e), a.secrets, d, a.reg
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	var err error
	if a.Reconciler, err = provision.NewReconciler(cfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := a.Run(ctx); err != nil {
			t.Errorf("reconciler: %v", err)
		}
	}()
	var once sync.Once
	a.stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(a.stop)
	eventually(t, 2*time.Minute, "the reconciler's first full pass", func() bool { return a.Ready() == nil })
	return a
}

// file is the password file of an account.
func (a *accounts) file(account string) string { return a.secrets.Files[account] }

// metric sums a metric of the reconciler whose labels include want.
func (a *accounts) metric(t testing.TB, name string, want map[string]string) float64 {
	t.Helper()
	return gather(t, a.reg, name, want)
}
