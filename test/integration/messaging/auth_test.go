package messaging_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/xml"
	"errors"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"mellium.im/sasl"
	"mellium.im/xmlstream"
	"mellium.im/xmpp"
	"mellium.im/xmpp/jid"
	"mellium.im/xmpp/stanza"

	"github.com/mlsysops-go/mlsysops/internal/messaging"
	"github.com/mlsysops-go/mlsysops/internal/testbed/services"
)

// rawSession logs in with mellium directly, to put hand-made (forged,
// malformed) envelopes on the wire.
func rawSession(t *testing.T, e *services.Ejabberd, account, password string) *xmpp.Session {
	t.Helper()
	s, err := rawLogin(t, e, account, password)
	if err != nil {
		t.Fatalf("raw login as %s: %v", account, err)
	}
	return s
}

func rawLogin(t *testing.T, e *services.Ejabberd, account, password string) (*xmpp.Session, error) {
	t.Helper()
	pem, err := os.ReadFile(e.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	conn, err := net.Dial("tcp", e.C2SAddr())
	if err != nil {
		t.Fatal(err)
	}
	j := jid.MustParse(account)
	s, err := xmpp.NewSession(context.Background(), j.Domain(), j, conn, 0, xmpp.NewNegotiator(func(*xmpp.Session, *xmpp.StreamConfig) xmpp.StreamConfig {
		return xmpp.StreamConfig{Features: []xmpp.StreamFeature{
			xmpp.StartTLS(&tls.Config{RootCAs: pool, ServerName: j.Domainpart(), MinVersion: tls.VersionTLS12}),
			xmpp.SASL("", password, sasl.ScramSha256, sasl.ScramSha1),
			xmpp.BindResource(),
		}}
	}))
	if err != nil {
		conn.Close()
		return nil, err
	}
	go func() { _ = s.Serve(nil) }()
	t.Cleanup(func() { s.Close(); conn.Close() })
	return s, nil
}

func sendRaw(t *testing.T, s *xmpp.Session, to string, body string) {
	t.Helper()
	err := s.Send(context.Background(), stanza.Message{To: jid.MustParse(to), Type: stanza.ChatMessage}.Wrap(
		xmlstream.Wrap(xmlstream.Token(xml.CharData(body)), xml.StartElement{Name: xml.Name{Space: messaging.NS, Local: "env"}})))
	if err != nil {
		t.Fatal(err)
	}
}

func rawEnvelope(t *testing.T, from string, seq uint64, msg messaging.Message) string {
	t.Helper()
	payload, err := json.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	env := messaging.Envelope{V: messaging.Version, ID: "forged-" + from + "-" + string(rune('a'+seq)), Type: msg.MessageType(),
		From: from, Layer: messaging.LayerCluster, Time: time.Now(), Stream: "forged", Seq: seq, Base: 1, Payload: payload}
	b, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestAuthorization checks that a node agent applies commands only from
// its parent or a configured controller, that a cluster agent accepts
// reports only from its children, and that forged, malformed and
// unauthorized messages are dropped, counted and never crash the agent.
func TestAuthorization(t *testing.T) {
	e := startEjabberd(t)
	p := provisioner(t, e)
	parentJID, parentPW := account(t, p, "cluster-1")
	childJID, childPW := account(t, p, "node-1")
	strangerJID, strangerPW := account(t, p, "intruder")
	controllerJID, controllerPW := account(t, p, "northbound")
	link(t, p, parentJID, childJID)

	parent := startAgent(t, e, messaging.Config{JID: parentJID, Password: parentPW, Layer: messaging.LayerCluster, Children: []string{childJID}})
	child := startAgent(t, e, messaging.Config{JID: childJID, Password: childPW, Layer: messaging.LayerNode, Parent: parentJID,
		Controllers: []string{controllerJID}})
	stranger := startAgent(t, e, messaging.Config{JID: strangerJID, Password: strangerPW, Layer: messaging.LayerCluster})
	controller := startAgent(t, e, messaging.Config{JID: controllerJID, Password: controllerPW, Layer: messaging.LayerService})

	var childCommands, parentReports atomic.Int64
	var lastMode atomic.Int64
	messaging.HandleFunc(child.Client, func(ctx context.Context, env *messaging.Envelope, m *messaging.ManagementMode) (messaging.Message, error) {
		childCommands.Add(1)
		lastMode.Store(int64(m.Mode))
		return nil, nil
	})
	messaging.HandleFunc(parent.Client, func(ctx context.Context, env *messaging.Envelope, m *messaging.ManagementMode) (messaging.Message, error) {
		t.Errorf("parent applied a command from %s", env.From)
		return nil, nil
	})
	messaging.HandleFunc(parent.Client, func(ctx context.Context, env *messaging.Envelope, m *messaging.ApplicationStatusReport) (messaging.Message, error) {
		parentReports.Add(1)
		if env.From != childJID {
			t.Errorf("parent accepted a report from %s", env.From)
		}
		return nil, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	unauthorized := func(a *agent, typ messaging.Type) float64 {
		return a.metric(t, "mlsysops_messaging_dropped_unauthorized_total", map[string]string{"type": string(typ)})
	}
	malformed := func(a *agent) float64 {
		return a.metric(t, "mlsysops_messaging_dropped_total", map[string]string{"reason": "malformed"})
	}

	t.Run("command from a stranger", func(t *testing.T) {
		sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
		defer scancel()
		err := stranger.Send(sctx, childJID, &messaging.ManagementMode{Mode: messaging.ModeML})
		if !errors.Is(err, messaging.ErrDeliveryTimeout) && !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("stranger's Send = %v, want no acknowledgement (deadline)", err)
		}
		eventually(t, 10*time.Second, "the refusal to be counted", func() bool { return unauthorized(child, messaging.TypeManagementMode) >= 1 })
	})

	t.Run("report from a stranger", func(t *testing.T) {
		sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
		defer scancel()
		err := stranger.Send(sctx, parentJID, &messaging.ApplicationStatusReport{Application: "app-1", Phase: "Running"})
		if err == nil {
			t.Error("the stranger's report was acknowledged")
		}
		eventually(t, 10*time.Second, "the refusal to be counted", func() bool { return unauthorized(parent, messaging.TypeApplicationStatusReport) >= 1 })
	})

	t.Run("command from a child to its parent", func(t *testing.T) {
		err := child.Send(ctx, parentJID, &messaging.ManagementMode{Mode: messaging.ModeML})
		var rej *messaging.RejectedError
		if !errors.As(err, &rej) {
			t.Fatalf("Send = %v, want a RejectedError (the parent knows the child and refuses at once)", err)
		}
		if unauthorized(parent, messaging.TypeManagementMode) < 1 {
			t.Error("refusal not counted")
		}
	})

	t.Run("envelope claiming to come from the parent", func(t *testing.T) {
		raw := rawSession(t, e, strangerJID, strangerPW)
		before := unauthorized(child, messaging.TypeManagementMode)
		sendRaw(t, raw, childJID, rawEnvelope(t, parentJID, 1, &messaging.ManagementMode{Mode: messaging.ModeML}))
		eventually(t, 10*time.Second, "the forgery to be counted", func() bool { return unauthorized(child, messaging.TypeManagementMode) > before })
	})

	t.Run("malformed envelopes", func(t *testing.T) {
		raw := rawSession(t, e, strangerJID, strangerPW)
		bodies := []string{
			`not json`,
			`{"v":1}`,
			`{"v":99,"id":"x","type":"ping","from":"` + strangerJID + `","layer":"cluster","ts":"2026-01-01T00:00:00Z"}`,
			`{"v":1,"id":"x","type":"no_such_type","from":"` + strangerJID + `","layer":"cluster","ts":"2026-01-01T00:00:00Z"}`,
			`{"v":1,"id":"x","type":"ping","from":"` + strangerJID + `","layer":"cluster","ts":"2026-01-01T00:00:00Z","seq":5,"base":9,"stream":"s"}`,
			strings.Repeat("[", 10000),
		}
		before := malformed(child)
		for _, b := range bodies {
			sendRaw(t, raw, childJID, b)
		}
		// A message stanza without an envelope at all.
		if err := raw.Send(ctx, stanza.Message{To: jid.MustParse(childJID), Type: stanza.ChatMessage}.Wrap(
			xmlstream.Wrap(xmlstream.Token(xml.CharData("hello")), xml.StartElement{Name: xml.Name{Local: "body"}}))); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "every malformed message to be counted", func() bool { return malformed(child)-before >= float64(len(bodies)+1) })
	})

	t.Run("commands from the parent and a controller still work", func(t *testing.T) {
		if err := parent.Send(ctx, childJID, &messaging.ManagementMode{Mode: messaging.ModeHeuristic}); err != nil {
			t.Fatalf("parent's command: %v", err)
		}
		if err := controller.Send(ctx, childJID, &messaging.ManagementMode{Mode: messaging.ModeML}); err != nil {
			t.Fatalf("controller's command: %v", err)
		}
		if err := child.Send(ctx, parentJID, &messaging.ApplicationStatusReport{Application: "app-1", Phase: "Running"}); err != nil {
			t.Fatalf("child's report: %v", err)
		}
		if got := childCommands.Load(); got != 2 {
			t.Errorf("child applied %d commands, want exactly the 2 legitimate ones", got)
		}
		if got := lastMode.Load(); got != messaging.ModeML {
			t.Errorf("child's mode = %d, want the controller's %d", got, messaging.ModeML)
		}
		if got := parentReports.Load(); got != 1 {
			t.Errorf("parent handled %d reports, want exactly the child's one", got)
		}
	})
}

// TestSubscribeRegistersChild: a node agent the cluster agent does not know
// yet subscribes; the cluster agent's policy accepts it, the handler adds it
// as a child, and from then on its reports are accepted and its liveness is
// followed. A JID the policy refuses stays out.
func TestSubscribeRegistersChild(t *testing.T) {
	e := startEjabberd(t)
	p := provisioner(t, e)
	parentJID, parentPW := account(t, p, "cluster-1")
	childJID, childPW := account(t, p, "node-1")
	otherJID, otherPW := account(t, p, "intruder")
	link(t, p, parentJID, childJID)

	parent := startAgent(t, e, messaging.Config{JID: parentJID, Password: parentPW, Layer: messaging.LayerCluster,
		AcceptSubscribe: func(from string) bool { return strings.HasPrefix(from, "node-") }})
	messaging.HandleFunc(parent.Client, func(ctx context.Context, env *messaging.Envelope, m *messaging.Subscribe) (messaging.Message, error) {
		if _, err := parent.AddChild(env.From); err != nil {
			return nil, err
		}
		return &messaging.SubscribeAck{Accepted: true}, nil
	})
	var reports atomic.Int64
	messaging.HandleFunc(parent.Client, func(ctx context.Context, env *messaging.Envelope, m *messaging.CapacityReport) (messaging.Message, error) {
		reports.Add(1)
		return nil, nil
	})
	child := startAgent(t, e, messaging.Config{JID: childJID, Password: childPW, Layer: messaging.LayerNode, Parent: parentJID,
		HeartbeatInterval: 200 * time.Millisecond})
	other := startAgent(t, e, messaging.Config{JID: otherJID, Password: otherPW, Layer: messaging.LayerNode, Parent: parentJID})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// refused checks that a message failed because the parent refused
	// it, not because the machine was too slow to deliver it in time: the
	// parent counted it as unauthorized.
	refused := func(t *testing.T, m messaging.Message, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s from an unregistered agent was accepted", m.MessageType())
		}
		labels := map[string]string{"type": string(m.MessageType())}
		eventually(t, 30*time.Second, "the parent refusing "+string(m.MessageType()), func() bool {
			return parent.metric(t, "mlsysops_messaging_dropped_unauthorized_total", labels) >= 1
		})
	}
	report := &messaging.CapacityReport{Cluster: "edge-1", ReadyNodes: 1}
	// The deadline ends the retries before the child subscribes; the
	// parent's counter, not the deadline, tells the report was refused.
	early, ecancel := context.WithTimeout(ctx, 5*time.Second)
	defer ecancel()
	refused(t, report, child.Send(early, parentJID, report))
	resp, _, err := child.Request(ctx, parentJID, &messaging.Subscribe{Name: "node-1", Layer: messaging.LayerNode, Cluster: "cluster-1"})
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	if ack, ok := resp.(*messaging.SubscribeAck); !ok || !ack.Accepted {
		t.Fatalf("subscribe answered %#v", resp)
	}
	if parent.Role(childJID) != messaging.RoleChild {
		t.Fatalf("after subscribe the child's role is %v", parent.Role(childJID))
	}
	if err := child.Send(ctx, parentJID, report); err != nil {
		t.Fatalf("report after subscribing: %v", err)
	}
	if reports.Load() != 1 {
		t.Errorf("parent handled %d reports, want 1", reports.Load())
	}
	waitEvent(t, parent, childJID, true, time.Time{}, 10*time.Second)

	octx, ocancel := context.WithTimeout(ctx, 5*time.Second)
	defer ocancel()
	intrusion := &messaging.Subscribe{Name: "intruder", Layer: messaging.LayerNode}
	_, _, err = other.Request(octx, parentJID, intrusion)
	refused(t, intrusion, err)
	if parent.Role(otherJID) != messaging.RoleUnknown {
		t.Error("intruder became known")
	}
}
