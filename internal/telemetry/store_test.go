package telemetry

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestStoreHidesExpiredBeforeTheSweep checks that a series past the
// retention is gone from every read at once, although the sweep that
// frees it runs only every tenth of the retention.
func TestStoreHidesExpiredBeforeTheSweep(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := NewStore(100*time.Second, 0)
	s.Append(t0, []Reading{{Name: "gone", Value: 1}, {Name: "kept", Labels: Labels{"node": "a"}, Value: 1}})
	s.Append(t0.Add(95*time.Second), []Reading{{Name: "kept", Labels: Labels{"node": "a"}, Value: 2}})
	// 6 s after the last sweep: no sweep, but "gone" (t0) and kept's
	// first point are older than the retention.
	s.Append(t0.Add(101*time.Second), []Reading{{Name: "kept", Labels: Labels{"node": "b"}, Value: 3}})
	if len(s.series) != 3 {
		t.Fatalf("%d series held, want 3 (no sweep yet)", len(s.series))
	}
	if _, ok := s.Latest("gone", nil); ok {
		t.Error("Latest found an expired series")
	}
	if got := s.Range("gone", nil, time.Time{}); got != nil {
		t.Errorf("Range of an expired series = %v", got)
	}
	if got := s.Select("gone", nil, time.Time{}); got != nil {
		t.Errorf("Select of an expired series = %v", got)
	}
	if diff := cmp.Diff([]string{"kept"}, s.Names()); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]float64{`kept{node="a"}`: 2, `kept{node="b"}`: 3}, s.Values()); diff != "" {
		t.Errorf("values (-want +got):\n%s", diff)
	}
	// kept{node="a"}'s point at t0 has expired; its point at 95 s has not.
	if diff := cmp.Diff([]Point{{t0.Add(95 * time.Second), 2}}, s.Range("kept", Labels{"node": "a"}, time.Time{})); diff != "" {
		t.Errorf("range (-want +got):\n%s", diff)
	}
	sel := s.Select("kept", nil, time.Time{})
	if len(sel) != 2 || len(sel[0].Points) != 1 || sel[0].Labels["node"] != "a" || sel[1].Labels["node"] != "b" {
		t.Errorf("select = %+v", sel)
	}
	// The next sweep frees them.
	s.Append(t0.Add(106*time.Second), []Reading{{Name: "kept", Labels: Labels{"node": "b"}, Value: 4}})
	if len(s.series) != 2 || len(s.series[`kept{node="a"}`].points) != 1 {
		t.Errorf("after the sweep: %d series, want 2, and one point of node a", len(s.series))
	}
	// A sample a little older than the last (another node's report
	// arriving late) does not sweep; one a whole retention older (a clock
	// set back) does.
	s.Append(t0.Add(105*time.Second), []Reading{{Name: "late", Value: 5}})
	if got := s.swept; !got.Equal(t0.Add(106 * time.Second)) {
		t.Errorf("a late sample swept (last sweep at %v)", got.Sub(t0))
	}
	s.Append(t0.Add(5*time.Second), []Reading{{Name: "kept", Labels: Labels{"node": "0"}, Value: 5}})
	if got := s.swept; !got.Equal(t0.Add(5 * time.Second)) {
		t.Errorf("a clock set back did not sweep (last sweep at %v)", got.Sub(t0))
	}
	if sel := s.Select("kept", nil, time.Time{}); len(sel) != 3 || sel[0].Labels["node"] != "0" {
		t.Errorf("select after an earlier sample = %+v", sel)
	}
}

// TestStoreKeepsSeriesOrdered checks that series added one by one are
// kept in the order reads choose from: fewer labels first, then by key.
func TestStoreKeepsSeriesOrdered(t *testing.T) {
	s := NewStore(time.Minute, 0)
	t0 := time.Unix(1000, 0)
	for _, n := range []string{"3", "1", "2"} {
		s.Append(t0, []Reading{{Name: "m", Labels: Labels{"node": n}, Value: 1}})
	}
	s.Append(t0, []Reading{{Name: "m", Value: 0}})
	var got []string
	for _, se := range s.Select("m", nil, time.Time{}) {
		got = append(got, se.Labels["node"])
	}
	if diff := cmp.Diff([]string{"", "1", "2", "3"}, got); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}

// BenchmarkAppendNodeReports appends, as a cluster agent does, one
// telemetry report per node in turn (30 series each: load, memory and
// per-core CPU, labelled by node), nodes reporting every 5 s of sample
// time, after the store holds every node's series. One op is one report.
func BenchmarkAppendNodeReports(b *testing.B) {
	for _, nodes := range []int{8, 1000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			reports := make([][]Reading, nodes)
			for n := range reports {
				node := "node-" + strconv.Itoa(n)
				r := []Reading{
					{Name: "node_load1", Labels: Labels{"node": node}, Value: 1},
					{Name: "node_memory_MemAvailable_bytes", Labels: Labels{"node": node}, Value: 1 << 30},
				}
				for c := 0; c < 28; c++ {
					r = append(r, Reading{Name: "node_cpu_core_utilisation_ratio", Labels: Labels{"node": node, "cpu": strconv.Itoa(c)}, Value: 0.5})
				}
				reports[n] = r
			}
			s := NewStore(0, 0)
			t0 := time.Unix(1000, 0)
			// Reports arrive a little out of order: every other one
			// 50 ms older than the one before it.
			step := 5 * time.Second / time.Duration(nodes)
			at := func(i int) time.Time { return t0.Add(time.Duration(i)*step - time.Duration(i%2)*50*time.Millisecond) }
			for i := range nodes {
				s.Append(at(i), reports[i])
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				j := nodes + i
				s.Append(at(j), reports[j%nodes])
			}
		})
	}
}
