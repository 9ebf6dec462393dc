package services

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/template"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mlsysops-go/mlsysops/internal/testbed/pki"
	"github.com/mlsysops-go/mlsysops/internal/testbed/proc"
)

// Ejabberd is an ejabberd server with its own configuration, spool and log
// directories, so several can run on one machine beside (and without
// touching) the system's. It runs Erlang distribution on a fixed loopback
// port without epmd, so that stopping it leaves no process behind.
//
// Security: STARTTLS is required with a certificate from a CA of its own,
// there is no in-band registration, and the admin API (mod_http_api, HTTPS
// on loopback) accepts only the admin account, which provisions agents.
//
// Storage: by default ejabberd keeps its data in Mnesia, which writes
// through caches that a SIGKILL loses (about the last two seconds of
// writes: accounts, passwords, roster items). UseSQL moves every table
// ejabberd can keep in SQL to PostgreSQL, where an acknowledged write
// survives a crash of ejabberd (see docs/messaging.md).
type Ejabberd struct {
	dir      string
	portBase int
	domain   string
	node     string
	ctl      string
	proc     *proc.Process
	adminPW  string
	sql      *EjabberdSQL
	// also are addresses its c2s listener serves besides 127.0.0.1 (the
	// testbed bridge's, for pods); its certificate names them.
	also []string
	// index is the node's place in its cluster (0 for a single server);
	// distIP is the loopback address of its Erlang distribution; seed is
	// the cluster's first node, which the others join (nil for the first).
	index  int
	distIP string
	seed   *Ejabberd
}

// AlsoListenOn makes the c2s listener and the admin API serve ip too (set
// before Start); only the admin account may use the API.
func (e *Ejabberd) AlsoListenOn(ip string) { e.also = append(e.also, ip) }

// APIURLOn is the admin API's URL on one of the AlsoListenOn addresses
// (where the accounts reconciler's pod reaches it).
func (e *Ejabberd) APIURLOn(ip string) string {
	return "https://" + net.JoinHostPort(ip, strconv.Itoa(e.apiPort())) + "/api"
}

// C2SAddrOn is the c2s address on one of the AlsoListenOn addresses.
func (e *Ejabberd) C2SAddrOn(ip string) string {
	return net.JoinHostPort(ip, strconv.Itoa(e.c2sPort()))
}

// EjabberdSQL is the PostgreSQL database ejabberd keeps its data in.
type EjabberdSQL struct {
	// Addr is the server, host:port.
	Addr string
	// Database and User: the database (owned by User) and the role
	// ejabberd logs in as.
	Database, User string
	// CertFile and KeyFile: the client certificate (common name User) and
	// key ejabberd logs in with, over TLS; CAFile: the authority of the
	// server's certificate. No password: ejabberd's SQL process prints
	// its state, a password included, in the crash report Erlang logs
	// when the database goes away (see Postgres.ClientCert).
	CertFile, KeyFile, CAFile string
}

// PostgresSQL is the database db on pg for ejabberd, as role user, which
// logs in with its client certificate: the role and database are made
// (EnsureCertDatabase) and the certificate issued.
func PostgresSQL(ctx context.Context, pg *Postgres, db, user string) (EjabberdSQL, error) {
	if err := pg.EnsureCertDatabase(ctx, db, user); err != nil {
		return EjabberdSQL{}, err
	}
	cert, key, ca, err := pg.ClientCert(user)
	if err != nil {
		return EjabberdSQL{}, fmt.Errorf("postgres: client certificate of %s: %w", user, err)
	}
	return EjabberdSQL{Addr: pg.Addr(), Database: db, User: user, CertFile: cert, KeyFile: key, CAFile: ca}, nil
}

// ejabberdSchema is the PostgreSQL schema Debian's ejabberd package ships
// for its single-host ("old") SQL layout.
const ejabberdSchema = "/usr/share/ejabberd/sql/pg.sql"

