package handlers

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/northbound/api"
)

func TestCompare(t *testing.T) {
	cases := []struct {
		v        float64
		relation string
		target   float64
		want     bool
	}{
		{5, "lower_or_equal", 5, true}, {6, "lower_or_equal", 5, false},
		{5, "greater_or_equal", 5, true}, {4, "greater_or_equal", 5, false},
		{4, "lower_than", 5, true}, {5, "lower_than", 5, false},
		{6, "greater_than", 5, true}, {5, "greater_than", 5, false},
		{0.1 + 0.2, "equal", 0.3, true}, {0.31, "equal", 0.3, false},
		{1, "", 1, false},
	}
	for _, c := range cases {
		if got := compare(c.v, c.relation, c.target); got != c.want {
			t.Errorf("compare(%v, %s, %v) = %v", c.v, c.relation, c.target, got)
		}
	}
}

func TestLookupMetric(t *testing.T) {
	m := map[string]float64{
		"latency":                               1,
		`fps{app="other",component="detector"}`: 2,
		`fps{app="cam",component="detector"}`:   3,
		`errors{component="aggregator"}`:        4,
		`bytes{service_name="x"}`:               5,
	}
	cases := map[string]struct {
		metric, app, comp string
		want              float64
		found             bool
	}{
		"plain name":                {"latency", "cam", "detector", 1, true},
		"series of this app":        {"fps", "cam", "detector", 3, true},
		"series of another comp":    {"errors", "cam", "detector", 0, false},
		"series without app labels": {"bytes", "cam", "detector", 5, true},
		"missing":                   {"nope", "cam", "detector", 0, false},
	}
	for name, tc := range cases {
		got, ok := lookupMetric(m, tc.metric, tc.app, tc.comp)
		if ok != tc.found || got != tc.want {
			t.Errorf("%s: got %v %v, want %v %v", name, got, ok, tc.want, tc.found)
		}
	}
}

func TestSatisfaction(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	b := func(v bool) *bool { return &v }
	metrics := []api.MetricValue{
		{Metric: "a", Satisfied: b(true)}, {Metric: "b", Satisfied: b(false)}, {Metric: "c"},
	}
	byID := map[string]*api.MetricValue{"a": &metrics[0], "b": &metrics[1], "c": &metrics[2]}
	cases := map[string]struct {
		gs   mlsysopsv1.GlobalSatisfaction
		want api.Satisfaction
	}{
		"weighted": {
			gs: mlsysopsv1.GlobalSatisfaction{Threshold: f(0.7), Relation: "greater_or_equal",
				AchievementWeights: []mlsysopsv1.AchievementWeight{{MetricID: "a", Weight: 0.75}, {MetricID: "b", Weight: 0.25}}},
			want: api.Satisfaction{Threshold: f(0.7), Relation: "greater_or_equal", Value: f(0.75), Satisfied: b(true)},
		},
		"a weighted metric has no value": {
			gs:   mlsysopsv1.GlobalSatisfaction{Threshold: f(0.5), Relation: "greater_than", AchievementWeights: []mlsysopsv1.AchievementWeight{{MetricID: "c", Weight: 1}}},
			want: api.Satisfaction{Threshold: f(0.5), Relation: "greater_than"},
		},
		"unknown metric id": {
			gs:   mlsysopsv1.GlobalSatisfaction{AchievementWeights: []mlsysopsv1.AchievementWeight{{MetricID: "zzz", Weight: 1}}},
			want: api.Satisfaction{},
		},
	}
	for name, tc := range cases {
		got := satisfaction(&tc.gs, metrics, byID)
		if diff := cmp.Diff(&tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
}
