package messaging_test

import (
	"context"
	"encoding/xml"
	"strings"
	"testing"
	"time"

	"mellium.im/xmlstream"
	"mellium.im/xmpp/jid"
	"mellium.im/xmpp/stanza"

	"github.com/mlsysops-go/mlsysops/internal/messaging/provision"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
	"github.com/mlsysops-go/mlsysops/internal/testbed/services"
)

// TestProvisioning creates and re-keys accounts and links rosters through
// the real admin API, and checks that nobody can register an account in
// band.
func TestProvisioning(t *testing.T) {
	e := startEjabberd(t)
	p := provisioner(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	acct := "node-9@" + testbed.DefaultXMPPDomain

	pw1, err := provision.Agent(ctx, p, acct)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rawLogin(t, e, acct, pw1); err != nil {
		t.Fatalf("login with the generated password: %v", err)
	}
	pw2, err := provision.Agent(ctx, p, acct)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rawLogin(t, e, acct, pw1); err == nil {
		t.Error("the old password still works after re-provisioning")
	}
	if _, err := rawLogin(t, e, acct, pw2); err != nil {
		t.Fatalf("login with the new password: %v", err)
	}

	parent, _ := account(t, p, "cluster-9")
	if err := p.Link(ctx, parent, acct); err != nil {
		t.Fatal(err)
	}
	for _, pair := range [][2]string{{"node-9", "cluster-9"}, {"cluster-9", "node-9"}} {
		out, err := e.Ctl(ctx, "get_roster", pair[0], testbed.DefaultXMPPDomain)
		if err != nil || !strings.Contains(out, pair[1]+"@"+testbed.DefaultXMPPDomain) || !strings.Contains(out, "both") {
			t.Errorf("roster of %s: %q, %v; want %s with subscription both", pair[0], out, err, pair[1])
		}
	}

	// In-band registration (XEP-0077) of a new account must be refused.
	s, err := rawLogin(t, e, acct, pw2)
	if err != nil {
		t.Fatal(err)
	}
	query := xmlstream.Wrap(xmlstream.MultiReader(
		xmlstream.Wrap(xmlstream.Token(xml.CharData("intruder")), xml.StartElement{Name: xml.Name{Local: "username"}}),
		xmlstream.Wrap(xmlstream.Token(xml.CharData("secret")), xml.StartElement{Name: xml.Name{Local: "password"}}),
	), xml.StartElement{Name: xml.Name{Space: "jabber:iq:register", Local: "query"}})
	resp, err := s.SendIQ(ctx, stanza.IQ{Type: stanza.SetIQ, To: jid.MustParse(testbed.DefaultXMPPDomain)}.Wrap(query))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := resp.Token()
	resp.Close()
	if err != nil {
		t.Fatal(err)
	}
	start, _ := tok.(xml.StartElement)
	typ := ""
	for _, a := range start.Attr {
		if a.Name.Local == "type" {
			typ = a.Value
		}
	}
	if typ != "error" {
		t.Errorf("in-band registration answered %q, want an error", typ)
	}
	if _, err := e.Ctl(ctx, "check_account", "intruder", testbed.DefaultXMPPDomain); err == nil {
		t.Error("the in-band registered account exists")
	}
}

// TestAdminBootstrap: an admin account created, as a container image
// creates it, from ejabberdctl's command line with a one-time password is
// given the real admin password through the admin API by Bootstrap (what
// the deployer does before it provisions), after which the one-time
// password opens nothing; a second Bootstrap changes nothing; and when
// neither password is accepted, the error says so without either.
func TestAdminBootstrap(t *testing.T) {
	e := startEjabberd(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hc, err := e.HTTPClient()
	if err != nil {
		t.Fatal(err)
	}
	once := "one-time-" + services.RandomSecret()
	// What CTL_ON_CREATE does when the database is created.
	if out, err := e.Ctl(ctx, "change_password", "admin", testbed.DefaultXMPPDomain, once); err != nil {
		t.Fatalf("ejabberdctl change_password: %v: %s", err, out)
	}
	real := provision.NewHTTPAPI(e.APIURL(), e.AdminJID(), e.AdminPassword(), hc)
	if _, err := real.Uptime(ctx); err == nil {
		t.Fatal("the admin password is accepted before the bootstrap: the test set nothing up")
	}
	set, err := real.Bootstrap(ctx, once)
	if err != nil || !set {
		t.Fatalf("Bootstrap = %v, %v; want the password set", set, err)
	}
	if _, err := real.Uptime(ctx); err != nil {
		t.Fatalf("the admin password after the bootstrap: %v", err)
	}
	if _, err := provision.NewHTTPAPI(e.APIURL(), e.AdminJID(), once, hc).Uptime(ctx); err == nil {
		t.Error("the one-time password still opens the admin API")
	}
	if set, err := real.Bootstrap(ctx, once); err != nil || set {
		t.Errorf("second Bootstrap = %v, %v; want nothing done", set, err)
	}

	wrong := provision.NewHTTPAPI(e.APIURL(), e.AdminJID(), "not-the-admin-password", hc)
	_, err = wrong.Bootstrap(ctx, "not-the-one-time-password")
	if err == nil || !strings.Contains(err.Error(), "accepts neither") {
		t.Errorf("Bootstrap with two wrong passwords = %v; want a refusal naming both", err)
	}
	if err != nil && (strings.Contains(err.Error(), "not-the-admin-password") || strings.Contains(err.Error(), "not-the-one-time-password")) {
		t.Errorf("the error shows a password: %v", err)
	}
}
