package fluidity

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

// FuzzReadOverride feeds arbitrary annotation values (anyone who may edit
// a Deployment can set them) to the override reader. It must not panic,
// and an override it accepts encodes back to one that reads the same.
// Crashers found by
//
//	go test ./agents/cluster/fluidity -run '^$' -fuzz FuzzReadOverride -fuzztime 60s
//
// are kept in testdata/fuzz/FuzzReadOverride and replayed by every go test.
func FuzzReadOverride(f *testing.F) {
	for _, s := range []string{
		`{"nodes":["n1","n2"]}`, `{"stopped":true}`,
		`{"spec":{"name":"c","image":"img","replicas":2}}`,
		`{}`, `null`, `[]`, `{"nodes":null,"spec":{"name":""}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		o, err := ReadOverride(map[string]string{mlsysopsv1.AnnotationOverride: v})
		if err != nil || o == nil {
			return
		}
		_ = o.Empty()
		_ = o.Pinned()
		again, err := ReadOverride(map[string]string{mlsysopsv1.AnnotationOverride: o.Encode()})
		if err != nil {
			t.Fatalf("re-reading an encoded override: %v", err)
		}
		if diff := cmp.Diff(o, again); diff != "" {
			t.Fatalf("round trip (-first +second):\n%s", diff)
		}
	})
}

// FuzzParsePlan feeds arbitrary commands, as a policy's plan or a
// message's payload decode them from JSON, to the fluidity plan parser. It
// must not panic; it returns a plan or an error, never both nor neither; a
// plan names its application, and every action is one of the known kinds
// with the hosts that kind needs.
func FuzzParsePlan(f *testing.F) {
	for _, s := range []string{
		`{"name":"app","deployment_plan":{"a":[{"action":"move","src_host":"n1","target_host":"n2"},{"action":"change_spec","host":"n2","new_spec":{"restart_policy":"Always"}}],"b":[{"action":"remove","host":"n3"},{"action":"deploy","host":"n4"}],"initial_plan":false},"plan_uid":"p1"}`,
		`{"name":"app","deployment_plan":{"a":[{"action":"deploy","host":"n1"}],"initial_plan":true}}`,
		`{"name":"app","deployment_plan":{"a":[{"action":"move","src_host":"n1"},{"action":"teleport"},{"host":"n1"},"deploy"],"b":{"action":"deploy"},"c":[{"action":"change_spec","new_spec":"x"},{"action":"remove"}],"initial_plan":"yes"}}`,
		`{"deployment_plan":{}}`, `{"name":"app"}`, `{}`, `null`, `[]`, `{"name":1,"deployment_plan":[]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var cmd map[string]any
		if json.Unmarshal(data, &cmd) != nil {
			return
		}
		p, err := ParsePlan(cmd)
		if (p == nil) == (err == nil) {
			t.Fatalf("ParsePlan returned plan %v and error %v", p != nil, err)
		}
		if err != nil {
			_ = err.Error()
			return
		}
		if p.App == "" {
			t.Fatal("a plan without its application")
		}
		for comp, actions := range p.Components {
			for i, a := range actions {
				ok := false
				switch a.Kind {
				case ActionDeploy, ActionRemove:
					ok = a.Host != ""
				case ActionMove:
					ok = a.SrcHost != "" && a.TargetHost != ""
				case ActionChangeSpec:
					ok = a.NewSpec != nil
				}
				if !ok {
					t.Fatalf("%s[%d]: accepted action %+v", comp, i, a)
				}
				_ = a.String()
			}
		}
	})
}
