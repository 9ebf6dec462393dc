package northbound_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mlsysops-go/mlsysops/internal/testbed"
	nbclient "github.com/mlsysops-go/mlsysops/northbound/client"
)

// TestTestbedServesTheAPI: the testbed's up starts the northbound built
// from this checkout, and its env file gives what mls needs.
func TestTestbedServesTheAPI(t *testing.T) {
	tb := testbed.Shared(t)
	ctx := ctxT(t)
	if tb.NorthboundURL == "" || len(tb.NorthboundToken) < 16 || len(tb.NorthboundViewerToken) < 16 || tb.NorthboundToken == tb.NorthboundViewerToken {
		t.Fatalf("testbed env: URL %q, tokens of %d and %d characters", tb.NorthboundURL, len(tb.NorthboundToken), len(tb.NorthboundViewerToken))
	}
	envFile, err := os.ReadFile(filepath.Join(tb.StateDir, "env"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"export MLS_API_URL='" + tb.NorthboundURL + "'", "export MLS_TOKEN='" + tb.NorthboundToken + "'", "export MLS_VIEWER_TOKEN='" + tb.NorthboundViewerToken + "'"} {
		if !strings.Contains(string(envFile), want) {
			t.Errorf("env file lacks %s", want)
		}
	}
	bin := filepath.Join(repoRoot(t), "bin")
	if !strings.Contains(string(envFile), "export PATH='"+bin+"':\"$PATH\"") {
		t.Errorf("env file does not put %s on the PATH:\n%s", bin, envFile)
	}
	if _, err := os.Stat(filepath.Join(bin, "mls")); err != nil {
		t.Errorf("mls not built: %v", err)
	}
	for _, f := range []string{"northbound-operator.token", "northbound-viewer.token", "northbound.tokens", "northbound.xmpp.password"} {
		st, err := os.Stat(filepath.Join(tb.StateDir, "pki", f))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("pki/%s: %v %v, want mode 0600", f, st.Mode(), err)
		}
	}

	op := newClient(t, tb.NorthboundURL, tb.NorthboundToken)
	view := newClient(t, tb.NorthboundURL, tb.NorthboundViewerToken)
	if h, err := op.Readyz(ctx); err != nil || h.Status != "ok" {
		t.Fatalf("readyz: %+v %v", h, err)
	}
	name := uniq("testbed-app")
	if _, err := op.Applications().Submit(ctx, appJSON(name), nbclient.JSON); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = op.Applications().Remove(ctx, name) })
	app, err := view.Applications().Get(ctx, name)
	if err != nil || app.Phase == "" {
		t.Errorf("get through the testbed's API: %+v %v", app, err)
	}
	if _, err := view.Applications().Remove(ctx, name); nbclient.StatusCode(err) != 403 {
		t.Errorf("viewer remove: %v, want 403", err)
	}
	cont, err := view.Continuum(ctx)
	if err != nil || len(cont.Clusters) != len(tb.Clusters) || cont.ID == "" {
		t.Errorf("infrastructure through the testbed's API: %+v %v", cont, err)
	}
}
