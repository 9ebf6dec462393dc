package messaging

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// syncBuffer is a log destination safe for the client's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLoginWithoutPassword checks, without a server, what an agent whose
// password file is missing does: it retries with a short backoff, reports
// every failure, says what to check, and reads the file again at every
// attempt.
func TestLoginWithoutPassword(t *testing.T) {
	file := filepath.Join(t.TempDir(), "xmpp.password")
	// A port nobody listens on: once the password is there, the login
	// fails on the connection, not on the credentials.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server := ln.Addr().String()
	ln.Close()

	var logs syncBuffer
	failures := make(chan AuthFailure, 16)
	reg := prometheus.NewRegistry()
	c, err := New(Config{JID: "node-1@d", PasswordFile: file, Layer: LayerNode, Servers: []string{server},
		AuthBackoff: 20 * time.Millisecond, MinBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
		HeartbeatInterval: -1, KeepaliveInterval: -1, Registerer: reg,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		OnAuthFailure: func(f AuthFailure) {
			select {
			case failures <- f:
			default:
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if s := c.AuthStatus(); s.Failing || s.Problem() != "" {
		t.Errorf("before the first login: %+v", s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	defer func() { cancel(); <-done }()

	var f AuthFailure
	for i := 0; i < 3; i++ {
		select {
		case f = <-failures:
		case <-time.After(10 * time.Second):
			t.Fatal("no failure reported")
		}
	}
	if f.Account != "node-1@d" || f.Reason != AuthNoPassword || f.PasswordFile != file || f.Failures < 3 || f.RetryIn > 20*time.Millisecond {
		t.Errorf("failure = %+v", f)
	}
	s := c.AuthStatus()
	if !s.Failing || !strings.Contains(s.Problem(), file) || !strings.Contains(s.Problem(), "does not exist") {
		t.Errorf("status %+v, problem %q", s, s.Problem())
	}
	if got := testutil.ToFloat64(c.m.authFailures.WithLabelValues(AuthNoPassword)); got < 3 {
		t.Errorf("auth_failures_total{reason=no_password} = %v", got)
	}
	if got := testutil.ToFloat64(c.m.authFailing); got != 1 {
		t.Errorf("auth_failing = %v", got)
	}
	if l := logs.String(); !strings.Contains(l, "password_file="+file) || !strings.Contains(l, "account=node-1@d") {
		t.Errorf("the log does not say what to check:\n%s", l)
	}

	// Once the file is there it is used: the attempts now fail on the
	// connection and stop counting as login failures.
	secret := "s3cret-never-logged"
	if err := os.WriteFile(file, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "XMPP connect failed") {
		if time.Now().After(deadline) {
			t.Fatalf("the password file was not read again:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if strings.Contains(logs.String(), secret) {
		t.Error("the password appears in the log")
	}
}

func TestAuthStatusProblem(t *testing.T) {
	since := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := AuthStatus{Failing: true, Reason: AuthRefused, Failures: 4, Since: since, Account: "n@d", Server: "x:5222", PasswordFile: "/s/pw"}
	want := "XMPP server x:5222 refuses the login of n@d since 2026-01-02T03:04:05Z (4 attempts): check that the account exists with the password in /s/pw; the accounts reconciler restores it"
	if got := s.Problem(); got != want {
		t.Errorf("Problem() =\n%s\nwant\n%s", got, want)
	}
}

// TestSlowServerGetsLongerLogins checks that a login that timed out gives
// the next one twice as long: a server that accepts connections and never
// answers (one in a connection storm) holds each attempt until the
// client's deadline, so the attempts' lengths are the timeouts given.
func TestSlowServerGetsLongerLogins(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	held := make(chan time.Duration, 16)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				began := time.Now()
				_, _ = io.Copy(io.Discard, conn) // until the client gives up
				held <- time.Since(began)
			}()
		}
	}()
	const base = 100 * time.Millisecond
	c, err := New(Config{JID: "node-1@d", Password: "pw", Layer: LayerNode, Servers: []string{ln.Addr().String()},
		ConnectTimeout: base, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
		HeartbeatInterval: -1, KeepaliveInterval: -1, Registerer: prometheus.NewRegistry(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	defer func() { cancel(); <-done }()
	// A deadline never fires early: attempt k lasts at least base×2^k.
	for k, want := range []time.Duration{base, 2 * base, 4 * base} {
		select {
		case got := <-held:
			if got < want {
				t.Fatalf("attempt %d held %v, want at least %v", k+1, got, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("attempt %d did not end", k+1)
		}
	}
}

func TestIsTimeout(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("negotiate: %w", os.ErrDeadlineExceeded), true},
		{fmt.Errorf("dial: %w", context.DeadlineExceeded), true},
		{&net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, true},
		{errors.New("connection refused"), false},
		{fmt.Errorf("negotiate: %w", io.EOF), false},
	} {
		if got := isTimeout(tc.err); got != tc.want {
			t.Errorf("isTimeout(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
