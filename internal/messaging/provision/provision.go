// Package provision creates XMPP accounts for agents and links parents and
// children in their rosters, through ejabberd's admin API (mod_http_api) or
// ejabberdctl. In-band registration stays off everywhere: only the deployer
// and the testbed create accounts, each with a generated password.
package provision

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"mellium.im/xmpp/jid"
)

// Provisioner manages accounts and roster links on one XMPP server.
type Provisioner interface {
	// EnsureAccount creates the account, or sets its password when it
	// already exists.
	EnsureAccount(ctx context.Context, account, password string) error
	// DeleteAccount removes the account; a missing account is not an error.
	DeleteAccount(ctx context.Context, account string) error
	// Link puts a and b in each other's roster with subscription "both", so
	// each receives the other's presence (and learns it again after a
	// restart through the server's presence probes).
	Link(ctx context.Context, a, b string) error
	// Unlink removes the roster items Link created.
	Unlink(ctx context.Context, a, b string) error
}

// GeneratePassword returns a random 32-character password.
func GeneratePassword() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate password: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// Agent creates or updates the account of an agent with a fresh generated
// password and returns the password (to be stored in the agent's Secret).
func Agent(ctx context.Context, p Provisioner, account string) (string, error) {
	pw, err := GeneratePassword()
	if err != nil {
		return "", err
	}
	if err := p.EnsureAccount(ctx, account, pw); err != nil {
		return "", err
	}
	return pw, nil
}

func split(account string) (user, host string, err error) {
	j, err := jid.Parse(account)
	if err != nil {
		return "", "", fmt.Errorf("account %q: %w", account, err)
	}
	if j.Localpart() == "" || j.Resourcepart() != "" {
		return "", "", fmt.Errorf("account %q: want a bare JID such as agent@domain", account)
	}
	return j.Localpart(), j.Domainpart(), nil
}

// Server is a Provisioner that can also read the server's state, which
// the Reconciler compares with what is described.
type Server interface {
	Provisioner
	// Accounts lists the accounts of an XMPP domain as bare JIDs.
	Accounts(ctx context.Context, domain string) ([]string, error)
	// CheckPassword reports whether the account exists with password.
	CheckPassword(ctx context.Context, account, password string) (bool, error)
	// Roster lists the account's roster (empty for a missing account).
	Roster(ctx context.Context, account string) ([]RosterItem, error)
	// Uptime is how long the server has been running; it going back
	// means the server restarted.
	Uptime(ctx context.Context) (time.Duration, error)
}

// RosterGroup is the roster group of every item Link writes: the links
// MLSysOps made, which the Reconciler may remove again; items in other
// groups are someone else's and left alone.
const RosterGroup = "mlsysops"

// RosterItem is one contact of a roster.
type RosterItem struct {
	JID          string `json:"jid"`
	Subscription string `json:"subscription"`
	// Group (ejabberd before 24.02) or Groups (API v2) of the item.
	Group  string   `json:"group,omitempty"`
	Groups []string `json:"groups,omitempty"`
}

// Ours reports whether Link wrote the item (its group is RosterGroup).
func (it RosterItem) Ours() bool {
	return it.Group == RosterGroup || slices.Contains(it.Groups, RosterGroup)
}

// HTTPAPI provisions through ejabberd's mod_http_api, authenticated as an
// admin account with HTTP basic auth. The admin account must be allowed the
// commands register, change_password, unregister, registered_users,
// check_password, get_roster, add_rosteritem, delete_rosteritem and stats
// in api_permissions (most come from mod_admin_extra, which must be
// enabled).
type HTTPAPI struct {
	bases         []string
	admin, secret string
	client        *http.Client

	mu  sync.Mutex
	cur int // the base that answered last
}

var _ Server = (*HTTPAPI)(nil)

// NewHTTPAPI returns a provisioner for the API at baseURL (for example
// "http://127.0.0.1:5280/api"). A nil client uses one with a 30s timeout.
func NewHTTPAPI(baseURL, adminJID, adminPassword string, client *http.Client) *HTTPAPI {
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	return &HTTPAPI{bases: []string{strings.TrimRight(baseURL, "/")}, admin: adminJID, secret: adminPassword, client: client}
}

// AlsoAt adds the admin APIs of the other nodes of an ejabberd cluster:
// accounts and rosters are the cluster's, so when the node that answered
// last cannot be reached, a call goes to the next. It returns h.
func (h *HTTPAPI) AlsoAt(baseURLs ...string) *HTTPAPI {
	for _, u := range baseURLs {
		h.bases = append(h.bases, strings.TrimRight(u, "/"))
	}
	return h
}

