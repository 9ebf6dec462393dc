package continuum

import (
	"encoding/json"
	"slices"
	"testing"
)

// FuzzParseClusterCommand feeds arbitrary clusterPlacement commands, as a
// policy's plan decodes them from JSON (the upstream shape among them), to
// the parser. It must not panic; an accepted command names its
// application and at least one cluster, sorted and without repeats or
// empty names.
//
//	go test ./agents/continuum -run '^$' -fuzz FuzzParseClusterCommand -fuzztime 60s
func FuzzParseClusterCommand(f *testing.F) {
	for _, s := range []string{
		`{"action":{"component":"edge-1"},"app":[{"name":"demo"}]}`,
		`{"name":"demo","action":{"a":"c1","b":"c1"}}`,
		`{"app":{"name":"demo"},"action":{"a":["c2","c1"]}}`,
		`{"name":"demo","action":{"a":"c1","b":"c2"}}`,
		`{"name":"demo","action":{"a":""}}`,
		`{"action":{"a":"c1"}}`, `{}`, `null`, `{"app":[],"action":[]}`, `{"app":"demo","action":{"a":[1,null]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var cmd map[string]any
		if json.Unmarshal(data, &cmd) != nil {
			return
		}
		app, clusters, err := ParseClusterCommand(cmd)
		if err != nil {
			_ = err.Error()
			return
		}
		if app == "" || len(clusters) == 0 {
			t.Fatalf("accepted without an application or a cluster: %q %q", app, clusters)
		}
		if !slices.IsSorted(clusters) || len(slices.Compact(slices.Clone(clusters))) != len(clusters) || slices.Contains(clusters, "") {
			t.Fatalf("clusters %q: want sorted, unique, named", clusters)
		}
	})
}
