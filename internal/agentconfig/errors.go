package agentconfig

import (
	"fmt"
	"sort"
	"strings"
)

// Problem is one thing wrong with the configuration.
type Problem struct {
	// Key is the path of the offending key, e.g. monitoring_interval or
	// behaviours.Subscribe.enabled; for environment variables and flags it
	// names the variable (env MLSYSOPS_MONITORING_INTERVAL) or the flag.
	Key string
	// Message says what is wrong, including the offending value.
	Message string
}

// String renders the problem as "key: message".
func (p Problem) String() string {
	if p.Key == "" {
		return p.Message
	}
	return p.Key + ": " + p.Message
}

// Error lists every problem found in a configuration. It is returned by
// Validate, ParseFile and Load.
type Error struct {
	// Source is the file or "options" the problems were found in.
	Source string
	// Problems are sorted by key.
	Problems []Problem
}

// Error renders all problems, one per line after a summary line.
func (e *Error) Error() string {
	var b strings.Builder
	if e.Source != "" {
		fmt.Fprintf(&b, "%s: ", e.Source)
	}
	if len(e.Problems) == 1 {
		b.WriteString(e.Problems[0].String())
		return b.String()
	}
	fmt.Fprintf(&b, "%d problems:", len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.String())
	}
	return b.String()
}

func newError(source string, problems []Problem) error {
	if len(problems) == 0 {
		return nil
	}
	sorted := append([]Problem(nil), problems...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Key < sorted[j].Key })
	return &Error{Source: source, Problems: sorted}
}

// Warning is a configuration key that was accepted but ignored, or a value
// that was adjusted. Warnings are not fatal; the agent logs them.
type Warning struct {
	// Source is the file, "env" or "flags".
	Source string
	// Key is the path of the key concerned.
	Key string
	// Message explains what happened.
	Message string
}

// String renders the warning as "source: key: message".
func (w Warning) String() string {
	var parts []string
	if w.Source != "" {
		parts = append(parts, w.Source)
	}
	if w.Key != "" {
		parts = append(parts, w.Key)
	}
	parts = append(parts, w.Message)
	return strings.Join(parts, ": ")
}
