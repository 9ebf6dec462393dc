// Package accounts is the MLSysOps accounts reconciler (mlsysops-accounts):
// the long-lived component that holds ejabberd's admin credential and
// keeps every described agent's XMPP account and roster links in place
// (provision.Reconciler), at start, periodically, after ejabberd restarts
// and as soon as an agent reports that it cannot log in (Kubernetes
// Events, see internal/messaging/authreport).
package accounts

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"mellium.im/xmpp/jid"

	"github.com/mlsysops-go/mlsysops/internal/agentconfig"
	"github.com/mlsysops-go/mlsysops/internal/logging"
	"github.com/mlsysops-go/mlsysops/internal/messaging/provision"
)

// Options configure the reconciler. Flags win over environment
// variables, which win over defaults.
type Options struct {
	// Listen is the address of /metrics, /healthz, /readyz and /status.
	Listen string

	// Descriptions is the system description folder: every agent it
	// describes gets an account, and each parent and child a roster link.
	Descriptions string
	// XMPPDomain is the domain of the agents' accounts.
	XMPPDomain string
	// PasswordDir holds one password file per agent account, named by
	// provision.PasswordFileName: a Secret mounted as a volume, or the
	// testbed's pki folder.
	PasswordDir string
	// GeneratePasswords writes a generated password for an account whose
	// file is missing (the testbed; an installation creates its Secrets).
	GeneratePasswords bool
	// Accounts are further accounts, "jid=password-file" (the northbound
	// API's).
	Accounts []string
	// Layers are the agent layers whose described agents get accounts
	// (continuum, cluster, node): a deployment that runs no node agents
	// (the testbed's scale profile, thousands of simulated nodes) would
	// otherwise keep thousands of accounts nothing logs in with.
	Layers []string

	// AdminURLs are ejabberd's mod_http_api base URLs: one, or one per
	// node of an ejabberd cluster (a call goes to the next when a node
	// cannot be reached). AdminJID is the admin account; AdminPasswordFile
	// holds its password; AdminCAFile the CA of the API's certificate
	// (empty: system roots).
	AdminURLs                                []string
	AdminJID, AdminPasswordFile, AdminCAFile string

	// Interval, FullInterval and ProbeInterval: see
	// provision.ReconcilerConfig.
	Interval, FullInterval, ProbeInterval time.Duration
	// Workers is how many accounts are checked at once.
	Workers int

	// Kubeconfig holds the contexts below (empty: in-cluster only).
	Kubeconfig string
	// EventContexts are kubeconfig contexts whose Events are watched
	// directly; "in-cluster" is the pod's own cluster.
	EventContexts []string
	// KarmadaContext is the Karmada API's context, for watching member
	// clusters through its cluster proxy.
	KarmadaContext string
	// KarmadaClusters are the member clusters watched through the proxy;
	// "*" watches every cluster joined to Karmada.
	KarmadaClusters []string
	// EventsNamespace restricts the watch to one namespace; empty watches
	// all.
	EventsNamespace string
	// ReportMaxAge ignores reports older than this (the Events a watch
	// lists when it starts).
	ReportMaxAge time.Duration

	// LogLevel is debug, info, warn or error; LogFormat json or text.
	LogLevel, LogFormat string
}

// InCluster names the pod's own cluster in EventContexts.
const InCluster = "in-cluster"

// SourcesInterval is how often the member clusters whose Events are
// watched (--karmada-clusters '*') are listed again, at most.
const SourcesInterval = 30 * time.Second

