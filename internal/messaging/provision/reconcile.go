package provision

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"mellium.im/xmpp/jid"
)

// Desired is what a Reconciler keeps in place on the server.
type Desired struct {
	// Accounts are the bare JIDs that must exist, each with the password
	// its Secret holds.
	Accounts []string
	// Links are pairs of accounts that must be in each other's roster
	// with subscription "both" (parent and child, so that each sees the
	// other's presence).
	Links [][2]string
}

// Validate reports every problem of the description at once.
func (d Desired) Validate() error {
	var errs []error
	seen := map[string]bool{}
	for _, a := range d.Accounts {
		if _, _, err := split(a); err != nil {
			errs = append(errs, err)
			continue
		}
		if j, _ := jid.Parse(a); j.Bare().String() != a {
			errs = append(errs, fmt.Errorf("account %s: write it as %s (the server compares normalized JIDs)", a, j.Bare().String()))
		}
		if seen[a] {
			errs = append(errs, fmt.Errorf("account %s described twice", a))
		}
		seen[a] = true
	}
	for _, l := range d.Links {
		for _, a := range l {
			if !seen[a] {
				errs = append(errs, fmt.Errorf("link %s <-> %s: %s is not a described account", l[0], l[1], a))
			}
		}
		if l[0] == l[1] {
			errs = append(errs, fmt.Errorf("link %s <-> %s: an account cannot be its own contact", l[0], l[1]))
		}
	}
	return errors.Join(errs...)
}

// ReconcilerConfig configures a Reconciler. Zero durations take the
// documented defaults.
type ReconcilerConfig struct {
	// Server is the XMPP server's admin API. Required.
	Server Server
	// Secrets gives each account's password. Required.
	Secrets Secrets
	// Desired lists the accounts and roster links. Required.
	Desired Desired
	// Interval is the time between two light passes, which compare the
	// server's account list with the described accounts and apply
	// rotated Secrets. Default 30s.
	Interval time.Duration
	// FullInterval is the time between two full passes, which also check
	// every password and roster. Default 10m.
	FullInterval time.Duration
	// ProbeInterval is how often the server's uptime is read to notice a
	// restart, after which a full pass runs. Default 2s.
	ProbeInterval time.Duration
	// ReportCooldown is the shortest time between two checks of one
	// account triggered by reports. Default 2s.
	ReportCooldown time.Duration
	// Workers is how many accounts are checked at once. Default 4.
	Workers int
	// Logger receives structured logs. Default slog.Default().
	Logger *slog.Logger
	// Registerer receives the metrics. Nil keeps them unregistered.
	Registerer prometheus.Registerer
}

// Defaults of ReconcilerConfig.
const (
	DefaultReconcileInterval = 30 * time.Second
	DefaultFullInterval      = 10 * time.Minute
	DefaultProbeInterval     = 2 * time.Second
	DefaultReportCooldown    = 2 * time.Second
	DefaultWorkers           = 4
)

// Triggers of a pass, as the metrics and logs name them.
const (
	TriggerStart    = "start"
	TriggerPeriodic = "periodic"
	TriggerRestart  = "restart"
	TriggerReport   = "report"
	TriggerRetry    = "retry"
	// TriggerDescription: the described accounts changed.
	TriggerDescription = "description"
)

// Kinds of repairs.
const (
	RepairAccount  = "account"  // a missing account created
	RepairPassword = "password" // a password set to its Secret's
	RepairRoster   = "roster"   // a roster link restored
	// RepairUnlink: a link the topology no longer has (an agent moved
	// to another parent, or whose account is gone) removed.
	RepairUnlink = "unlink"
)