// Ejabberd ports are offsets from the port base: node i of a cluster
// serves c2s on 2i and the admin API on 2i+1; every node's Erlang
// distribution listens on 9, each on a loopback address of its own.
const (
	ejC2SOffset  = 0
	ejAPIOffset  = 1
	ejDistOffset = 9
	// MaxEjabberdNodes is the largest cluster one port base holds.
	MaxEjabberdNodes = 4
)

// NewEjabberd describes a server for the XMPP domain whose state lives in dir
// and whose ports are portBase (c2s), portBase+1 (HTTPS admin API) and
// portBase+9 (Erlang distribution, loopback).
func NewEjabberd(dir string, portBase int, domain string) *Ejabberd {
	sum := sha256.Sum256([]byte(dir))
	return newEjabberd(dir, portBase, domain, "mlsysops-"+hex.EncodeToString(sum[:4])+"@localhost")
}

// NewEjabberdCluster describes an ejabberd cluster of n nodes (at most
// MaxEjabberdNodes) for the XMPP domain. Node 1 keeps its state in dir,
// node i in dir-i. The nodes keep their data in one SQL database (UseSQL
// on every node, before Start), so accounts, passwords and rosters are
// the cluster's; they are joined into one Erlang cluster (Mnesia) for the
// rest: sessions and routes, so that a message reaches its recipient
// whichever node it is logged in to. Start node 1 first: the others join
// it.
//
// Ports: node i (from 0) serves c2s on portBase+2i and its admin API on
// portBase+2i+1; the Erlang distribution of every node listens on
// portBase+9 on 127.0.0.(i+1): Erlang without epmd expects every node of a
// cluster on one port, so each gets a loopback address of its own.
func NewEjabberdCluster(dir string, portBase int, domain string, n int) ([]*Ejabberd, error) {
	if n < 1 || n > MaxEjabberdNodes {
		return nil, fmt.Errorf("ejabberd cluster of %d nodes: want 1 to %d", n, MaxEjabberdNodes)
	}
	sum := sha256.Sum256([]byte(dir))
	nodes := make([]*Ejabberd, n)
	for i := range nodes {
		d := dir
		if i > 0 {
			d = dir + "-" + strconv.Itoa(i+1)
		}
		ip := "127.0.0." + strconv.Itoa(i+1)
		e := newEjabberd(d, portBase, domain, fmt.Sprintf("mlsysops-%s-%d@%s", hex.EncodeToString(sum[:4]), i+1, ip))
		e.index, e.distIP = i, ip
		if i > 0 {
			e.seed = nodes[0]
		}
		nodes[i] = e
	}
	return nodes, nil
}

func newEjabberd(dir string, portBase int, domain, node string) *Ejabberd {
	e := &Ejabberd{
		dir:      dir,
		portBase: portBase,
		domain:   domain,
		node:     node,
		ctl:      lookPath("ejabberdctl", "/usr/sbin/ejabberdctl"),
	}
	e.proc = &proc.Process{
		Name:    "ejabberd",
		Path:    e.ctl,
		Args:    append(e.ctlArgs(), "foreground"),
		Dir:     dir,
		LogFile: filepath.Join(dir, "logs", "foreground.log"),
		PIDFile: filepath.Join(dir, "ejabberd.pid"),
		Ready:   e.Healthy,
	}
	if os.Geteuid() == 0 {
		// Run as root, ejabberdctl would start the server through su,
		// whose PAM session sets the open-files limit back to 1024: too
		// few for a connection per agent. Started as its user, it runs
		// the server itself, with the limit set here.
		e.proc.User, e.proc.OpenFiles = ejabberdUser, EjabberdOpenFiles()
		if u, err := user.Lookup(ejabberdUser); err == nil {
			e.proc.Env = []string{"HOME=" + u.HomeDir, "USER=" + ejabberdUser, "LOGNAME=" + ejabberdUser}
		}
	}
	return e
}

