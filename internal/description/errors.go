package description

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/mlsysops-go/mlsysops/internal/description/generic"
)

// Problem is one thing wrong with a description file, ready to show to a
// person or to render as JSON (see generic.Problem).
type Problem = generic.Problem

// Error lists every problem found while loading descriptions. It is the
// error LoadDir and LoadFile return; errors.As recovers it, and it
// marshals to JSON as {"problems": [...]} (see generic.Error).
type Error = generic.Error

// ProblemsFrom turns field errors found in file into problems, ordered by
// field path (list indexes in numeric order) so that problems with one
// part of a file are listed together.
func ProblemsFrom(file string, errs field.ErrorList) []Problem {
	return generic.ProblemsFrom(file, errs)
}

// NewError returns an error listing errs, found in file, or nil if errs is
// empty.
func NewError(file string, errs field.ErrorList) error { return generic.NewError(file, errs) }

// ProblemsOf returns the problems err lists: those of an *Error anywhere in
// its chain, else a single problem carrying err's message.
func ProblemsOf(err error) []Problem { return generic.ProblemsOf(err) }