// APIError is a refusal from mod_http_api.
type APIError struct {
	Command string
	Status  int
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *APIError) Error() string {
	return fmt.Sprintf("ejabberd API %s: HTTP %d: code %d: %s", e.Command, e.Status, e.Code, e.Message)
}

// errAlreadyRegistered is ejabberd's error code for register on an
// existing account.
const errAlreadyRegistered = 10090

func (h *HTTPAPI) call(ctx context.Context, command string, args any) (json.RawMessage, error) {
	body, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("encode %s arguments: %w", command, err)
	}
	h.mu.Lock()
	first := h.cur
	h.mu.Unlock()
	var resp *http.Response
	// A node that cannot be reached makes the call go to the next one. A
	// command may then run twice (its answer was lost, not the command):
	// every command used here is idempotent, or (register) its repeat is
	// handled as "already there".
	for i := range h.bases {
		n := (first + i) % len(h.bases)
		req, rerr := http.NewRequestWithContext(ctx, http.MethodPost, h.bases[n]+"/"+command, bytes.NewReader(body))
		if rerr != nil {
			return nil, fmt.Errorf("ejabberd API %s: %w", command, rerr)
		}
		req.Header.Set("Content-Type", "application/json")
		req.SetBasicAuth(h.admin, h.secret)
		if resp, err = h.client.Do(req); err == nil {
			h.mu.Lock()
			h.cur = n
			h.mu.Unlock()
			break
		}
		if ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("ejabberd API %s: %w", command, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("ejabberd API %s: read response: %w", command, err)
	}
	if resp.StatusCode/100 != 2 {
		apiErr := &APIError{Command: command, Status: resp.StatusCode}
		if json.Unmarshal(out, apiErr) != nil || apiErr.Message == "" {
			apiErr.Message = strings.TrimSpace(string(out))
		}
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			apiErr.Message += " (check the admin account and api_permissions)"
		}
		return nil, apiErr
	}
	return out, nil
}

// callStatus calls a command whose result is an integer status (0 = ok).
// Some commands answer a failure as a string instead (change_password of
// a missing account: "unknown_user").
func (h *HTTPAPI) callStatus(ctx context.Context, command string, args any) error {
	out, err := h.call(ctx, command, args)
	if err != nil {
		return err
	}
	var status int
	if json.Unmarshal(out, &status) == nil && status != 0 {
		return &APIError{Command: command, Status: http.StatusOK, Code: status, Message: "command returned a failure status"}
	}
	var text string
	if json.Unmarshal(out, &text) == nil && text != "" {
		return &APIError{Command: command, Status: http.StatusOK, Message: text}
	}
	return nil
}

// EnsureAccount implements Provisioner.
func (h *HTTPAPI) EnsureAccount(ctx context.Context, account, password string) error {
	user, host, err := split(account)
	if err != nil {
		return err
	}
	if password == "" {
		return errors.New("ensure account: empty password")
	}
	_, err = h.call(ctx, "register", map[string]string{"user": user, "host": host, "password": password})
	var apiErr *APIError
	if errors.As(err, &apiErr) && (apiErr.Code == errAlreadyRegistered || apiErr.Status == http.StatusConflict) {
		err = h.callStatus(ctx, "change_password", map[string]string{"user": user, "host": host, "newpass": password})
	}
	if err != nil {
		return fmt.Errorf("ensure account %s: %w", account, err)
	}
	return nil
}

// DeleteAccount implements Provisioner.
func (h *HTTPAPI) DeleteAccount(ctx context.Context, account string) error {
	user, host, err := split(account)
	if err != nil {
		return err
	}
	if _, err := h.call(ctx, "unregister", map[string]string{"user": user, "host": host}); err != nil {
		return fmt.Errorf("delete account %s: %w", account, err)
	}
	return nil
}

// Link implements Provisioner.
func (h *HTTPAPI) Link(ctx context.Context, a, b string) error {
	if err := h.addItem(ctx, a, b); err != nil {
		return err
	}
	return h.addItem(ctx, b, a)
}

