package testbed

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/mlsysops-go/mlsysops/internal/testbed/services"
)

// ejabberdDatabase is ejabberd's database and role on the testbed's
// PostgreSQL.
const ejabberdDatabase = "ejabberd"

// newPostgres describes the testbed's PostgreSQL; its superuser password
// is generated once per state folder.
func (tb *Testbed) newPostgres() (*services.Postgres, error) {
	pw, err := readOrCreateSecret(tb.l.path("pki", "postgres.password"))
	if err != nil {
		return nil, err
	}
	pg := services.NewPostgres(tb.l.path("postgres"), tb.l.port(portPostgres), pw)
	// The installed ML connector's pod reaches it on the bridge.
	pg.AlsoListenOn(tb.net.HostIP(), tb.net.Range())
	return pg, nil
}

// startXMPP starts PostgreSQL, gives ejabberd its database there and starts
// ejabberd on it: a write ejabberd acknowledged (an account, a password, a
// roster item) survives a crash of ejabberd, which Mnesia's write caches
// do not promise (see docs/messaging.md).
func (tb *Testbed) startXMPP(ctx context.Context) error {
	pg, err := tb.newPostgres()
	if err != nil {
		return err
	}
	if err := pg.Start(ctx); err != nil {
		return fmt.Errorf("%w; see %s", err, pg.LogFile())
	}
	tb.progress("ready on %s", "postgres", pg.Addr())
	// ejabberd logs in with a client certificate: it has no password to
	// print (see services.EjabberdSQL). A password an earlier testbed
	// gave the role is removed.
	db, err := services.PostgresSQL(ctx, pg, ejabberdDatabase, ejabberdDatabase)
	if err != nil {
		return err
	}
	_ = os.Remove(tb.l.path("pki", "ejabberd-db.password"))
	for _, e := range tb.ejabberdSpare {
		// Nodes of a larger cluster an earlier Up ran.
		if err := e.Stop(ctx); err != nil {
			return err
		}
	}
	// The first node first: the others join its cluster.
	for i, e := range tb.ejabberdNodes(false) {
		e.UseSQL(db)
		if err := e.Start(ctx); err != nil {
			return fmt.Errorf("%w; see %s", err, e.LogFile())
		}
		if i == 0 {
			tb.progress("ready on %s (domain %s, data in PostgreSQL)", "ejabberd", e.C2SAddr(), e.Domain())
		} else {
			tb.progress("ready on %s (node %s, in the cluster of %s)", fmt.Sprintf("ejabberd-%d", i+1), e.C2SAddr(), e.Node(), tb.ejabberd.Node())
		}
	}
	return os.WriteFile(tb.l.path(xmppNodesFile), []byte(strconv.Itoa(1+len(tb.ejabberdPeers))+"\n"), 0o644)
}

// xmppNodesFile records in the state folder how many ejabberd nodes the
// last Up started.
const xmppNodesFile = "ejabberd-nodes"

// planEjabberd describes the ejabberd nodes: Options.XMPPNodes of them,
// else as many as the state folder last ran, else one.
func (tb *Testbed) planEjabberd() error {
	n := tb.opts.XMPPNodes
	if n == 0 {
		n = 1
		if b, err := os.ReadFile(tb.l.path(xmppNodesFile)); err == nil {
			if v, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && v >= 1 && v <= services.MaxEjabberdNodes {
				n = v
			}
		}
	}
	all, err := services.NewEjabberdCluster(tb.l.path("ejabberd"), tb.l.port(portEjabberd), tb.opts.XMPPDomain, services.MaxEjabberdNodes)
	if err != nil {
		return err
	}
	if n > 1 {
		tb.ejabberd, tb.ejabberdPeers = all[0], all[1:n]
	} else {
		// One node keeps the name it always had.
		tb.ejabberd = services.NewEjabberd(tb.l.path("ejabberd"), tb.l.port(portEjabberd), tb.opts.XMPPDomain)
	}
	tb.ejabberdSpare = all[n:]
	// The agents' pods reach ejabberd and Redis on the bridge.
	for _, e := range tb.ejabberdNodes(false) {
		e.AlsoListenOn(tb.net.HostIP())
	}
	return nil
}

// ejabberdNodes returns the nodes in use, the first first; with spare, the
// nodes of larger clusters too (to stop them).
func (tb *Testbed) ejabberdNodes(spare bool) []*services.Ejabberd {
	out := append([]*services.Ejabberd{tb.ejabberd}, tb.ejabberdPeers...)
	if spare {
		out = append(out, tb.ejabberdSpare...)
	}
	return out
}

// xmppAddrs are the c2s addresses of every node, on loopback or, with
// ip, on that address.
func (tb *Testbed) xmppAddrs(ip string) []string {
	return tb.eachNode(func(e *services.Ejabberd) string {
		if ip == "" {
			return e.C2SAddr()
		}
		return e.C2SAddrOn(ip)
	})
}

// xmppAPIURLs are the admin API URLs of every node, on loopback or, with
// ip, on that address.
func (tb *Testbed) xmppAPIURLs(ip string) []string {
	return tb.eachNode(func(e *services.Ejabberd) string {
		if ip == "" {
			return e.APIURL()
		}
		return e.APIURLOn(ip)
	})
}

func (tb *Testbed) eachNode(f func(*services.Ejabberd) string) []string {
	var out []string
	for _, e := range tb.ejabberdNodes(false) {
		out = append(out, f(e))
	}
	return out
}

// stopPostgres stops the testbed's PostgreSQL, after ejabberd.
func (tb *Testbed) stopPostgres(ctx context.Context) error {
	return services.NewPostgres(tb.l.path("postgres"), tb.l.port(portPostgres), "").Stop(ctx)
}
