package services_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/mlsysops-go/mlsysops/internal/testbed"
	"github.com/mlsysops-go/mlsysops/internal/testbed/proc"
	"github.com/mlsysops-go/mlsysops/internal/testbed/services"
)

// These tests start the real servers from Debian's packages (`make deps`).

func TestRedisRestartKeepsData(t *testing.T) {
	ctx := context.Background()
	r := services.NewRedis(t.TempDir(), testbed.FreePorts(t, 10), services.RandomSecret())
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop(ctx) })
	if err := r.Start(ctx); err != nil { // idempotent
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), Password: r.Password()})
	defer c.Close()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("after restart k = %q, %v", v, err)
	}
	if err := r.Kill(); err != nil {
		t.Fatal(err)
	}
	waitDown(t, r.Running)
	if err := r.Healthy(ctx); err == nil {
		t.Fatal("killed redis still answers")
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestEjabberdLifecycle(t *testing.T) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "ejabberd-test-")
	if err == nil {
		err = os.Chmod(dir, 0o755) // ejabberd runs as its own user and must reach its dirs
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// The admin password must never be on a command line: watch every
	// process's while the server starts (and creates the account) and
	// restarts (and finds it).
	const adminPW = "admin-password-under-watch-0123456789"
	if err := os.MkdirAll(filepath.Join(dir, "x"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "x", "admin.password"), []byte(adminPW), 0o600); err != nil {
		t.Fatal(err)
	}
	leaks := watchCmdlines(t, adminPW)
	e := services.NewEjabberd(filepath.Join(dir, "x"), testbed.FreePorts(t, 10), "mlsysops.test")
	start := time.Now()
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if e.AdminPassword() != adminPW {
		t.Fatalf("admin password %q, want the stored one", e.AdminPassword())
	}
	if err := e.Healthy(ctx); err != nil {
		t.Fatalf("admin API with the stored password: %v", err)
	}
	t.Logf("ejabberd up in %v", time.Since(start))
	t.Cleanup(func() { _ = e.Stop(ctx) })
	out, err := e.Ctl(ctx, "registered_users", e.Domain())
	if err != nil || out != "admin" {
		t.Fatalf("registered_users = %q, %v", out, err)
	}
	// The Erlang VM may hold a connection per agent.
	if os.Geteuid() == 0 {
		if got, want := beamOpenFiles(t, e), services.EjabberdOpenFiles(); got != want || got < 4096 {
			t.Errorf("the server may open %d files, want %d (and at least 4096)", got, want)
		}
	}
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if e.Running() {
		t.Fatal("still running after Stop")
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.Healthy(ctx); err != nil {
		t.Fatalf("admin API with the stored password after a restart: %v", err)
	}
	if err := e.Kill(); err != nil {
		t.Fatal(err)
	}
	waitDown(t, e.Running)
	if l := leaks(); len(l) > 0 {
		t.Errorf("the admin password was on the command line of: %v", l)
	}
}

// watchCmdlines polls every process's command line for secret until the
// returned function is called, which returns the command lines (cut at
// the secret) that held it.
func watchCmdlines(t *testing.T, secret string) func() []string {
	t.Helper()
	stop := make(chan struct{})
	done := make(chan []string)
	go func() {
		var found []string
		for {
			entries, _ := os.ReadDir("/proc")
			for _, e := range entries {
				if e.Name()[0] < '0' || e.Name()[0] > '9' {
					continue
				}
				b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
				if err == nil && strings.Contains(string(b), secret) {
					line := strings.ReplaceAll(string(b), "\x00", " ")
					found = append(found, line[:strings.Index(line, secret)])
				}
			}
			select {
			case <-stop:
				done <- found
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	var once sync.Once
	var result []string
	get := func() []string {
		once.Do(func() { close(stop); result = <-done })
		return result
	}
	t.Cleanup(func() { get() })
	return get
}

func waitDown(t *testing.T, running func() bool) {
	t.Helper()
	for i := 0; i < 100 && running(); i++ {
		time.Sleep(100 * time.Millisecond)
	}
	if running() {
		t.Fatal("process still running")
	}
}

func TestPostgresRestartKeepsData(t *testing.T) {
	ctx := context.Background()
	p := testbed.Postgres(t)
	start := time.Now()
	if err := p.EnsureDatabase(ctx, "app", "app", "pw-'quoted"); err != nil {
		t.Fatal(err)
	}
	if err := p.EnsureDatabase(ctx, "app", "app", "pw-'quoted"); err != nil { // idempotent
		t.Fatal(err)
	}
	t.Logf("database ready in %v", time.Since(start))
	exec := func(sql string, args ...any) error {
		conn, err := pgx.Connect(ctx, p.DSN("app", "pw-'quoted", "app"))
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql, args...)
		return err
	}
	if err := exec("CREATE TABLE t (v text); INSERT INTO t VALUES ('kept')"); err != nil {
		t.Fatal(err)
	}
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	waitDown(t, p.Running)
	if err := p.Healthy(ctx); err == nil {
		t.Fatal("killed postgres still answers")
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, p.DSN("app", "pw-'quoted", "app"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v string
	if err := conn.QueryRow(ctx, "SELECT v FROM t").Scan(&v); err != nil || v != "kept" {
		t.Fatalf("after a crash t holds %q, %v", v, err)
	}
	if _, err := pgx.Connect(ctx, p.DSN("app", "wrong", "app")); err == nil {
		t.Fatal("a wrong password was accepted")
	}
	if err := p.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if p.Running() {
		t.Fatal("still running after Stop")
	}
}

func TestS3Lifecycle(t *testing.T) {
	ctx := context.Background()
	s := testbed.S3(t)
	if err := s.Start(ctx); err != nil { // idempotent
		t.Fatal(err)
	}
	// Unsigned requests are refused: the store is not open.
	resp, err := http.Get(s.URL() + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("anonymous list: %s, want 403", resp.Status)
	}
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	waitDown(t, s.Running)
	if err := s.Healthy(ctx); err == nil {
		t.Fatal("killed S3 server still answers")
	}
	if err := s.Start(ctx); err != nil {
		t.Fatal(err)
	}
}

// beamOpenFiles returns the soft open-files limit of the server's Erlang
// VM (beam.smp, below the ejabberdctl process).
func beamOpenFiles(t *testing.T, e *services.Ejabberd) uint64 {
	t.Helper()
	pid, ok := e.Pid()
	if !ok {
		t.Fatal("ejabberd is not running")
	}
	for _, p := range proc.Descendants(pid) {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", p))
		if err != nil || filepath.Base(exe) != "beam.smp" {
			continue
		}
		limits, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", p))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(limits), "\n") {
			if f := strings.Fields(line); strings.HasPrefix(line, "Max open files") && len(f) > 3 {
				n, err := strconv.ParseUint(f[3], 10, 64)
				if err != nil {
					t.Fatalf("%s", line)
				}
				return n
			}
		}
	}
	t.Fatal("no beam.smp below ejabberd")
	return 0
}

// TestEjabberdMovesToSQL starts ejabberd on Mnesia, then on PostgreSQL as
// an upgraded testbed would: the running server is restarted with the new
// configuration and keeps its accounts in the database, where it logs in
// with its client certificate: its role has no password, and no password
// or plain connection logs in as it.
func TestEjabberdMovesToSQL(t *testing.T) {
	ctx := context.Background()
	e := testbed.Ejabberd(t)
	before, _ := e.Pid()
	pg := testbed.Postgres(t)
	// A role that had a password (an earlier testbed) loses it.
	oldPassword := services.RandomSecret()
	if err := pg.EnsureDatabase(ctx, "ejabberd", "ejabberd", oldPassword); err != nil {
		t.Fatal(err)
	}
	db := testbed.PostgresForEjabberd(t, pg)
	e.UseSQL(db)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if after, _ := e.Pid(); after == before {
		t.Fatal("ejabberd was not restarted with its new configuration")
	}
	if out, err := e.Ctl(ctx, "register", "someone", e.Domain(), "pw"); err != nil {
		t.Fatalf("register: %v: %s", err, out)
	}
	dsn, err := pg.CertDSN(db.User, db.Database)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for what, dsn := range map[string]string{
		"its old password, plain": pg.DSN(db.User, oldPassword, db.Database),
		"its old password, TLS":   strings.Replace(pg.DSN(db.User, oldPassword, db.Database), "sslmode=disable", "sslmode=require", 1),
		"no password, plain":      pg.DSN(db.User, "", db.Database),
	} {
		if c, err := pgx.Connect(ctx, dsn); err == nil {
			c.Close(ctx)
			t.Errorf("ejabberd's role logged in with %s", what)
		}
	}
	var hasPassword bool
	su, err := pgx.Connect(ctx, pg.SuperuserDSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer su.Close(ctx)
	if err := su.QueryRow(ctx, "SELECT rolpassword IS NOT NULL FROM pg_authid WHERE rolname = $1", db.User).Scan(&hasPassword); err != nil || hasPassword {
		t.Errorf("ejabberd's role has a password: %v (%v)", hasPassword, err)
	}
	conf, err := os.ReadFile(e.ConfigFile())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(conf), "sql_password") || !strings.Contains(string(conf), "sql_ssl_certfile") {
		t.Errorf("ejabberd's configuration names a database password or no client certificate:\n%s", conf)
	}
	var users []string
	rows, err := conn.Query(ctx, "SELECT username FROM users ORDER BY username")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var u string
		if err := rows.Scan(&u); err != nil {
			t.Fatal(err)
		}
		users = append(users, u)
	}
	if len(users) != 2 || users[0] != "admin" || users[1] != "someone" {
		t.Errorf("users in PostgreSQL = %v, want admin and someone", users)
	}
	// A second start with the same configuration keeps the server.
	pid, _ := e.Pid()
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if again, _ := e.Pid(); again != pid {
		t.Error("ejabberd was restarted although its configuration did not change")
	}
}

// TestEjabberdLogsNoDatabaseSecret kills ejabberd's PostgreSQL under it:
// its SQL connections fail and Erlang logs their crash reports, with the
// processes' state (which printed the database password when ejabberd
// logged in with one, chaos soak). It logs in with a client certificate,
// so the reports hold a file name at most: no line of its key is in any
// log. Once the database is back ejabberd works again.
func TestEjabberdLogsNoDatabaseSecret(t *testing.T) {
	ctx := context.Background()
	pg := testbed.Postgres(t)
	db := testbed.PostgresForEjabberd(t, pg)
	e := testbed.EjabberdWithSQL(t, db)
	if err := pg.Kill(); err != nil {
		t.Fatal(err)
	}
	logs := filepath.Dir(e.LogFile())
	readLogs := func() string {
		var all strings.Builder
		files, _ := filepath.Glob(filepath.Join(logs, "*.log"))
		for _, f := range files {
			b, _ := os.ReadFile(f)
			all.Write(b)
		}
		return all.String()
	}
	// Work that needs the database, until the failure is logged.
	killed := time.Now()
	deadline := killed.Add(4 * time.Minute)
	for i := 0; !strings.Contains(readLogs(), "CRASH REPORT") && !strings.Contains(readLogs(), "crasher"); i++ {
		if time.Now().After(deadline) {
			t.Fatalf("no crash report logged with the database killed:\n%s", proc.Tail(e.LogFile(), 30))
		}
		_, _ = e.Ctl(ctx, "register", "during-outage-"+strconv.Itoa(i), e.Domain(), services.RandomSecret())
		time.Sleep(time.Second)
	}
	t.Logf("crash report logged %s after the kill", time.Since(killed).Round(time.Second))
	key, err := os.ReadFile(db.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	all := readLogs()
	for _, line := range strings.Split(string(key), "\n") {
		if len(line) >= 16 && !strings.HasPrefix(line, "-----") && strings.Contains(all, line) {
			t.Errorf("a line of ejabberd's database key is in its logs: %q", line)
		}
	}
	if strings.Contains(all, "sql_password") {
		t.Error("ejabberd's logs name a database password")
	}
	if err := pg.Start(ctx); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(4 * time.Minute)
	for {
		out, err := e.Ctl(ctx, "register", "after-outage", e.Domain(), services.RandomSecret())
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ejabberd does not work once its database is back: %v: %s", err, out)
		}
		time.Sleep(time.Second)
	}
}
