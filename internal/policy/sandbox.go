package policy

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strings"

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"
)

// The sandbox bounds what one step of a policy may do. Starlark counts
// execution steps, and the runtime stops a call after MaxSteps or Timeout,
// but one step can still allocate gigabytes ([0] * (1 << 29),
// list(range(1 << 29)), sep.join(big_list)), spin in Go code that no
// cancellation reaches, or recurse until the Go stack overflows, which
// kills the whole agent. So, before a policy is compiled, its syntax tree
// is rewritten:
//
//   - every def and lambda body first calls a check of the call depth;
//   - x * y, x *= y and x % y go through checked versions that refuse a
//     result larger than the memory limit;
//   - calls of the methods that amplify (join, replace, extend, format)
//     go through a checked dispatcher;
//
// and the built-ins that materialise an iterable (list, tuple, sorted,
// ...) are replaced by versions that refuse one larger than the limit.
// What grows step by step (appending in a loop, s = s + s) is bounded by
// the memory governor (memory.go).

// ErrMemoryLimit is wrapped by errors of calls stopped for allocating more
// than the runtime's memory limit.
var ErrMemoryLimit = errors.New("policy exceeded its memory limit")

// ErrDepthLimit is wrapped by errors of calls stopped for nesting calls
// deeper than the runtime's call depth limit (endless recursion).
var ErrDepthLimit = errors.New("policy exceeded its call depth limit")

// sandboxPrefix starts the names of the sandbox's hidden built-ins; a
// policy may not use such names, or it could shadow the checks.
const sandboxPrefix = "__sandbox_"

const (
	enterName  = sandboxPrefix + "enter"
	mulName    = sandboxPrefix + "mul"
	modName    = sandboxPrefix + "mod"
	methodName = sandboxPrefix + "method"
)

// amplifying are the methods whose result may be much larger than their
// receiver and arguments.
var amplifying = map[string]bool{"join": true, "replace": true, "extend": true, "format": true}

// materialising are the universe built-ins that build a value as large as
// their (possibly lazy) argument, or iterate over all of it in one step.
var materialising = []string{"list", "tuple", "sorted", "set", "dict", "enumerate", "zip", "reversed", "any", "all", "max", "min"}

// sandbox holds the limits the checks enforce.
type sandbox struct {
	maxBytes uint64 // the largest value one step may build
	maxDepth int    // the deepest call nesting
}

// elemSize is what one element of a list, tuple or dict costs at least.
const elemSize = 16

// predeclared returns the hidden built-ins and the checked universe
// built-ins.
func (sb sandbox) predeclared() starlark.StringDict {
	d := starlark.StringDict{
		enterName:  starlark.NewBuiltin(enterName, sb.enter),
		mulName:    starlark.NewBuiltin("*", sb.mul),
		modName:    starlark.NewBuiltin("%", sb.mod),
		methodName: starlark.NewBuiltin(methodName, sb.method),
	}
	for _, name := range materialising {
		orig := starlark.Universe[name].(*starlark.Builtin)
		d[name] = starlark.NewBuiltin(name, func(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			for _, a := range args {
				if err := sb.checkLen(name, a); err != nil {
					return nil, err
				}
			}
			return orig.CallInternal(thread, args, kwargs)
		})
	}
	return d
}

func (sb sandbox) tooLarge(what string, size uint64) error {
	return fmt.Errorf("%w: %s would take %d MiB or more, the limit is %d MiB", ErrMemoryLimit, what, size>>20, sb.maxBytes>>20)
}

// checkLen refuses an argument with more elements than the limit allows.
func (sb sandbox) checkLen(fn string, v starlark.Value) error {
	if s, ok := v.(starlark.Sequence); ok {
		if n := uint64(s.Len()); n > sb.maxBytes/elemSize {
			return sb.tooLarge(fmt.Sprintf("%s() of %d elements", fn, n), n*elemSize)
		}
	}
	return nil
}

// enter is called first in every function body.
func (sb sandbox) enter(thread *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	// The depth includes this built-in's own frame.
	if d := thread.CallStackDepth() - 1; d > sb.maxDepth {
		return nil, fmt.Errorf("%w: %s nested %d calls deep, the limit is %d (endless recursion?)", ErrDepthLimit, thread.DebugFrame(1).Callable().Name(), d, sb.maxDepth)
	}
	return starlark.True, nil
}