func (h *HTTPAPI) addItem(ctx context.Context, owner, contact string) error {
	ou, oh, err := split(owner)
	if err != nil {
		return err
	}
	cu, ch, err := split(contact)
	if err != nil {
		return err
	}
	args := map[string]any{"localuser": ou, "localhost": oh, "user": cu, "host": ch,
		"nick": cu, "group": RosterGroup, "subs": "both"}
	err = h.callStatus(ctx, "add_rosteritem", args)
	var apiErr *APIError
	if errors.As(err, &apiErr) && strings.Contains(apiErr.Message, "groups") {
		// ejabberd 24.02 and later (API v2) take a list of groups.
		delete(args, "group")
		args["groups"] = []string{RosterGroup}
		err = h.callStatus(ctx, "add_rosteritem", args)
	}
	if err != nil {
		return fmt.Errorf("add %s to the roster of %s: %w", contact, owner, err)
	}
	return nil
}

// Accounts implements Server.
func (h *HTTPAPI) Accounts(ctx context.Context, domain string) ([]string, error) {
	out, err := h.call(ctx, "registered_users", map[string]string{"host": domain})
	if err != nil {
		return nil, fmt.Errorf("list the accounts of %s: %w", domain, err)
	}
	var users []string
	if err := json.Unmarshal(out, &users); err != nil {
		return nil, fmt.Errorf("list the accounts of %s: unexpected answer %.200q: %w", domain, out, err)
	}
	for i, u := range users {
		users[i] = u + "@" + domain
	}
	return users, nil
}

// CheckPassword implements Server.
func (h *HTTPAPI) CheckPassword(ctx context.Context, account, password string) (bool, error) {
	user, host, err := split(account)
	if err != nil {
		return false, err
	}
	out, err := h.call(ctx, "check_password", map[string]string{"user": user, "host": host, "password": password})
	if err != nil {
		return false, fmt.Errorf("check the password of %s: %w", account, err)
	}
	var status int
	if err := json.Unmarshal(out, &status); err != nil {
		return false, fmt.Errorf("check the password of %s: unexpected answer %.200q", account, out)
	}
	// 0 is a match; 1 a mismatch or no such account.
	return status == 0, nil
}

// Roster implements Server.
func (h *HTTPAPI) Roster(ctx context.Context, account string) ([]RosterItem, error) {
	user, host, err := split(account)
	if err != nil {
		return nil, err
	}
	out, err := h.call(ctx, "get_roster", map[string]string{"user": user, "host": host})
	if err != nil {
		return nil, fmt.Errorf("read the roster of %s: %w", account, err)
	}
	var items []RosterItem
	if err := json.Unmarshal(out, &items); err != nil {
		return nil, fmt.Errorf("read the roster of %s: unexpected answer %.200q: %w", account, out, err)
	}
	return items, nil
}

// Uptime implements Server.
func (h *HTTPAPI) Uptime(ctx context.Context) (time.Duration, error) {
	out, err := h.call(ctx, "stats", map[string]string{"name": "uptimeseconds"})
	if err != nil {
		return 0, fmt.Errorf("read the server's uptime: %w", err)
	}
	var v struct {
		Stat *int64 `json:"stat"`
	}
	if err := json.Unmarshal(out, &v); err != nil || v.Stat == nil {
		return 0, fmt.Errorf("read the server's uptime: unexpected answer %.200q", out)
	}
	return time.Duration(*v.Stat) * time.Second, nil
}

// Unlink implements Provisioner.
func (h *HTTPAPI) Unlink(ctx context.Context, a, b string) error {
	for _, pair := range [][2]string{{a, b}, {b, a}} {
		ou, oh, err := split(pair[0])
		if err != nil {
			return err
		}
		cu, ch, err := split(pair[1])
		if err != nil {
			return err
		}
		if err := h.callStatus(ctx, "delete_rosteritem", map[string]string{"localuser": ou, "localhost": oh, "user": cu, "host": ch}); err != nil {
			return fmt.Errorf("remove %s from the roster of %s: %w", pair[1], pair[0], err)
		}
	}
	return nil
}

// Ctl provisions by running ejabberdctl on the server's host. It is slower
// (an Erlang VM per call, about 0.3s) and passes passwords on the command
// line, so prefer HTTPAPI; Ctl is for bootstrapping the admin account.
type Ctl struct {
	// Path of ejabberdctl; default "ejabberdctl".
	Path string
	// Args are passed before every command, e.g. "--config-dir", DIR,
	// "--node", NAME, so that every call reaches the same node.
	Args []string
}

var _ Provisioner = (*Ctl)(nil)

