package policy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"go.starlark.net/lib/json"
	"go.starlark.net/lib/math"
	"go.starlark.net/resolve"
	"go.starlark.net/starlark"
)

func init() {
	// Policies are ported from Python: allow while loops, recursion,
	// top-level control flow and sets. Endless loops are caught by the
	// step and time limits of every call.
	resolve.AllowRecursion = true
	resolve.AllowGlobalReassign = true
	resolve.AllowSet = true
}

// Limits bound every policy call.
type Limits struct {
	// MaxSteps is the number of Starlark execution steps one call may
	// take. Default 5,000,000 (about a second of pure computation).
	MaxSteps uint64
	// Timeout is the wall-clock time one call may take. Default 2s.
	Timeout time.Duration
	// MaxMemory is how much one call may allocate and keep, in bytes:
	// no single step may build a larger value, and the call is stopped
	// when the process's live heap grows by more while it runs. Default
	// 256 MiB.
	MaxMemory uint64
	// MaxDepth is how deeply calls may nest (recursion). Default 200;
	// an endless recursion would otherwise overflow the Go stack and
	// kill the agent.
	MaxDepth int
}

// Runtime is the environment policies run in.
type Runtime struct {
	// Limits bound each call.
	Limits Limits
	// Logger receives log() and print() output and load errors. Default
	// slog.Default().
	Logger *slog.Logger
	// Now is the clock behind now() and telemetry.query. Default
	// time.Now.
	Now func() time.Time
}

func (rt Runtime) withDefaults() Runtime {
	if rt.Limits.MaxSteps == 0 {
		rt.Limits.MaxSteps = 5_000_000
	}
	if rt.Limits.Timeout <= 0 {
		rt.Limits.Timeout = 2 * time.Second
	}
	if rt.Limits.MaxMemory == 0 {
		rt.Limits.MaxMemory = 256 << 20
	}
	if rt.Limits.MaxDepth <= 0 {
		rt.Limits.MaxDepth = 200
	}
	if rt.Logger == nil {
		rt.Logger = slog.Default()
	}
	if rt.Now == nil {
		rt.Now = time.Now
	}
	return rt
}

// threadLogger is the thread-local key of the policy's logger.
const threadLogger = "mlsysops.logger"

// predeclared returns the names every policy sees besides the Starlark
// built-ins.
func (rt Runtime) predeclared() starlark.StringDict {
	d := sandbox{maxBytes: rt.Limits.MaxMemory, maxDepth: rt.Limits.MaxDepth}.predeclared()
	for name, v := range (starlark.StringDict{
		"json":           json.Module,
		"math":           math.Module,
		"now":            starlark.NewBuiltin("now", rt.now),
		"log":            starlark.NewBuiltin("log", logBuiltin),
		"parse_duration": starlark.NewBuiltin("parse_duration", parseDurationBuiltin),
		"metric":         starlark.NewBuiltin("metric", metricBuiltin),
	}) {
		d[name] = v
	}
	return d
}

func (rt Runtime) now(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackArgs(b.Name(), args, kwargs); err != nil {
		return nil, err
	}
	return starlark.Float(float64(rt.Now().UnixNano()) / 1e9), nil
}

func loggerOf(thread *starlark.Thread) *slog.Logger {
	if l, ok := thread.Local(threadLogger).(*slog.Logger); ok {
		return l
	}
	return slog.Default()
}

// logBuiltin is log(*args, level="info", **fields).
func logBuiltin(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	level := slog.LevelInfo
	var attrs []any
	for _, kv := range kwargs {
		key := string(kv[0].(starlark.String))
		if key == "level" {
			s, ok := kv[1].(starlark.String)
			if !ok {
				return nil, fmt.Errorf("log: level: want \"debug\", \"info\", \"warn\" or \"error\", got %s", kv[1].String())
			}
			switch strings.ToLower(string(s)) {
			case "debug":
				level = slog.LevelDebug
			case "info":
				level = slog.LevelInfo
			case "warn", "warning":
				level = slog.LevelWarn
			case "error":
				level = slog.LevelError
			default:
				return nil, fmt.Errorf("log: level: want \"debug\", \"info\", \"warn\" or \"error\", got %q", s)
			}
			continue
		}
		v, err := FromStarlark(kv[1])
		if err != nil {
			v = kv[1].String()
		}
		attrs = append(attrs, key, v)
	}
	parts := make([]string, len(args))
	for i, a := range args {
		if s, ok := a.(starlark.String); ok {
			parts[i] = string(s)
		} else {
			parts[i] = a.String()
		}
	}
	if fr := thread.CallFrame(1); fr.Pos.IsValid() {
		attrs = append(attrs, "line", fr.Pos.Line)
	}
	loggerOf(thread).Log(context.Background(), level, strings.Join(parts, " "), attrs...)
	return starlark.None, nil
}

