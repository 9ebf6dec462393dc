package continuum

import (
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/messaging"
)

// MemberStatuses holds the application status each cluster agent reported
// over XMPP (application_status_report) when it wrote it in its member,
// until Karmada's reflection of that status (member → Work →
// ResourceBinding) catches up. Karmada's way back takes three writes, one
// after the other, each behind its controller's queue: seconds in a
// burst; the report takes one message. The ResourceBinding stays the
// source of truth: a report is used only while the binding shows another
// status for that cluster (it can only be older: the cluster agent
// reports every status it writes), and dropped once the binding shows the
// same, when the application is placed again, or after MemberStatusTTL
// (a report that Karmada never matched does not stand for ever).
type MemberStatuses struct {
	ttl time.Duration
	now func() time.Time

	mu sync.Mutex
	by map[string]map[string]memberReport // application → cluster
	// accepted counts the reports kept, used the passes that took a
	// report over the binding's status.
	accepted, used int64

	// C carries an event for each application whose report changed:
	// the placement controller reconciles it (a source.Channel).
	C chan event.GenericEvent
}

type memberReport struct {
	comps []mlsysopsv1.ComponentStatus
	// sent is the cluster agent's time of the report: a later one
	// replaces it, an earlier one (delivered late) does not.
	sent time.Time
	got  time.Time
}

// MemberStatusTTL is how long a report is used when the ResourceBinding
// never shows the same status.
const MemberStatusTTL = 2 * time.Minute

// NewMemberStatuses returns an empty set of reports kept for ttl.
func NewMemberStatuses(ttl time.Duration) *MemberStatuses {
	return &MemberStatuses{ttl: ttl, now: time.Now, by: map[string]map[string]memberReport{}, C: make(chan event.GenericEvent, 1024)}
}

// Put keeps a cluster agent's report and asks for a pass over its
// application; false when a later report of that cluster is held.
func (s *MemberStatuses) Put(m *messaging.ApplicationStatusReport) bool {
	comps := reportComponents(m)
	s.mu.Lock()
	held, ok := s.by[m.Application][m.Cluster]
	if ok && m.Time.Before(held.sent) {
		s.mu.Unlock()
		return false
	}
	if s.by[m.Application] == nil {
		s.by[m.Application] = map[string]memberReport{}
	}
	s.by[m.Application][m.Cluster] = memberReport{comps: comps, sent: m.Time, got: s.now()}
	s.accepted++
	s.mu.Unlock()
	app := &mlsysopsv1.MLSysOpsApp{ObjectMeta: metav1.ObjectMeta{Namespace: mlsysopsv1.Namespace, Name: m.Application}}
	select {
	case s.C <- event.GenericEvent{Object: app}:
	default:
		// The controller is not running or far behind: the binding's
		// own event brings the pass.
	}
	return true
}

// Merge returns the components of the clusters of a placement: a
// cluster's report where the binding (fromBinding, by cluster) shows
// another status or none, the binding's otherwise. Reports the binding
// matches, or too old, are dropped. A nil MemberStatuses holds no
// report: the binding's components.
func (s *MemberStatuses) Merge(app string, clusters []string, fromBinding map[string][]mlsysopsv1.ComponentStatus) []mlsysopsv1.ComponentStatus {
	var out []mlsysopsv1.ComponentStatus
	if s == nil {
		for _, cl := range clusters {
			out = append(out, fromBinding[cl]...)
		}
		sortComponents(out)
		return out
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for _, cl := range clusters {
		rb := fromBinding[cl]
		rep, ok := s.by[app][cl]
		switch {
		case ok && (now.Sub(rep.got) > s.ttl || sameComponents(rep.comps, rb)):
			delete(s.by[app], cl)
			out = append(out, rb...)
		case ok:
			s.used++
			out = append(out, rep.comps...)
		default:
			out = append(out, rb...)
		}
	}
	if len(s.by[app]) == 0 {
		delete(s.by, app)
	}
	sortComponents(out)
	return out
}

// Forget drops an application's reports: it was placed again, or is gone.
// It does nothing on a nil MemberStatuses.
func (s *MemberStatuses) Forget(app string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.by, app)
}

// Counts returns the reports held, those accepted so far and the times
// one was used ahead of the binding.
func (s *MemberStatuses) Counts() (held int, accepted, used int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.by {
		held += len(m)
	}
	return held, s.accepted, s.used
}

// reportComponents turns a report's components into the application's
// component status entries of that cluster.
func reportComponents(m *messaging.ApplicationStatusReport) []mlsysopsv1.ComponentStatus {
	out := make([]mlsysopsv1.ComponentStatus, 0, len(m.Components))
	for name, c := range m.Components {
		out = append(out, mlsysopsv1.ComponentStatus{Name: name, Cluster: m.Cluster, Nodes: c.Nodes,
			Replicas: c.Replicas, ReadyReplicas: c.ReadyReplicas, Message: c.Message})
	}
	sortComponents(out)
	return out
}

func sameComponents(a, b []mlsysopsv1.ComponentStatus) bool {
	if len(a) != len(b) {
		return false
	}
	// Both sides name their cluster: reports by construction, the
	// binding's entries as memberComponents fills them in.
	x := append([]mlsysopsv1.ComponentStatus(nil), a...)
	y := append([]mlsysopsv1.ComponentStatus(nil), b...)
	sortComponents(x)
	sortComponents(y)
	return equality.Semantic.DeepEqual(x, y)
}

func sortComponents(out []mlsysopsv1.ComponentStatus) {
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Cluster < out[j].Cluster
	})
}
