package testbed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/mlsysops-go/mlsysops/internal/testbed/proc"
	"github.com/mlsysops-go/mlsysops/internal/testbed/services"
)

// Environment variables that steer the test helpers.
const (
	// EnvSkipIntegration set to 1 skips integration tests instead of
	// failing them when the binaries are missing. CI never sets it.
	EnvSkipIntegration = "MLSYSOPS_SKIP_INTEGRATION"
	// EnvTestState overrides the shared test testbed's state folder
	// (default <repo>/.testbed-test).
	EnvTestState = "MLSYSOPS_TESTBED_STATE"
	// EnvTestPortBase overrides its port base (default 17000, so that it
	// runs beside a `make up` testbed on 16000).
	EnvTestPortBase = "MLSYSOPS_TESTBED_PORT_BASE"
	// EnvTestXMPPNodes sets the shared test testbed's ejabberd nodes
	// (Options.XMPPNodes): 2 runs the integration tests against a
	// two-node ejabberd cluster.
	EnvTestXMPPNodes = "MLSYSOPS_TESTBED_XMPP_NODES"
	// EnvTestKWOKOnly set to 1 runs the shared test testbed without real
	// nodes (Options.KWOKOnly), for benchmarks of the agents and ejabberd
	// that want the cores the kubelets and containerd would take. Tests
	// that run pods need the real nodes and fail without them.
	EnvTestKWOKOnly = "MLSYSOPS_TESTBED_KWOK_ONLY"
)

// DefaultTestPortBase is the shared test testbed's port base.
const DefaultTestPortBase = 17000

// RESTConfig returns the client configuration of a kubeconfig context
// (ContextHost, ContextKarmada or a member cluster name), failing t if the
// context does not exist.
func (e *Env) RESTConfig(t testing.TB, context string) *rest.Config {
	t.Helper()
	cfg, err := e.ClientConfig(context)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// ClientConfig returns the client configuration of a kubeconfig context.
func (e *Env) ClientConfig(context string) (*rest.Config, error) {
	return restConfig(e.Kubeconfig, context)
}

var shared struct {
	once sync.Once
	env  *Env
	err  error
}

// Shared starts, or reuses, the testbed that every integration test of
// this checkout shares, and returns its Env. Test binaries that run at the
// same time take turns through a file lock; the first brings the testbed
// up and the others find it running. It stays up after the tests; `make
// test` takes it down at the end.
//
// When the binaries from `make deps` are missing the test fails and says
// so, unless MLSYSOPS_SKIP_INTEGRATION=1 is set, which skips it.
func Shared(t testing.TB) *Env {
	t.Helper()
	shared.once.Do(func() { shared.env, shared.err = upShared() })
	if shared.err != nil {
		if os.Getenv(EnvSkipIntegration) == "1" {
			t.Skipf("integration test skipped (%s=1): %v", EnvSkipIntegration, shared.err)
		}
		t.Fatalf("shared testbed: %v", shared.err)
	}
	return shared.env
}

// RepoRoot finds the checkout's root (the folder with the product's
// go.mod) from the working directory up.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(b), "module github.com/mlsysops-go/mlsysops\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no github.com/mlsysops-go/mlsysops checkout above the working directory")
		}
		dir = parent
	}
}

// StopSharedCluster stops the processes of one member cluster of the
// shared testbed. The cluster comes back at the end of the test (and with
// RestoreShared); the test must leave the testbed as it found it.
func StopSharedCluster(t testing.TB, name string) {
	t.Helper()
	err := withShared(func(tb *Testbed) error { return tb.StopCluster(name) })
	t.Cleanup(func() { RestoreShared(t) })
	if err != nil {
		t.Fatalf("stop member cluster %s: %v", name, err)
	}
}

// RestoreShared starts whatever of the shared testbed is not running and
// waits until every member cluster is Ready again.
func RestoreShared(t testing.TB) {
	t.Helper()
	if err := RestoreSharedContext(context.Background()); err != nil {
		t.Fatalf("restore the shared testbed: %v", err)
	}
}

// RestoreSharedContext is RestoreShared for callers without a test (a
// goroutine of a test, which must not call t.Fatal).
func RestoreSharedContext(ctx context.Context) error {
	return withShared(func(tb *Testbed) error {
		ctx, cancel := context.WithTimeout(ctx, sharedUpTimeout)
		defer cancel()
		_, err := tb.Up(ctx)
		return err
	})
}