// Reconciler makes sure, continuously, that every described account
// exists with the password of its Secret and that the described roster
// links exist. It is level-triggered: each pass compares the server with
// the description and repairs what differs, whatever caused the
// difference (a crash of the server that lost its last writes, an
// account deleted by hand, a rotated Secret). Passes run at start,
// periodically, after the server restarted, and for one account when its
// agent reports that it cannot log in (Report).
type Reconciler struct {
	cfg  ReconcilerConfig
	log  *slog.Logger
	m    *reconcilerMetrics
	wake chan struct{}

	mu         sync.Mutex
	desc       description
	full       string // trigger of a pending full pass, "" for none
	light      string // trigger of a pending light pass
	accounts   map[string]time.Time
	lastCheck  map[string]time.Time // last report-triggered check per account
	applied    map[string][32]byte  // digest of the password known in place
	ready      bool
	lastErr    error
	lastFull   time.Time
	serverUp   bool
	serverSeen bool
	started    time.Time // the server's start, from its uptime
}

// NewReconciler validates cfg and returns a reconciler; Run starts it.
func NewReconciler(cfg ReconcilerConfig) (*Reconciler, error) {
	var errs []error
	if cfg.Server == nil {
		errs = append(errs, errors.New("server: required"))
	}
	if cfg.Secrets == nil {
		errs = append(errs, errors.New("secrets: required"))
	}
	if err := cfg.Desired.Validate(); err != nil {
		errs = append(errs, err)
	}
	for name, d := range map[string]time.Duration{"interval": cfg.Interval, "full interval": cfg.FullInterval,
		"probe interval": cfg.ProbeInterval, "report cooldown": cfg.ReportCooldown} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s %v must not be negative", name, d))
		}
	}
	if cfg.Workers < 0 {
		errs = append(errs, fmt.Errorf("workers %d must not be negative", cfg.Workers))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("accounts reconciler: %w", err)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&cfg.Interval, DefaultReconcileInterval)
	def(&cfg.FullInterval, DefaultFullInterval)
	def(&cfg.ProbeInterval, DefaultProbeInterval)
	def(&cfg.ReportCooldown, DefaultReportCooldown)
	if cfg.Workers == 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	r := &Reconciler{
		cfg: cfg, log: cfg.Logger.With("component", "accounts"), wake: make(chan struct{}, 1),
		desc:     newDescription(cfg.Desired),
		accounts: map[string]time.Time{}, lastCheck: map[string]time.Time{}, applied: map[string][32]byte{},
	}
	r.m = newReconcilerMetrics()
	r.m.described.Set(float64(len(cfg.Desired.Accounts)))
	for _, k := range []string{RepairAccount, RepairPassword, RepairRoster, RepairUnlink} {
		r.m.repairs.WithLabelValues(k) // exported at 0 from the start
	}
	if cfg.Registerer != nil {
		if err := r.m.register(cfg.Registerer); err != nil {
			return nil, fmt.Errorf("register accounts metrics: %w", err)
		}
	}
	return r, nil
}

// description is a Desired indexed for the passes.
type description struct {
	Desired
	desired  map[string]bool
	contacts map[string][]string // account -> its described contacts
	domains  []string
}

func newDescription(d Desired) description {
	desc := description{Desired: d, desired: map[string]bool{}, contacts: map[string][]string{}}
	domains := map[string]bool{}
	for _, a := range d.Accounts {
		desc.desired[a] = true
		j, _ := jid.Parse(a)
		domains[j.Domainpart()] = true
	}
	for dom := range domains {
		desc.domains = append(desc.domains, dom)
	}
	sort.Strings(desc.domains)
	for _, l := range d.Links {
		desc.contacts[l[0]] = append(desc.contacts[l[0]], l[1])
		desc.contacts[l[1]] = append(desc.contacts[l[1]], l[0])
	}
	return desc
}

func (r *Reconciler) description() description {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.desc
}

// SetDesired replaces what is described (for example after the
// description folder changed) and schedules a full pass when it differs,
// which also removes the links the new topology no longer has
// (checkRoster). Accounts no longer described are left on the server:
// the reconciler never deletes an account, since it cannot tell one it
// made from another's (the deployer deletes those it recorded).
func (r *Reconciler) SetDesired(d Desired) error {
	if err := d.Validate(); err != nil {
		return err
	}
	r.mu.Lock()
	same := slices.Equal(r.desc.Accounts, d.Accounts) && slices.Equal(r.desc.Links, d.Links)
	if !same {
		r.desc = newDescription(d)
	}
	r.mu.Unlock()
	if same {
		return nil
	}
	r.m.described.Set(float64(len(d.Accounts)))
	r.log.Info("description changed", "accounts", len(d.Accounts), "links", len(d.Links))
	r.schedule(true, TriggerDescription)
	return nil
}