// NewOptions returns the defaults, with environment variables applied.
func NewOptions() *Options {
	o := &Options{
		Listen:         "127.0.0.1:8090",
		Descriptions:   "descriptions",
		XMPPDomain:     "mlsysops.local",
		Interval:       provision.DefaultReconcileInterval,
		FullInterval:   provision.DefaultFullInterval,
		ProbeInterval:  provision.DefaultProbeInterval,
		Workers:        provision.DefaultWorkers,
		Layers:         []string{string(agentconfig.LayerContinuum), string(agentconfig.LayerCluster), string(agentconfig.LayerNode)},
		KarmadaContext: "karmada-apiserver",
		ReportMaxAge:   10 * time.Minute,
		LogLevel:       "info",
		LogFormat:      "json",
	}
	env := func(dst *string, keys ...string) {
		for _, k := range keys {
			if v := os.Getenv(k); v != "" {
				*dst = v
				return
			}
		}
	}
	env(&o.Listen, "MLSYSOPS_LISTEN")
	env(&o.Descriptions, "DESCRIPTION_PATH")
	env(&o.XMPPDomain, "MLSYSOPS_XMPP_DOMAIN", "EJABBERD_DOMAIN")
	env(&o.PasswordDir, "MLSYSOPS_XMPP_PASSWORD_DIR")
	if v := os.Getenv("XMPP_ADMIN_URL"); v != "" {
		o.AdminURLs = strings.Split(v, ",")
	}
	env(&o.AdminJID, "XMPP_ADMIN_JID")
	env(&o.AdminPasswordFile, "XMPP_ADMIN_PASSWORD_FILE")
	env(&o.AdminCAFile, "XMPP_CA_FILE")
	env(&o.Kubeconfig, "KUBECONFIG")
	return o
}

// AddFlags registers every option as a flag.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Listen, "listen", o.Listen, "address of /metrics, /healthz, /readyz and /status ($MLSYSOPS_LISTEN)")
	fs.StringVar(&o.Descriptions, "descriptions", o.Descriptions, "system description folder: its agents get accounts and roster links ($DESCRIPTION_PATH)")
	fs.StringVar(&o.XMPPDomain, "xmpp-domain", o.XMPPDomain, "XMPP domain of the agents' accounts ($MLSYSOPS_XMPP_DOMAIN)")
	fs.StringVar(&o.PasswordDir, "password-dir", o.PasswordDir, "folder of the agents' password files, xmpp-<user>_at_<domain>.password, e.g. a Secret mount ($MLSYSOPS_XMPP_PASSWORD_DIR)")
	fs.BoolVar(&o.GeneratePasswords, "generate-passwords", o.GeneratePasswords, "write a generated password (0600) for an account whose file is missing (testbeds; installations create the Secrets)")
	fs.StringSliceVar(&o.Accounts, "account", o.Accounts, "a further account to keep, jid=password-file (repeatable)")
	fs.StringSliceVar(&o.Layers, "layers", o.Layers, "agent layers whose described agents get accounts and roster links: continuum, cluster, node")
	fs.StringSliceVar(&o.AdminURLs, "admin-url", o.AdminURLs, "ejabberd mod_http_api base URL, e.g. https://ejabberd:5443/api; repeated or comma-separated for the nodes of an ejabberd cluster ($XMPP_ADMIN_URL)")
	fs.StringVar(&o.AdminJID, "admin-jid", o.AdminJID, "ejabberd admin account allowed the API ($XMPP_ADMIN_JID)")
	fs.StringVar(&o.AdminPasswordFile, "admin-password-file", o.AdminPasswordFile, "file holding the admin account's password ($XMPP_ADMIN_PASSWORD_FILE)")
	fs.StringVar(&o.AdminCAFile, "admin-ca-file", o.AdminCAFile, "CA of the API's certificate, PEM ($XMPP_CA_FILE; default system roots)")
	fs.DurationVar(&o.Interval, "interval", o.Interval, "time between light passes (account list, rotated Secrets)")
	fs.DurationVar(&o.FullInterval, "full-interval", o.FullInterval, "time between full passes (every password and roster checked)")
	fs.DurationVar(&o.ProbeInterval, "probe-interval", o.ProbeInterval, "how often ejabberd's uptime is read to notice a restart")
	fs.IntVar(&o.Workers, "workers", o.Workers, "accounts checked at once")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig with the contexts below ($KUBECONFIG)")
	fs.StringSliceVar(&o.EventContexts, "event-contexts", o.EventContexts, "contexts whose agents' login failure Events are watched directly; in-cluster is the pod's own cluster")
	fs.StringVar(&o.KarmadaContext, "karmada-context", o.KarmadaContext, "context of the Karmada API, for --karmada-clusters")
	fs.StringSliceVar(&o.KarmadaClusters, "karmada-clusters", o.KarmadaClusters, "member clusters whose Events are watched through Karmada's cluster proxy; * for every joined cluster")
	fs.StringVar(&o.EventsNamespace, "events-namespace", o.EventsNamespace, "namespace of the agents' Events (default all)")
	fs.DurationVar(&o.ReportMaxAge, "report-max-age", o.ReportMaxAge, "ignore login failure reports older than this")
	fs.StringVar(&o.LogLevel, "log-level", o.LogLevel, "debug, info, warn or error")
	fs.StringVar(&o.LogFormat, "log-format", o.LogFormat, "json or text")
}

