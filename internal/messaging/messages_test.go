package messaging

import (
	"math"
	"strings"
	"testing"
)

func TestValidateMetricMessages(t *testing.T) {
	cases := map[string]struct {
		msg  interface{ Validate() error }
		want []string // substrings of the error; none: valid
	}{
		"targets":    {msg: &ScrapeTargets{Node: "n1", Targets: []ScrapeTarget{{Application: "a", Component: "c", Pod: "p", Address: "10.0.0.1:9090", Path: "/metrics"}}}},
		"no targets": {msg: &ScrapeTargets{Node: "n1"}},
		"bad targets": {msg: &ScrapeTargets{Targets: []ScrapeTarget{
			{Component: "c", Pod: "p", Address: "10.0.0.1"},
			{Application: "a", Component: "c", Pod: "p", Address: "[::1]:9090", Path: "metrics"},
		}}, want: []string{`"node"`, `targets[0]: missing required field "application"`, `targets[0].address "10.0.0.1"`, `targets[1].path "metrics"`}},
		"status": {msg: &ApplicationStatusReport{Application: "a", Cluster: "c1", Phase: "Running",
			Components: map[string]ComponentStatus{"web": {Phase: "Ready", Nodes: []string{"n1"}, Replicas: 2, ReadyReplicas: 2}}}},
		"bad status": {msg: &ApplicationStatusReport{Cluster: "c1", Components: map[string]ComponentStatus{
			"web": {Replicas: -1}, "": {ReadyReplicas: -2}}},
			want: []string{`"application"`, "a component without a name", "components.web: replicas (-1)", "ready_replicas (-2)"}},
		"metrics": {msg: &ApplicationMetrics{Cluster: "c1", Node: "n1", Series: []MetricSeries{{Name: "x", Value: 1}}}},
		"bad metrics": {msg: &ApplicationMetrics{Cluster: "c1", Series: []MetricSeries{{Value: math.NaN()}, {Name: "y", Value: math.Inf(1)}}},
			want: []string{`"node"`, "series[0].name", "series[0].value", "series[1].value"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := tc.msg.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate passed")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