func (c *Ctl) run(ctx context.Context, args ...string) (string, error) {
	path := c.Path
	if path == "" {
		path = "ejabberdctl"
	}
	all := append(append([]string(nil), c.Args...), args...)
	out, err := exec.CommandContext(ctx, path, all...).CombinedOutput()
	text := strings.TrimSpace(string(out))
	if err != nil {
		return text, fmt.Errorf("ejabberdctl %s: %w: %s", args[0], err, text)
	}
	return text, nil
}

// EnsureAccount implements Provisioner.
func (c *Ctl) EnsureAccount(ctx context.Context, account, password string) error {
	user, host, err := split(account)
	if err != nil {
		return err
	}
	if password == "" {
		return errors.New("ensure account: empty password")
	}
	out, err := c.run(ctx, "register", user, host, password)
	if err != nil && strings.Contains(out, "already registered") {
		_, err = c.run(ctx, "change_password", user, host, password)
	}
	if err != nil {
		return fmt.Errorf("ensure account %s: %w", account, err)
	}
	return nil
}

// DeleteAccount implements Provisioner.
func (c *Ctl) DeleteAccount(ctx context.Context, account string) error {
	user, host, err := split(account)
	if err != nil {
		return err
	}
	if _, err := c.run(ctx, "unregister", user, host); err != nil {
		return fmt.Errorf("delete account %s: %w", account, err)
	}
	return nil
}

// Link implements Provisioner.
func (c *Ctl) Link(ctx context.Context, a, b string) error {
	for _, pair := range [][2]string{{a, b}, {b, a}} {
		ou, oh, err := split(pair[0])
		if err != nil {
			return err
		}
		cu, ch, err := split(pair[1])
		if err != nil {
			return err
		}
		if _, err := c.run(ctx, "add_rosteritem", ou, oh, cu, ch, cu, RosterGroup, "both"); err != nil {
			return fmt.Errorf("add %s to the roster of %s: %w", pair[1], pair[0], err)
		}
	}
	return nil
}

// Unlink implements Provisioner.
func (c *Ctl) Unlink(ctx context.Context, a, b string) error {
	for _, pair := range [][2]string{{a, b}, {b, a}} {
		ou, oh, err := split(pair[0])
		if err != nil {
			return err
		}
		cu, ch, err := split(pair[1])
		if err != nil {
			return err
		}
		if _, err := c.run(ctx, "delete_rosteritem", ou, oh, cu, ch); err != nil {
			return fmt.Errorf("remove %s from the roster of %s: %w", pair[1], pair[0], err)
		}
	}
	return nil
}

// refused reports whether err is the admin API refusing the admin's
// credentials (or their rights).
func refused(err error) bool {
	var apiErr *APIError
	return errors.As(err, &apiErr) && (apiErr.Status == http.StatusUnauthorized || apiErr.Status == http.StatusForbidden)
}

// Bootstrap gives the admin account the password h logs in with when it
// still has the one-time password it was created with. A container image
// creates the admin account from its command line (ejabberd's
// CTL_ON_CREATE runs `ejabberdctl register admin <domain> <password>`),
// where every process that can list processes reads the password; so the
// account is created with oneTime, and this sets the real password through
// the authenticated admin API, after which oneTime opens nothing. It does
// nothing when the real password is already accepted (the usual case, and
// every run after the first), and reports whether it changed the password.
// An error never contains either password.
func (h *HTTPAPI) Bootstrap(ctx context.Context, oneTime string) (bool, error) {
	_, err := h.Uptime(ctx)
	if err == nil || !refused(err) || oneTime == "" {
		return false, err
	}
	user, host, serr := split(h.admin)
	if serr != nil {
		return false, serr
	}
	h.mu.Lock()
	once := &HTTPAPI{bases: h.bases, admin: h.admin, secret: oneTime, client: h.client, cur: h.cur}
	h.mu.Unlock()
	if err := once.callStatus(ctx, "change_password", map[string]string{"user": user, "host": host, "newpass": h.secret}); err != nil {
		if refused(err) {
			return false, fmt.Errorf("the admin account %s accepts neither its password nor the one-time bootstrap password (changed by hand? set its password to the installation's with ejabberd's change_password): %w", h.admin, err)
		}
		return false, fmt.Errorf("set the admin account's password from its one-time password: %w", err)
	}
	if _, err := h.Uptime(ctx); err != nil {
		return true, fmt.Errorf("the admin password was set, but the admin API still refuses it: %w", err)
	}
	return true, nil
}
