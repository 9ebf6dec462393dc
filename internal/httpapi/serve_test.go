package httpapi_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/httpapi"
	"github.com/mlsysops-go/mlsysops/internal/httpapi/apitest"
)

// serveTLS serves h with o on a loopback port until the test ends and
// returns the address.
func serveTLS(t *testing.T, o httpapi.ServeOptions, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- httpapi.ServeListener(ctx, o, ln, h, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeListener: %v", err)
		}
	})
	return ln.Addr().String()
}

// TestServeTLS: with a certificate the API answers only over TLS 1.2 or
// newer, to clients that verify the certificate; plain HTTP on the same
// port gets a 400 and never reaches the handler.
func TestServeTLS(t *testing.T) {
	pool, cert, key := apitest.ServingCert(t, t.TempDir(), "ca")
	var reached atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		_, _ = io.WriteString(w, "secret answer")
	})
	addr := serveTLS(t, httpapi.ServeOptions{TLSCertFile: cert, TLSKeyFile: key, ShutdownTimeout: 10 * time.Second}, h)
	if body := apitest.CheckTLSOnly(t, addr, pool, "/", http.StatusOK); body != "secret answer" {
		t.Errorf("answer %q", body)
	}
	if n := reached.Load(); n != 1 {
		t.Errorf("handler reached %d times, want once (by the verifying client)", n)
	}
}

// TestServeTLSReloadsCertificate: a certificate replaced on disk is served
// from the next check on, without a restart; a half-written pair keeps the
// previous certificate.
func TestServeTLSReloadsCertificate(t *testing.T) {
	dir := t.TempDir()
	poolA, cert, key := apitest.ServingCert(t, dir, "ca-a")
	// CertCheckInterval 1ns: every handshake checks the files.
	addr := serveTLS(t, httpapi.ServeOptions{TLSCertFile: cert, TLSKeyFile: key, CertCheckInterval: 1, ShutdownTimeout: 10 * time.Second},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	url := "https://" + addr + "/"
	if code, _, err := apitest.Get(apitest.TLSClient(poolA), url); err != nil || code != http.StatusOK {
		t.Fatalf("before the rotation: %d %v", code, err)
	}

	other := filepath.Join(dir, "b")
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	poolB, certB, keyB := apitest.ServingCert(t, other, "ca-b")
	copyFile(t, certB, cert)
	if code, _, err := apitest.Get(apitest.TLSClient(poolA), url); err != nil || code != http.StatusOK {
		t.Fatalf("with a mismatched pair on disk: %d %v, want the old certificate served", code, err)
	}
	copyFile(t, keyB, key)
	if code, _, err := apitest.Get(apitest.TLSClient(poolB), url); err != nil || code != http.StatusOK {
		t.Fatalf("after the rotation, a client of the new CA: %d %v", code, err)
	}
	if _, _, err := apitest.Get(apitest.TLSClient(poolA), url); err == nil {
		t.Error("after the rotation the old certificate is still served")
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestServeTLSBadPair: a pair that does not load fails the start with the
// files named.
func TestServeTLSBadPair(t *testing.T) {
	_, cert, _ := apitest.ServingCert(t, t.TempDir(), "ca")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	err = httpapi.ServeListener(context.Background(), httpapi.ServeOptions{TLSCertFile: cert, TLSKeyFile: cert}, ln,
		http.NotFoundHandler(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil || !strings.Contains(err.Error(), "serving certificate "+cert) {
		t.Errorf("ServeListener with a certificate as key: %v", err)
	}
}