// RestartShared starts one component of the shared testbed again when it
// is not running (Testbed.Restart).
func RestartShared(ctx context.Context, name string) error {
	return withShared(func(tb *Testbed) error { return tb.Restart(ctx, name) })
}

// SignalShared sends sig to one component of the shared testbed (a name
// SharedComponents lists) and its descendants, and returns the pid
// signalled: SIGKILL crashes it until RestoreShared, SIGSTOP pauses it
// until the pid gets SIGCONT (proc.SignalTree).
func SignalShared(name string, sig syscall.Signal) (int, error) {
	var pid int
	err := withShared(func(tb *Testbed) error {
		var err error
		pid, err = tb.Signal(name, sig)
		return err
	})
	return pid, err
}

// SharedComponents lists the names of the shared testbed's components
// that run now (Testbed.Status's names).
func SharedComponents() ([]string, error) {
	var out []string
	err := withShared(func(tb *Testbed) error {
		cs, err := tb.components()
		if err != nil {
			return err
		}
		for _, c := range cs {
			if _, ok := c.pid(); ok {
				out = append(out, c.name)
			}
		}
		return nil
	})
	return out, err
}

// sharedUpTimeout bounds an up of the shared testbed so that a hang fails
// instead of waiting for the package's timeout; it is not a measure. The
// first up of a checkout also builds the images the real nodes import:
// 546 s for that build alone on this machine with two testbeds and other
// builds beside it (load average 50 on 2 cores), where a 10-minute bound
// killed the import that followed.
const sharedUpTimeout = 30 * time.Minute

// upShared brings the shared testbed up, trying a second time when the
// first attempt fails: a package whose every test fails on one transient
// error (a member apiserver still starting, a write conflict) says nothing
// about the product.
func upShared() (*Env, error) {
	var env *Env
	var err error
	for attempt := 1; attempt <= 2; attempt++ {
		err = withShared(func(tb *Testbed) error {
			ctx, cancel := context.WithTimeout(context.Background(), sharedUpTimeout)
			defer cancel()
			var err error
			env, err = tb.Up(ctx)
			return err
		})
		if err == nil {
			return env, nil
		}
		fmt.Fprintf(os.Stderr, "shared testbed: attempt %d: %v\n", attempt, err)
	}
	return nil, err
}

// withShared runs fn on the shared testbed while holding its lock.
func withShared(fn func(tb *Testbed) error) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	bin := filepath.Join(root, "bin")
	var missing []string
	for _, b := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "karmada-controller-manager", "karmada-scheduler", "karmada-aggregated-apiserver", "karmada-webhook", "kwok", "karmada-crds/webhook-configuration.yaml", "versitygw"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s in %s: run `make deps` first", strings.Join(missing, ", "), bin)
	}
	state := os.Getenv(EnvTestState)
	if state == "" {
		state = filepath.Join(root, ".testbed-test")
	}
	base := DefaultTestPortBase
	if v := os.Getenv(EnvTestPortBase); v != "" {
		if base, err = strconv.Atoi(v); err != nil {
			return fmt.Errorf("%s=%q: %w", EnvTestPortBase, v, err)
		}
	}
	xmppNodes := 0
	if v := os.Getenv(EnvTestXMPPNodes); v != "" {
		if xmppNodes, err = strconv.Atoi(v); err != nil {
			return fmt.Errorf("%s=%q: %w", EnvTestXMPPNodes, v, err)
		}
	}
	if err := os.MkdirAll(state, 0o755); err != nil {
		return err
	}
	lock, err := os.OpenFile(state+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)

	var out strings.Builder
	tb, err := New(Options{
		Descriptions: filepath.Join(root, "descriptions"), StateDir: state, PortBase: base, BinDir: bin, Out: &out,
		XMPPNodes: xmppNodes, KWOKOnly: os.Getenv(EnvTestKWOKOnly) == "1",
	})
	if err != nil {
		return err
	}
	if err := fn(tb); err != nil {
		return fmt.Errorf("%w\nprogress:\n%s", err, out.String())
	}
	return nil
}

// Redis starts a Redis private to the test (its own folder and port),
// for tests that restart or crash it. It is stopped when the test ends.
func Redis(t testing.TB) *services.Redis {
	t.Helper()
	r := services.NewRedis(t.TempDir(), FreePorts(t, 1), services.RandomSecret())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.Start(ctx); err != nil {
		t.Fatalf("private redis: %v", err)
	}
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	return r
}