// EjabberdOpenFiles is the testbed's ejabberd's limit of open files, for a
// connection per agent (BenchmarkFanIn connects 1,000) and the server's
// own files: 65,536, or the hard limit of this process when that is lower
// (a container may forbid raising it).
func EjabberdOpenFiles() uint64 {
	const want = 65536
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Max < want {
		return lim.Max
	}
	return want
}

func (e *Ejabberd) c2sPort() int { return e.portBase + ejC2SOffset + 2*e.index }
func (e *Ejabberd) apiPort() int { return e.portBase + ejAPIOffset + 2*e.index }

// Node is the Erlang node name of the server.
func (e *Ejabberd) Node() string { return e.node }

// ejabberdUser is the account Debian's ejabberd package runs the server as.
const ejabberdUser = "ejabberd"

func (e *Ejabberd) ctlArgs() []string {
	return []string{
		"--config-dir", filepath.Join(e.dir, "etc"),
		"--spool", filepath.Join(e.dir, "spool"),
		"--logs", filepath.Join(e.dir, "logs"),
		"--node", e.node,
	}
}

// UseSQL keeps the server's data in the PostgreSQL database db instead of
// Mnesia; the schema is created on the first Start. Call it before Start.
// Debian's ejabberd needs its PostgreSQL driver, erlang-p1-pgsql.
func (e *Ejabberd) UseSQL(db EjabberdSQL) { e.sql = &db }

// SQL returns the database the server keeps its data in, nil for Mnesia.
func (e *Ejabberd) SQL() *EjabberdSQL { return e.sql }

// C2SAddr is the client-to-server address, "127.0.0.1:port".
func (e *Ejabberd) C2SAddr() string { return "127.0.0.1:" + strconv.Itoa(e.c2sPort()) }

// Domain is the XMPP domain (virtual host) the server serves.
func (e *Ejabberd) Domain() string { return e.domain }

// APIURL is the base URL of mod_http_api, e.g. https://127.0.0.1:5281/api.
// Requests authenticate with HTTP basic auth as AdminJID and trust CAFile.
func (e *Ejabberd) APIURL() string {
	return "https://127.0.0.1:" + strconv.Itoa(e.apiPort()) + "/api"
}

// AdminJID is the account allowed to use the admin API.
func (e *Ejabberd) AdminJID() string { return "admin@" + e.domain }

// AdminPassword is the admin account's password, generated once per state
// directory.
func (e *Ejabberd) AdminPassword() string { return e.adminPW }

// AdminPasswordFile holds AdminPassword (mode 0600).
func (e *Ejabberd) AdminPasswordFile() string { return filepath.Join(e.dir, "admin.password") }

// CAFile is the PEM file of the CA that signed the server certificate (SANs:
// the domain, localhost and 127.0.0.1). The nodes of a cluster share the
// first node's CA.
func (e *Ejabberd) CAFile() string { return filepath.Join(e.caDir(), "ca.crt") }

func (e *Ejabberd) caDir() string {
	if e.seed != nil {
		return e.seed.caDir()
	}
	return filepath.Join(e.dir, "tls")
}

// LogFile is the server's main log.
func (e *Ejabberd) LogFile() string { return filepath.Join(e.dir, "logs", "ejabberd.log") }

// ConfigFile is the server's configuration (ejabberd.yml).
func (e *Ejabberd) ConfigFile() string { return filepath.Join(e.dir, "etc", "ejabberd.yml") }

// PIDFile is the file holding the server's process id.
func (e *Ejabberd) PIDFile() string { return e.proc.PIDFile }

// Pid returns the server's process id and whether it is alive.
func (e *Ejabberd) Pid() (int, bool) { return e.proc.Pid() }

// Running reports whether the server process is alive.
func (e *Ejabberd) Running() bool { _, ok := e.proc.Pid(); return ok }

