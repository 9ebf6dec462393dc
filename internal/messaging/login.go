package messaging

import (
	"errors"
	"fmt"
	"time"
)

// errAuth marks a login the server refused. Retrying fast would only get
// the host banned by mod_fail2ban.
var errAuth = errors.New("authentication failed")

// errNoCredentials marks a login not attempted because the password could
// not be read.
var errNoCredentials = errors.New("no XMPP password")

// Reasons of a failed login, as the auth_failures_total metric labels
// them.
const (
	// AuthRefused: the server refused the credentials (a missing account,
	// or another password).
	AuthRefused = "refused"
	// AuthNoPassword: the password file is missing, empty or unreadable.
	AuthNoPassword = "no_password"
)

// AuthFailure describes a failed login, for OnAuthFailure. It never holds
// the password.
type AuthFailure struct {
	// Account is the bare JID that could not log in.
	Account string
	// Server is the c2s address tried.
	Server string
	// PasswordFile is where the password comes from; empty when it was
	// given inline.
	PasswordFile string
	// Reason is AuthRefused or AuthNoPassword.
	Reason string
	// Err is the error, as text.
	Err string
	// Failures counts the failed logins in a row; Since is the first.
	Failures int
	Since    time.Time
	// RetryIn is the wait before the next login.
	RetryIn time.Duration
}

// AuthStatus tells whether the agent can log in.
type AuthStatus struct {
	// Failing is true from a failed login to the next accepted one.
	Failing bool `json:"failing"`
	// Reason, Failures, Since, LastError and LastAttempt describe the
	// failures; zero while Failing is false.
	Reason      string    `json:"reason,omitempty"`
	Failures    int       `json:"failures,omitempty"`
	Since       time.Time `json:"since,omitzero"`
	LastAttempt time.Time `json:"lastAttempt,omitzero"`
	LastError   string    `json:"lastError,omitempty"`
	// Account, Server and PasswordFile say what to check.
	Account      string `json:"account"`
	Server       string `json:"server"`
	PasswordFile string `json:"passwordFile,omitempty"`
}

// Problem explains a failing login and what to check, or returns "".
func (s AuthStatus) Problem() string {
	if !s.Failing {
		return ""
	}
	src := "the password given to the agent"
	if s.PasswordFile != "" {
		src = "the password in " + s.PasswordFile
	}
	if s.Reason == AuthNoPassword {
		return fmt.Sprintf("XMPP login impossible since %s (%d attempts): %s; check that the Secret is mounted there",
			s.Since.UTC().Format(time.RFC3339), s.Failures, s.LastError)
	}
	return fmt.Sprintf("XMPP server %s refuses the login of %s since %s (%d attempts): check that the account exists with %s; the accounts reconciler restores it",
		s.Server, s.Account, s.Since.UTC().Format(time.RFC3339), s.Failures, src)
}

// AuthStatus returns whether the client can log in.
func (c *Client) AuthStatus() AuthStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.auth
	s.Account, s.Server, s.PasswordFile = c.bare, c.srv.current(), c.cfg.PasswordFile
	return s
}

// authFailed records a failed login, logs what to check and calls
// OnAuthFailure.
func (c *Client) authFailed(err error, retryIn time.Duration) {
	reason := AuthRefused
	if errors.Is(err, errNoCredentials) {
		reason = AuthNoPassword
	}
	now := time.Now()
	c.mu.Lock()
	if !c.auth.Failing {
		c.auth = AuthStatus{Failing: true, Since: now}
	}
	c.auth.Failures++
	c.auth.Reason, c.auth.LastError, c.auth.LastAttempt = reason, err.Error(), now
	f := AuthFailure{Account: c.bare, Server: c.srv.current(), PasswordFile: c.cfg.PasswordFile, Reason: reason,
		Err: err.Error(), Failures: c.auth.Failures, Since: c.auth.Since, RetryIn: retryIn}
	c.mu.Unlock()
	c.m.authFailures.WithLabelValues(reason).Inc()
	c.m.authFailing.Set(1)
	source := c.cfg.PasswordFile
	if source == "" {
		source = "(given inline)"
	}
	msg := "XMPP server refused the login: check that the account exists on the server with the password in the password file; the accounts reconciler restores a lost account when the agent reports it"
	if reason == AuthNoPassword {
		msg = "XMPP login impossible: the password file cannot be read; check that the agent's Secret is mounted there"
	}
	c.log.Error(msg, "account", c.bare, "password_file", source, "server", c.srv.current(),
		"err", err, "failures", f.Failures, "since", f.Since.UTC().Format(time.RFC3339), "retry_in", retryIn)
	if c.cfg.OnAuthFailure != nil {
		c.cfg.OnAuthFailure(f)
	}
}

// authOK records an accepted login.
func (c *Client) authOK() {
	c.mu.Lock()
	was := c.auth
	c.auth = AuthStatus{}
	c.mu.Unlock()
	c.m.authFailing.Set(0)
	if was.Failing {
		c.log.Info("XMPP login accepted again", "account", c.bare, "failures", was.Failures,
			"after", time.Since(was.Since).Round(time.Millisecond))
	}
}
