package auth

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzParse feeds arbitrary token lists (a token file or Secret) to the
// parser. It must not panic; a list it accepts has valid roles and names
// and tokens that authenticate (or digests that decode), and formats back
// to the same entries.
//
//	go test ./internal/auth -run '^$' -fuzz FuzzParse -fuzztime 60s
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"# tokens\n\n" + opTok + ",alice,operator\n  " + viewTok + " , bob , viewer \n",
		HashToken(opTok) + ",alice,operator\n",
		"short,x,viewer\n" + opTok + ",alice,admin\n" + opTok + ",\n",
		"sha256:abc,x,viewer\n", "", ",,\n", "a,b,c,d\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := Parse(data)
		if err != nil {
			_ = err.Error()
			return
		}
		for _, e := range entries {
			if !e.Role.Valid() || e.Name == "" {
				t.Fatalf("accepted entry %+v", e)
			}
			if _, err := e.digest(); err != nil {
				t.Fatalf("accepted entry whose digest does not decode: %v", err)
			}
		}
		again, err := Parse(Format(entries))
		if err != nil {
			t.Fatalf("re-parsing a formatted list: %v", err)
		}
		if diff := cmp.Diff(entries, again); diff != "" && len(entries) > 0 {
			t.Fatalf("round trip (-first +second):\n%s", diff)
		}
	})
}
