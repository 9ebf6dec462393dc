package services

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mlsysops-go/mlsysops/internal/testbed/pki"
	"github.com/mlsysops-go/mlsysops/internal/testbed/proc"
)

// PostgresUser is the system account Debian's PostgreSQL runs as; the
// server refuses to run as root.
const PostgresUser = "postgres"

// Postgres is a PostgreSQL server from Debian's packages with a cluster of
// its own (initdb on first start) in dir: data in dir/data, the Unix
// socket in dir/sock, TLS material in dir/tls, its log beside. It listens
// on 127.0.0.1:port and authenticates every connection with a password
// (scram-sha-256), the superuser's included, except the roles made by
// EnsureCertDatabase: those have no password and log in over TLS with a
// client certificate of the server's own authority (pg_hba's cert
// method), and only so. A password can be printed where a client dumps
// its state (ejabberd's SQL process does, in Erlang crash reports, when
// the server goes away); a certificate path cannot log in.
//
// fsync is off: a crash of the server process loses nothing (the kernel
// still holds what was written), only a crash of the machine would, and
// the testbed does not outlive one.
type Postgres struct {
	dir      string
	port     int
	password string
	bin      string
	proc     *proc.Process
	// alsoIP and alsoFrom: AlsoListenOn's address and clients.
	alsoIP, alsoFrom string
}

// NewPostgres describes a server keeping its cluster in dir, listening on
// 127.0.0.1:port, whose superuser "postgres" has password. dir and its
// parents must be reachable by the postgres account (not a 0700 folder of
// root's).
func NewPostgres(dir string, port int, password string) *Postgres {
	p := &Postgres{dir: dir, port: port, password: password, bin: postgresBinDir()}
	p.proc = &proc.Process{
		Name: "postgres",
		Path: filepath.Join(p.bin, "postgres"),
		Args: []string{
			"-D", p.DataDir(),
			"-p", strconv.Itoa(port),
			"-k", p.SocketDir(),
			"-c", "listen_addresses=127.0.0.1",
			"-c", "fsync=off",
			"-c", "max_connections=200",
			"-c", "log_min_messages=warning",
			"-c", "hba_file=" + filepath.Join(dir, "pg_hba.conf"),
			"-c", "ssl=on",
			"-c", "ssl_cert_file=" + filepath.Join(dir, "tls", "server.crt"),
			"-c", "ssl_key_file=" + filepath.Join(dir, "tls", "server.key"),
			"-c", "ssl_ca_file=" + filepath.Join(dir, "tls", "ca.crt"),
		},
		Dir:     dir,
		LogFile: filepath.Join(dir, "postgres.log"),
		PIDFile: filepath.Join(dir, "postgres.pid"),
		Ready:   p.Healthy,
		User:    PostgresUser,
	}
	return p
}

// AlsoListenOn makes the server listen on ip too (set before Start) and
// accept password logins from the range from (CIDR) there: pods on the
// testbed's nodes reach it on the bridge.
func (p *Postgres) AlsoListenOn(ip, from string) {
	p.alsoIP, p.alsoFrom = ip, from
	for i, a := range p.proc.Args {
		if strings.HasPrefix(a, "listen_addresses=") {
			p.proc.Args[i] = "listen_addresses=127.0.0.1," + ip
		}
	}
}

// AddrOn is the server's address on AlsoListenOn's ip.
func (p *Postgres) AddrOn(ip string) string { return net.JoinHostPort(ip, strconv.Itoa(p.port)) }

func (p *Postgres) hbaFile() string { return filepath.Join(p.dir, "pg_hba.conf") }

// UseHBA replaces the running server's client authentication rules with
// rules (pg_hba.conf's format) until its next Start, which writes its
// own again: for tests of rules shipped elsewhere.
func (p *Postgres) UseHBA(ctx context.Context, rules string) error {
	if err := os.WriteFile(p.hbaFile(), []byte(rules), 0o644); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, p.SuperuserDSN("postgres"))
	if err != nil {
		return fmt.Errorf("postgres: connect as superuser: %w", err)
	}
	defer conn.Close(context.Background())
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT pg_reload_conf()").Scan(&ok); err != nil || !ok {
		return fmt.Errorf("postgres: reload its configuration: %v %w", ok, err)
	}
	// A rule the server cannot parse is logged, and the old rules kept.
	var bad int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_hba_file_rules WHERE error IS NOT NULL").Scan(&bad); err != nil || bad > 0 {
		return fmt.Errorf("postgres: %d rules it cannot use (%v)", bad, err)
	}
	return nil
}

