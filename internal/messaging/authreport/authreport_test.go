package authreport

import (
	"strings"
	"testing"

	"github.com/mlsysops-go/mlsysops/internal/messaging"
)

func TestEventName(t *testing.T) {
	cases := map[string]string{
		"node-1@mlsysops.local":              "xmpp-auth.node-1.mlsysops.local",
		"Cloud_1.cluster@mlsysops.local":     "xmpp-auth.cloud.1.cluster.mlsysops.local",
		"x@" + strings.Repeat("a", 300):      "",
		"mls-continuum.continuum@example.io": "xmpp-auth.mls-continuum.continuum.example.io",
	}
	for in, want := range cases {
		got := EventName(in)
		if want == "" {
			if len(got) > 253 || !strings.HasPrefix(got, "xmpp-auth.x.aaa") {
				t.Errorf("EventName(long) has %d characters", len(got))
			}
			continue
		}
		if got != want {
			t.Errorf("EventName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestReportKeepsTheLatest checks that Report never blocks and that a
// failure waiting to be written is replaced by a newer one.
func TestReportKeepsTheLatest(t *testing.T) {
	r := New(nil, Object{Kind: "Node", Name: "n"}, "n", nil)
	for i := 1; i <= 5; i++ {
		r.Report(messaging.AuthFailure{Account: "n@d", Failures: i})
	}
	if f := <-r.queue; f.Failures != 5 {
		t.Errorf("queued failure %d, want the latest (5)", f.Failures)
	}
	if r.ns != DefaultNamespace {
		t.Errorf("namespace %q for a cluster-scoped object", r.ns)
	}
}
