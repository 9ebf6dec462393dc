package fetch

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzParseManifest feeds arbitrary artifact manifests (a model version's
// metadata, which whoever registers a model writes) to the parser. It
// must not panic; a manifest it accepts lists artifacts whose names stay
// inside the destination folder, are unique, and survive a round trip
// through JSON.
//
//	go test ./mlconnector/serving/fetch -run '^$' -fuzz FuzzParseManifest -fuzztime 60s
func FuzzParseManifest(f *testing.F) {
	ok := strings.Repeat("ab", 32)
	for _, s := range []string{
		`{"artifacts": [{"name": "sub/dir/model.onnx", "uri": "s3://b/k", "sha256": "` + ok + `"}]}`,
		`{"artifacts": [{"name": "model.json", "uri": "/models/m.json", "sha256": "` + ok + `", "size": 10}, {"name": "b", "uri": "https://h/b", "sha256": "` + ok + `"}]}`,
		`{"artifacts": [{"name": "../etc/passwd", "uri": "/a", "sha256": "` + ok + `"}, {"name": "a\\b", "uri": "ftp://h/a", "sha256": "xyz", "size": -1}]}`,
		`{"artifacts": []}`, `{"artifacts": [`, `{"artifacts": [], "extra": 1}`, `null`, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(data)
		if (m == nil) == (err == nil) {
			t.Fatalf("ParseManifest returned manifest %v and error %v", m != nil, err)
		}
		if err != nil {
			_ = err.Error()
			return
		}
		if len(m.Artifacts) == 0 {
			t.Fatal("accepted a manifest without artifacts")
		}
		seen := map[string]bool{}
		for _, a := range m.Artifacts {
			dest := filepath.Join("/dest", a.Name)
			if !strings.HasPrefix(dest, "/dest/") || filepath.IsAbs(a.Name) {
				t.Fatalf("accepted name %q leaves the destination (%s)", a.Name, dest)
			}
			if seen[a.Name] {
				t.Fatalf("accepted name %q twice", a.Name)
			}
			seen[a.Name] = true
		}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseManifest(b)
		if err != nil {
			t.Fatalf("re-parsing an accepted manifest: %v\n%s", err, b)
		}
		if diff := cmp.Diff(m, again); diff != "" {
			t.Fatalf("round trip (-first +second):\n%s", diff)
		}
	})
}
