// Package vulnreport reads govulncheck's JSON output and decides whether
// the module is clean: every vulnerability whose code the module calls
// must be fixed (by upgrading) or accepted, with a reason, in the
// project's list of accepted findings. Vulnerabilities only in imported
// packages or required modules, which the code does not call, are
// reported but do not fail the check, as govulncheck itself counts them.
package vulnreport

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Level is how close a finding comes to the module's code.
type Level int

const (
	// Required: the vulnerable module is in the build list only.
	Required Level = iota
	// Imported: a vulnerable package is imported, its symbols not called.
	Imported
	// Called: the module's code reaches a vulnerable function.
	Called
)

func (l Level) String() string {
	return [...]string{"required", "imported", "called"}[l]
}

// Finding is one vulnerability as found in the module, at the closest
// level govulncheck reported it.
type Finding struct {
	ID      string
	Summary string
	Module  string
	Version string
	Fixed   string
	Level   Level
	// Trace is one example path from the module's code to the vulnerable
	// symbol, outermost call first (called findings only).
	Trace []string
}

// Scan is what one govulncheck run reported.
type Scan struct {
	DB        string
	GoVersion string
	Findings  []Finding
}

// message, frame and the rest mirror the parts of govulncheck's JSON
// stream (golang.org/x/vuln/internal/govulncheck) read here.
type message struct {
	Config *struct {
		DB        string `json:"db"`
		GoVersion string `json:"go_version"`
	} `json:"config"`
	OSV *struct {
		ID      string `json:"id"`
		Summary string `json:"summary"`
	} `json:"osv"`
	Finding *struct {
		OSV          string   `json:"osv"`
		FixedVersion string   `json:"fixed_version"`
		Trace        []*frame `json:"trace"`
	} `json:"finding"`
}

type frame struct {
	Module   string `json:"module"`
	Version  string `json:"version"`
	Package  string `json:"package"`
	Function string `json:"function"`
	Receiver string `json:"receiver"`
	Position *struct {
		Filename string `json:"filename"`
		Line     int    `json:"line"`
	} `json:"position"`
}

func (f *frame) String() string {
	name := f.Package
	if f.Function != "" {
		fn := f.Function
		if f.Receiver != "" {
			fn = strings.TrimPrefix(f.Receiver, "*") + "." + fn
		}
		name += "." + fn
	}
	if f.Position != nil && f.Position.Filename != "" {
		name += fmt.Sprintf(" (%s:%d)", f.Position.Filename, f.Position.Line)
	}
	return name
}

// Read parses a govulncheck -format json stream.
func Read(r io.Reader) (*Scan, error) {
	dec := json.NewDecoder(r)
	scan := &Scan{}
	summaries := map[string]string{}
	byID := map[string]*Finding{}
	sawConfig := false
	for {
		var m message
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("govulncheck output: %w", err)
		}
		switch {
		case m.Config != nil:
			sawConfig = true
			scan.DB, scan.GoVersion = m.Config.DB, m.Config.GoVersion
		case m.OSV != nil:
			summaries[m.OSV.ID] = m.OSV.Summary
		case m.Finding != nil && len(m.Finding.Trace) > 0:
			f := m.Finding
			level := Required
			if f.Trace[0].Function != "" {
				level = Called
			} else if f.Trace[0].Package != "" {
				level = Imported
			}
			cur := byID[f.OSV]
			if cur != nil && cur.Level >= level {
				continue
			}
			nf := &Finding{ID: f.OSV, Module: f.Trace[0].Module, Version: f.Trace[0].Version, Fixed: f.FixedVersion, Level: level}
			if level == Called {
				for i := len(f.Trace) - 1; i >= 0; i-- {
					nf.Trace = append(nf.Trace, f.Trace[i].String())
				}
			}
			byID[f.OSV] = nf
		}
	}
	if !sawConfig {
		return nil, errors.New("govulncheck output: no config message (not a -format json stream?)")
	}
	for id, f := range byID {
		f.Summary = summaries[id]
		scan.Findings = append(scan.Findings, *f)
	}
	sort.Slice(scan.Findings, func(i, j int) bool {
		a, b := scan.Findings[i], scan.Findings[j]
		if a.Level != b.Level {
			return a.Level > b.Level
		}
		return a.ID < b.ID
	})
	return scan, nil
}

