// Package db connects the ML connector to PostgreSQL: a pgx pool, the
// embedded migrations applied at start with goose (under a session lock,
// so replicas starting together migrate once), and the classification of
// errors into "the database is unavailable, retry" and everything else.
package db

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed migrations/*.sql
var migrations embed.FS

// ErrUnavailable wraps errors of a database that cannot be reached now
// (down, restarting, refusing connections): the request may be retried.
var ErrUnavailable = errors.New("the database is unavailable")

// Open returns a pool for dsn, waiting (until ctx ends) for the database to
// accept connections, and applies the migrations.
func Open(ctx context.Context, dsn string, maxConns int32, log *slog.Logger) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// The DSN may hold a password: do not echo it.
		return nil, errors.New("database URL: not a valid PostgreSQL connection string (postgres://user:password@host:port/db)")
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	// Connections broken by a server restart are dropped at the next
	// health check rather than failing a request.
	cfg.HealthCheckPeriod = 5 * time.Second
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("database pool: %w", err)
	}
	for attempt := 1; ; attempt++ {
		err = pool.Ping(ctx)
		if err == nil {
			break
		}
		if !IsUnavailable(err) || ctx.Err() != nil {
			pool.Close()
			return nil, fmt.Errorf("connect to the database at %s: %w", cfg.ConnConfig.Host, err)
		}
		log.Warn("database not reachable yet; retrying", "host", cfg.ConnConfig.Host, "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			pool.Close()
			return nil, fmt.Errorf("connect to the database at %s: %w", cfg.ConnConfig.Host, err)
		case <-time.After(min(time.Duration(attempt)*500*time.Millisecond, 5*time.Second)):
		}
	}
	if err := Migrate(ctx, pool, log); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// Migrate applies the embedded migrations that are not applied yet.
func Migrate(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) error {
	sqlDB := stdlib.OpenDBFromPool(pool)
	defer sqlDB.Close()
	fsys, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return err
	}
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return err
	}
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, fsys, goose.WithSessionLocker(locker))
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	results, err := p.Up(ctx)
	if err != nil {
		return fmt.Errorf("apply migrations: %w", err)
	}
	for _, r := range results {
		log.Info("migration applied", "component", "db", "version", r.Source.Version, "file", r.Source.Path, "duration_ms", r.Duration.Milliseconds())
	}
	return nil
}

// IsUnavailable reports whether err says the database cannot be reached
// now: a refused or broken connection, a server shutting down or starting.
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrUnavailable) {
		return true
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "57P01", "57P02", "57P03", "53300": // admin/crash shutdown, cannot connect now, too many connections
			return true
		}
		// Class 08: connection exceptions.
		return len(pgErr.Code) == 5 && pgErr.Code[:2] == "08"
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return true
	}
	if pgconn.Timeout(err) {
		return true
	}
	// A connection closed under a query (the server was killed).
	return errors.Is(err, pgx.ErrTxClosed) || pgconn.SafeToRetry(err) || isClosedConn(err)
}

func isClosedConn(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		switch e.Error() {
		case "conn closed", "unexpected EOF", "EOF":
			return true
		}
	}
	return false
}

// Retry runs fn until it succeeds, fails with an error that is not
// IsUnavailable, or wait has passed; fn must be safe to run again (a
// read, or a transaction that had not committed). The error returned for
// an unavailable database wraps ErrUnavailable.
func Retry(ctx context.Context, wait time.Duration, fn func(ctx context.Context) error) error {
	deadline := time.Now().Add(wait)
	delay := 100 * time.Millisecond
	for {
		err := fn(ctx)
		if err == nil || !IsUnavailable(err) {
			return err
		}
		var ce *commitError
		if errors.As(err, &ce) {
			// The commit may have happened: running fn again could do
			// its work twice.
			return fmt.Errorf("%w: the connection broke while committing, so the change may or may not be saved; check before retrying: %v", ErrUnavailable, ce.err)
		}
		if time.Now().Add(delay).After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %v", ErrUnavailable, err)
		case <-time.After(delay):
		}
		delay = min(delay*2, time.Second)
	}
}

// InTx runs fn in a transaction, committing when it returns nil.
func InTx(ctx context.Context, pool *pgxpool.Pool, fn func(tx pgx.Tx) error) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after Commit it is a no-op
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		if IsUnavailable(err) && !pgconn.SafeToRetry(err) {
			return &commitError{err: err}
		}
		return err
	}
	return nil
}

// commitError is a commit whose outcome is unknown.
type commitError struct{ err error }

func (e *commitError) Error() string { return "commit: " + e.err.Error() }
func (e *commitError) Unwrap() error { return e.err }