// sizeOf is a lower bound of a value's size for repetition: bytes of a
// string, element slots of a list or tuple; ok is false for other types.
func sizeOf(v starlark.Value) (uint64, bool) {
	switch v := v.(type) {
	case starlark.String:
		return uint64(len(v)), true
	case starlark.Bytes:
		return uint64(len(v)), true
	case *starlark.List:
		return uint64(v.Len()) * elemSize, true
	case starlark.Tuple:
		return uint64(len(v)) * elemSize, true
	}
	return 0, false
}

// mul is x * y.
func (sb sandbox) mul(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var x, y starlark.Value
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 2, &x, &y); err != nil {
		return nil, err
	}
	seq, n := x, y
	if _, ok := x.(starlark.Int); ok {
		seq, n = y, x
	}
	if size, ok := sizeOf(seq); ok && size > 0 {
		if count, isInt := n.(starlark.Int); isInt {
			c, exact := count.Int64()
			if !exact || (c > 0 && size > sb.maxBytes/uint64(c)) {
				hi, total := bits.Mul64(size, uint64(c))
				if !exact || hi != 0 {
					total = math.MaxUint64
				}
				return nil, sb.tooLarge(fmt.Sprintf("%s * %s", seq.Type(), count), total)
			}
		}
	}
	return starlark.Binary(syntax.STAR, x, y)
}

// mod is x % y; string formatting can repeat large arguments.
func (sb sandbox) mod(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var x, y starlark.Value
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kwargs, 2, &x, &y); err != nil {
		return nil, err
	}
	if format, ok := x.(starlark.String); ok {
		verbs := uint64(strings.Count(string(format), "%"))
		if est := uint64(len(format)) + verbs*sb.estimate(y); est > sb.maxBytes {
			return nil, sb.tooLarge("string formatting", est)
		}
	}
	return starlark.Binary(syntax.PERCENT, x, y)
}

// estimate is an upper-bound guess of the length of a value's text, capped
// a little above the limit so that it stays cheap on huge values.
func (sb sandbox) estimate(v starlark.Value) uint64 {
	var total uint64
	budget := 10_000 // values looked at
	var walk func(v starlark.Value)
	walk = func(v starlark.Value) {
		if total > sb.maxBytes || budget <= 0 {
			total = sb.maxBytes + 1
			return
		}
		budget--
		switch v := v.(type) {
		case starlark.String:
			total += uint64(len(v)) + 2
		case starlark.Bytes:
			total += uint64(len(v))*4 + 3
		case starlark.Indexable: // lists, tuples
			total += 2
			for i := 0; i < v.Len(); i++ {
				walk(v.Index(i))
				total += 2
			}
		case starlark.IterableMapping: // dicts
			total += 2
			for _, kv := range v.Items() {
				walk(kv[0])
				walk(kv[1])
				total += 4
			}
		default:
			total += 32 // numbers, None, booleans, functions
		}
	}
	walk(v)
	return total
}

// method is recv.name(*args, **kwargs) for the amplifying methods.
func (sb sandbox) method(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) < 2 {
		return nil, fmt.Errorf("%s: internal error: %d arguments", b.Name(), len(args))
	}
	recv, rest := args[0], args[2:]
	name := string(args[1].(starlark.String))
	var m starlark.Value
	if ha, ok := recv.(starlark.HasAttrs); ok {
		v, err := ha.Attr(name)
		if err != nil {
			return nil, err
		}
		m = v
	}
	if m == nil {
		return nil, fmt.Errorf("%s has no .%s field or method", recv.Type(), name)
	}
	if s, isStr := recv.(starlark.String); isStr {
		if err := sb.checkStringMethod(string(s), name, rest); err != nil {
			return nil, err
		}
	}
	if _, isList := recv.(*starlark.List); isList && name == "extend" && len(rest) == 1 {
		l := recv.(*starlark.List)
		if s, ok := rest[0].(starlark.Sequence); ok {
			if n := uint64(l.Len()) + uint64(s.Len()); n > sb.maxBytes/elemSize {
				return nil, sb.tooLarge(fmt.Sprintf("extend to %d elements", n), n*elemSize)
			}
		}
	}
	return starlark.Call(thread, m, rest, kwargs)
}

