package oip

import (
	"fmt"
	"strings"
)

// Problem is one thing wrong with a request, at a field path such as
// inputs[0].shape.
type Problem struct {
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// Problems is every problem of one request; a non-empty Problems is the
// error a handler answers with a 4xx.
type Problems []Problem

func (p *Problems) add(field, format string, args ...any) {
	*p = append(*p, Problem{Field: field, Message: fmt.Sprintf(format, args...)})
}

// Error joins the problems, each prefixed with its field.
func (p Problems) Error() string {
	s := make([]string, len(p))
	for i, q := range p {
		if q.Field == "" {
			s[i] = q.Message
		} else {
			s[i] = q.Field + ": " + q.Message
		}
	}
	return strings.Join(s, "; ")
}

// Err is p as an error, nil when p is empty.
func (p Problems) Err() error {
	if len(p) == 0 {
		return nil
	}
	return p
}
