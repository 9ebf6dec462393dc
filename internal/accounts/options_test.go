package accounts

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func validOptions() *Options {
	o := NewOptions()
	o.PasswordDir = "/run/secrets/xmpp"
	o.AdminURLs = []string{"https://ejabberd:5443/api"}
	o.AdminJID = "admin@mlsysops.local"
	o.AdminPasswordFile = "/run/secrets/admin/password"
	return o
}

func TestOptionsValidate(t *testing.T) {
	cases := map[string]struct {
		mutate func(*Options)
		want   []string
	}{
		"valid": {mutate: func(*Options) {}},
		"valid with event sources": {mutate: func(o *Options) {
			o.Kubeconfig, o.EventContexts, o.KarmadaClusters = "/k", []string{"karmada-host", InCluster}, []string{"*"}
		}},
		"in-cluster needs no kubeconfig": {mutate: func(o *Options) { o.EventContexts = []string{InCluster} }},
		"missing": {
			mutate: func(o *Options) {
				o.Listen, o.Descriptions, o.XMPPDomain, o.PasswordDir = "nohost", "", "", ""
				o.AdminURLs, o.AdminJID, o.AdminPasswordFile = nil, "", ""
				o.Layers = nil
			},
			want: []string{
				`--listen "nohost": want host:port`,
				"--descriptions: required",
				"--xmpp-domain: required",
				"--password-dir: required (the agents' password files)",
				"--layers: at least one of continuum, cluster, node",
				`--admin-url "": want the API's http(s) URL`,
				`--admin-jid "": want the admin account's bare JID`,
				"--admin-password-file: required (never give the password on the command line)",
			},
		},
		"bad values": {
			mutate: func(o *Options) {
				o.Accounts = []string{"northbound@d", "nb@d/x=/f"}
				o.AdminURLs = []string{"https://ejabberd-0:5443/api", "ftp://x/api"}
				o.Interval, o.FullInterval, o.ProbeInterval, o.ReportMaxAge = 0, -time.Second, 0, 0
				o.Workers = 0
				o.Layers = []string{"cluster", "pod"}
				o.EventContexts = []string{"cloud-1"}
				o.KarmadaClusters = []string{"*"}
				o.LogLevel, o.LogFormat = "loud", "xml"
			},
			want: []string{
				`--account "northbound@d": want jid=password-file`,
				`--account "nb@d/x=/f": "nb@d/x" is not a bare JID`,
				`--layers "pod": want continuum, cluster or node`,
				`--admin-url "ftp://x/api": want the API's http(s) URL`,
				"--interval must be positive",
				"--full-interval must be positive",
				"--probe-interval must be positive",
				"--report-max-age must be positive",
				"--workers 0: at least 1",
				`--event-contexts "cloud-1" needs --kubeconfig`,
				"--karmada-clusters needs --kubeconfig and --karmada-context (the Karmada API)",
				`--log-level: unknown level "loud" (debug, info, warn, error)`,
				`--log-format: want json or text, got "xml"`,
			},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			o := validOptions()
			c.mutate(o)
			var got []string
			if err := o.Validate(); err != nil {
				got = strings.Split(err.Error(), "\n")
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}