// Start prepares the directories, configuration and certificate, starts the
// server unless it is already healthy, and makes sure the admin account
// exists.
func (e *Ejabberd) Start(ctx context.Context) error {
	changed, err := e.prepare()
	if err != nil {
		return fmt.Errorf("ejabberd: %w", err)
	}
	if err := e.ensureSchema(ctx); err != nil {
		return fmt.Errorf("ejabberd: %w", err)
	}
	if _, ok := e.proc.Pid(); ok {
		if !changed && e.Healthy(ctx) == nil {
			return e.ensureJoined(ctx)
		}
		// Running with another configuration (say, Mnesia where it now
		// keeps its data in SQL), or not answering.
		if err := e.Stop(ctx); err != nil {
			return err
		}
	}
	_ = e.proc.Stop(5 * time.Second)
	// Only now that it is stopped may its spool go.
	if err := e.checkSpool(); err != nil {
		return fmt.Errorf("ejabberd: %w", err)
	}
	if err := e.proc.Start(); err != nil {
		return err
	}
	// The listener comes up before the admin account exists; wait for the
	// port first, then create the account, then check the API. Booting
	// the Erlang VM and loading the modules is most of the time (seconds
	// alone, tens of seconds on a loaded machine): the boot and the rest
	// have a deadline each.
	bctx, cancel := context.WithTimeout(ctx, startupTimeout)
	defer cancel()
	if err := waitTCP(bctx, e.C2SAddr(), e.proc); err != nil {
		// ejabberd logs why it stopped in its own log, not on its output.
		return fmt.Errorf("%w\n%s:\n%s", err, e.LogFile(), proc.Tail(e.LogFile(), 20))
	}
	wctx, cancel := context.WithTimeout(ctx, startupTimeout)
	defer cancel()
	if e.seed != nil {
		// The admin account is the cluster's (in SQL), made by the first
		// node.
		if err := e.ensureJoined(wctx); err != nil {
			return err
		}
		return e.proc.WaitReady(wctx)
	}
	if err := e.ensureAdmin(wctx); err != nil {
		return err
	}
	return e.proc.WaitReady(wctx)
}