// Acceptance is a called vulnerability the project lives with, and why.
type Acceptance struct {
	ID     string `json:"id"`
	Module string `json:"module"`
	// Reason says why the vulnerable code cannot be reached with
	// untrusted input here, or why no upgrade is possible.
	Reason string `json:"reason"`
}

// ReadAccepted parses the accepted-findings file (YAML: a list of id,
// module, reason); every entry needs all three, once.
func ReadAccepted(data []byte) ([]Acceptance, error) {
	var list []Acceptance
	if err := yaml.UnmarshalStrict(data, &list); err != nil {
		return nil, err
	}
	var problems []string
	seen := map[string]bool{}
	for i, a := range list {
		if a.ID == "" {
			problems = append(problems, fmt.Sprintf("[%d].id: required", i))
		}
		if a.Module == "" {
			problems = append(problems, fmt.Sprintf("[%d].module: required", i))
		}
		if strings.TrimSpace(a.Reason) == "" {
			problems = append(problems, fmt.Sprintf("[%d].reason: required", i))
		}
		if seen[a.ID] {
			problems = append(problems, fmt.Sprintf("[%d].id: %s listed twice", i, a.ID))
		}
		seen[a.ID] = true
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	return list, nil
}

// Verdict is the outcome of a scan against the accepted findings.
type Verdict struct {
	// Failing are called vulnerabilities nobody accepted.
	Failing []Finding
	// Accepted are called vulnerabilities with their acceptance.
	Accepted []Finding
	// Stale are acceptances that match no called vulnerability any more
	// (fixed by an upgrade, or no longer reached): they must go, so that
	// the list says only what is true.
	Stale []Acceptance
	// Uncalled are vulnerabilities in imported packages or required
	// modules that the code does not reach.
	Uncalled []Finding
}

// Clean reports whether nothing fails the check.
func (v Verdict) Clean() bool { return len(v.Failing) == 0 && len(v.Stale) == 0 }

// Judge sorts a scan's findings by the accepted list. An acceptance
// covers a finding only when both its id and its module match.
func Judge(scan *Scan, accepted []Acceptance) Verdict {
	var v Verdict
	used := map[string]bool{}
	byID := map[string]Acceptance{}
	for _, a := range accepted {
		byID[a.ID] = a
	}
	for _, f := range scan.Findings {
		if f.Level != Called {
			v.Uncalled = append(v.Uncalled, f)
			continue
		}
		if a, ok := byID[f.ID]; ok && a.Module == f.Module {
			used[a.ID] = true
			v.Accepted = append(v.Accepted, f)
			continue
		}
		v.Failing = append(v.Failing, f)
	}
	for _, a := range accepted {
		if !used[a.ID] {
			v.Stale = append(v.Stale, a)
		}
	}
	return v
}

// Print writes the verdict for a person reading the build's log.
func Print(w io.Writer, scan *Scan, v Verdict, accepted []Acceptance) {
	reason := map[string]string{}
	for _, a := range accepted {
		reason[a.ID] = a.Reason
	}
	fmt.Fprintf(w, "vulncheck: database %s, %s\n", scan.DB, scan.GoVersion)
	for _, f := range v.Failing {
		fmt.Fprintf(w, "FAIL %s %s@%s (fixed in %s): %s\n", f.ID, f.Module, f.Version, orNone(f.Fixed), f.Summary)
		for _, t := range f.Trace {
			fmt.Fprintf(w, "    %s\n", t)
		}
	}
	for _, a := range v.Stale {
		fmt.Fprintf(w, "FAIL accepted %s (%s) is not found any more: remove it from the accepted findings\n", a.ID, a.Module)
	}
	for _, f := range v.Accepted {
		fmt.Fprintf(w, "accepted %s %s@%s (fixed in %s): %s\n    why: %s\n", f.ID, f.Module, f.Version, orNone(f.Fixed), f.Summary, oneLine(reason[f.ID]))
	}
	counts := map[Level]int{}
	for _, f := range v.Uncalled {
		counts[f.Level]++
	}
	fmt.Fprintf(w, "vulncheck: %d called and not accepted, %d called and accepted, %d in imported packages and %d in required modules not called\n",
		len(v.Failing), len(v.Accepted), counts[Imported], counts[Required])
}

func orNone(s string) string {
	if s == "" {
		return "no release"
	}
	return s
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
