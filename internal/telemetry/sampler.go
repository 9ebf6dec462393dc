package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Source is something the Sampler reads at every tick.
type Source interface {
	// Name identifies the source in logs and metrics.
	Name() string
	// Collect returns the current readings. wanted lists the metric
	// names requesters asked for (sorted); sources with a fixed set of
	// readings, such as the NodeCollector, may ignore it, while sources
	// that scrape a large endpoint return only those.
	Collect(ctx context.Context, wanted []string) ([]Reading, error)
}

// SamplerOptions configure a Sampler.
type SamplerOptions struct {
	// Interval is the sampling interval while nobody requests one (the
	// agent's monitoring_interval). Default 5s.
	Interval time.Duration
	// Retention and MaxPoints bound the Store (see NewStore).
	Retention time.Duration
	MaxPoints int // points kept per series
	// Timeout bounds one source's Collect. Default 10s.
	Timeout time.Duration
	// Logger receives sampling errors. Default slog.Default().
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// OnSample, when set, is called after each sampling round with its
	// time (an agent that reports its samples sends them at once).
	OnSample func(time.Time)
}

// Sampler is an agent's single monitoring loop: it collects every source
// at the smallest interval requested and appends the readings to its
// Store. It is safe for concurrent use.
type Sampler struct {
	log       *slog.Logger
	now       func() time.Time
	timeout   time.Duration
	intervals *Intervals
	store     *Store
	wake      chan struct{}
	onSample  func(time.Time)

	mu      sync.Mutex
	sources []Source
	wanted  map[string][]string

	samples  prometheus.Counter
	errs     *prometheus.CounterVec
	duration prometheus.Histogram
	interval prometheus.GaugeFunc
}

// NewSampler returns a Sampler with no sources.
func NewSampler(opts SamplerOptions) *Sampler {
	if opts.Interval <= 0 {
		opts.Interval = 5 * time.Second
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Sampler{
		log:       opts.Logger,
		now:       opts.Now,
		timeout:   opts.Timeout,
		intervals: NewIntervals(opts.Interval),
		store:     NewStore(opts.Retention, opts.MaxPoints),
		wake:      make(chan struct{}, 1),
		onSample:  opts.OnSample,
		wanted:    map[string][]string{},
		samples: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "mlsysops", Subsystem: "telemetry", Name: "samples_total",
			Help: "Sampling rounds completed by the agent's monitor.",
		}),
		errs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "mlsysops", Subsystem: "telemetry", Name: "source_errors_total",
			Help: "Sampling rounds in which a source failed, by source.",
		}, []string{"source"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "mlsysops", Subsystem: "telemetry", Name: "sample_duration_seconds",
			Help:    "Time taken by one sampling round.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}),
	}
	s.interval = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "mlsysops", Subsystem: "telemetry", Name: "interval_seconds",
		Help: "Current sampling interval: the smallest one requested.",
	}, func() float64 { return s.Interval().Seconds() })
	return s
}

// Register registers the sampler's own metrics on reg.
func (s *Sampler) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{s.samples, s.errs, s.duration, s.interval} {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("register telemetry sampler metrics: %w", err)
		}
	}
	return nil
}

// Store returns the store the readings go to.
func (s *Sampler) Store() *Store { return s.store }

// AddSource adds a source, replacing one of the same name.
func (s *Sampler) AddSource(src Source) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, x := range s.sources {
		if x.Name() == src.Name() {
			s.sources[i] = src
			return
		}
	}
	s.sources = append(s.sources, src)
}

// RemoveSource removes the source of that name, if any.
func (s *Sampler) RemoveSource(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, x := range s.sources {
		if x.Name() == name {
			s.sources = append(s.sources[:i:i], s.sources[i+1:]...)
			return
		}
	}
}

// RequestInterval records the interval requester asks for; the sampler
// runs at the smallest request. A running loop picks the change up at once.
func (s *Sampler) RequestInterval(requester string, d time.Duration) {
	if s.intervals.Request(requester, d) {
		s.log.Info("sampling interval changed", "interval", s.intervals.Current(), "requester", requester)
		s.poke()
	}
}

// RemoveInterval forgets requester's interval; the sampler goes back to
// the smallest remaining request. Removing twice is harmless.
func (s *Sampler) RemoveInterval(requester string) {
	if s.intervals.Remove(requester) {
		s.log.Info("sampling interval changed", "interval", s.intervals.Current(), "removed", requester)
		s.poke()
	}
}

// Interval returns the current sampling interval.
func (s *Sampler) Interval() time.Duration { return s.intervals.Current() }

// Intervals returns the requested intervals by requester.
func (s *Sampler) Intervals() map[string]time.Duration { return s.intervals.Requests() }

// Want records the metric names requester needs (replacing its previous
// list); sources that scrape selectively collect the union.
func (s *Sampler) Want(requester string, metrics []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(metrics) == 0 {
		delete(s.wanted, requester)
		return
	}
	s.wanted[requester] = append([]string(nil), metrics...)
}

// Unwant forgets requester's metric names. Harmless when there are none.
func (s *Sampler) Unwant(requester string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.wanted, requester)
}

// Wanted returns the union of the wanted metric names, sorted.
func (s *Sampler) Wanted() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wantedLocked()
}

func (s *Sampler) wantedLocked() []string {
	set := map[string]bool{}
	for _, ms := range s.wanted {
		for _, m := range ms {
			set[m] = true
		}
	}
	out := make([]string, 0, len(set))
	for m := range set {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

func (s *Sampler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Sample runs one sampling round: every source is collected concurrently
// and the readings are stored under one timestamp. A failing source does
// not stop the others; the returned error joins their errors.
func (s *Sampler) Sample(ctx context.Context) error {
	s.mu.Lock()
	sources := append([]Source(nil), s.sources...)
	wanted := s.wantedLocked()
	s.mu.Unlock()

	start := s.now()
	results := make([][]Reading, len(sources))
	errs := make([]error, len(sources))
	var wg sync.WaitGroup
	for i, src := range sources {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, s.timeout)
			defer cancel()
			rs, err := src.Collect(cctx, wanted)
			results[i] = rs
			if err != nil {
				errs[i] = fmt.Errorf("telemetry source %s: %w", src.Name(), err)
				s.errs.WithLabelValues(src.Name()).Inc()
			}
		}()
	}
	wg.Wait()
	var all []Reading
	for _, rs := range results {
		all = append(all, rs...)
	}
	s.store.Append(start, all)
	s.samples.Inc()
	s.duration.Observe(s.now().Sub(start).Seconds())
	if s.onSample != nil {
		s.onSample(start)
	}
	return errors.Join(errs...)
}

// Run samples at the current interval until ctx is done, starting at
// once. Interval changes take effect immediately. Sampling errors are
// logged, not returned; Run returns nil when ctx is cancelled.
func (s *Sampler) Run(ctx context.Context) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	last := time.Time{}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.wake:
			// Re-arm for the new interval, counted from the last sample.
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
			timer.Reset(s.untilNext(last))
		case <-timer.C:
			last = s.now()
			if err := s.Sample(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("telemetry sampling failed", "err", err)
			}
			timer.Reset(s.untilNext(last))
		}
	}
}

func (s *Sampler) untilNext(last time.Time) time.Duration {
	if last.IsZero() {
		return 0
	}
	d := s.Interval() - s.now().Sub(last)
	if d < 0 {
		return 0
	}
	return d
}