// BinDir holds the server's programs (psql, pg_isready, ...).
func (p *Postgres) BinDir() string { return p.bin }

// certGroup is the role whose members log in with a client certificate
// only.
const certGroup = "cert_login"

// writeHBA writes the client authentication rules: members of certGroup
// by certificate over TLS (from loopback and AlsoListenOn's range) and in
// no other way; everyone else with a password (scram-sha-256) from
// loopback, the socket and AlsoListenOn's range.
func (p *Postgres) writeHBA() error {
	ranges := []string{"127.0.0.1/32"}
	if p.alsoIP != "" {
		ranges = append(ranges, p.alsoFrom)
	}
	var b strings.Builder
	b.WriteString("# Written by the testbed (services.Postgres).\n")
	for _, r := range ranges {
		fmt.Fprintf(&b, "hostssl all +%s %s cert\n", certGroup, r)
	}
	fmt.Fprintf(&b, "host all +%s all reject\nlocal all +%s reject\n", certGroup, certGroup)
	b.WriteString("local all all scram-sha-256\n")
	for _, r := range ranges {
		fmt.Fprintf(&b, "host all all %s scram-sha-256\n", r)
	}
	return os.WriteFile(p.hbaFile(), []byte(b.String()), 0o644)
}

// tlsDir holds the server's authority, certificate and key (the key
// readable by the postgres account only, as the server demands).
func (p *Postgres) tlsDir() string { return filepath.Join(p.dir, "tls") }

// ca loads or creates the authority of the server's certificate and of
// the client certificates it accepts.
func (p *Postgres) ca() (*pki.CA, error) {
	return pki.LoadOrCreateCA(p.tlsDir(), "ca", "mlsysops-postgres-ca")
}

// writeTLS issues the server's certificate (127.0.0.1 and AlsoListenOn's
// address).
func (p *Postgres) writeTLS() error {
	ca, err := p.ca()
	if err != nil {
		return err
	}
	spec := pki.CertSpec{CommonName: "postgres", DNSNames: []string{"localhost"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}, Server: true}
	if p.alsoIP != "" {
		spec.IPs = append(spec.IPs, net.ParseIP(p.alsoIP))
	}
	if !pki.Covers(filepath.Join(p.tlsDir(), "server.crt"), spec) {
		_ = os.Remove(filepath.Join(p.tlsDir(), "server.crt"))
	}
	if _, _, err := ca.Issue(p.tlsDir(), "server", spec); err != nil {
		return err
	}
	return chownTree(p.tlsDir(), PostgresUser)
}

// ClientCert issues (once) the client certificate role logs in with:
// PEM files of certificate and key, and of the authority that signed the
// server's certificate. The caller must be able to read the key (root).
func (p *Postgres) ClientCert(role string) (certFile, keyFile, caFile string, err error) {
	ca, err := p.ca()
	if err != nil {
		return "", "", "", err
	}
	dir := filepath.Join(p.dir, "clients")
	// The cert method takes the role from the certificate's common name.
	certFile, keyFile, err = ca.Issue(dir, role, pki.CertSpec{CommonName: role, Client: true})
	return certFile, keyFile, ca.CertFile, err
}

// CertDSN is a connection URL for role, which logs in with its client
// certificate (ClientCert), to database db, verifying the server.
func (p *Postgres) CertDSN(role, db string) (string, error) {
	certFile, keyFile, caFile, err := p.ClientCert(role)
	if err != nil {
		return "", err
	}
	return CertDSN(p.Addr(), role, db, certFile, keyFile, caFile), nil
}

// CertDSN is a connection URL for role to database db on addr (host:port)
// with a client certificate, verifying the server against caFile.
func CertDSN(addr, role, db, certFile, keyFile, caFile string) string {
	q := url.Values{"sslmode": {"verify-full"}, "sslcert": {certFile}, "sslkey": {keyFile}, "sslrootcert": {caFile}}
	u := url.URL{Scheme: "postgres", User: url.User(role), Host: addr, Path: "/" + db, RawQuery: q.Encode()}
	return u.String()
}

