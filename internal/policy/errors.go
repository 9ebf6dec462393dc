package policy

import (
	"errors"
	"fmt"
	"strings"

	"go.starlark.net/resolve"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// ErrStepLimit is wrapped by errors of calls stopped after too many
// execution steps (an endless loop, or a policy doing far too much).
var ErrStepLimit = errors.New("policy exceeded its execution step limit")

// ErrTimeout is wrapped by errors of calls stopped by the wall-clock limit.
var ErrTimeout = errors.New("policy exceeded its time limit")

// Error is a policy failure located in the policy's source.
type Error struct {
	// Policy is the policy's name.
	Policy string
	// Phase is what failed: load, initialize, analyze or plan.
	Phase string
	// File, Line and Col locate the failure (the innermost frame in the
	// policy file); Line is 0 when unknown.
	File string
	Line int32 // 1-based; 0 when unknown
	Col  int32 // 1-based; 0 when unknown
	// Msg says what went wrong.
	Msg string
	// Backtrace is the Starlark call stack, when there is one.
	Backtrace string

	cause error
}

// Error renders "file:line:col: phase: message".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
		if e.Col > 0 {
			fmt.Fprintf(&b, ":%d", e.Col)
		}
	}
	b.WriteString(": ")
	if e.Phase != "" {
		b.WriteString(e.Phase)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns ErrStepLimit, ErrTimeout, ErrMemoryLimit, ErrDepthLimit,
// a context error or nil.
func (e *Error) Unwrap() error { return e.cause }

// Location returns "file:line".
func (e *Error) Location() string {
	if e.Line == 0 {
		return e.File
	}
	return fmt.Sprintf("%s:%d", e.File, e.Line)
}

func (e *Error) at(pos syntax.Position) *Error {
	if pos.IsValid() {
		e.Line, e.Col = pos.Line, pos.Col
	}
	return e
}

// compileError turns a syntax or resolve error into an *Error.
func compileError(policy, file string, err error) *Error {
	e := &Error{Policy: policy, Phase: "load", File: file, Msg: err.Error()}
	var se syntax.Error
	var rl resolve.ErrorList
	switch {
	case errors.As(err, &se):
		e.Msg = se.Msg
		e.at(se.Pos)
		// The scanner places an unexpected end of line at the start of
		// the next one; the mistake is on the line that ended.
		if strings.HasPrefix(se.Msg, "got newline") && e.Col == 1 && e.Line > 1 {
			e.Line, e.Col = e.Line-1, 0
		}
	case errors.As(err, &rl) && len(rl) > 0:
		e.Msg = rl[0].Msg
		if len(rl) > 1 {
			e.Msg += fmt.Sprintf(" (and %d more problems)", len(rl)-1)
		}
		e.at(rl[0].Pos)
	}
	return e
}

// evalError turns an error from a Starlark call into an *Error located at
// the innermost frame in the policy file.
func evalError(policy, file, phase string, err error, cause error) *Error {
	e := &Error{Policy: policy, Phase: phase, File: file, Msg: err.Error(), cause: cause}
	var ee *starlark.EvalError
	if errors.As(err, &ee) {
		e.Msg = ee.Msg
		e.Backtrace = ee.Backtrace()
		for i := 0; i < len(ee.CallStack); i++ {
			fr := ee.CallStack.At(i)
			if fr.Pos.Filename() == file {
				e.at(fr.Pos)
				break
			}
		}
	}
	switch {
	case errors.Is(cause, ErrStepLimit):
		e.Msg = "stopped: " + ErrStepLimit.Error() + " (an endless loop?)"
	case errors.Is(cause, ErrTimeout):
		e.Msg = "stopped: " + ErrTimeout.Error()
	case errors.Is(cause, ErrMemoryLimit) && !strings.Contains(e.Msg, ErrMemoryLimit.Error()):
		// Stopped by the governor: the message is the cancellation's.
		e.Msg = "stopped: " + ErrMemoryLimit.Error() + ": " + strings.TrimPrefix(e.Msg, "Starlark computation cancelled: ")
	case errors.Is(cause, ErrMemoryLimit), errors.Is(cause, ErrDepthLimit):
		// Refused by a sandbox check, whose message says what.
		e.Msg = "stopped: " + e.Msg
	}
	return e
}