// Postgres starts a PostgreSQL private to the test (its own cluster and
// port), for tests that need a database or restart or crash it. It is
// stopped and its folder removed when the test ends.
func Postgres(t testing.TB) *services.Postgres {
	t.Helper()
	// PostgreSQL runs as its own user, which must reach the folder.
	dir, err := os.MkdirTemp("", "mlsysops-postgres-")
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	p := services.NewPostgres(filepath.Join(dir, "postgres"), FreePorts(t, 1), services.RandomSecret())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := p.Start(ctx); err != nil {
		os.RemoveAll(dir)
		t.Fatalf("private postgres: %v", err)
	}
	t.Cleanup(func() {
		_ = p.Stop(context.Background())
		_ = p.Kill()
		os.RemoveAll(dir)
	})
	return p
}

// S3 starts an S3 server (versitygw from `make deps`) private to the
// test, on loopback, for tests that need an object store or restart or
// crash it. It is stopped when the test ends.
func S3(t testing.TB) *services.S3 {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "bin", "versitygw")
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv(EnvSkipIntegration) == "1" {
			t.Skipf("S3 test skipped (%s=1): %s missing", EnvSkipIntegration, bin)
		}
		t.Fatalf("%s missing: run `make deps`", bin)
	}
	s := services.NewS3(bin, t.TempDir(), "127.0.0.1", FreePorts(t, 1), services.RandomSecret(), services.RandomSecret())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		t.Fatalf("private S3 server: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	return s
}

// Ejabberd starts an ejabberd private to the test (its own folders, ports
// and Erlang node), for tests that restart or crash it. It keeps its data
// in Mnesia, ejabberd's default. It is stopped and its folder removed when
// the test ends.
func Ejabberd(t testing.TB) *services.Ejabberd {
	t.Helper()
	return startEjabberd(t, nil)
}

// EjabberdOnPostgres starts an ejabberd private to the test that keeps its
// data in a PostgreSQL private to the test, as the testbed's ejabberd does.
func EjabberdOnPostgres(t testing.TB) *services.Ejabberd {
	t.Helper()
	return EjabberdWithSQL(t, PostgresForEjabberd(t, Postgres(t)))
}

// EjabberdWithSQL starts an ejabberd private to the test that keeps its
// data in db.
func EjabberdWithSQL(t testing.TB, db services.EjabberdSQL) *services.Ejabberd {
	t.Helper()
	return startEjabberd(t, &db)
}

// PostgresForEjabberd gives ejabberd its database on pg, as the testbed
// does: the role ejabberd, which logs in with a client certificate.
func PostgresForEjabberd(t testing.TB, pg *services.Postgres) services.EjabberdSQL {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := services.PostgresSQL(ctx, pg, "ejabberd", "ejabberd")
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// EjabberdCluster starts an ejabberd cluster of n nodes private to the
// test, its data in a PostgreSQL private to the test (see
// services.NewEjabberdCluster). Every node is stopped and its folder
// removed when the test ends.
func EjabberdCluster(t testing.TB, n int) []*services.Ejabberd {
	t.Helper()
	db := PostgresForEjabberd(t, Postgres(t))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := ejabberdDir(t)
	nodes, err := services.NewEjabberdCluster(filepath.Join(dir, "ejabberd"), FreePorts(t, 10), DefaultXMPPDomain, n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, e := range nodes {
			_ = e.Stop(context.Background())
			_ = e.Kill()
			if t.Failed() {
				t.Logf("last lines of %s:\n%s", e.LogFile(), proc.Tail(e.LogFile(), 30))
			}
		}
		os.RemoveAll(dir)
	})
	for _, e := range nodes {
		e.UseSQL(db)
		if err := e.Start(ctx); err != nil {
			t.Fatalf("ejabberd node %s: %v", e.Node(), err)
		}
	}
	return nodes
}

