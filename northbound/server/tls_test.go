package server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"

	"github.com/spf13/pflag"

	"github.com/mlsysops-go/mlsysops/internal/httpapi/apitest"
)

// TestServeTLS: with --tls-cert-file and --tls-key-file the northbound
// API is served over TLS only (plain HTTP on its port gets a 400).
func TestServeTLS(t *testing.T) {
	pool, cert, key := apitest.ServingCert(t, t.TempDir(), "ca")
	o := NewOptions()
	o.TokenFile, o.RedisAddrs = "tokens.csv", []string{"127.0.0.1:6379"}
	fs := pflag.NewFlagSet("northbound", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--listen", "127.0.0.1:0", "--tls-cert-file", cert, "--tls-key-file", key}); err != nil {
		t.Fatal(err)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "applications") })
	body := apitest.CheckServedTLS(t, pool, "/v1/applications", http.StatusOK, func(ctx context.Context, ln net.Listener) error {
		return ServeListener(ctx, o, ln, h, slog.New(slog.NewTextHandler(io.Discard, nil)))
	})
	if body != "applications" {
		t.Errorf("answer %q", body)
	}
}
