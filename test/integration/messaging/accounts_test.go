package messaging_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/messaging"
	"github.com/mlsysops-go/mlsysops/internal/messaging/provision"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
	"github.com/mlsysops-go/mlsysops/internal/testbed/services"
)

// fleet describes a cluster agent and n-1 node agents under it.
func fleet(n int) provision.Desired {
	parent := "cluster-1@" + testbed.DefaultXMPPDomain
	d := provision.Desired{Accounts: []string{parent}}
	for i := 1; i < n; i++ {
		j := fmt.Sprintf("node-%02d@%s", i, testbed.DefaultXMPPDomain)
		d.Accounts = append(d.Accounts, j)
		d.Links = append(d.Links, [2]string{parent, j})
	}
	return d
}

// TestAgentsReconnectAfterServerCrash provisions 50 accounts through the
// accounts reconciler and kills ejabberd with SIGKILL the moment the
// reconciler has written them, while 50 agents wait to log in. After the
// restart every agent must be connected again. On Mnesia, ejabberd's
// default, the crash loses the last writes and the reconciler restores
// them when it notices the restart; on PostgreSQL, as the testbed and
// installations run it, nothing written is lost.
func TestAgentsReconnectAfterServerCrash(t *testing.T) {
	for _, storage := range []string{"mnesia", "postgres"} {
		t.Run(storage, func(t *testing.T) {
			const n = 50
			var e *services.Ejabberd
			if storage == "postgres" {
				e = testbed.EjabberdOnPostgres(t)
			} else {
				e = testbed.Ejabberd(t)
			}
			d := fleet(n)
			// The password files exist before the accounts: the agents try
			// to log in from the start and are refused until the reconciler
			// has created their accounts.
			secrets := make([]string, n)
			acc := &provision.SecretFiles{Files: map[string]string{}, Generate: true}
			dir := t.TempDir()
			for i, j := range d.Accounts {
				acc.Files[j] = dir + "/" + provision.PasswordFileName(j)
				pw, err := acc.Password(context.Background(), j)
				if err != nil {
					t.Fatal(err)
				}
				secrets[i] = pw
			}
			agents := make([]*agent, n)

			for i, j := range d.Accounts {
				cfg := messaging.Config{JID: j, PasswordFile: acc.Files[j], Layer: messaging.LayerNode, Parent: d.Accounts[0]}
				if i == 0 {
					cfg = messaging.Config{JID: j, PasswordFile: acc.Files[j], Layer: messaging.LayerCluster, Children: d.Accounts[1:]}
				}
				// Refused logins are expected until the accounts exist.
				cfg.Logger = quietLogger(t)
				a, err := launchAgent(t, e, cfg)
				if err != nil {
					t.Fatal(err)
				}
				agents[i] = a
			}

			// Reports are not wired: the repair must come from noticing
			// the restart. The periodic passes are out of the way.
			rec := startAccountsWith(t, e, d, acc, provision.ReconcilerConfig{Interval: time.Hour, FullInterval: time.Hour})
			if err := e.Kill(); err != nil {
				t.Fatal(err)
			}
			created := rec.metric(t, "mlsysops_accounts_repairs_total", map[string]string{"kind": provision.RepairAccount})
			if created != n {
				t.Fatalf("the first pass created %v accounts, want %d", created, n)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			restarted := time.Now()
			if err := e.Start(ctx); err != nil {
				t.Fatalf("start ejabberd again: %v", err)
			}
			back := time.Now()

			// A correctness deadline, generous: agents back off up to 30s
			// while the server is down and 15s while their login is
			// refused.
			connected := func() int {
				c := 0
				for _, a := range agents {
					if a.Connected() {
						c++
					}
				}
				return c
			}
			eventually(t, 3*time.Minute, "every agent connected after the restart", func() bool { return connected() == n })
			took := time.Since(back)
			eventually(t, time.Minute, "the reconciler's pass after the restart", func() bool {
				return rec.metric(t, "mlsysops_accounts_reconcile_passes_total", map[string]string{"kind": "full", "trigger": provision.TriggerRestart}) >= 1 &&
					rec.Status().LastFullPass.After(restarted)
			})
			lost := rec.metric(t, "mlsysops_accounts_repairs_total", map[string]string{"kind": provision.RepairAccount}) - created
			pwLost := rec.metric(t, "mlsysops_accounts_repairs_total", map[string]string{"kind": provision.RepairPassword})
			links := rec.metric(t, "mlsysops_accounts_repairs_total", map[string]string{"kind": provision.RepairRoster})
			t.Logf("%s: SIGKILL right after the reconciler wrote %d accounts and %d roster links: it restored %v accounts, %v passwords, %v roster items; all %d agents connected %v after ejabberd was back",
				storage, n, n-1, lost, pwLost, links-float64(2*(n-1)), n, took.Round(time.Millisecond))
			if storage == "postgres" && lost+pwLost > 0 {
				t.Errorf("on PostgreSQL the crash lost %v accounts and %v passwords the server had acknowledged", lost, pwLost)
			}
			for i, a := range agents {
				if s := a.AuthStatus(); s.Failing {
					t.Errorf("%s still reports a failing login: %+v", d.Accounts[i], s)
				}
				// The password file was never rewritten.
				if b, err := os.ReadFile(acc.Files[d.Accounts[i]]); err != nil || strings.TrimSpace(string(b)) != secrets[i] {
					t.Errorf("password file of %s changed (%v)", d.Accounts[i], err)
				}
			}
			// The roster links are back: the cluster agent sees every node.
			eventually(t, time.Minute, "every node online for the cluster agent", func() bool {
				online := 0
				for _, p := range agents[0].PeerStates() {
					if p.Online {
						online++
					}
				}
				return online == n-1
			})
		})
	}
}

// TestRotatedPasswordIsPickedUp rotates an agent's password file, as a
// rotated Secret would: the reconciler sets the new password on the server
// and the agent logs in with it at its next login, without a restart. When
// the agent is faster than the reconciler, its refused login is reported
// and the reconciler applies the new password at once.
func TestRotatedPasswordIsPickedUp(t *testing.T) {
	e := startEjabberd(t)
	d := fleet(2)
	node := d.Accounts[1]
	rec := startAccounts(t, e, d, provision.ReconcilerConfig{Interval: 200 * time.Millisecond, FullInterval: time.Hour})
	// Refused logins go to whichever reconciler runs.
	var reportTo atomic.Pointer[accounts]
	reportTo.Store(rec)
	a := startAgent(t, e, messaging.Config{JID: node, PasswordFile: rec.file(node), Layer: messaging.LayerNode,
		ConflictBackoff: 100 * time.Millisecond,
		OnAuthFailure:   func(f messaging.AuthFailure) { reportTo.Load().Report(f.Account, "test") }})
	p := provisioner(t, e)
	ctx := context.Background()
	logins := func() float64 { return a.metric(t, "mlsysops_messaging_reconnects_total", nil) }
	kick := func() {
		t.Helper()
		// The server ends the session; the agent logs in again.
		before := logins()
		if _, err := e.Ctl(ctx, "kick_session", "node-01", testbed.DefaultXMPPDomain, messaging.DefaultResource, "password rotated"); err != nil {
			t.Fatal(err)
		}
		eventually(t, time.Minute, "the session ended", func() bool { return !a.Connected() || logins() > before })
	}
	write := func(pw string) {
		t.Helper()
		if err := os.WriteFile(rec.file(node), []byte(pw+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// The reconciler first, then a new login.
	write("rotated-by-the-secret-1")
	eventually(t, time.Minute, "the server to have the rotated password", func() bool {
		ok, err := p.CheckPassword(ctx, node, "rotated-by-the-secret-1")
		return err == nil && ok
	})
	kick()
	eventually(t, time.Minute, "the agent logged in with the rotated password", func() bool { return a.Connected() && logins() >= 1 })
	if f := a.metric(t, "mlsysops_messaging_auth_failures_total", nil); f != 0 {
		t.Errorf("%v refused logins, want none: the server had the password first", f)
	}

	// The agent first: its refused login is reported and the password
	// applied at once, by a reconciler whose periodic passes are out of
	// the way.
	rec.stop()
	rec2 := startAccountsWith(t, e, d, rec.secrets, provision.ReconcilerConfig{Interval: time.Hour, FullInterval: time.Hour})
	reportTo.Store(rec2)
	write("rotated-by-the-secret-2")
	kick()
	eventually(t, 2*time.Minute, "the agent logged in with the second password", func() bool { return a.Connected() && logins() >= 2 })
	if f := a.metric(t, "mlsysops_messaging_auth_failures_total", map[string]string{"reason": messaging.AuthRefused}); f < 1 {
		t.Errorf("no refused login counted before the report")
	}
	if r := rec2.metric(t, "mlsysops_accounts_repairs_total", map[string]string{"kind": provision.RepairPassword}); r != 1 {
		t.Errorf("password repairs after the report = %v, want 1", r)
	}
	if r := rec2.metric(t, "mlsysops_accounts_reports_total", map[string]string{"result": "accepted"}); r < 1 {
		t.Errorf("accepted reports = %v, want at least 1", r)
	}
	if ok, err := p.CheckPassword(ctx, node, "rotated-by-the-secret-2"); err != nil || !ok {
		t.Errorf("the server does not have the second password (%v)", err)
	}
}

// quietLogger drops the warnings expected while accounts do not exist yet,
// keeping errors other than refused logins.
func quietLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelError + 1}))
}