// Report asks for a check of one account at once, because its agent
// reported that the server refused its credentials. It reports whether
// the account is described; reports about others are ignored, so that a
// report can never make the reconciler create an account.
func (r *Reconciler) Report(account, source string) bool {
	b, err := jid.Parse(account)
	if err == nil {
		account = b.Bare().String()
	}
	if err != nil || !r.description().desired[account] {
		r.m.reports.WithLabelValues("ignored").Inc()
		r.log.Info("authentication failure report about an account that is not described: ignored", "account", account, "source", source)
		return false
	}
	r.m.reports.WithLabelValues("accepted").Inc()
	r.log.Info("agent reports that it cannot log in: checking its account", "account", account, "source", source)
	r.mu.Lock()
	if _, pending := r.accounts[account]; !pending {
		notBefore := r.lastCheck[account].Add(r.cfg.ReportCooldown)
		r.accounts[account] = notBefore
	}
	r.mu.Unlock()
	r.poke()
	return true
}

// Ready reports nil once a full pass has succeeded, else why not.
func (r *Reconciler) Ready() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ready {
		return nil
	}
	if r.lastErr != nil {
		return fmt.Errorf("no full pass has succeeded yet: %w", r.lastErr)
	}
	return errors.New("no full pass has succeeded yet")
}

// ReconcilerStatus is the reconciler's state for /status.
type ReconcilerStatus struct {
	Accounts      int       `json:"accounts"`
	Links         int       `json:"links"`
	Ready         bool      `json:"ready"`
	ServerUp      bool      `json:"serverUp"`
	ServerStarted time.Time `json:"serverStarted,omitzero"`
	LastFullPass  time.Time `json:"lastFullPass,omitzero"`
	LastError     string    `json:"lastError,omitempty"`
}

// Status returns the reconciler's state.
func (r *Reconciler) Status() ReconcilerStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := ReconcilerStatus{Accounts: len(r.desc.Accounts), Links: len(r.desc.Links), Ready: r.ready,
		ServerUp: r.serverUp, ServerStarted: r.started, LastFullPass: r.lastFull}
	if r.lastErr != nil {
		s.LastError = r.lastErr.Error()
	}
	return s
}

func (r *Reconciler) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *Reconciler) schedule(full bool, trigger string) {
	r.mu.Lock()
	if full {
		if r.full == "" {
			r.full = trigger
		}
	} else if r.light == "" {
		r.light = trigger
	}
	r.mu.Unlock()
	r.poke()
}

// Run reconciles until ctx ends; it returns nil then.
func (r *Reconciler) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); r.probe(ctx) }()
	defer wg.Wait()

	r.schedule(true, TriggerStart)
	light := time.NewTicker(r.cfg.Interval)
	defer light.Stop()
	full := time.NewTicker(r.cfg.FullInterval)
	defer full.Stop()
	retry := newRetry()
	var retryTimer, accountTimer <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.wake:
		case <-light.C:
			r.schedule(false, TriggerPeriodic)
		case <-full.C:
			r.schedule(true, TriggerPeriodic)
		case <-retryTimer:
			retryTimer = nil
		case <-accountTimer:
			accountTimer = nil
		}
		if retryTimer != nil {
			// A failed pass waits for its retry; reports still go through.
			accountTimer = r.checkAccounts(ctx)
			continue
		}
		r.mu.Lock()
		fullTrigger, lightTrigger := r.full, r.light
		r.full, r.light = "", ""
		r.mu.Unlock()
		var err error
		switch {
		case fullTrigger != "":
			err = r.pass(ctx, true, fullTrigger)
		case lightTrigger != "":
			err = r.pass(ctx, false, lightTrigger)
		}
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			wait := retry.next()
			r.log.Warn("accounts pass failed; retrying", "err", err, "retry_in", wait)
			r.schedule(fullTrigger != "", TriggerRetry)
			retryTimer = time.After(wait)
		} else if fullTrigger != "" || lightTrigger != "" {
			retry.reset()
		}
		if t := r.checkAccounts(ctx); t != nil {
			accountTimer = t
		}
	}
}