// layers are Layers as agent layers.
func (o *Options) layers() []agentconfig.Layer {
	out := make([]agentconfig.Layer, len(o.Layers))
	for i, l := range o.Layers {
		out[i] = agentconfig.Layer(l)
	}
	return out
}

// Validate reports every problem with the options.
func (o *Options) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if _, _, err := net.SplitHostPort(o.Listen); err != nil {
		add("--listen %q: want host:port", o.Listen)
	}
	if o.Descriptions == "" {
		add("--descriptions: required")
	}
	if o.XMPPDomain == "" {
		add("--xmpp-domain: required")
	}
	if o.PasswordDir == "" {
		add("--password-dir: required (the agents' password files)")
	}
	for _, a := range o.Accounts {
		j, file, ok := strings.Cut(a, "=")
		if !ok || file == "" {
			add("--account %q: want jid=password-file", a)
			continue
		}
		if p, err := jid.Parse(j); err != nil || p.Localpart() == "" || p.Resourcepart() != "" {
			add("--account %q: %q is not a bare JID", a, j)
		}
	}
	if len(o.Layers) == 0 {
		add("--layers: at least one of continuum, cluster, node")
	}
	for _, l := range o.Layers {
		if !slices.Contains(agentconfig.Layers, agentconfig.Layer(l)) {
			add("--layers %q: want continuum, cluster or node", l)
		}
	}
	if len(o.AdminURLs) == 0 {
		add(`--admin-url "": want the API's http(s) URL`)
	}
	for _, a := range o.AdminURLs {
		if u, err := url.Parse(a); a == "" || err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			add("--admin-url %q: want the API's http(s) URL", a)
		}
	}
	if p, err := jid.Parse(o.AdminJID); o.AdminJID == "" || err != nil || p.Localpart() == "" {
		add("--admin-jid %q: want the admin account's bare JID", o.AdminJID)
	}
	if o.AdminPasswordFile == "" {
		add("--admin-password-file: required (never give the password on the command line)")
	}
	for _, d := range []struct {
		name string
		d    time.Duration
	}{{"--interval", o.Interval}, {"--full-interval", o.FullInterval}, {"--probe-interval", o.ProbeInterval}, {"--report-max-age", o.ReportMaxAge}} {
		if d.d <= 0 {
			add("%s must be positive", d.name)
		}
	}
	if o.Workers < 1 {
		add("--workers %d: at least 1", o.Workers)
	}
	for _, c := range o.EventContexts {
		if c != InCluster && o.Kubeconfig == "" {
			add("--event-contexts %q needs --kubeconfig", c)
		}
	}
	if len(o.KarmadaClusters) > 0 && (o.KarmadaContext == "" || o.Kubeconfig == "") {
		add("--karmada-clusters needs --kubeconfig and --karmada-context (the Karmada API)")
	}
	if _, err := logging.ParseLevel(o.LogLevel); err != nil {
		add("--log-level: %v", err)
	}
	if err := logging.CheckFormat(o.LogFormat); err != nil {
		add("--log-format: %v", err)
	}
	return errors.Join(errs...)
}
