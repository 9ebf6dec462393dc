package generic

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Problem is one thing wrong with a description file, ready to show to a
// person or to render as JSON.
type Problem struct {
	// File is the file the problem is in; empty for data that did not come
	// from a file (e.g. a request body).
	File string `json:"file,omitempty"`
	// Field is the path of the offending field, e.g.
	// MLSysOpsNode.hardware.gpu.memory or spec.components[0].metadata.name;
	// empty when the problem concerns the whole document.
	Field string `json:"field,omitempty"`
	// Type is the machine-readable kind of problem, one of the
	// k8s.io/apimachinery field.ErrorType values (FieldValueRequired,
	// FieldValueInvalid, FieldValueNotSupported, ...).
	Type string `json:"type"`
	// Message says what is wrong, including the offending value.
	Message string `json:"message"`
}

// String renders the problem as "file: field: message".
func (p Problem) String() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(p.File)
		b.WriteString(": ")
	}
	if p.Field != "" {
		b.WriteString(p.Field)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// ProblemsFrom turns field errors found in file into problems, ordered by
// field path (list indexes in numeric order) so that problems with one
// part of a file are listed together.
func ProblemsFrom(file string, errs field.ErrorList) []Problem {
	sorted := append(field.ErrorList(nil), errs...)
	sort.SliceStable(sorted, func(i, j int) bool { return PathLess(sorted[i].Field, sorted[j].Field) })
	out := make([]Problem, 0, len(sorted))
	for _, e := range sorted {
		msg := e.ErrorBody()
		if e.Field == "" && e.Detail != "" {
			// A problem with the whole document reads as a sentence about
			// the file: "app.yaml: is not valid YAML: ...".
			msg = e.Detail
		}
		out = append(out, Problem{File: file, Field: e.Field, Type: string(e.Type), Message: msg})
	}
	return out
}

// PathLess orders field paths, comparing runs of digits as numbers so
// that components[2] comes before components[10].
func PathLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := digitPrefix(a), digitPrefix(b)
		if da > 0 && db > 0 {
			na, _ := strconv.Atoi(a[:da])
			nb, _ := strconv.Atoi(b[:db])
			if na != nb {
				return na < nb
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func digitPrefix(s string) int {
	n := 0
	for n < len(s) && n < 9 && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

// Error lists every problem found while loading descriptions. It is the
// error LoadOwn, and package description's LoadDir and LoadFile, return;
// errors.As recovers it, and it marshals to JSON as {"problems": [...]}.
type Error struct {
	// Problems lists every problem, ordered by file and field path.
	Problems []Problem `json:"problems"`
}

// NewError returns an error listing errs, found in file, or nil if errs is
// empty.
func NewError(file string, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return &Error{Problems: ProblemsFrom(file, errs)}
}

// Error renders one problem per line.
func (e *Error) Error() string {
	lines := make([]string, 0, len(e.Problems)+1)
	if len(e.Problems) != 1 {
		lines = append(lines, fmt.Sprintf("%d problems:", len(e.Problems)))
	}
	for _, p := range e.Problems {
		lines = append(lines, p.String())
	}
	return strings.Join(lines, "\n")
}

// ProblemsOf returns the problems err lists: those of an *Error anywhere in
// its chain, else a single problem carrying err's message.
func ProblemsOf(err error) []Problem {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Problems
	}
	return []Problem{{Type: string(field.ErrorTypeInternal), Message: err.Error()}}
}

// DocumentError reports a problem with a whole document (no field path).
func DocumentError(detail string) *field.Error {
	return &field.Error{Type: field.ErrorTypeInvalid, BadValue: field.OmitValueType{}, Detail: detail}
}