// TestStaleLinksRemoved: on a real ejabberd, the accounts reconciler
// removes the roster links the topology no longer has. A node agent
// moves to another cluster agent (the description changes while the
// reconciler runs): its link with the old parent goes from both rosters
// and the new one comes. A link to an account that was deleted goes at
// the next full pass, while a link in another roster group (not made by
// MLSysOps) stays.
func TestStaleLinksRemoved(t *testing.T) {
	e := startEjabberd(t)
	p := provisioner(t, e)
	ctx := context.Background()
	dom := testbed.DefaultXMPPDomain
	c1, c2, node := "cluster-1@"+dom, "cluster-2@"+dom, "node-01@"+dom
	d := provision.Desired{Accounts: []string{c1, c2, node}, Links: [][2]string{{c1, node}}}
	rec := startAccounts(t, e, d, provision.ReconcilerConfig{Interval: time.Hour, FullInterval: time.Hour})
	roster := func(a string) map[string]provision.RosterItem {
		t.Helper()
		items, err := p.Roster(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]provision.RosterItem{}
		for _, it := range items {
			out[it.JID] = it
		}
		return out
	}
	eventually(t, time.Minute, "the first link", func() bool { _, ok := roster(node)[c1]; return ok })
	if it := roster(node)[c1]; !it.Ours() || it.Subscription != "both" {
		t.Fatalf("the reconciler's link as ejabberd reads it back: %+v; want subscription both in group %s", it, provision.RosterGroup)
	}

	// Someone's own contact, and a link to an account deleted since.
	human, gone := "operator@"+dom, "gone@"+dom
	if out, err := e.Ctl(ctx, "add_rosteritem", "node-01", dom, "operator", dom, "operator", "friends", "both"); err != nil {
		t.Fatalf("add_rosteritem: %v: %s", err, out)
	}
	account(t, p, "gone")
	link(t, p, node, gone)
	if err := p.DeleteAccount(ctx, gone); err != nil {
		t.Fatal(err)
	}

	d.Links = [][2]string{{c2, node}}
	if err := rec.SetDesired(d); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the move to cluster-2", func() bool {
		r := roster(node)
		_, old := r[c1]
		_, dangling := r[gone]
		_, parent := r[c2]
		return !old && !dangling && parent && len(roster(c1)) == 0
	})
	if _, ok := roster(node)[human]; !ok {
		t.Error("the contact in another roster group was removed")
	}
	if it := roster(c2)[node]; it.Subscription != "both" {
		t.Errorf("cluster-2's roster item of the node: %+v", it)
	}
	// Each from one end or, checked at once by two workers, both.
	if n := rec.metric(t, "mlsysops_accounts_repairs_total", map[string]string{"kind": provision.RepairUnlink}); n < 2 || n > 3 {
		t.Errorf("unlink repairs = %v, want 2 or 3 (the old parent, the deleted account)", n)
	}
}
