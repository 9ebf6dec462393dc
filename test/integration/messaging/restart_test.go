package messaging_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/messaging"
	"github.com/mlsysops-go/mlsysops/internal/messaging/provision"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
)

// TestExactlyOnceAcrossServerRestart streams 10,000 commands from a cluster
// agent to a node agent and stops (or kills) ejabberd while they flow. Every
// command must be acknowledged to the sender and handled exactly once, in
// the order it was sent. ejabberd runs as the testbed runs it: its data in
// PostgreSQL, the accounts kept by the accounts reconciler, so the kill
// loses no account created a moment before.
func TestExactlyOnceAcrossServerRestart(t *testing.T) {
	for _, mode := range []string{"stop", "kill"} {
		t.Run(mode, func(t *testing.T) {
			const n = 10000
			e := testbed.EjabberdOnPostgres(t)
			d := fleet(2)
			rec := startAccounts(t, e, d, provision.ReconcilerConfig{})
			parentJID, childJID := d.Accounts[0], d.Accounts[1]

			parent := startAgent(t, e, messaging.Config{JID: parentJID, PasswordFile: rec.file(parentJID), Layer: messaging.LayerCluster,
				Children: []string{childJID}, RetryInterval: time.Second})
			child := startAgent(t, e, messaging.Config{JID: childJID, PasswordFile: rec.file(childJID), Layer: messaging.LayerNode,
				Parent: parentJID, RetryInterval: time.Second})

			cmds := handleCommands(child.Client, n)
			handled := cmds.handled

			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			deliveries := make(chan *messaging.Delivery, n)
			sendErr := make(chan error, 1)
			go func() {
				defer close(deliveries)
				for i := 0; i < n; i++ {
					d, err := parent.SendAsync(ctx, childJID, command(i))
					if err != nil {
						sendErr <- fmt.Errorf("SendAsync %d: %w", i, err)
						return
					}
					deliveries <- d
				}
			}()

			eventually(t, 2*time.Minute, "a third of the commands handled", func() bool { return handled() >= n/3 })
			began := time.Now()
			switch mode {
			case "stop":
				if err := e.Stop(ctx); err != nil {
					t.Fatalf("stop ejabberd: %v", err)
				}
			case "kill":
				if err := e.Kill(); err != nil {
					t.Fatalf("kill ejabberd: %v", err)
				}
			}
			// The server is down: no write and no acknowledgement passes
			// now. Commands written before and not acknowledged were in
			// flight; with none, the test would prove nothing.
			placed := map[string]string{"type": string(messaging.TypeComponentPlaced)}
			atRestart, queued := handled(), parent.QueueDepth()
			inFlight := parent.metric(t, "mlsysops_messaging_sent_total", placed) -
				parent.metric(t, "mlsysops_messaging_retried_total", placed) -
				parent.metric(t, "mlsysops_messaging_acked_total", nil)
			if atRestart >= n || inFlight < 1 {
				t.Fatalf("nothing in flight at the %s: %d of %d commands handled, %v written and unacknowledged, %d held by the parent", mode, atRestart, n, inFlight, queued)
			}
			if err := e.Start(ctx); err != nil {
				t.Fatalf("start ejabberd again: %v", err)
			}
			t.Logf("ejabberd %s+start with %d of %d handled, %v in flight and %d held by the parent took %v", mode, atRestart, n, inFlight, queued, time.Since(began).Round(time.Millisecond))

			cmds.check(t, ctx, deliveries, sendErr)
			// The issue this guards: an account written a moment before a
			// kill, lost, and its agent refused for good.
			for _, a := range []*agent{parent, child} {
				if f := a.metric(t, "mlsysops_messaging_auth_failures_total", nil); f != 0 {
					t.Errorf("%s: %v refused logins after the restart, want none", a.JID(), f)
				}
			}
			if r := parent.metric(t, "mlsysops_messaging_reconnects_total", nil); r < 1 {
				t.Errorf("parent reconnects = %v, want at least 1 (did the restart happen?)", r)
			}
			t.Logf("after the restart: parent retried %v, child dropped %v duplicates, parent reconnected %v times",
				parent.metric(t, "mlsysops_messaging_retried_total", nil),
				child.metric(t, "mlsysops_messaging_duplicates_total", nil),
				parent.metric(t, "mlsysops_messaging_reconnects_total", nil))
		})
	}
}