// parseDurationBuiltin is parse_duration("5m") -> 300.0.
func parseDurationBuiltin(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var v starlark.Value
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 1, &v); err != nil {
		return nil, err
	}
	d, err := parseDuration(v)
	if err != nil {
		return nil, fmt.Errorf("parse_duration: %v", err)
	}
	return starlark.Float(d.Seconds()), nil
}

// metricBuiltin is metric(telemetry, name, default=None, **labels).
func metricBuiltin(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) < 2 {
		return nil, fmt.Errorf("metric: want metric(telemetry, name, default=None, **labels)")
	}
	tv, ok := args[0].(*telemetryValue)
	if !ok {
		return nil, fmt.Errorf("metric: first argument is a %s, want the telemetry argument", args[0].Type())
	}
	name, ok := args[1].(starlark.String)
	if !ok {
		return nil, fmt.Errorf("metric: name: want a string, got %s", args[1].Type())
	}
	var def starlark.Value = starlark.None
	if len(args) > 2 {
		def = args[2]
	}
	if len(args) > 3 {
		return nil, fmt.Errorf("metric: too many positional arguments; pass labels as keywords")
	}
	var labels map[string]string
	for _, kv := range kwargs {
		k := string(kv[0].(starlark.String))
		if k == "default" {
			def = kv[1]
			continue
		}
		s, ok := kv[1].(starlark.String)
		if !ok {
			return nil, fmt.Errorf("metric: label %s: want a string, got %s", k, kv[1].Type())
		}
		if labels == nil {
			labels = map[string]string{}
		}
		labels[k] = string(s)
	}
	if p, ok := tv.lookup(string(name), labels); ok {
		return starlark.Float(p.Value), nil
	}
	return def, nil
}

// call runs fn under the runtime's limits. The returned error is an
// *Error located in file.
func (rt Runtime) call(ctx context.Context, policy, file, phase string, log *slog.Logger, fn starlark.Callable, args starlark.Tuple) (starlark.Value, error) {
	thread := &starlark.Thread{
		Name:  policy + "." + phase,
		Print: func(_ *starlark.Thread, msg string) { log.Info(msg) },
		Load: func(*starlark.Thread, string) (starlark.StringDict, error) {
			return nil, errors.New("load() is not available in policies; put everything in the policy file")
		},
	}
	thread.SetLocal(threadLogger, log)
	return rt.run(ctx, thread, policy, file, phase, func() (starlark.Value, error) {
		return starlark.Call(thread, fn, args, nil)
	})
}

// run executes f on thread with the step and time limits.
func (rt Runtime) run(ctx context.Context, thread *starlark.Thread, policy, file, phase string, f func() (starlark.Value, error)) (starlark.Value, error) {
	max := rt.Limits.MaxSteps
	thread.SetMaxExecutionSteps(max)
	thread.OnMaxSteps = func(th *starlark.Thread) {
		// Some instructions (loop jumps) carry the position of the
		// function itself; step a little further so that the error points
		// at a line in the loop.
		if th.ExecutionSteps() < max+16 {
			fr := th.DebugFrame(0)
			if fn, ok := fr.Callable().(*starlark.Function); ok && fr.Position() == fn.Position() {
				return
			}
		}
		th.Cancel("too many steps")
	}
	var timedOut, cancelled atomic.Bool
	timer := time.AfterFunc(rt.Limits.Timeout, func() {
		timedOut.Store(true)
		thread.Cancel(fmt.Sprintf("%s exceeded %s", phase, rt.Limits.Timeout))
	})
	stop := context.AfterFunc(ctx, func() {
		cancelled.Store(true)
		thread.Cancel("the agent is stopping")
	})
	governed := governor.watch(thread, rt.Limits.MaxMemory)
	v, err := f()
	memoryHit := governed()
	timer.Stop()
	stop()
	if err == nil {
		return v, nil
	}
	var cause error
	switch {
	case memoryHit || errors.Is(err, ErrMemoryLimit):
		cause = ErrMemoryLimit
	case errors.Is(err, ErrDepthLimit):
		cause = ErrDepthLimit
	case timedOut.Load():
		cause = ErrTimeout
	case cancelled.Load():
		cause = ctx.Err()
	case thread.ExecutionSteps() >= max:
		cause = ErrStepLimit
	}
	return nil, evalError(policy, file, phase, err, cause)
}
