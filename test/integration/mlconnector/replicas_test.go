package mlconnector_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/auth"
	"github.com/mlsysops-go/mlsysops/internal/httpapi"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
	"github.com/mlsysops-go/mlsysops/internal/testbed/proc"
	"github.com/mlsysops-go/mlsysops/internal/testbed/services"
	"github.com/mlsysops-go/mlsysops/mlconnector/api"
	mlclient "github.com/mlsysops-go/mlsysops/mlconnector/client"
	nbclient "github.com/mlsysops-go/mlsysops/northbound/client"
)

// TestReplicasRollingRestartAndKill runs two ML connector processes on one
// PostgreSQL database and one S3 bucket (both private to the test; the
// shared testbed is not needed) behind one balancer that, as a Service
// does, routes to the replicas whose /readyz answers. Clients register
// models through it, upload a file to each, read the model and download
// the file back:
//
//   - a rolling restart (SIGTERM: the replica fails /readyz while it still
//     serves for --shutdown-delay, then stops; started again; the next)
//     fails no request;
//   - a replica SIGKILLed under the same load fails the requests it held;
//     the clients retry them (a registration or upload that may have
//     happened is looked up first), and in the end every model exists
//     once, with its one file, byte for byte, whichever replica is asked.
func TestReplicasRollingRestartAndKill(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rs, _ := connectorReplicas(t, ctx, 2)
	var addrs []string
	for _, r := range rs {
		addrs = append(addrs, r.addr)
	}
	svc := testbed.NewBalancer(t, addrs, httpapi.PathReadyz)
	testbed.Eventually(t, "the balancer sees both replicas ready", 10*time.Second, func() error {
		if !svc.AllReady() {
			return errors.New("not yet")
		}
		return nil
	})
	c, err := mlclient.New(mlclient.Config{URL: svc.URL, Token: rs[0].token, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	l := &modelLoad{c: c, done: map[string]loadedModel{}}

	// Rolling restart: no request may fail.
	stop := l.run(4)
	l.waitFor(t, 20)
	for _, r := range rs {
		if err := r.p.Stop(30 * time.Second); err != nil {
			t.Fatal(err)
		}
		startReplica(t, r.p)
		testbed.Eventually(t, "the balancer sees "+r.p.Name+" ready again", 10*time.Second, func() error {
			if !svc.AllReady() {
				return errors.New("not yet")
			}
			return nil
		})
	}
	l.waitFor(t, 20)
	stop()
	if f := l.failures(); len(f) > 0 || svc.Failed() > 0 {
		t.Fatalf("rolling restart: %d of %d requests failed (%d not forwarded): %v", len(f), l.requests.Load(), svc.Failed(), f)
	}
	t.Logf("rolling restart of 2 connector replicas: %d requests (%d models), none failed", l.requests.Load(), l.count())

	// SIGKILL under load: the clients retry what failed.
	l.retry.Store(true)
	before := l.requests.Load()
	stop = l.run(4)
	l.waitFor(t, 20)
	killed := time.Now()
	if err := rs[0].p.Kill(); err != nil {
		t.Fatal(err)
	}
	l.waitFor(t, 20)
	startReplica(t, rs[0].p)
	l.waitFor(t, 10)
	stop()
	t.Logf("replica SIGKILLed under load: %d requests, %d failed and were retried (%d not forwarded by the balancer); the killed replica was ready again after %v",
		l.requests.Load()-before, len(l.failures()), svc.Failed(), time.Since(killed).Round(time.Millisecond))

	// Nothing lost, nothing doubled: ask each replica directly.
	for _, r := range rs {
		l.check(t, ctx, r)
	}
	if l.count() < 40 {
		t.Fatalf("only %d models registered", l.count())
	}
}

// connectorReplica is one connector process and where it listens.
type connectorReplica struct {
	p     *proc.Process
	addr  string
	token string
}

// connectorBackends are the connector replicas' private PostgreSQL and S3
// server.
type connectorBackends struct {
	pg *services.Postgres
	s3 *services.S3
}

// connectorReplicas starts n connector processes built from this checkout
// on a private PostgreSQL and S3 server, with one token file.
func connectorReplicas(t *testing.T, ctx context.Context, n int) ([]*connectorReplica, connectorBackends) {
	t.Helper()
	root, err := testbed.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "mlsysops-mlconnector")
	if err := testbed.BuildMLConnector(ctx, root, bin, testbed.RaceDetector); err != nil {
		t.Fatalf("build the ML connector: %v", err)
	}
	pg := testbed.Postgres(t)
	dbPW := services.RandomSecret()
	if err := pg.EnsureDatabase(ctx, "mlconnector", "mlconnector", dbPW); err != nil {
		t.Fatal(err)
	}
	s3 := testbed.S3(t)
	token, err := auth.GenerateToken()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"db.url":        pg.DSN("mlconnector", dbPW, "mlconnector"),
		"tokens":        token + ",operator,operator\n",
		"s3/access-key": s3.AccessKey(),
		"s3/secret-key": s3.SecretKey(),
		"uploads/.keep": "",
	}
	for f, content := range files {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	base := testbed.FreePorts(t, n)
	var out []*connectorReplica
	for i := 0; i < n; i++ {
		name := "mlconnector-" + strconv.Itoa(i)
		addr := "127.0.0.1:" + strconv.Itoa(base+i)
		p := &proc.Process{
			Name: name, Path: bin, Dir: dir,
			Args: []string{
				"--listen=" + addr, "--token-file=" + filepath.Join(dir, "tokens"),
				"--database-url-file=" + filepath.Join(dir, "db.url"),
				"--artifact-store=s3", "--s3-endpoint=" + s3.URL(), "--s3-bucket=mlsysops-models",
				"--s3-credentials-dir=" + filepath.Join(dir, "s3"), "--upload-dir=" + filepath.Join(dir, "uploads"),
				"--drift-interval=0", "--shutdown-delay=2s", "--log-format=json",
			},
			LogFile: filepath.Join(dir, name+".log"), PIDFile: filepath.Join(dir, name+".pid"),
			Ready: testbed.HTTPReady("http://" + addr + httpapi.PathReadyz),
		}
		out = append(out, &connectorReplica{p: p, addr: addr, token: token})
	}
	t.Cleanup(func() {
		for _, r := range out {
			_ = r.p.Stop(10 * time.Second)
			if t.Failed() {
				t.Logf("--- last lines of %s:\n%s", r.p.Name, proc.Tail(r.p.LogFile, 30))
			}
		}
	})
	for _, r := range out {
		startReplica(t, r.p)
	}
	return out, connectorBackends{pg: pg, s3: s3}
}

func startReplica(t *testing.T, p *proc.Process) {
	t.Helper()
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := p.WaitReady(ctx); err != nil {
		t.Fatalf("%s: %v\n%s", p.Name, err, proc.Tail(p.LogFile, 20))
	}
}

// modelLoad registers models through the balancer, each with one data
// file, and reads both back; with retry set, a failed step is retried
// after looking up whether it happened.
type modelLoad struct {
	c        *mlclient.Client
	retry    atomic.Bool
	requests atomic.Int64
	mu       sync.Mutex
	done     map[string]loadedModel
	failed   []string
	statuses map[int]int // HTTP status of each failure (0: no answer)
}

type loadedModel struct{ id, sha string }

func (l *modelLoad) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.done)
}

