package apitest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/mlsysops-go/mlsysops/internal/testbed/pki"
)

// ServingCert writes a serving certificate for 127.0.0.1 signed by a new CA
// named ca into dir and returns the CA as a pool and the pair's files.
func ServingCert(t testing.TB, dir, ca string) (pool *x509.CertPool, certFile, keyFile string) {
	t.Helper()
	auth, err := pki.LoadOrCreateCA(dir, ca, ca)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err = auth.Issue(dir, "server", pki.CertSpec{CommonName: "api", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true})
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(auth.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("CA certificate does not parse")
	}
	return pool, certFile, keyFile
}

// Get fetches url with c and returns the status and body.
func Get(c *http.Client, url string) (int, string, error) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// TLSClient is an HTTPS client trusting only pool.
func TLSClient(pool *x509.CertPool) *http.Client {
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}}
}

// CheckTLSOnly checks an API serving on addr with a certificate of pool's
// CA: a client that verifies the certificate gets path's answer (status
// want); plain HTTP to the same port gets a 400 without it; a client that
// does not trust the CA, or offers at most TLS 1.1, cannot connect. It
// returns the verified answer's body.
func CheckTLSOnly(t *testing.T, addr string, pool *x509.CertPool, path string, want int) string {
	t.Helper()
	code, verified, err := Get(TLSClient(pool), "https://"+addr+path)
	if err != nil || code != want {
		t.Fatalf("verifying client, GET %s: %d %q %v, want %d", path, code, verified, err, want)
	}
	code, body, err := Get(&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}, "http://"+addr+path)
	if err != nil || code != http.StatusBadRequest || (verified != "" && strings.Contains(body, verified)) {
		t.Errorf("plain HTTP to the TLS port, GET %s: %d %q %v, want 400 without the answer", path, code, body, err)
	}
	if _, _, err := Get(&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}, "https://"+addr+path); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("client without the CA: %v, want a certificate error", err)
	}
	old := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MaxVersion: tls.VersionTLS11}, DisableKeepAlives: true}}
	if _, _, err := Get(old, "https://"+addr+path); err == nil {
		t.Error("a TLS 1.1 client connected")
	}
	return verified
}

// CheckServedTLS runs serve on a loopback listener, checks it with
// CheckTLSOnly, stops it and checks that it stopped cleanly; it returns the
// verified answer's body.
func CheckServedTLS(t *testing.T, pool *x509.CertPool, path string, want int, serve func(ctx context.Context, ln net.Listener) error) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, ln) }()
	body := CheckTLSOnly(t, ln.Addr().String(), pool, path, want)
	cancel()
	if err := <-done; err != nil {
		t.Errorf("serve: %v", err)
	}
	return body
}