// checkStringMethod bounds the result of s.join, s.replace and s.format.
func (sb sandbox) checkStringMethod(s, name string, args starlark.Tuple) error {
	switch name {
	case "join":
		if len(args) != 1 {
			return nil // the method reports the mistake
		}
		seq, ok := args[0].(starlark.Sequence)
		if !ok {
			return nil
		}
		est := uint64(seq.Len()) * uint64(len(s))
		if ix, ok := seq.(starlark.Indexable); ok {
			est += sb.estimate(ix)
		}
		if est > sb.maxBytes {
			return sb.tooLarge(fmt.Sprintf("join of %d elements", seq.Len()), est)
		}
	case "replace":
		if len(args) < 2 {
			return nil
		}
		old, ok1 := args[0].(starlark.String)
		repl, ok2 := args[1].(starlark.String)
		if !ok1 || !ok2 || len(repl) <= len(old) {
			return nil
		}
		count := uint64(strings.Count(s, string(old)))
		if est := uint64(len(s)) + count*uint64(len(repl)-len(old)); est > sb.maxBytes {
			return sb.tooLarge("replace", est)
		}
	case "format":
		fields := uint64(strings.Count(s, "{"))
		var largest uint64
		for _, a := range args {
			largest = max(largest, sb.estimate(a))
		}
		if est := uint64(len(s)) + fields*largest; est > sb.maxBytes {
			return sb.tooLarge("format", est)
		}
	}
	return nil
}

// rewrite inserts the sandbox's checks into a parsed file. It fails when
// the file uses a reserved name.
func rewrite(f *syntax.File) error {
	// (syntax.Walk does not know while loops: the rewriter looks for
	// reserved names itself.)
	var bad *syntax.Ident
	for _, s := range f.Stmts {
		if l, ok := s.(*syntax.LoadStmt); ok {
			for _, id := range l.To {
				reserved(id, &bad)
			}
		}
	}
	rw := &rewriter{bad: bad}
	f.Stmts = rw.stmts(f.Stmts)
	if rw.bad != nil {
		return syntax.Error{Pos: rw.bad.NamePos, Msg: fmt.Sprintf("%s: names starting with %s are reserved", rw.bad.Name, sandboxPrefix)}
	}
	return nil
}

// reserved records the first identifier with a reserved name.
func reserved(id *syntax.Ident, bad **syntax.Ident) {
	if *bad == nil && strings.HasPrefix(id.Name, sandboxPrefix) {
		*bad = id
	}
}

// rewriter rewrites statements and expressions in place.
type rewriter struct {
	bad *syntax.Ident // the first reserved name the file uses
}

func ident(name string, pos syntax.Position) *syntax.Ident {
	return &syntax.Ident{Name: name, NamePos: pos}
}

func call(name string, pos syntax.Position, args ...syntax.Expr) *syntax.CallExpr {
	return &syntax.CallExpr{Fn: ident(name, pos), Lparen: pos, Args: args, Rparen: pos}
}

func (rw *rewriter) stmts(stmts []syntax.Stmt) []syntax.Stmt {
	for i, s := range stmts {
		stmts[i] = rw.stmt(s)
	}
	return stmts
}

func (rw *rewriter) stmt(s syntax.Stmt) syntax.Stmt {
	switch s := s.(type) {
	case *syntax.AssignStmt:
		s.LHS = rw.expr(s.LHS)
		s.RHS = rw.expr(s.RHS)
		if s.Op == syntax.STAR_EQ || s.Op == syntax.PERCENT_EQ {
			// x op= y becomes x = checked(x, y). For an index or
			// attribute target its operands are evaluated twice, which
			// only matters when they have side effects.
			fn := mulName
			if s.Op == syntax.PERCENT_EQ {
				fn = modName
			}
			return &syntax.AssignStmt{OpPos: s.OpPos, Op: syntax.EQ, LHS: s.LHS, RHS: call(fn, s.OpPos, copyTarget(s.LHS), s.RHS)}
		}
	case *syntax.DefStmt:
		reserved(s.Name, &rw.bad)
		for i, p := range s.Params {
			s.Params[i] = rw.expr(p)
		}
		enter := &syntax.ExprStmt{X: call(enterName, s.Def)}
		s.Body = append([]syntax.Stmt{enter}, rw.stmts(s.Body)...)
	case *syntax.ExprStmt:
		s.X = rw.expr(s.X)
	case *syntax.IfStmt:
		s.Cond = rw.expr(s.Cond)
		s.True = rw.stmts(s.True)
		s.False = rw.stmts(s.False)
	case *syntax.ForStmt:
		s.Vars = rw.expr(s.Vars)
		s.X = rw.expr(s.X)
		s.Body = rw.stmts(s.Body)
	case *syntax.WhileStmt:
		s.Cond = rw.expr(s.Cond)
		s.Body = rw.stmts(s.Body)
	case *syntax.ReturnStmt:
		if s.Result != nil {
			s.Result = rw.expr(s.Result)
		}
	}
	return s
}

