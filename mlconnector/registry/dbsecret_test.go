package registry_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/mlsysops-go/mlsysops/mlconnector/db"
	"github.com/mlsysops-go/mlsysops/mlconnector/internal/dbtest"
)

// TestDatabasePasswordNotEchoed: opening the database with a wrong
// password, or with a connection string that does not parse, fails with
// an error, and neither the error nor the log says the password.
func TestDatabasePasswordNotEchoed(t *testing.T) {
	u, err := url.Parse(dbtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	const wrong = "Wrong-Db-Password-0123456789"
	u.User = url.UserPassword(u.User.Username(), wrong)
	for name, dsn := range map[string]string{
		"wrong password": u.String(),
		"malformed":      strings.Replace(u.String(), "postgres://", "postgres://%zz", 1),
	} {
		t.Run(name, func(t *testing.T) {
			var logs bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			pool, err := db.Open(ctx, dsn, 1, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
			if err == nil {
				pool.Close()
				t.Fatal("opened with a wrong password")
			}
			if strings.Contains(err.Error(), wrong) || strings.Contains(logs.String(), wrong) {
				t.Errorf("the password is echoed:\nerror: %v\nlog: %s", err, logs.String())
			}
			t.Logf("error: %v", err)
		})
	}
}