// ejabberdDir makes a folder for a test's ejabberd, which runs as its own
// user and must reach it.
func ejabberdDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "mlsysops-ejabberd-")
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func startEjabberd(t testing.TB, db *services.EjabberdSQL) *services.Ejabberd {
	t.Helper()
	dir := ejabberdDir(t)
	e := services.NewEjabberd(filepath.Join(dir, "ejabberd"), FreePorts(t, 10), DefaultXMPPDomain)
	if db != nil {
		e.UseSQL(*db)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := e.Start(ctx); err != nil {
		t.Fatalf("private ejabberd: %v", err)
	}
	t.Cleanup(func() {
		_ = e.Stop(context.Background())
		_ = e.Kill()
		if t.Failed() {
			t.Logf("last lines of %s:\n%s", e.LogFile(), proc.Tail(e.LogFile(), 30))
		}
		os.RemoveAll(dir)
	})
	return e
}

// FreePorts returns the first of n consecutive loopback TCP ports that
// were free a moment ago and that no earlier call in this process
// returned (a caller may not listen on its ports before the next call:
// the test agents' accounts process and the agents' range were once
// given the same port). They are taken above the kernel's ephemeral
// range when there is room: there no outgoing connection takes a port
// between this check and the caller's listen, and on a machine with
// thousands of connections consecutive free ports are rare inside it.
func FreePorts(t testing.TB, n int) int {
	t.Helper()
	if _, hi, ok := ephemeralRange(); ok && 65535-hi > 20*n {
		for i := 0; i < 200; i++ {
			p := hi + 1 + rand.IntN(65535-hi-n)
			if rangeFree(p, n) && claimPorts(p, n) {
				return p
			}
		}
	}
	for i := 0; i < 100; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if p+n < 65535 && rangeFree(p, n) && claimPorts(p, n) {
			return p
		}
	}
	t.Fatalf("no %d free consecutive ports", n)
	return 0
}

// portsGiven are the ports FreePorts returned in this process.
var portsGiven = struct {
	sync.Mutex
	m map[int]bool
}{m: map[int]bool{}}

// claimPorts records ports p to p+n-1 as given, unless one of them was
// given before (then it records none).
func claimPorts(p, n int) bool {
	portsGiven.Lock()
	defer portsGiven.Unlock()
	for i := p; i < p+n; i++ {
		if portsGiven.m[i] {
			return false
		}
	}
	for i := p; i < p+n; i++ {
		portsGiven.m[i] = true
	}
	return true
}

// ephemeralRange reads the ports the kernel gives outgoing connections.
func ephemeralRange() (lo, hi int, ok bool) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0, false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0, false
	}
	lo, err1 := strconv.Atoi(f[0])
	hi, err2 := strconv.Atoi(f[1])
	return lo, hi, err1 == nil && err2 == nil && lo <= hi
}

func rangeFree(p, n int) bool {
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p+i)))
		if err != nil {
			return false
		}
		l.Close()
	}
	return true
}

// KillShared kills every process of the shared testbed with SIGKILL (see
// Testbed.Kill). The next Shared or RestoreShared brings it up again.
func KillShared(t testing.TB) {
	t.Helper()
	if err := withShared(func(tb *Testbed) error { return tb.Kill() }); err != nil {
		t.Fatalf("kill the shared testbed: %v", err)
	}
}

// DownShared takes the shared testbed down (make down).
func DownShared(t testing.TB) {
	t.Helper()
	if err := withShared(func(tb *Testbed) error { return tb.Down(context.Background(), false) }); err != nil {
		t.Fatalf("take the shared testbed down: %v", err)
	}
	// The next Shared in this process must bring it up again.
	shared.once = sync.Once{}
}

// HostState is what the first testbed with real nodes recorded of the
// host's kernel settings (by /proc/sys path), or nil when no testbed with
// real nodes runs.
func HostState() (map[string]string, error) {
	b, err := os.ReadFile(filepath.Join(hostStateDir, "host.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r hostRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	return r.Sysctls, nil
}

// KernelSettings are the global settings real nodes' kubelets change, by
// /proc/sys path.
func KernelSettings() []string { return append([]string(nil), kernelSettings...) }

// Eventually calls cond until it returns nil, failing the test with what
// and cond's last error when timeout passes first.
func Eventually(t testing.TB, what string, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// Poll calls cond every interval, with a context that ends at within,
// until it returns nil; then the test fails with cond's last error.
func Poll(t testing.TB, what string, interval, within time.Duration, cond func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var last error
	for {
		if last = cond(ctx); last == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not after %s: %v", what, within, last)
		case <-time.After(interval):
		}
	}
}