// copyTarget returns a fresh copy of an assignment target used as an
// operand: the resolver annotates identifiers, so nodes are not shared.
func copyTarget(e syntax.Expr) syntax.Expr {
	switch e := e.(type) {
	case *syntax.Ident:
		return ident(e.Name, e.NamePos)
	case *syntax.IndexExpr:
		return &syntax.IndexExpr{X: copyTarget(e.X), Lbrack: e.Lbrack, Y: copyTarget(e.Y), Rbrack: e.Rbrack}
	case *syntax.DotExpr:
		return &syntax.DotExpr{X: copyTarget(e.X), Dot: e.Dot, NamePos: e.NamePos, Name: ident(e.Name.Name, e.Name.NamePos)}
	case *syntax.ParenExpr:
		return &syntax.ParenExpr{Lparen: e.Lparen, X: copyTarget(e.X), Rparen: e.Rparen}
	}
	// Other expressions (literals, calls as index keys) are shared:
	// the resolver gives a shared node the same answer twice.
	return e
}

func (rw *rewriter) exprs(es []syntax.Expr) []syntax.Expr {
	for i, e := range es {
		es[i] = rw.expr(e)
	}
	return es
}

func (rw *rewriter) expr(e syntax.Expr) syntax.Expr {
	switch e := e.(type) {
	case nil:
		return nil
	case *syntax.Ident:
		reserved(e, &rw.bad)
	case *syntax.BinaryExpr:
		e.X = rw.expr(e.X)
		e.Y = rw.expr(e.Y)
		switch e.Op {
		case syntax.STAR:
			return call(mulName, e.OpPos, e.X, e.Y)
		case syntax.PERCENT:
			return call(modName, e.OpPos, e.X, e.Y)
		}
	case *syntax.CallExpr:
		e.Fn = rw.expr(e.Fn)
		e.Args = rw.exprs(e.Args)
		if dot, ok := e.Fn.(*syntax.DotExpr); ok && amplifying[dot.Name.Name] {
			name := &syntax.Literal{Token: syntax.STRING, TokenPos: dot.NamePos, Raw: fmt.Sprintf("%q", dot.Name.Name), Value: dot.Name.Name}
			args := append([]syntax.Expr{dot.X, name}, e.Args...)
			return &syntax.CallExpr{Fn: ident(methodName, dot.NamePos), Lparen: e.Lparen, Args: args, Rparen: e.Rparen}
		}
	case *syntax.LambdaExpr:
		e.Params = rw.exprs(e.Params)
		e.Body = &syntax.BinaryExpr{X: call(enterName, e.Lambda), OpPos: e.Lambda, Op: syntax.AND, Y: rw.expr(e.Body)}
	case *syntax.Comprehension:
		e.Body = rw.expr(e.Body)
		for _, c := range e.Clauses {
			switch c := c.(type) {
			case *syntax.ForClause:
				c.Vars = rw.expr(c.Vars)
				c.X = rw.expr(c.X)
			case *syntax.IfClause:
				c.Cond = rw.expr(c.Cond)
			}
		}
	case *syntax.CondExpr:
		e.Cond = rw.expr(e.Cond)
		e.True = rw.expr(e.True)
		e.False = rw.expr(e.False)
	case *syntax.DictEntry:
		e.Key = rw.expr(e.Key)
		e.Value = rw.expr(e.Value)
	case *syntax.DictExpr:
		e.List = rw.exprs(e.List)
	case *syntax.DotExpr:
		e.X = rw.expr(e.X)
	case *syntax.IndexExpr:
		e.X = rw.expr(e.X)
		e.Y = rw.expr(e.Y)
	case *syntax.ListExpr:
		e.List = rw.exprs(e.List)
	case *syntax.ParenExpr:
		e.X = rw.expr(e.X)
	case *syntax.SliceExpr:
		e.X = rw.expr(e.X)
		e.Lo = rw.expr(e.Lo)
		e.Hi = rw.expr(e.Hi)
		e.Step = rw.expr(e.Step)
	case *syntax.TupleExpr:
		e.List = rw.exprs(e.List)
	case *syntax.UnaryExpr:
		e.X = rw.expr(e.X)
	}
	return e
}
