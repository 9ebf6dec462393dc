package vulnreport

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// stream is a govulncheck -format json output in the shape v1.9.0 writes:
// one called finding (two traces of it), one imported only, one required
// only, and one called finding in the standard library.
const stream = `{"config":{"protocol_version":"v1.0.0","scanner_name":"govulncheck","db":"file:///db","go_version":"go1.26.8","scan_level":"symbol"}}
{"progress":{"message":"Scanning your code..."}}
{"osv":{"id":"GO-2025-0001","summary":"Loop in parser"}}
{"osv":{"id":"GO-2025-0002","summary":"Panic in decoder"}}
{"osv":{"id":"GO-2025-0003","summary":"Leak in client"}}
{"osv":{"id":"GO-2025-0004","summary":"Flaw in net/http"}}
{"finding":{"osv":"GO-2025-0001","fixed_version":"v1.2.0","trace":[{"module":"example.com/a","version":"v1.1.0"}]}}
{"finding":{"osv":"GO-2025-0001","fixed_version":"v1.2.0","trace":[{"module":"example.com/a","version":"v1.1.0","package":"example.com/a/p"}]}}
{"finding":{"osv":"GO-2025-0001","fixed_version":"v1.2.0","trace":[{"module":"example.com/a","version":"v1.1.0","package":"example.com/a/p","function":"Parse","position":{"filename":"p/parse.go","line":10}},{"module":"example.com/me","package":"example.com/me/cmd","function":"main","position":{"filename":"cmd/main.go","line":5}}]}}
{"finding":{"osv":"GO-2025-0001","fixed_version":"v1.2.0","trace":[{"module":"example.com/a","version":"v1.1.0","package":"example.com/a/p","function":"Parse"},{"module":"example.com/me","package":"example.com/me/other","function":"Run"}]}}
{"finding":{"osv":"GO-2025-0002","fixed_version":"v0.3.0","trace":[{"module":"example.com/b","version":"v0.2.0","package":"example.com/b/dec"}]}}
{"finding":{"osv":"GO-2025-0003","trace":[{"module":"example.com/c","version":"v2.0.0"}]}}
{"finding":{"osv":"GO-2025-0004","fixed_version":"v1.26.9","trace":[{"module":"stdlib","version":"v1.26.8","package":"net/http","function":"ServeHTTP","receiver":"*Server"},{"module":"example.com/me","package":"example.com/me/srv","function":"Start"}]}}
`

