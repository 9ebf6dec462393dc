package provision

import (
	"context"
	"errors"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// memServer is an in-memory XMPP server's account store, for the
// reconciler's logic.
type memServer struct {
	mu      sync.Mutex
	pw      map[string]string
	roster  map[string]map[string]string // owner -> contact -> subscription
	foreign map[[2]string]bool           // items in a group other than RosterGroup
	started time.Time
	down    bool
	calls   map[string]int
}

func newMemServer() *memServer {
	return &memServer{pw: map[string]string{}, roster: map[string]map[string]string{}, foreign: map[[2]string]bool{}, started: time.Now().Add(-time.Hour), calls: map[string]int{}}
}

var errDown = errors.New("connection refused")

func (s *memServer) op(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[name]++
	if s.down {
		return errDown
	}
	return nil
}

func (s *memServer) EnsureAccount(_ context.Context, a, pw string) error {
	if err := s.op("ensure"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pw[a] = pw
	return nil
}

func (s *memServer) DeleteAccount(_ context.Context, a string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pw, a)
	delete(s.roster, a)
	return nil
}

func (s *memServer) Link(_ context.Context, a, b string) error {
	if err := s.op("link"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range [][2]string{{a, b}, {b, a}} {
		s.addItem(p[0], p[1], true)
	}
	return nil
}

// addItem writes a roster item (held), in RosterGroup when ours.
func (s *memServer) addItem(owner, contact string, ours bool) {
	if s.roster[owner] == nil {
		s.roster[owner] = map[string]string{}
	}
	s.roster[owner][contact] = "both"
	if ours {
		delete(s.foreign, [2]string{owner, contact})
	} else {
		s.foreign[[2]string{owner, contact}] = true
	}
}

func (s *memServer) Unlink(_ context.Context, a, b string) error {
	if err := s.op("unlink"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range [][2]string{{a, b}, {b, a}} {
		delete(s.roster[p[0]], p[1])
		delete(s.foreign, p)
	}
	return nil
}

func (s *memServer) Accounts(_ context.Context, domain string) ([]string, error) {
	if err := s.op("list"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for a := range s.pw {
		if strings.HasSuffix(a, "@"+domain) {
			out = append(out, a)
		}
	}
	return out, nil
}

func (s *memServer) CheckPassword(_ context.Context, a, pw string) (bool, error) {
	if err := s.op("check"); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	got, ok := s.pw[a]
	return ok && got == pw, nil
}

func (s *memServer) Roster(_ context.Context, a string) ([]RosterItem, error) {
	if err := s.op("roster"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []RosterItem
	for c, sub := range s.roster[a] {
		it := RosterItem{JID: c, Subscription: sub, Group: RosterGroup}
		if s.foreign[[2]string{a, c}] {
			it.Group = "friends"
		}
		out = append(out, it)
	}
	return out, nil
}

func (s *memServer) Uptime(context.Context) (time.Duration, error) {
	if err := s.op("uptime"); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Since(s.started), nil
}

// crash forgets the given accounts and roster items, as a server that
// lost its last writes, and restarts the server.
func (s *memServer) crash(lose ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range lose {
		delete(s.pw, a)
		delete(s.roster, a)
		for _, r := range s.roster {
			delete(r, a)
		}
	}
	s.started = time.Now()
}

// state is the accounts with their passwords and each roster, sorted.
func (s *memServer) state() (map[string]string, map[string][]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pw := map[string]string{}
	for a, p := range s.pw {
		pw[a] = p
	}
	rosters := map[string][]string{}
	for a, r := range s.roster {
		for c, sub := range r {
			rosters[a] = append(rosters[a], c+":"+sub)
		}
		sort.Strings(rosters[a])
	}
	return pw, rosters
}

func (s *memServer) count(op string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[op]
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type fixture struct {
	srv     *memServer
	secrets *SecretFiles
	rec     *Reconciler
	reg     *prometheus.Registry
	cancel  context.CancelFunc
	done    chan struct{}
}

const (
	cont = "c.continuum@d"
	cl   = "k.cluster@d"
	n1   = "n1@d"
	n2   = "n2@d"
)

func start(t *testing.T, srv *memServer, cfg ReconcilerConfig) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{srv: srv, reg: prometheus.NewRegistry(), done: make(chan struct{})}
	f.secrets = &SecretFiles{Files: map[string]string{}, Generate: true}
	desired := Desired{Accounts: []string{cont, cl, n1, n2}, Links: [][2]string{{cont, cl}, {cl, n1}, {cl, n2}}}
	for _, a := range desired.Accounts {
		f.secrets.Files[a] = filepath.Join(dir, PasswordFileName(a))
	}
	cfg.Server, cfg.Secrets, cfg.Desired, cfg.Registerer = srv, f.secrets, desired, f.reg
	if cfg.ProbeInterval == 0 {
		cfg.ProbeInterval = 10 * time.Millisecond
	}
	var err error
	if f.rec, err = NewReconciler(cfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	go func() { defer close(f.done); _ = f.rec.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-f.done })
	waitFor(t, "the first full pass", func() bool { return f.rec.Ready() == nil })
	return f
}

func (f *fixture) password(t *testing.T, a string) string {
	t.Helper()
	pw, err := f.secrets.Password(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	return pw
}

// wantInPlace checks that the server holds exactly the description.
func (f *fixture) wantInPlace(t *testing.T) {
	t.Helper()
	pw, rosters := f.srv.state()
	want := map[string]string{}
	for _, a := range []string{cont, cl, n1, n2} {
		want[a] = f.password(t, a)
	}
	if diff := cmp.Diff(want, pw); diff != "" {
		t.Errorf("accounts (-want +got):\n%s", diff)
	}
	wantRosters := map[string][]string{
		cont: {cl + ":both"}, cl: {cont + ":both", n1 + ":both", n2 + ":both"},
		n1: {cl + ":both"}, n2: {cl + ":both"},
	}
	if diff := cmp.Diff(wantRosters, rosters); diff != "" {
		t.Errorf("rosters (-want +got):\n%s", diff)
	}
}

func (f *fixture) repairs(kind string) float64 {
	return testutil.ToFloat64(f.rec.m.repairs.WithLabelValues(kind))
}

func TestReconcilerCreatesWhatIsDescribed(t *testing.T) {
	f := start(t, newMemServer(), ReconcilerConfig{Interval: time.Hour, FullInterval: time.Hour})
	f.wantInPlace(t)
	if got := f.repairs(RepairAccount); got != 4 {
		t.Errorf("account repairs = %v, want 4", got)
	}
	// A second full pass finds nothing to do.
	f.rec.schedule(true, TriggerPeriodic)
	waitFor(t, "a second full pass", func() bool {
		return testutil.ToFloat64(f.rec.m.passes.WithLabelValues("full", TriggerPeriodic)) == 1 && f.srv.count("roster") >= 4
	})
	if got := f.repairs(RepairAccount) + f.repairs(RepairPassword); got != 4 {
		t.Errorf("repairs after a pass over a correct server = %v, want still 4", got)
	}
	// Both passes counted every account checked: the progress a testbed
	// waiting for the first pass over thousands of accounts watches.
	waitFor(t, "the second pass's checks counted", func() bool { return testutil.ToFloat64(f.rec.m.checked) == 8 })
}

func TestReconcilerRepairsAfterServerRestart(t *testing.T) {
	srv := newMemServer()
	f := start(t, srv, ReconcilerConfig{Interval: time.Hour, FullInterval: time.Hour})
	srv.crash(n2, cl)
	waitFor(t, "the repair after the restart", func() bool { return f.repairs(RepairAccount) == 6 })
	waitFor(t, "the roster links", func() bool { _, r := srv.state(); return len(r[n1]) == 1 && len(r[cont]) == 1 })
	f.wantInPlace(t)
	if got := testutil.ToFloat64(f.rec.m.restarts); got != 1 {
		t.Errorf("restarts = %v, want 1", got)
	}
}

func TestReconcilerRepairsAfterServerWasUnreachable(t *testing.T) {
	srv := newMemServer()
	f := start(t, srv, ReconcilerConfig{Interval: time.Hour, FullInterval: time.Hour})
	srv.mu.Lock()
	srv.down = true
	srv.mu.Unlock()
	waitFor(t, "the probe to fail", func() bool { return !f.rec.Status().ServerUp })
	srv.mu.Lock()
	srv.down = false
	delete(srv.pw, n1)
	srv.mu.Unlock()
	waitFor(t, "the repair", func() bool { _, r := srv.state(); return f.repairs(RepairAccount) == 5 && len(r[n1]) == 1 })
	f.wantInPlace(t)
}

func TestReconcilerLightPass(t *testing.T) {
	srv := newMemServer()
	f := start(t, srv, ReconcilerConfig{Interval: 20 * time.Millisecond, FullInterval: time.Hour, ProbeInterval: time.Hour})
	// An account deleted behind the reconciler's back comes back at the
	// next light pass, with its links.
	srv.crash(n1)
	srv.mu.Lock()
	srv.started = srv.started.Add(-2 * time.Hour) // no restart to see
	srv.mu.Unlock()
	waitFor(t, "the missing account", func() bool { _, r := srv.state(); return f.repairs(RepairAccount) == 5 && len(r[n1]) == 1 })
	f.wantInPlace(t)

	// A rotated Secret is applied by the next light pass.
	if err := writeFileAtomic(f.secrets.Files[n2], []byte("rotated-password\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the rotated password", func() bool { pw, _ := srv.state(); return pw[n2] == "rotated-password" })
	if got := f.repairs(RepairPassword); got != 1 {
		t.Errorf("password repairs = %v, want 1", got)
	}

	// A light pass trusts passwords it set: one changed on the server
	// alone waits for a full pass or a report.
	checks := srv.count("check")
	srv.mu.Lock()
	srv.pw[n1] = "changed-by-hand"
	srv.mu.Unlock()
	waitFor(t, "more light passes", func() bool { return srv.count("list") > 10 })
	if pw, _ := srv.state(); pw[n1] != "changed-by-hand" {
		t.Fatalf("a light pass checked a password it had set")
	}
	if got := srv.count("check"); got != checks {
		t.Errorf("light passes checked %d passwords, want none", got-checks)
	}
	if !f.rec.Report(n1, "test") {
		t.Fatal("a report about a described account was ignored")
	}
	waitFor(t, "the reported account", func() bool { pw, _ := srv.state(); return pw[n1] == f.password(t, n1) })
	f.wantInPlace(t)
}

func TestReconcilerReports(t *testing.T) {
	srv := newMemServer()
	f := start(t, srv, ReconcilerConfig{Interval: time.Hour, FullInterval: time.Hour, ProbeInterval: time.Hour})
	if f.rec.Report("stranger@d", "test") || f.rec.Report("not a jid@@", "test") {
		t.Error("a report about an undescribed account was accepted")
	}
	if _, err := srv.CheckPassword(context.Background(), "stranger@d", ""); err != nil {
		t.Fatal(err)
	}
	pw, _ := srv.state()
	if _, ok := pw["stranger@d"]; ok {
		t.Error("a report created an undescribed account")
	}
	// A report about an account whose resource part is given, deleted
	// behind the reconciler's back.
	if err := srv.DeleteAccount(context.Background(), n2); err != nil {
		t.Fatal(err)
	}
	f.rec.Report(n2+"/agent", "test")
	waitFor(t, "the reported account", func() bool { _, r := srv.state(); return f.repairs(RepairAccount) == 5 && len(r[n2]) == 1 })
	f.wantInPlace(t)
	if got := testutil.ToFloat64(f.rec.m.reports.WithLabelValues("ignored")); got != 2 {
		t.Errorf("ignored reports = %v, want 2", got)
	}
}

func TestReconcilerRetriesFailedPasses(t *testing.T) {
	srv := newMemServer()
	srv.down = true
	f := &fixture{srv: srv}
	dir := t.TempDir()
	secrets := &SecretFiles{Files: map[string]string{n1: filepath.Join(dir, "n1")}, Generate: true}
	rec, err := NewReconciler(ReconcilerConfig{Server: srv, Secrets: secrets, Desired: Desired{Accounts: []string{n1}},
		Interval: time.Hour, FullInterval: time.Hour, ProbeInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	f.rec = rec
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = rec.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "a failed pass", func() bool { return srv.count("list") >= 1 })
	if err := rec.Ready(); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("Ready() = %v, want the pass's error", err)
	}
	srv.mu.Lock()
	srv.down = false
	srv.mu.Unlock()
	waitFor(t, "the retried pass", func() bool { return rec.Ready() == nil })
	if pw, _ := srv.state(); pw[n1] == "" {
		t.Error("the account was not created by the retried pass")
	}
}

func TestDesiredValidate(t *testing.T) {
	cases := map[string]struct {
		d    Desired
		want []string
	}{
		"valid": {d: Desired{Accounts: []string{"a@d", "b@d"}, Links: [][2]string{{"a@d", "b@d"}}}},
		"problems": {
			d: Desired{Accounts: []string{"a@d", "a@d", "nolocal", "B@d"}, Links: [][2]string{{"a@d", "c@d"}, {"a@d", "a@d"}}},
			want: []string{
				"account a@d described twice",
				`account "nolocal": want a bare JID such as agent@domain`,
				"account B@d: write it as b@d (the server compares normalized JIDs)",
				"link a@d <-> c@d: c@d is not a described account",
				"link a@d <-> a@d: an account cannot be its own contact",
			},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			if err := c.d.Validate(); err != nil {
				got = strings.Split(err.Error(), "\n")
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSecretFiles(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "pw")
	s := &SecretFiles{Files: map[string]string{"a@d": file}}
	if _, err := s.Password(context.Background(), "a@d"); err == nil || !strings.Contains(err.Error(), file) {
		t.Errorf("missing file: err = %v, want one naming the file", err)
	}
	if _, err := s.Password(context.Background(), "b@d"); err == nil {
		t.Error("an account without a file has a password")
	}
	s.Generate = true
	pw, err := s.Password(context.Background(), "a@d")
	if err != nil || len(pw) < 32 {
		t.Fatalf("generated password %d characters, %v", len(pw), err)
	}
	again, err := s.Password(context.Background(), "a@d")
	if err != nil || again != pw {
		t.Errorf("second read gave another password (%v)", err)
	}
}

// TestReconcilerRemovesStaleLinks: the links MLSysOps made that the
// topology no longer has go, the described ones come, and links that are
// not MLSysOps's, or lead to an account that exists but another
// description may want, stay.
func TestReconcilerRemovesStaleLinks(t *testing.T) {
	srv := newMemServer()
	f := start(t, srv, ReconcilerConfig{Interval: time.Hour, FullInterval: time.Hour})
	const cl2, other, gone, human = "k2.cluster@d", "other@d", "gone@d", "human@d"
	srv.mu.Lock()
	srv.pw[other] = "x"
	srv.addItem(n1, other, true) // another description's link
	srv.addItem(other, n1, true)
	srv.addItem(n1, gone, true) // its account was deleted
	srv.addItem(n1, human, false)
	srv.mu.Unlock()

	// n2 moves from cluster k to k2.
	d := Desired{Accounts: []string{cont, cl, cl2, n1, n2}, Links: [][2]string{{cont, cl}, {cont, cl2}, {cl, n1}, {cl2, n2}}}
	f.secrets.Files[cl2] = filepath.Join(t.TempDir(), PasswordFileName(cl2))
	if err := f.rec.SetDesired(d); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		cont: {cl + ":both", cl2 + ":both"}, cl: {cont + ":both", n1 + ":both"}, cl2: {cont + ":both", n2 + ":both"},
		n1: {human + ":both", cl + ":both", other + ":both"}, n2: {cl2 + ":both"}, other: {n1 + ":both"},
	}
	var rosters map[string][]string
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, rosters = srv.state(); cmp.Diff(want, rosters) == "" {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if diff := cmp.Diff(want, rosters); diff != "" {
		t.Errorf("rosters after the move (-want +got):\n%s", diff)
	}
	// k's link with n2 (from either end, or both when two workers
	// checked them at once), n1's with gone@d.
	if got := f.repairs(RepairUnlink); got < 2 || got > 3 {
		t.Errorf("unlink repairs = %v, want 2 or 3", got)
	}
}