// postgresBinDir finds the newest server installed by Debian's packages.
func postgresBinDir() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi > vj
	})
	if len(dirs) == 0 {
		return "/usr/lib/postgresql/15/bin"
	}
	return dirs[0]
}

// DataDir is the cluster's data directory.
func (p *Postgres) DataDir() string { return filepath.Join(p.dir, "data") }

// SocketDir holds the server's Unix socket.
func (p *Postgres) SocketDir() string { return filepath.Join(p.dir, "sock") }

// Addr is the host:port clients connect to.
func (p *Postgres) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port)) }

// Password is the superuser's password.
func (p *Postgres) Password() string { return p.password }

// LogFile is where the server logs.
func (p *Postgres) LogFile() string { return p.proc.LogFile }

// DSN is a connection URL for user with password to database db.
func (p *Postgres) DSN(user, password, db string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(user, password), Host: p.Addr(), Path: "/" + db, RawQuery: "sslmode=disable"}
	return u.String()
}

// SuperuserDSN connects as the superuser to database db.
func (p *Postgres) SuperuserDSN(db string) string { return p.DSN(PostgresUser, p.password, db) }

// Start creates the cluster on first use and starts the server unless it
// is already running and healthy.
func (p *Postgres) Start(ctx context.Context) error {
	if _, ok := p.proc.Pid(); ok && p.proc.SameCommand() && p.Healthy(ctx) == nil {
		return nil
	}
	_ = p.stop(10 * time.Second)
	if _, err := os.Stat(p.proc.Path); err != nil {
		return fmt.Errorf("postgres: %s missing: install Debian's postgresql (make deps): %w", p.proc.Path, err)
	}
	if err := p.prepare(ctx); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	if err := p.writeHBA(); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	if err := p.writeTLS(); err != nil {
		return fmt.Errorf("postgres: TLS: %w", err)
	}
	p.removeStaleLock()
	if err := p.proc.Start(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return p.proc.WaitReady(ctx)
}

// removeStaleLock removes the lock files (the data folder's and the
// socket's) a killed server left when the process they name is gone or a
// zombie: PostgreSQL itself takes a zombie (an orphan not yet reaped) for a
// live server and refuses to start.
func (p *Postgres) removeStaleLock() {
	locks, _ := filepath.Glob(filepath.Join(p.SocketDir(), ".s.PGSQL.*.lock"))
	for _, lock := range append(locks, filepath.Join(p.DataDir(), "postmaster.pid")) {
		b, err := os.ReadFile(lock)
		if err != nil {
			continue
		}
		first, _, _ := strings.Cut(string(b), "\n")
		if pid, err := strconv.Atoi(strings.TrimSpace(first)); err == nil && pid > 0 && !proc.PIDAlive(pid) {
			_ = os.Remove(lock)
		}
	}
}

// prepare makes the folders (the data folder owned by the postgres
// account, as the server demands) and runs initdb once.
func (p *Postgres) prepare(ctx context.Context) error {
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return err
	}
	for _, d := range []string{p.DataDir(), p.SocketDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
		if err := chownTree(d, PostgresUser); err != nil {
			return err
		}
	}
	if _, err := os.Stat(filepath.Join(p.DataDir(), "PG_VERSION")); err == nil {
		return nil
	}
	// initdb reads the superuser's password from a file only it can read.
	pwFile := filepath.Join(p.SocketDir(), "initdb.pw")
	if err := os.WriteFile(pwFile, []byte(p.password+"\n"), 0o600); err != nil {
		return err
	}
	defer os.Remove(pwFile)
	if err := chownTree(pwFile, PostgresUser); err != nil {
		return err
	}
	out, err := p.runAsPostgres(ctx, "initdb",
		"-D", p.DataDir(), "-U", PostgresUser, "--pwfile="+pwFile,
		"--auth-local=scram-sha-256", "--auth-host=scram-sha-256",
		"-E", "UTF8", "--locale=C", "--no-sync")
	if err != nil {
		return fmt.Errorf("initdb: %w\n%s", err, out)
	}
	return nil
}

