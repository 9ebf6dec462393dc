package telemetry

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Labels are the label pairs of a series, e.g. {"cpu": "0"}.
type Labels map[string]string

// Reading is one value of one series at the time of a sample.
type Reading struct {
	// Name is the metric name, e.g. node_load1.
	Name string
	// Labels tell series of the same metric apart; nil for none.
	Labels Labels
	// Value is the reading.
	Value float64
}

// Point is a value at a time.
type Point struct {
	Time  time.Time // when the value was sampled
	Value float64   // the reading
}

// Series is a metric's history under one label set.
type Series struct {
	Name   string  // metric name
	Labels Labels  // label pairs; nil for none
	Points []Point // oldest first
}

// Key renders a series identity the Prometheus way: name{a="x",b="y"},
// labels sorted.
func Key(name string, labels Labels) string {
	if len(labels) == 0 {
		return name
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(strconv.Quote(labels[k]))
	}
	b.WriteByte('}')
	return b.String()
}

// ParseKey reads a series identity Key rendered: name or
// name{a="x",b="y"}.
func ParseKey(key string) (string, Labels, error) {
	name, rest, ok := strings.Cut(key, "{")
	if name == "" {
		return "", nil, fmt.Errorf("series %q: no name", key)
	}
	if !ok {
		return name, nil, nil
	}
	labels := Labels{}
	for {
		if rest == "}" {
			return name, labels, nil
		}
		k, after, found := strings.Cut(rest, "=")
		if !found || k == "" {
			return "", nil, fmt.Errorf("series %q: want label=\"value\"", key)
		}
		q, err := strconv.QuotedPrefix(after)
		if err != nil {
			return "", nil, fmt.Errorf("series %q: label %s: %w", key, k, err)
		}
		v, _ := strconv.Unquote(q)
		labels[k] = v
		rest = after[len(q):]
		switch {
		case strings.HasPrefix(rest, ","):
			rest = rest[1:]
		case rest == "}":
		default:
			return "", nil, fmt.Errorf("series %q: want , or } after label %s", key, k)
		}
	}
}

// Store keeps the recent history of every series. Points older than the
// retention are dropped, as are series not updated within it, and each
// series keeps at most maxPoints points, so memory stays bounded whatever
// the sampling interval. It is safe for concurrent use.
type Store struct {
	mu        sync.RWMutex
	retention time.Duration
	maxPoints int
	series    map[string]*series
	byName    map[string][]*series
	// cutoff is the time before which points have expired, as of the
	// last Append: reads leave them out whether or not a sweep has
	// dropped them yet.
	cutoff time.Time
	// swept is when the last sweep dropped expired points and series.
	swept time.Time
}

type series struct {
	key    string
	name   string
	labels Labels
	points []Point
}

// DefaultRetention is how long a Store keeps points by default: long
// enough for a policy to compare the last few samples.
const DefaultRetention = 5 * time.Minute

// NewStore returns an empty store. A retention of zero means
// DefaultRetention; maxPoints of zero means 600.
func NewStore(retention time.Duration, maxPoints int) *Store {
	if retention <= 0 {
		retention = DefaultRetention
	}
	if maxPoints <= 0 {
		maxPoints = 600
	}
	return &Store{
		retention: retention,
		maxPoints: maxPoints,
		series:    map[string]*series{},
		byName:    map[string][]*series{},
	}
}

// Append records readings taken at t and drops what has expired.
//
// Expired points and series are hidden from reads at once and dropped by
// a sweep over every series at most every sweepEvery of sample time: a
// cluster agent appends each of its nodes' reports, and a sweep on every
// one made telemetry fan-in quadratic (1,000 node agents kept two cluster
// agents at a quarter of a core each, most of it in this sweep).
func (s *Store) Append(t time.Time, readings []Reading) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range readings {
		k := Key(r.Name, r.Labels)
		se, ok := s.series[k]
		if !ok {
			se = &series{key: k, name: r.Name, labels: copyLabels(r.Labels)}
			s.series[k] = se
			list := s.byName[r.Name]
			i := sort.Search(len(list), func(i int) bool { return less(se, list[i]) })
			s.byName[r.Name] = slices.Insert(list, i, se)
		}
		se.points = append(se.points, Point{Time: t, Value: r.Value})
		if n := len(se.points) - s.maxPoints; n > 0 {
			se.points = trim(se.points, n)
		}
	}
	s.cutoff = t.Add(-s.retention)
	// Samples of many nodes arrive a little out of order: only a sample
	// time a whole retention before the last sweep (a clock set back)
	// sweeps before its turn.
	if d := t.Sub(s.swept); d < s.sweepEvery() && d > -s.retention {
		return
	}
	s.swept = t
	for k, se := range s.series {
		i := se.since(s.cutoff)
		if i == len(se.points) {
			s.remove(k, se)
			continue
		}
		if i > 0 {
			se.points = trim(se.points, i)
		}
	}
}

