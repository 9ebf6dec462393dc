// Package authreport carries an agent's "I cannot log in to XMPP" to the
// accounts reconciler on a path that does not need XMPP: a Kubernetes
// Event in the agent's own cluster, whose apiserver the agent can always
// reach. The reconciler watches these Events in every cluster (directly,
// or through Karmada's cluster proxy) and checks the account at once.
//
// The Event carries no secret, only the account's name: at worst a forged
// one makes the reconciler compare a described account with its Secret.
package authreport

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/kube/kubelite"
	"github.com/mlsysops-go/mlsysops/internal/messaging"
)

// What the Events look like.
const (
	// Reason is the Events' reason, which the reconciler selects on.
	Reason = "XMPPAuthenticationFailed"
	// AnnotationAccount holds the account's bare JID.
	AnnotationAccount = "mlsysops.eu/xmpp-account"
	// Component is the Events' source component.
	Component = "mlsysops-agent"
	// DefaultNamespace holds the Events when the involved object is
	// cluster-scoped, as Kubernetes requires.
	DefaultNamespace = "default"
)

// Object is what an Event is about: the agent's Node, or its MLSysOps
// resource.
type Object struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	Namespace  string `json:"namespace,omitempty"`
}

// Event is the part of a core/v1 Event the reporter writes and the
// reconciler reads.
type Event struct {
	APIVersion     string   `json:"apiVersion,omitempty"`
	Kind           string   `json:"kind,omitempty"`
	Metadata       Metadata `json:"metadata"`
	InvolvedObject Object   `json:"involvedObject"`
	Reason         string   `json:"reason"`
	Message        string   `json:"message"`
	Type           string   `json:"type"`
	Count          int      `json:"count"`
	FirstTimestamp string   `json:"firstTimestamp,omitempty"`
	LastTimestamp  string   `json:"lastTimestamp,omitempty"`
	Source         struct {
		Component string `json:"component,omitempty"`
		Host      string `json:"host,omitempty"`
	} `json:"source"`
}

// Metadata is an Event's object metadata.
type Metadata struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Account returns the account an Event reports, "" when it is not a
// report.
func (e *Event) Account() string {
	if e.Reason != Reason {
		return ""
	}
	return e.Metadata.Annotations[AnnotationAccount]
}

// Last returns when the failure was last reported.
func (e *Event) Last() time.Time {
	t, _ := time.Parse(time.RFC3339, e.LastTimestamp)
	return t
}

// Reporter writes an agent's login failures as one Event, created at the
// first failure and updated (count, last time, message) at the next.
type Reporter struct {
	kube   *kubelite.Client
	ns     string
	obj    Object
	host   string
	log    *slog.Logger
	queue  chan messaging.AuthFailure
	logged bool
}

// New returns a reporter that writes Events through kube about obj. A
// cluster-scoped obj (no namespace) puts them in DefaultNamespace.
func New(kube *kubelite.Client, obj Object, host string, log *slog.Logger) *Reporter {
	ns := obj.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	if log == nil {
		log = slog.Default()
	}
	return &Reporter{kube: kube, ns: ns, obj: obj, host: host, log: log, queue: make(chan messaging.AuthFailure, 1)}
}

// Report queues a failure; it never blocks. A failure queued while the
// previous one waits replaces it.
func (r *Reporter) Report(f messaging.AuthFailure) {
	for {
		select {
		case r.queue <- f:
			return
		default:
		}
		select {
		case <-r.queue:
		default:
		}
	}
}

// Run writes the queued failures until ctx ends.
func (r *Reporter) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case f := <-r.queue:
			wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			err := r.write(wctx, f)
			cancel()
			switch {
			case err != nil && ctx.Err() == nil:
				// Logged once per streak: the login failures are logged
				// anyway, and the reconciler's periodic pass repairs the
				// account without the report, only later.
				if !r.logged {
					r.log.Warn("cannot report the XMPP login failure to the accounts reconciler; it repairs the account at its next pass",
						"namespace", r.ns, "err", err)
					r.logged = true
				}
			case err == nil:
				r.logged = false
			}
		}
	}
}

// EventName is the name of an account's Event: the bare JID made a DNS
// subdomain.
func EventName(account string) string {
	var b strings.Builder
	b.WriteString("xmpp-auth.")
	for _, c := range strings.ToLower(account) {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '.':
			b.WriteRune(c)
		default:
			b.WriteByte('.')
		}
	}
	name := strings.Trim(b.String(), ".-")
	if len(name) > 253 {
		name = strings.Trim(name[:253], ".-")
	}
	return name
}

func (r *Reporter) write(ctx context.Context, f messaging.AuthFailure) error {
	name := EventName(f.Account)
	now := time.Now().UTC().Format(time.RFC3339)
	msg := fmt.Sprintf("XMPP server %s refused the login of %s %d times since %s (%s); the agent reads its password from %s",
		f.Server, f.Account, f.Failures, f.Since.UTC().Format(time.RFC3339), f.Reason, orInline(f.PasswordFile))
	base := "/api/v1/namespaces/" + url.PathEscape(r.ns) + "/events"
	patch := map[string]any{"count": f.Failures, "lastTimestamp": now, "message": msg}
	err := r.kube.Do(ctx, http.MethodPatch, base+"/"+url.PathEscape(name), "application/merge-patch+json", patch, nil)
	if !kubelite.IsStatus(err, http.StatusNotFound) {
		return err
	}
	ev := Event{
		APIVersion: "v1", Kind: "Event",
		Metadata:       Metadata{Name: name, Namespace: r.ns, Annotations: map[string]string{AnnotationAccount: f.Account}},
		InvolvedObject: r.obj, Reason: Reason, Message: msg, Type: "Warning", Count: f.Failures,
		FirstTimestamp: f.Since.UTC().Format(time.RFC3339), LastTimestamp: now,
	}
	ev.Source.Component, ev.Source.Host = Component, r.host
	err = r.kube.Do(ctx, http.MethodPost, base, "", ev, nil)
	if kubelite.IsStatus(err, http.StatusConflict) {
		// Created meanwhile by an earlier run of the agent.
		return r.kube.Do(ctx, http.MethodPatch, base+"/"+url.PathEscape(name), "application/merge-patch+json", patch, nil)
	}
	return err
}

func orInline(file string) string {
	if file == "" {
		return "its configuration"
	}
	return file
}
