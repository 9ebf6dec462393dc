package fluidity

import (
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