// ensureJoined makes a node other than the first a member of the first
// node's cluster: ejabberdctl join_cluster copies the cluster's Mnesia
// schema and restarts ejabberd on this node. A node that was a member
// before finds the cluster again by itself when it starts.
func (e *Ejabberd) ensureJoined(ctx context.Context) error {
	if e.seed == nil {
		return nil
	}
	var last string
	for {
		out, err := e.ctlRun(ctx, "list_cluster")
		if err == nil && strings.Contains(out, e.seed.node) {
			return nil
		}
		if err == nil {
			out, err = e.ctlRun(ctx, "join_cluster", e.seed.node)
		}
		if err != nil {
			last = out
			if last == "" {
				last = err.Error()
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("ejabberd: join node %s to the cluster of %s: %w (last answer: %s); see %s", e.node, e.seed.node, ctx.Err(), last, e.LogFile())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// startupTimeout bounds each of ejabberd's start-up steps: the boot until
// its client port answers, then the admin account and the API.
const startupTimeout = 3 * time.Minute

// prepare writes the server's files; it reports whether its configuration
// changed.
func (e *Ejabberd) prepare() (bool, error) {
	for _, d := range []string{"etc", "spool", "logs", "tls"} {
		if err := os.MkdirAll(filepath.Join(e.dir, d), 0o750); err != nil {
			return false, err
		}
	}
	pwFile := filepath.Join(e.dir, "admin.password")
	if e.seed != nil {
		// The cluster has one admin account.
		b, err := os.ReadFile(e.seed.AdminPasswordFile())
		if err != nil || len(bytes.TrimSpace(b)) == 0 {
			return false, fmt.Errorf("the admin password of the cluster's first node (start it first): %v", err)
		}
		e.adminPW = string(bytes.TrimSpace(b))
		if err := os.WriteFile(pwFile, []byte(e.adminPW), 0o600); err != nil {
			return false, err
		}
	} else if b, err := os.ReadFile(pwFile); err == nil && len(bytes.TrimSpace(b)) > 0 {
		e.adminPW = string(bytes.TrimSpace(b))
	} else {
		e.adminPW = RandomSecret()
		if err := os.WriteFile(pwFile, []byte(e.adminPW), 0o600); err != nil {
			return false, err
		}
	}
	tlsDir := filepath.Join(e.dir, "tls")
	ca, err := pki.LoadOrCreateCA(e.caDir(), "ca", "mlsysops-xmpp-ca")
	if err != nil {
		return false, err
	}
	ips := []net.IP{net.ParseIP("127.0.0.1")}
	for _, ip := range e.also {
		ips = append(ips, net.ParseIP(ip))
	}
	spec := pki.CertSpec{CommonName: e.domain, DNSNames: []string{e.domain, "localhost"}, IPs: ips, Server: true}
	if !pki.Covers(filepath.Join(tlsDir, "server.crt"), spec) {
		_ = os.Remove(filepath.Join(tlsDir, "server.crt"))
	}
	certFile, keyFile, err := ca.Issue(tlsDir, "server", spec)
	if err != nil {
		return false, err
	}
	// ejabberd wants certificate and key in one file it can read.
	if err := joinFiles(filepath.Join(e.dir, "etc", "server.pem"), 0o600, certFile, keyFile); err != nil {
		return false, err
	}
	var conf bytes.Buffer
	vars := map[string]any{
		"Domain": e.domain, "C2SPort": e.c2sPort(), "APIPort": e.apiPort(),
		"Cert": filepath.Join(e.dir, "etc", "server.pem"), "Admin": e.AdminJID(), "Also": e.also,
	}
	if e.sql != nil {
		host, port, err := net.SplitHostPort(e.sql.Addr)
		if err != nil {
			return false, fmt.Errorf("SQL server %q: %w", e.sql.Addr, err)
		}
		// Copies ejabberd's user can read (chownTree below).
		clientPEM := filepath.Join(e.dir, "etc", "sql-client.pem")
		if err := joinFiles(clientPEM, 0o600, e.sql.CertFile, e.sql.KeyFile); err != nil {
			return false, fmt.Errorf("SQL client certificate: %w", err)
		}
		caFile := filepath.Join(e.dir, "etc", "sql-ca.pem")
		if err := joinFiles(caFile, 0o644, e.sql.CAFile); err != nil {
			return false, fmt.Errorf("SQL server's authority: %w", err)
		}
		// YAML double-quoted strings: JSON quoting is a subset.
		q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
		vars["SQL"] = map[string]string{"Host": q(host), "Port": port, "Database": q(e.sql.Database),
			"User": q(e.sql.User), "CertFile": q(clientPEM), "CAFile": q(caFile)}
	}
	if err := ejabberdConfig.Execute(&conf, vars); err != nil {
		return false, err
	}
	confFile := e.ConfigFile()
	old, _ := os.ReadFile(confFile)
	changed := !bytes.Equal(old, conf.Bytes())
	if err := os.WriteFile(confFile, conf.Bytes(), 0o640); err != nil {
		return false, err
	}
	distIP := e.distIP
	if distIP == "" {
		distIP = "127.0.0.1"
	}
	ctlCfg := fmt.Sprintf("# Written by the MLSysOps testbed.\nERLANG_NODE=%s\nERL_DIST_PORT=%d\nINET_DIST_INTERFACE=%s\nERL_OPTIONS=\"-env ERL_CRASH_DUMP_BYTES 0\"\n",
		e.node, e.portBase+ejDistOffset, distIP)
	// Erlang reads inetrc from the config dir and complains when it is missing.
	if err := os.WriteFile(filepath.Join(e.dir, "etc", "inetrc"), []byte("{lookup, [file, native]}.\n"), 0o644); err != nil {
		return false, err
	}
	// The node name is there: a server running under another name (one
	// that became a cluster's node, or the reverse) is restarted.
	ctlFile := filepath.Join(e.dir, "etc", "ejabberdctl.cfg")
	if old, _ := os.ReadFile(ctlFile); !bytes.Equal(old, []byte(ctlCfg)) {
		changed = true
	}
	if err := os.WriteFile(ctlFile, []byte(ctlCfg), 0o640); err != nil {
		return false, err
	}
	return changed, chownTree(e.dir, ejabberdUser)
}

// joinFiles writes the contents of srcs, one after the other, to dst
// with mode.
func joinFiles(dst string, mode os.FileMode, srcs ...string) error {
	var all bytes.Buffer
	for _, f := range srcs {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		all.Write(b)
	}
	return os.WriteFile(dst, all.Bytes(), mode)
}

// checkSpool empties the Mnesia spool when it belongs to another Erlang
// node name (a single server that becomes a cluster's first node):
// Mnesia refuses a spool of another node. Only a server keeping its data
// in SQL may lose its spool; its Mnesia holds nothing that outlives it.
func (e *Ejabberd) checkSpool() error {
	spool := filepath.Join(e.dir, "spool")
	nodeFile := filepath.Join(e.dir, "node")
	b, err := os.ReadFile(nodeFile)
	// A spool from before the node was recorded: its node is unknown.
	unknown := errors.Is(err, os.ErrNotExist) && e.sql != nil
	if unknown || err == nil && string(bytes.TrimSpace(b)) != e.node {
		if e.sql == nil {
			return fmt.Errorf("the Mnesia spool %s belongs to the node %s, not %s: keep the data in SQL to change the node's name", spool, bytes.TrimSpace(b), e.node)
		}
		if err := os.RemoveAll(spool); err != nil {
			return err
		}
		if err := os.MkdirAll(spool, 0o750); err != nil {
			return err
		}
		if err := chownTree(spool, ejabberdUser); err != nil {
			return err
		}
	}
	return os.WriteFile(nodeFile, []byte(e.node+"\n"), 0o644)
}

// ensureSchema creates ejabberd's tables in its SQL database unless they
// exist. ejabberd 23.01 does not create them itself.
func (e *Ejabberd) ensureSchema(ctx context.Context) error {
	if e.sql == nil {
		return nil
	}
	dsn := CertDSN(e.sql.Addr, e.sql.User, e.sql.Database, e.sql.CertFile, e.sql.KeyFile, e.sql.CAFile)
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, dsn)
	if err != nil {
		return fmt.Errorf("connect to its database %s on %s: %w", e.sql.Database, e.sql.Addr, err)
	}
	defer conn.Close(context.Background())
	var exists bool
	if err := conn.QueryRow(cctx, "SELECT to_regclass('public.users') IS NOT NULL").Scan(&exists); err != nil {
		return fmt.Errorf("look for its schema: %w", err)
	}
	if exists {
		return nil
	}
	schema, err := os.ReadFile(ejabberdSchema)
	if err != nil {
		return fmt.Errorf("read the SQL schema of Debian's ejabberd package: %w", err)
	}
	// The whole file in one transaction: a failed attempt leaves nothing
	// half-created for the next one to trip over.
	if _, err := conn.Exec(cctx, "BEGIN;\n"+string(schema)+"\nCOMMIT;"); err != nil {
		return fmt.Errorf("create its schema from %s: %w", ejabberdSchema, err)
	}
	return nil
}

// chownTree gives dir and everything below it to the named user, because
// ejabberdctl run as root drops to that user, which must own its spool.
func chownTree(dir, name string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return fmt.Errorf("user %s (install Debian's ejabberd with `make deps`): %w", name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

func (e *Ejabberd) ctlRun(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, e.ctl, append(e.ctlArgs(), args...)...)
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// ensureAdmin makes the admin account exist with the stored password.
// The password never goes on a command line, where every local user could
// read it: ejabberdctl creates the account (or resets it) with a one-time
// password, and the authenticated admin API then sets the real one.
func (e *Ejabberd) ensureAdmin(ctx context.Context) error {
	if e.adminAPI(ctx, e.adminPW, "status", struct{}{}) == nil {
		return nil // already there with the stored password
	}
	once := RandomSecret()
	var last string
	for {
		out, err := e.ctlRun(ctx, "register", "admin", e.domain, once)
		if err != nil && strings.Contains(out, "successfully registered") {
			// ejabberdctl said so and then did not exit in time (a slow
			// machine): the account is there.
			err = nil
		}
		if err != nil && strings.Contains(out, "already registered") {
			out, err = e.ctlRun(ctx, "change_password", "admin", e.domain, once)
		}
		if err == nil {
			break
		}
		last = out
		if err != nil && out == "" {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("ejabberd: create admin account: %w (last answer: %s); see %s", ctx.Err(), last, e.LogFile())
		case <-time.After(300 * time.Millisecond):
		}
	}
	for {
		err := e.adminAPI(ctx, once, "change_password", map[string]string{"user": "admin", "host": e.domain, "newpass": e.adminPW})
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("ejabberd: set admin password through the admin API: %v; see %s", err, e.LogFile())
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// adminAPI calls an admin API command as the admin account with password
// pw.
func (e *Ejabberd) adminAPI(ctx context.Context, pw, command string, args any) error {
	c, err := e.HTTPClient()
	if err != nil {
		return err
	}
	body, err := json.Marshal(args)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.APIURL()+"/"+command, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.SetBasicAuth(e.AdminJID(), pw)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("admin API %s: HTTP %d", command, resp.StatusCode)
	}
	return nil
}

// HTTPClient returns a client that trusts the server's CA, for the admin API.
func (e *Ejabberd) HTTPClient() (*http.Client, error) {
	b, err := os.ReadFile(e.CAFile())
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, errors.New("no certificate in " + e.CAFile())
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}, nil
}

// Healthy checks that the admin API answers an authenticated status call,
// which needs the listeners, the configuration and the admin account.
func (e *Ejabberd) Healthy(ctx context.Context) error {
	if e.adminPW == "" {
		if b, err := os.ReadFile(filepath.Join(e.dir, "admin.password")); err == nil {
			e.adminPW = string(bytes.TrimSpace(b))
		}
	}
	return e.adminAPI(ctx, e.adminPW, "status", struct{}{})
}

// Stop stops the server gracefully and waits for it to exit.
func (e *Ejabberd) Stop(ctx context.Context) error {
	if _, ok := e.proc.Pid(); !ok {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := e.ctlRun(cctx, "stop"); err != nil {
		// ejabberdctl cannot reach it (say, it runs under the node name it
		// had before): SIGTERM makes Erlang stop just as well.
		return e.proc.Stop(20 * time.Second)
	}
	for cctx.Err() == nil {
		if _, ok := e.proc.Pid(); !ok {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return e.proc.Stop(5 * time.Second)
}

// Kill kills the server with SIGKILL, as a crash would.
func (e *Ejabberd) Kill() error { return e.proc.Kill() }

// Ctl runs an ejabberdctl command against this server, for tests and
// provisioning fallbacks; it returns the command's output.
func (e *Ejabberd) Ctl(ctx context.Context, args ...string) (string, error) {
	return e.ctlRun(ctx, args...)
}

func waitTCP(ctx context.Context, addr string, p *proc.Process) error {
	for {
		if !p.Alive() {
			return fmt.Errorf("%s exited during start-up; see %s:\n%s", p.Name, p.LogFile, proc.Tail(p.LogFile, 15))
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s does not listen on %s; see %s", p.Name, addr, p.LogFile)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

var ejabberdConfig = template.Must(template.New("ejabberd.yml").Parse(`# Written by the MLSysOps testbed.
# notice, not info: at info mod_http_api logs every call with its
# arguments, the passwords of the accounts it creates included.
loglevel: notice
log_rotate_count: 0
hosts:
  - "{{.Domain}}"
certfiles:
  - "{{.Cert}}"
auth_password_format: scram
auth_scram_hash: sha256
# The default of 1,000 entries per cache (rosters, last activity, ...) is
# fewer than the agents of a continuum: 1,000 node agents thrashed them.
cache_size: 20000
{{- with .SQL}}
# Every table ejabberd can keep in SQL lives in PostgreSQL: a write the
# admin API acknowledged survives a crash of ejabberd. Sessions, routes and
# stream management state stay in memory.
sql_type: pgsql
sql_server: {{.Host}}
sql_port: {{.Port}}
sql_database: {{.Database}}
sql_username: {{.User}}
# No password: the role logs in with a client certificate over TLS.
sql_ssl: true
sql_ssl_certfile: {{.CertFile}}
sql_ssl_cafile: {{.CAFile}}
sql_ssl_verify: true
# Every login, roster read and logout is a query: with 5 connections a
# storm of 1,000 logins queued in the pool and ejabberd stopped reading
# its clients (their writes and pings timed out).
sql_pool_size: 20
default_db: sql
auth_method: sql
{{- end}}
define_macro:
  TLS_OPTIONS:
    - "no_sslv3"
    - "no_tlsv1"
    - "no_tlsv1_1"
    - "cipher_server_preference"
    - "no_compression"
c2s_protocol_options: TLS_OPTIONS
listen:
  - port: {{.C2SPort}}
    ip: "127.0.0.1"
    module: ejabberd_c2s
    max_stanza_size: 1048576
    shaper: c2s_shaper
    access: c2s
    starttls_required: true
    backlog: 1024
{{- range .Also}}
  - port: {{$.C2SPort}}
    ip: "{{.}}"
    module: ejabberd_c2s
    max_stanza_size: 1048576
    shaper: c2s_shaper
    access: c2s
    starttls_required: true
    backlog: 1024
{{- end}}
  - port: {{.APIPort}}
    ip: "127.0.0.1"
    module: ejabberd_http
    tls: true
    request_handlers:
      /api: mod_http_api
{{- range .Also}}
  - port: {{$.APIPort}}
    ip: "{{.}}"
    module: ejabberd_http
    tls: true
    request_handlers:
      /api: mod_http_api
{{- end}}
disable_sasl_mechanisms:
  - "digest-md5"
  - "X-OAUTH2"
acl:
  admin:
    user:
      - "{{.Admin}}"
  local:
    user_regexp: ""
access_rules:
  local:
    allow: local
  c2s:
    deny: blocked
    allow: all
  register:
    deny: all
api_permissions:
  "console commands":
    from:
      - ejabberd_ctl
    who: all
    what: "*"
  "provisioning":
    from:
      - mod_http_api
    who:
      access:
        allow:
          - acl: admin
    what:
      - "*"
      - "!stop"
      - "!start"
      - "!restart"
shaper:
  normal:
    rate: 3000
    burst_size: 20000
  agents:
    rate: 50000000
    burst_size: 50000000
shaper_rules:
  max_user_sessions: 10
  max_user_offline_messages:
    10000: local
    100: all
  c2s_shaper:
    none: admin
    agents: local
    normal: all
modules:
  mod_admin_extra: {}
  mod_caps: {}
  mod_disco: {}
  mod_http_api: {}
  mod_last: {}
  mod_offline:
    access_max_user_messages: max_user_offline_messages
  mod_ping:
    send_pings: true
    ping_interval: 10
    ping_ack_timeout: 5
    timeout_action: kill
  mod_roster:
    versioning: true
  mod_stream_mgmt:
    resume_timeout: 30
    resend_on_timeout: if_offline
  mod_version:
    show_os: false
`))
