package charts_test

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mlsysops-go/mlsysops/deployments/charts"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
)

// configMapData is one key of a rendered ConfigMap.
func configMapData(t *testing.T, objs []*unstructured.Unstructured, name, key string) string {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == "ConfigMap" && o.GetName() == name {
			v, ok, _ := unstructured.NestedString(o.Object, "data", key)
			if !ok || v == "" {
				t.Fatalf("ConfigMap %s has no %s", name, key)
			}
			return v
		}
	}
	t.Fatalf("the bundled chart renders no ConfigMap %s", name)
	return ""
}

// TestBundledPostgresLogins runs the bundled chart's database set-up for
// ejabberd (what its pod's init container runs as the superuser) and its
// client authentication rules on a real PostgreSQL that an earlier
// install left (ejabberd's database and tables owned by postgres.user,
// which has a password): run twice, the role ejabberd has no password
// and owns the database and its tables; it logs in with its client
// certificate, to its database only, and not with a password; postgres.user
// (the ML connector) still logs in with its password.
func TestBundledPostgresLogins(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	objs, err := charts.Render(charts.Host, map[string]any{"karmadaHostIP": "192.0.2.1"})
	if err != nil {
		t.Fatal(err)
	}
	script := configMapData(t, objs, "mlsysops-ejabberd-database", "ejabberd.sql")
	hba := configMapData(t, objs, "mlsysops-postgres-hba", "pg_hba.conf")

	pg := testbed.Postgres(t)
	su, err := pgx.Connect(ctx, pg.SuperuserDSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer su.Close(context.Background())
	exec1 := func(conn *pgx.Conn, sql string) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	// The earlier install: postgres.user (the image's superuser) owns
	// its database and ejabberd's, where ejabberd made its tables.
	const user, userPassword = "mlsysops", "earlier-install-password"
	exec1(su, "CREATE ROLE mlsysops LOGIN SUPERUSER PASSWORD '"+userPassword+"'")
	exec1(su, "CREATE DATABASE mlsysops OWNER mlsysops")
	exec1(su, "CREATE DATABASE ejabberd OWNER mlsysops")
	old, err := pgx.Connect(ctx, pg.DSN(user, userPassword, "ejabberd"))
	if err != nil {
		t.Fatal(err)
	}
	exec1(old, "CREATE TABLE users (username text PRIMARY KEY, serial_id serial)")
	exec1(old, "INSERT INTO users (username) VALUES ('admin')")
	old.Close(ctx)

	file := filepath.Join(t.TempDir(), "ejabberd.sql")
	if err := os.WriteFile(file, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	for run := 1; run <= 2; run++ {
		cmd := exec.CommandContext(ctx, filepath.Join(pg.BinDir(), "psql"), "-v", "ON_ERROR_STOP=1", "-q", "-f", file)
		host, port, _ := net.SplitHostPort(pg.Addr())
		cmd.Env = []string{"PGHOST=" + host, "PGPORT=" + port, "PGUSER=" + user, "PGPASSWORD=" + userPassword,
			"PGDATABASE=" + user, "PGSSLMODE=require"}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("run %d of the set-up: %v\n%s", run, err, out)
		}
	}
	var hasPassword bool
	var dbOwner, tableOwner, seqOwner, userDBOwner string
	if err := su.QueryRow(ctx, "SELECT rolpassword IS NOT NULL FROM pg_authid WHERE rolname = 'ejabberd'").Scan(&hasPassword); err != nil || hasPassword {
		t.Errorf("role ejabberd: has a password %v (%v)", hasPassword, err)
	}
	err = su.QueryRow(ctx, `SELECT (SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = 'ejabberd'),
		(SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = 'mlsysops')`).Scan(&dbOwner, &userDBOwner)
	if err != nil || dbOwner != "ejabberd" || userDBOwner != user {
		t.Errorf("database owners: ejabberd's %q, mlsysops's %q (%v); want ejabberd, mlsysops", dbOwner, userDBOwner, err)
	}

	if err := pg.UseHBA(ctx, hba); err != nil {
		t.Fatal(err)
	}
	dsn, err := pg.CertDSN("ejabberd", "ejabberd")
	if err != nil {
		t.Fatal(err)
	}
	// The rules apply once the server has reloaded them.
	var ej *pgx.Conn
	deadline := time.Now().Add(30 * time.Second)
	for ej, err = pgx.Connect(ctx, dsn); err != nil; ej, err = pgx.Connect(ctx, dsn) {
		if time.Now().After(deadline) {
			t.Fatalf("ejabberd does not log in with its client certificate: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	defer ej.Close(context.Background())
	err = ej.QueryRow(ctx, `SELECT (SELECT tableowner FROM pg_tables WHERE tablename = 'users'),
		(SELECT sequenceowner FROM pg_sequences WHERE sequencename = 'users_serial_id_seq')`).Scan(&tableOwner, &seqOwner)
	if err != nil || tableOwner != "ejabberd" || seqOwner != "ejabberd" {
		t.Errorf("owners of the earlier install's table and sequence: %q, %q (%v); want ejabberd", tableOwner, seqOwner, err)
	}
	exec1(ej, "INSERT INTO users (username) VALUES ('someone')")

	otherDB, err := pg.CertDSN("ejabberd", user)
	if err != nil {
		t.Fatal(err)
	}
	for what, dsn := range map[string]string{
		"its client certificate, to another database": otherDB,
		"no password":              pg.DSN("ejabberd", "", "ejabberd"),
		"postgres.user's password": pg.DSN("ejabberd", userPassword, "ejabberd"),
	} {
		if c, err := pgx.Connect(ctx, dsn); err == nil {
			c.Close(ctx)
			t.Errorf("ejabberd logged in with %s", what)
		}
	}
	ml, err := pgx.Connect(ctx, strings.Replace(pg.DSN(user, userPassword, user), "sslmode=disable", "sslmode=require", 1))
	if err != nil {
		t.Fatalf("postgres.user (the ML connector) no longer logs in with its password: %v", err)
	}
	ml.Close(ctx)
}