func TestReadClassifiesByClosestLevel(t *testing.T) {
	scan, err := Read(strings.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	if scan.DB != "file:///db" || scan.GoVersion != "go1.26.8" {
		t.Errorf("config: got %q %q", scan.DB, scan.GoVersion)
	}
	want := map[string]Level{"GO-2025-0001": Called, "GO-2025-0004": Called, "GO-2025-0002": Imported, "GO-2025-0003": Required}
	if len(scan.Findings) != len(want) {
		t.Fatalf("got %d findings, want %d: %+v", len(scan.Findings), len(want), scan.Findings)
	}
	for _, f := range scan.Findings {
		if f.Level != want[f.ID] {
			t.Errorf("%s: level %s, want %s", f.ID, f.Level, want[f.ID])
		}
	}
	// Called first, then by id.
	if scan.Findings[0].ID != "GO-2025-0001" || scan.Findings[1].ID != "GO-2025-0004" {
		t.Errorf("order: %s, %s", scan.Findings[0].ID, scan.Findings[1].ID)
	}
	f := scan.Findings[0]
	if f.Summary != "Loop in parser" || f.Module != "example.com/a" || f.Version != "v1.1.0" || f.Fixed != "v1.2.0" {
		t.Errorf("finding: %+v", f)
	}
	// The first trace seen, from the module's code to the vulnerable symbol.
	wantTrace := []string{"example.com/me/cmd.main (cmd/main.go:5)", "example.com/a/p.Parse (p/parse.go:10)"}
	if strings.Join(f.Trace, "|") != strings.Join(wantTrace, "|") {
		t.Errorf("trace: got %q, want %q", f.Trace, wantTrace)
	}
	if got := scan.Findings[1].Trace[1]; got != "net/http.Server.ServeHTTP" {
		t.Errorf("method frame: got %q", got)
	}
}

func TestReadRefusesWhatIsNotGovulncheckJSON(t *testing.T) {
	for name, in := range map[string]string{
		"text output": "No vulnerabilities found.\n",
		"no config":   `{"osv":{"id":"GO-2025-0001"}}`,
		"truncated":   `{"config":{"db":"x"}}{"finding":`,
	} {
		if _, err := Read(strings.NewReader(in)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestJudge(t *testing.T) {
	scan, err := Read(strings.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	accepted := []Acceptance{
		{ID: "GO-2025-0001", Module: "example.com/a", Reason: "not reachable with untrusted input"},
		// The right id under another module does not cover the finding.
		{ID: "GO-2025-0004", Module: "example.com/other", Reason: "wrong module"},
		// Fixed meanwhile: stale.
		{ID: "GO-2024-0099", Module: "example.com/gone", Reason: "was there once"},
		// Accepting an uncalled finding covers nothing either.
		{ID: "GO-2025-0002", Module: "example.com/b", Reason: "imported only"},
	}
	v := Judge(scan, accepted)
	ids := func(fs []Finding) (s []string) {
		for _, f := range fs {
			s = append(s, f.ID)
		}
		return s
	}
	if got := ids(v.Failing); strings.Join(got, ",") != "GO-2025-0004" {
		t.Errorf("failing: %v", got)
	}
	if got := ids(v.Accepted); strings.Join(got, ",") != "GO-2025-0001" {
		t.Errorf("accepted: %v", got)
	}
	var stale []string
	for _, a := range v.Stale {
		stale = append(stale, a.ID)
	}
	if strings.Join(stale, ",") != "GO-2025-0004,GO-2024-0099,GO-2025-0002" {
		t.Errorf("stale: %v", stale)
	}
	if got := ids(v.Uncalled); strings.Join(got, ",") != "GO-2025-0002,GO-2025-0003" {
		t.Errorf("uncalled: %v", got)
	}
	if v.Clean() {
		t.Error("clean with a failing finding and stale acceptances")
	}
	var out bytes.Buffer
	Print(&out, scan, v, accepted)
	for _, want := range []string{
		"FAIL GO-2025-0004 stdlib@v1.26.8 (fixed in v1.26.9): Flaw in net/http",
		"FAIL accepted GO-2024-0099 (example.com/gone) is not found any more",
		"accepted GO-2025-0001 example.com/a@v1.1.0 (fixed in v1.2.0): Loop in parser\n    why: not reachable with untrusted input",
		"1 called and not accepted, 1 called and accepted, 1 in imported packages and 1 in required modules not called",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}

	clean := Judge(scan, []Acceptance{accepted[0], {ID: "GO-2025-0004", Module: "stdlib", Reason: "r"}})
	if !clean.Clean() {
		t.Errorf("not clean with every called finding accepted: %+v", clean)
	}
}

func TestReadAccepted(t *testing.T) {
	list, err := ReadAccepted([]byte("- id: GO-1\n  module: m\n  reason: >-\n    why\n    it is fine\n"))
	if err != nil || len(list) != 1 || list[0].Reason != "why it is fine" {
		t.Fatalf("got %+v, %v", list, err)
	}
	_, err = ReadAccepted([]byte("- id: GO-1\n  module: m\n  reason: ' '\n- module: m2\n  reason: r\n- id: GO-1\n  module: m\n  reason: r\n"))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"[0].reason: required", "[1].id: required", "[2].id: GO-1 listed twice"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if _, err := ReadAccepted([]byte("- id: GO-1\n  module: m\n  reason: r\n  expires: never\n")); err == nil {
		t.Error("an unknown field was accepted")
	}
}

// The project's own list must parse: a broken file would fail make test
// only at the end of a long govulncheck run.
func TestProjectAcceptedFileParses(t *testing.T) {
	data, err := os.ReadFile("../../hack/vulncheck-accepted.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ReadAccepted(data); err != nil {
		t.Fatal(err)
	}
}
