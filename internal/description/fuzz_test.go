package description

import (
	"os"
	"path/filepath"
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/yaml"
)

// FuzzParse feeds arbitrary documents to the loaders. Whatever the input,
// they must not panic; they return either an object or problems, never
// both nor neither; an object they return passes Validate, and survives a
// round trip through YAML unchanged. Crashers found by
//
//	go test ./internal/description -run '^$' -fuzz FuzzParse -fuzztime 5m
//
// are kept in testdata/fuzz/FuzzParse and replayed by every go test.
func FuzzParse(f *testing.F) {
	var seeds []string
	for _, pattern := range []string{
		"testdata/*.input.*",
		"../../descriptions/*/*.yaml",
		"../../examples/apps/*.yaml",
	} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, m...)
	}
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		obj, errs := Parse("fuzz.yaml", data)
		if (obj == nil) == (len(errs) == 0) {
			t.Fatalf("Parse returned object %v with %d problems", obj != nil, len(errs))
		}
		for _, e := range errs {
			_ = e.Error() // rendering must not panic either
		}
		app, appErrs := ParseApp(data, FormatAuto)
		if (app == nil) == (len(appErrs) == 0) {
			t.Fatalf("ParseApp returned application %v with %d problems", app != nil, len(appErrs))
		}
		if obj == nil {
			return
		}
		if verrs := Validate(obj); len(verrs) > 0 {
			t.Fatalf("a parsed %s fails Validate: %v", KindOf(obj), verrs)
		}
		out, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatalf("marshal parsed object: %v", err)
		}
		again, errs := Parse("fuzz.yaml", out)
		if len(errs) > 0 {
			t.Fatalf("re-parsing a parsed object fails: %v\n%s", errs, out)
		}
		if !apiequality.Semantic.DeepEqual(obj, again) {
			t.Fatalf("round trip changed the object:\n%s", out)
		}
	})
}
