// Package dbtest gives the ML connector's tests real PostgreSQL
// databases: one private server per test binary (Debian's PostgreSQL, run
// by TestMain through Main), one fresh, migrated database per test.
package dbtest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mlsysops-go/mlsysops/internal/testbed/services"
	"github.com/mlsysops-go/mlsysops/mlconnector/db"
)

var (
	server *services.Postgres
	count  atomic.Int64
)

// Main starts the package's PostgreSQL, runs the tests and stops it; call
// it from TestMain: os.Exit(dbtest.Main(m)).
func Main(m *testing.M) int {
	dir, err := os.MkdirTemp("", "mlconnector-pg-")
	if err == nil {
		// The server runs as the postgres account, which must reach it.
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dbtest:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	port, err := freePort()
	if err != nil {
		fmt.Fprintln(os.Stderr, "dbtest:", err)
		return 1
	}
	server = services.NewPostgres(filepath.Join(dir, "pg"), port, services.RandomSecret())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	err = server.Start(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "dbtest: start PostgreSQL (make deps installs it):", err)
		return 1
	}
	code := m.Run()
	_ = server.Stop(context.Background())
	return code
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// DSN returns the connection URL of a fresh database for t, owned by a
// fresh role.
func DSN(t testing.TB) string {
	t.Helper()
	if server == nil {
		t.Fatal("dbtest: call dbtest.Main from TestMain")
	}
	name := fmt.Sprintf("t%d_%s", count.Add(1), sanitize(t.Name()))
	if len(name) > 60 {
		name = name[:60]
	}
	pw := services.RandomSecret()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := server.EnsureDatabase(ctx, name, name, pw); err != nil {
		t.Fatal(err)
	}
	return server.DSN(name, pw, name)
}

// Pool returns a pool on a fresh migrated database, closed when t ends.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return Open(t, DSN(t))
}

// Open opens and migrates the database at dsn for t.
func Open(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := db.Open(ctx, dsn, 10, Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Logger logs to the test's log.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

var _ io.Writer = testWriter{}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}