// checkAccounts checks the accounts reported and due; it returns a timer
// for the next one that is not due yet.
func (r *Reconciler) checkAccounts(ctx context.Context) <-chan time.Time {
	now := time.Now()
	var due []string
	var next time.Time
	r.mu.Lock()
	for a, notBefore := range r.accounts {
		if !notBefore.After(now) {
			due = append(due, a)
			delete(r.accounts, a)
			r.lastCheck[a] = now
		} else if next.IsZero() || notBefore.Before(next) {
			next = notBefore
		}
	}
	r.mu.Unlock()
	if len(due) > 0 {
		sort.Strings(due)
		r.m.passes.WithLabelValues("account", TriggerReport).Inc()
		desc := r.description()
		r.each(ctx, due, func(a string) error {
			if !desc.desired[a] {
				return nil
			}
			return r.checkAccount(ctx, desc, a, nil, true, TriggerReport)
		})
	}
	if next.IsZero() {
		return nil
	}
	return time.After(time.Until(next))
}

// pass compares every described account with the server. A light pass
// relies on the account list and on the Secrets' digests; a full pass
// also checks every password and roster.
func (r *Reconciler) pass(ctx context.Context, full bool, trigger string) error {
	kind := "light"
	if full {
		kind = "full"
	}
	began := time.Now()
	r.m.passes.WithLabelValues(kind, trigger).Inc()
	desc := r.description()
	present := map[string]bool{}
	for _, d := range desc.domains {
		list, err := r.cfg.Server.Accounts(ctx, d)
		if err != nil {
			r.m.errors.WithLabelValues("list").Inc()
			r.setErr(err)
			return err
		}
		for _, a := range list {
			present[a] = true
		}
	}
	accounts := desc.Accounts
	err := r.each(ctx, accounts, func(a string) error { return r.checkAccount(ctx, desc, a, present, full, trigger) })
	r.setErr(err)
	if err != nil {
		return err
	}
	if full {
		r.mu.Lock()
		r.ready = true
		r.lastFull = time.Now()
		r.mu.Unlock()
		r.m.lastFull.SetToCurrentTime()
	}
	r.log.Debug("accounts pass done", "kind", kind, "trigger", trigger, "accounts", len(accounts), "took", time.Since(began).Round(time.Millisecond))
	return nil
}

func (r *Reconciler) setErr(err error) {
	r.mu.Lock()
	r.lastErr = err
	r.mu.Unlock()
}

