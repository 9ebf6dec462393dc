package telemetry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"sort"
	"sync"
	"time"
)

// Labels the TargetScraper puts on the series it reads, naming where they
// come from. A series of the endpoint that has one of these labels keeps
// its value under "exported_<label>", as Prometheus does.
const (
	LabelApp       = "app"
	LabelComponent = "component"
	LabelPod       = "pod"
	// LabelNode is added by the cluster agent to the series its nodes
	// report.
	LabelNode = "node"
)

// Target is the metrics endpoint of one pod of an application component.
type Target struct {
	App       string
	Component string
	Pod       string
	// URL is the endpoint, http://ip:port/metrics.
	URL string
}

// TargetScraper is the Source of the applications' own metrics: it scrapes
// the metrics endpoint of every pod of a component running on the node
// (the targets its cluster names) and returns the wanted metrics labelled
// with app, component and pod. NaN and infinite values are left out: a
// gauge with nothing to average has no value, not a perfect one.
type TargetScraper struct {
	name   string
	client *http.Client
	// parallel bounds the scrapes in flight.
	parallel int

	mu      sync.Mutex
	targets []Target
	latest  []Reading
	at      time.Time
}

var _ Source = (*TargetScraper)(nil)

// NewTargetScraper returns a scraper named name with no targets. A nil
// client means one with a 5s timeout; the Sampler's timeout bounds each
// round too.
func NewTargetScraper(name string, client *http.Client) *TargetScraper {
	if client == nil {
		client = &http.Client{Timeout: 5 * time.Second}
	}
	return &TargetScraper{name: name, client: client, parallel: 8}
}

// Name implements Source.
func (s *TargetScraper) Name() string { return s.name }

// SetTargets replaces the targets; it reports whether they changed.
func (s *TargetScraper) SetTargets(targets []Target) bool {
	list := append([]Target(nil), targets...)
	sort.Slice(list, func(i, j int) bool {
		return list[i].URL < list[j].URL || (list[i].URL == list[j].URL && list[i].Pod < list[j].Pod)
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	if slices.Equal(list, s.targets) {
		return false
	}
	s.targets = list
	return true
}

// Targets returns the current targets.
func (s *TargetScraper) Targets() []Target {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Target(nil), s.targets...)
}

// Latest returns the readings of the last round and when it ran.
func (s *TargetScraper) Latest() ([]Reading, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Reading(nil), s.latest...), s.at
}

// Collect implements Source: every target is scraped for the wanted
// metrics. A failing target does not stop the others; the error joins
// their errors.
func (s *TargetScraper) Collect(ctx context.Context, wanted []string) ([]Reading, error) {
	targets := s.Targets()
	if len(targets) == 0 || len(wanted) == 0 {
		s.keep(nil)
		return nil, nil
	}
	results := make([][]Reading, len(targets))
	errs := make([]error, len(targets))
	sem := make(chan struct{}, s.parallel)
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			fams, err := scrapeFamilies(ctx, s.client, t.URL)
			if err != nil {
				errs[i] = fmt.Errorf("%s/%s pod %s: %w", t.App, t.Component, t.Pod, err)
				return
			}
			for _, r := range selectFamilies(fams, wanted) {
				if math.IsNaN(r.Value) || math.IsInf(r.Value, 0) {
					continue
				}
				r.Labels = withSource(r.Labels, t)
				results[i] = append(results[i], r)
			}
		}()
	}
	wg.Wait()
	var out []Reading
	for _, rs := range results {
		out = append(out, rs...)
	}
	s.keep(out)
	return out, errors.Join(errs...)
}

func (s *TargetScraper) keep(rs []Reading) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latest, s.at = rs, time.Now()
}

// withSource labels a reading with its target, keeping clashing labels of
// the endpoint as exported_<label>.
func withSource(l Labels, t Target) Labels {
	out := make(Labels, len(l)+3)
	for k, v := range l {
		switch k {
		case LabelApp, LabelComponent, LabelPod:
			out["exported_"+k] = v
		default:
			out[k] = v
		}
	}
	out[LabelApp], out[LabelComponent], out[LabelPod] = t.App, t.Component, t.Pod
	return out
}