// runAsPostgres runs one of the server's tools as the postgres account.
func (p *Postgres) runAsPostgres(ctx context.Context, tool string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(p.bin, tool), args...)
	cmd.Dir = p.dir
	if os.Geteuid() == 0 {
		cred, err := proc.Credential(PostgresUser)
		if err != nil {
			return nil, err
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	return cmd.CombinedOutput()
}

// Healthy connects as the superuser and runs a query.
func (p *Postgres) Healthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.SuperuserDSN("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var one int
	return conn.QueryRow(ctx, "SELECT 1").Scan(&one)
}

// EnsureDatabase makes sure the role user exists with password and owns
// database db, creating either when missing. It is idempotent: the
// password is reset to the one given.
func (p *Postgres) EnsureDatabase(ctx context.Context, db, user, password string) error {
	// The password is a literal of a utility statement, which takes no
	// parameters: quote it as PostgreSQL quotes literals.
	lit := "'" + strings.ReplaceAll(password, "'", "''") + "'"
	return p.ensureDatabase(ctx, db, user, "PASSWORD "+lit, false)
}

// EnsureCertDatabase makes sure the role user exists without a password,
// logs in only with its client certificate (ClientCert) and owns database
// db, creating either when missing. A role that had a password loses it.
func (p *Postgres) EnsureCertDatabase(ctx context.Context, db, user string) error {
	return p.ensureDatabase(ctx, db, user, "PASSWORD NULL", true)
}

func (p *Postgres) ensureDatabase(ctx context.Context, db, user, password string, cert bool) error {
	conn, err := pgx.Connect(ctx, p.SuperuserDSN("postgres"))
	if err != nil {
		return fmt.Errorf("postgres: connect as superuser: %w", err)
	}
	defer conn.Close(context.Background())
	role, group := pgx.Identifier{user}.Sanitize(), pgx.Identifier{certGroup}.Sanitize()
	roleExists := func(name string) (bool, error) {
		var exists bool
		err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)", name).Scan(&exists)
		if err != nil {
			return false, fmt.Errorf("postgres: look up role %s: %w", name, err)
		}
		return exists, nil
	}
	stmts := []string{"CREATE ROLE " + role + " LOGIN " + password}
	if exists, err := roleExists(user); err != nil {
		return err
	} else if exists {
		stmts[0] = "ALTER ROLE " + role + " LOGIN " + password
	}
	if exists, err := roleExists(certGroup); err != nil {
		return err
	} else if cert && !exists {
		stmts = append([]string{"CREATE ROLE " + group + " NOLOGIN"}, stmts...)
	}
	if cert {
		stmts = append(stmts, "GRANT "+group+" TO "+role)
	} else {
		stmts = append(stmts, "DO $$ BEGIN IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '"+certGroup+"') THEN REVOKE "+group+" FROM "+role+"; END IF; END $$")
	}
	for _, stmt := range stmts {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("postgres: role %s: %w", user, err)
		}
	}
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", db).Scan(&exists); err != nil {
		return fmt.Errorf("postgres: look up database %s: %w", db, err)
	}
	if !exists {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{db}.Sanitize()+" OWNER "+role); err != nil {
			return fmt.Errorf("postgres: create database %s: %w", db, err)
		}
	}
	return nil
}

// Stop shuts the server down with a fast shutdown (open sessions are
// ended, committed work is kept).
func (p *Postgres) Stop(ctx context.Context) error { return p.stop(30 * time.Second) }

func (p *Postgres) stop(grace time.Duration) error {
	// SIGINT is PostgreSQL's fast shutdown; the SIGTERM of proc.Stop
	// would wait for every client to leave.
	if pid, ok := p.proc.Pid(); ok {
		_ = syscall.Kill(pid, syscall.SIGINT)
		deadline := time.Now().Add(grace)
		for time.Now().Before(deadline) {
			if _, ok := p.proc.Pid(); !ok {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return p.proc.Stop(grace)
}

// Kill kills the server and its backends with SIGKILL, as a crash would.
func (p *Postgres) Kill() error { return p.proc.Kill() }

// Pid returns the server's process id and whether it is alive.
func (p *Postgres) Pid() (int, bool) { return p.proc.Pid() }

// Running reports whether the server process is alive.
func (p *Postgres) Running() bool { _, ok := p.proc.Pid(); return ok }
