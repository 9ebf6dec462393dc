package agent

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// TestHealthzPasswordDirectory: an agent whose password file is a
// directory (a subPath mounted before its Secret had the key) asks for a
// restart; a file, or no file yet, is alive.
func TestHealthzPasswordDirectory(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "password")
	if err := os.WriteFile(file, []byte("pw"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		path string
		want int
	}{
		"file":      {file, http.StatusOK},
		"directory": {dir, http.StatusServiceUnavailable},
		"missing":   {filepath.Join(dir, "none"), http.StatusOK},
		"none":      {"", http.StatusOK},
	} {
		t.Run(name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			healthz(rec, &Connection{XMPPPasswordFile: tc.path})
			if rec.Code != tc.want {
				t.Errorf("status %d, want %d: %s", rec.Code, tc.want, rec.Body.String())
			}
		})
	}
}