// each runs fn for every account on the configured number of workers and
// joins the errors.
func (r *Reconciler) each(ctx context.Context, accounts []string, fn func(string) error) error {
	work := make(chan string)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for i := 0; i < min(r.cfg.Workers, len(accounts)); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for a := range work {
				if err := fn(a); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	for _, a := range accounts {
		if ctx.Err() != nil {
			break
		}
		work <- a
	}
	close(work)
	wg.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errors.Join(errs...)
}

// checkAccount makes one account match its description. present is the
// server's account list, or nil to ask the server about this account.
// thorough checks the password and the roster even when nothing hints at
// a difference.
func (r *Reconciler) checkAccount(ctx context.Context, desc description, account string, present map[string]bool, thorough bool, trigger string) error {
	defer r.m.checked.Inc()
	log := r.log.With("account", account, "trigger", trigger)
	pw, err := r.cfg.Secrets.Password(ctx, account)
	if err != nil {
		r.m.errors.WithLabelValues("secret").Inc()
		log.Error("cannot read the account's Secret; the account is left as it is", "err", err)
		return err
	}
	digest := sha256.Sum256([]byte(pw))
	r.mu.Lock()
	applied, known := r.applied[account]
	r.mu.Unlock()

	exists := present[account]
	if present == nil || (exists && (thorough || !known || applied != digest)) {
		ok, err := r.cfg.Server.CheckPassword(ctx, account, pw)
		if err != nil {
			r.m.errors.WithLabelValues("check_password").Inc()
			return err
		}
		if ok {
			exists = true
		} else if present == nil {
			// Missing, or there with another password?
			list, err := r.cfg.Server.Accounts(ctx, domainOf(account))
			if err != nil {
				r.m.errors.WithLabelValues("list").Inc()
				return err
			}
			exists = slices.Contains(list, account)
		}
		if !ok && exists {
			if err := r.cfg.Server.EnsureAccount(ctx, account, pw); err != nil {
				r.m.errors.WithLabelValues("change_password").Inc()
				return err
			}
			r.m.repairs.WithLabelValues(RepairPassword).Inc()
			if known && applied != digest {
				log.Info("password set from its rotated Secret")
			} else {
				log.Warn("account repaired: its password differed from its Secret's")
			}
		}
	}
	created := false
	if !exists {
		if err := r.cfg.Server.EnsureAccount(ctx, account, pw); err != nil {
			r.m.errors.WithLabelValues("register").Inc()
			return err
		}
		created = true
		r.m.repairs.WithLabelValues(RepairAccount).Inc()
		if trigger != TriggerStart {
			log.Warn("account repaired: it was missing on the server")
		} else {
			log.Info("account created")
		}
	}
	r.mu.Lock()
	r.applied[account] = digest
	r.mu.Unlock()
	if created || thorough {
		return r.checkRoster(ctx, desc, account, present, created, log)
	}
	return nil
}

// checkRoster restores the account's described roster links and removes
// the links MLSysOps made (RosterItem.Ours) that the topology no longer
// has: to a described account that is not a described contact (an agent
// moved to another parent), or to an account no longer on the server
// (present, when known: an agent removed from the topology). Links to
// other accounts that exist are left, since another description (a
// reconciler of a part of the topology) may want them. A new account
// has no links, so they are written without reading the roster.
func (r *Reconciler) checkRoster(ctx context.Context, desc description, account string, present map[string]bool, fresh bool, log *slog.Logger) error {
	contacts := desc.contacts[account]
	if fresh && len(contacts) == 0 {
		return nil
	}
	have := map[string]bool{}
	var stale []string
	if !fresh {
		items, err := r.cfg.Server.Roster(ctx, account)
		if err != nil {
			r.m.errors.WithLabelValues("roster").Inc()
			return err
		}
		for _, it := range items {
			wanted := slices.Contains(contacts, it.JID)
			if wanted && it.Subscription == "both" {
				have[it.JID] = true
			}
			if !wanted && it.Ours() && (desc.desired[it.JID] || (present != nil && !present[it.JID] && sameDomain(it.JID, account))) {
				stale = append(stale, it.JID)
			}
		}
	}
	var errs []error
	for _, c := range stale {
		if err := r.cfg.Server.Unlink(ctx, account, c); err != nil {
			r.m.errors.WithLabelValues("unlink").Inc()
			errs = append(errs, err)
			continue
		}
		r.m.repairs.WithLabelValues(RepairUnlink).Inc()
		log.Info("roster link the topology no longer has removed", "contact", c)
	}
	for _, c := range contacts {
		if have[c] {
			continue
		}
		if err := r.cfg.Server.Link(ctx, account, c); err != nil {
			r.m.errors.WithLabelValues("link").Inc()
			errs = append(errs, err)
			continue
		}
		r.m.repairs.WithLabelValues(RepairRoster).Inc()
		if !fresh {
			log.Warn("roster link repaired", "contact", c)
		}
	}
	return errors.Join(errs...)
}

func sameDomain(a, b string) bool { return domainOf(a) == domainOf(b) }

func domainOf(account string) string {
	j, err := jid.Parse(account)
	if err != nil {
		return ""
	}
	return j.Domainpart()
}

// probe reads the server's uptime to notice restarts: a start time later
// than the last one seen, or the API answering again after it did not.
// Either schedules a full pass, since a crash may have lost writes.
func (r *Reconciler) probe(ctx context.Context) {
	t := time.NewTicker(r.cfg.ProbeInterval)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, max(r.cfg.ProbeInterval, 5*time.Second))
		up, err := r.cfg.Server.Uptime(pctx)
		now := time.Now()
		cancel()
		if ctx.Err() != nil {
			return
		}
		r.mu.Lock()
		wasUp, seen, prevStart := r.serverUp, r.serverSeen, r.started
		r.serverUp = err == nil
		if err == nil {
			r.serverSeen = true
			r.started = now.Add(-up)
		}
		r.mu.Unlock()
		switch {
		case err != nil && wasUp:
			r.log.Warn("XMPP server admin API unreachable", "err", err)
		case err != nil:
		case !seen:
			// The first answer: the start pass covers it.
		case now.Add(-up).Sub(prevStart) > 2*time.Second:
			// The uptime went back: a restart, perhaps after a crash
			// that lost the last writes.
			r.m.restarts.Inc()
			r.log.Warn("XMPP server restarted: checking every account", "uptime", up)
			r.schedule(true, TriggerRestart)
		case !wasUp:
			r.log.Info("XMPP server admin API reachable again: checking every account", "uptime", up)
			r.schedule(true, TriggerRestart)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// retry is the wait before repeating a failed pass: doubling from 1s to
// 30s.
type retry struct{ d time.Duration }

func newRetry() *retry { return &retry{} }

func (b *retry) next() time.Duration {
	if b.d == 0 {
		b.d = time.Second
	} else {
		b.d = min(2*b.d, 30*time.Second)
	}
	return b.d
}

func (b *retry) reset() { b.d = 0 }

type reconcilerMetrics struct {
	checked   prometheus.Counter
	passes    *prometheus.CounterVec
	repairs   *prometheus.CounterVec
	errors    *prometheus.CounterVec
	reports   *prometheus.CounterVec
	restarts  prometheus.Counter
	described prometheus.Gauge
	lastFull  prometheus.Gauge
}

func newReconcilerMetrics() *reconcilerMetrics {
	opts := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: "mlsysops", Subsystem: "accounts", Name: name, Help: help}
	}
	return &reconcilerMetrics{
		checked: prometheus.NewCounter(prometheus.CounterOpts(opts("checked_total",
			"Accounts compared with the server (and created or repaired when they differed), by every kind of pass: a first pass over thousands of agents shows its progress here."))),
		passes: prometheus.NewCounterVec(prometheus.CounterOpts(opts("reconcile_passes_total",
			"Reconcile passes by kind (full, light, account) and trigger (start, periodic, restart, report, retry).")), []string{"kind", "trigger"}),
		repairs: prometheus.NewCounterVec(prometheus.CounterOpts(opts("repairs_total",
			"Differences repaired, by kind: account (created), password (set from its Secret), roster (link restored).")), []string{"kind"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts(opts("errors_total",
			"Failed operations, by operation.")), []string{"op"}),
		reports: prometheus.NewCounterVec(prometheus.CounterOpts(opts("reports_total",
			"Authentication failure reports from agents, accepted or ignored (account not described).")), []string{"result"}),
		restarts: prometheus.NewCounter(prometheus.CounterOpts(opts("server_restarts_total",
			"Restarts of the XMPP server noticed through its uptime."))),
		described: prometheus.NewGauge(prometheus.GaugeOpts(opts("described",
			"Accounts described."))),
		lastFull: prometheus.NewGauge(prometheus.GaugeOpts(opts("last_full_pass_timestamp_seconds",
			"When the last full pass succeeded."))),
	}
}

func (m *reconcilerMetrics) register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.checked, m.passes, m.repairs, m.errors, m.reports, m.restarts, m.described, m.lastFull} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