func (l *modelLoad) failures() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.failed...)
}

// waitFor waits until n more models are done.
func (l *modelLoad) waitFor(t *testing.T, n int) {
	t.Helper()
	want := l.count() + n
	testbed.Eventually(t, fmt.Sprintf("%d models registered", want), 2*time.Minute, func() error {
		if got := l.count(); got < want {
			return fmt.Errorf("%d", got)
		}
		return nil
	})
}

// check asks replica r for every model the load registered: each exists
// once, with its one file, byte for byte.
func (l *modelLoad) check(t *testing.T, ctx context.Context, r *connectorReplica) {
	t.Helper()
	rc, err := mlclient.New(mlclient.Config{URL: "http://" + r.addr, Token: r.token, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range l.done {
		page, err := rc.Models(ctx, mlclient.ModelFilter{Name: name})
		if err != nil {
			t.Fatalf("%s: list %s: %v", r.p.Name, name, err)
		}
		if len(page.Items) != 1 {
			t.Errorf("%s: %d models named %s, want 1", r.p.Name, len(page.Items), name)
			continue
		}
		files, err := rc.Files(ctx, m.id)
		if err != nil || len(files) != 1 || files[0].SHA256 != m.sha {
			t.Errorf("%s: files of %s: %v %+v, want one with sha256 %s", r.p.Name, name, err, files, m.sha)
			continue
		}
		b, err := rc.Download(ctx, m.id, files[0].ID)
		if sum := sha256.Sum256(b); err != nil || hex.EncodeToString(sum[:]) != m.sha {
			t.Errorf("%s: download of %s: %v, content differs", r.p.Name, name, err)
		}
	}
}

// run starts workers registering models until the returned stop is
// called; stop waits for them.
func (l *modelLoad) run(workers int) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				l.one(uniq("ha"))
			}
		}()
	}
	return func() { cancel(); wg.Wait() }
}