// sweepEvery is how much sample time passes between sweeps: a tenth of
// the retention, so what has expired takes at most that much more memory.
func (s *Store) sweepEvery() time.Duration {
	return s.retention / 10
}

// since returns the index of the first point at or after t.
func (se *series) since(t time.Time) int {
	return sort.Search(len(se.points), func(i int) bool { return !se.points[i].Time.Before(t) })
}

// live reports whether the series has a point that has not expired.
func (s *Store) live(se *series) bool {
	return len(se.points) > 0 && !se.points[len(se.points)-1].Time.Before(s.cutoff)
}

// from is the later of since and the cutoff.
func (s *Store) from(since time.Time) time.Time {
	if since.Before(s.cutoff) {
		return s.cutoff
	}
	return since
}

// trim drops the first n points, copying when most of the backing array
// would otherwise be wasted.
func trim(ps []Point, n int) []Point {
	rest := ps[n:]
	if cap(rest) > 2*len(rest)+16 {
		return append([]Point(nil), rest...)
	}
	return rest
}

func (s *Store) remove(k string, se *series) {
	delete(s.series, k)
	list := s.byName[se.name]
	for i, x := range list {
		if x == se {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(s.byName, se.name)
	} else {
		s.byName[se.name] = list
	}
}

// less orders series of one name: fewer labels first (so that an
// unlabelled total comes before its per-CPU parts), then by key.
func less(a, b *series) bool {
	if len(a.labels) != len(b.labels) {
		return len(a.labels) < len(b.labels)
	}
	return a.key < b.key
}

func matches(l, match Labels) bool {
	for k, v := range match {
		if l[k] != v {
			return false
		}
	}
	return true
}

// pick returns the first series of name whose labels include match.
func (s *Store) pick(name string, match Labels) *series {
	for _, se := range s.byName[name] {
		if s.live(se) && matches(se.labels, match) {
			return se
		}
	}
	return nil
}

// Latest returns the newest point of the series name whose labels include
// match. When several series match, the one with the fewest labels wins,
// then the first by key.
func (s *Store) Latest(name string, match Labels) (Point, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	se := s.pick(name, match)
	if se == nil {
		return Point{}, false
	}
	return se.points[len(se.points)-1], true
}

// Range returns the points since the given time (inclusive) of the series
// Latest would choose, oldest first.
func (s *Store) Range(name string, match Labels, since time.Time) []Point {
	s.mu.RLock()
	defer s.mu.RUnlock()
	se := s.pick(name, match)
	if se == nil {
		return nil
	}
	return append([]Point(nil), se.points[se.since(s.from(since)):]...)
}

// Select returns every series of name whose labels include match, each
// with its points since the given time.
func (s *Store) Select(name string, match Labels, since time.Time) []Series {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []Series
	for _, se := range s.byName[name] {
		if !s.live(se) || !matches(se.labels, match) {
			continue
		}
		points := se.points[se.since(s.from(since)):]
		out = append(out, Series{Name: se.name, Labels: copyLabels(se.labels), Points: append([]Point(nil), points...)})
	}
	return out
}

// Names returns the metric names with at least one series, sorted.
func (s *Store) Names() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]string, 0, len(s.byName))
	for n, list := range s.byName {
		if slices.ContainsFunc(list, s.live) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// Values returns the newest value of every series by its Key.
func (s *Store) Values() map[string]float64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string]float64, len(s.series))
	for k, se := range s.series {
		if s.live(se) {
			out[k] = se.points[len(se.points)-1].Value
		}
	}
	return out
}

func copyLabels(l Labels) Labels {
	if len(l) == 0 {
		return nil
	}
	out := make(Labels, len(l))
	for k, v := range l {
		out[k] = v
	}
	return out
}
