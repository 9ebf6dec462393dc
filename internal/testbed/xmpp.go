package testbed

import (
	"context"
	"fmt"

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
	pw, err := readOrCreateSecret(tb.l.path("pki", "ejabberd-db.password"))
	if err != nil {
		return err
	}
	if err := pg.EnsureDatabase(ctx, ejabberdDatabase, ejabberdDatabase, pw); err != nil {
		return err
	}
	tb.ejabberd.UseSQL(services.EjabberdSQL{Addr: pg.Addr(), Database: ejabberdDatabase, User: ejabberdDatabase, Password: pw})
	if err := tb.ejabberd.Start(ctx); err != nil {
		return fmt.Errorf("%w; see %s", err, tb.ejabberd.LogFile())
	}
	tb.progress("ready on %s (domain %s, data in PostgreSQL)", "ejabberd", tb.ejabberd.C2SAddr(), tb.ejabberd.Domain())
	return nil
}

// stopPostgres stops the testbed's PostgreSQL, after ejabberd.
func (tb *Testbed) stopPostgres(ctx context.Context) error {
	return services.NewPostgres(tb.l.path("postgres"), tb.l.port(portPostgres), "").Stop(ctx)
}