// step runs f until it succeeds, or once without retry; a failure is
// recorded. It reports whether f succeeded.
func (l *modelLoad) step(what string, f func(ctx context.Context) error) bool {
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		l.requests.Add(1)
		err := f(ctx)
		cancel()
		if err == nil {
			return true
		}
		l.mu.Lock()
		l.failed = append(l.failed, what+": "+err.Error())
		if l.statuses == nil {
			l.statuses = map[int]int{}
		}
		l.statuses[nbclient.StatusCode(err)]++
		l.mu.Unlock()
		if !l.retry.Load() || attempt > 20 {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (l *modelLoad) one(name string) {
	content := make([]byte, 4096)
	_, _ = rand.Read(content)
	sum := sha256.Sum256(content)
	sha := hex.EncodeToString(sum[:])
	var id string
	tried := false
	if !l.step("register "+name, func(ctx context.Context) error {
		if tried {
			// The registration that failed may have happened.
			page, err := l.c.Models(ctx, mlclient.ModelFilter{Name: name})
			if err != nil {
				return err
			}
			if len(page.Items) > 0 {
				id = page.Items[0].ModelID
				return nil
			}
		}
		tried = true
		m, err := l.c.CreateModel(ctx, api.ModelSpec{ModelName: name, ModelKind: "classification", ModelTags: []string{"ha"}})
		id = m.ModelID
		return err
	}) {
		return
	}
	tried = false
	if !l.step("upload to "+name, func(ctx context.Context) error {
		if tried {
			files, err := l.c.Files(ctx, id)
			if err != nil {
				return err
			}
			for _, f := range files {
				if f.SHA256 == sha {
					return nil
				}
			}
		}
		tried = true
		_, err := l.c.Upload(ctx, id, api.FileData, "data.bin", bytes.NewReader(content), "")
		return err
	}) {
		return
	}
	if !l.step("read "+name, func(ctx context.Context) error {
		m, err := l.c.Model(ctx, id)
		if err == nil && m.ModelName != name {
			err = fmt.Errorf("model %s is named %s", id, m.ModelName)
		}
		return err
	}) {
		return
	}
	l.mu.Lock()
	l.done[name] = loadedModel{id: id, sha: sha}
	l.mu.Unlock()
}

// TestBackendsRestartedMidway: a connector under a steady load of
// registrations and uploads (clients that retry what failed, after
// looking up whether it happened) while its PostgreSQL, then its S3
// server, is killed and started again a few seconds later. The connector
// stays up; what it could not do it refuses with 503 and the dependency's
// name, never a 500; afterwards every model exists once with its file,
// byte for byte.
func TestBackendsRestartedMidway(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rs, b := connectorReplicas(t, ctx, 1)
	c, err := mlclient.New(mlclient.Config{URL: "http://" + rs[0].addr, Token: rs[0].token, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	l := &modelLoad{c: c, done: map[string]loadedModel{}}
	l.retry.Store(true)
	stop := l.run(4)
	defer stop()
	l.waitFor(t, 10)
	for _, backend := range []struct {
		name  string
		kill  func() error
		start func(context.Context) error
	}{{"PostgreSQL", b.pg.Kill, b.pg.Start}, {"S3", b.s3.Kill, b.s3.Start}} {
		before := len(l.failures())
		if err := backend.kill(); err != nil {
			t.Fatal(err)
		}
		// The outage lasts a few seconds: long enough for requests to meet it.
		time.Sleep(3 * time.Second)
		if err := backend.start(ctx); err != nil {
			t.Fatal(err)
		}
		l.waitFor(t, 10)
		f := l.failures()[before:]
		t.Logf("%s killed and started again: %d requests failed meanwhile", backend.name, len(f))
		if len(f) > 0 {
			t.Logf("the first: %s", f[0])
		}
		if !rs[0].p.Alive() {
			t.Fatalf("the connector died with %s", backend.name)
		}
	}
	stop()
	l.mu.Lock()
	statuses := l.statuses
	l.mu.Unlock()
	for code, n := range statuses {
		if code != 503 {
			t.Errorf("%d failures answered %d (want 503): %v", n, code, l.failures())
		}
	}
	t.Logf("%d requests, %d failed and were retried; statuses %v; %d models", l.requests.Load(), len(l.failures()), statuses, l.count())
	l.check(t, ctx, rs[0])
}
