package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"sort"
	"strconv"
	"time"

	"go.starlark.net/starlark"
)

// pathElem is where a value sits in the data being converted, built
// lazily: it is only rendered for an error message.
type pathElem struct {
	parent *pathElem
	key    string
	index  int // used when key is ""
	root   string
}

func root(name string) *pathElem { return &pathElem{root: name} }

func (p *pathElem) field(k string) *pathElem { return &pathElem{parent: p, key: k} }
func (p *pathElem) elem(i int) *pathElem     { return &pathElem{parent: p, index: i} }

func (p *pathElem) String() string {
	if p.parent == nil {
		return p.root
	}
	if p.key != "" {
		return p.parent.String() + "." + p.key
	}
	return fmt.Sprintf("%s[%d]", p.parent.String(), p.index)
}

// maxDepth bounds the nesting of converted values; deeper means a value
// that contains itself.
const maxDepth = 64

// ToStarlark converts Go data to fresh, mutable Starlark values: maps with
// string keys become dicts (keys sorted, so iteration is deterministic),
// slices become lists, and numbers, strings and booleans their Starlark
// counterparts. Structs are converted through their JSON form, so API
// types can be passed as they are. Times become seconds since the epoch
// and durations seconds.
func ToStarlark(v any) (starlark.Value, error) {
	return toStarlark(v, root("value"), 0)
}

func toStarlark(v any, path *pathElem, depth int) (starlark.Value, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("%s: nested more than %d levels deep", path, maxDepth)
	}
	switch x := v.(type) {
	case nil:
		return starlark.None, nil
	case starlark.Value:
		return x, nil
	case bool:
		return starlark.Bool(x), nil
	case string:
		return starlark.String(x), nil
	case int:
		return starlark.MakeInt(x), nil
	case int64:
		return starlark.MakeInt64(x), nil
	case int32:
		return starlark.MakeInt64(int64(x)), nil
	case uint64:
		return starlark.MakeUint64(x), nil
	case uint32:
		return starlark.MakeUint64(uint64(x)), nil
	case uint:
		return starlark.MakeUint64(uint64(x)), nil
	case float64:
		return starlark.Float(x), nil
	case float32:
		return starlark.Float(x), nil
	case json.Number:
		if i, err := strconv.ParseInt(x.String(), 10, 64); err == nil {
			return starlark.MakeInt64(i), nil
		}
		f, err := x.Float64()
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not a number", path, x.String())
		}
		return starlark.Float(f), nil
	case time.Time:
		return starlark.Float(float64(x.UnixNano()) / 1e9), nil
	case time.Duration:
		return starlark.Float(x.Seconds()), nil
	case map[string]any:
		d := starlark.NewDict(len(x))
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			sv, err := toStarlark(x[k], path.field(k), depth+1)
			if err != nil {
				return nil, err
			}
			_ = d.SetKey(starlark.String(k), sv)
		}
		return d, nil
	case []any:
		elems := make([]starlark.Value, len(x))
		for i, e := range x {
			sv, err := toStarlark(e, path.elem(i), depth+1)
			if err != nil {
				return nil, err
			}
			elems[i] = sv
		}
		return starlark.NewList(elems), nil
	case []string:
		elems := make([]starlark.Value, len(x))
		for i, e := range x {
			elems[i] = starlark.String(e)
		}
		return starlark.NewList(elems), nil
	}
	return reflectToStarlark(v, path, depth)
}

func reflectToStarlark(v any, path *pathElem, depth int) (starlark.Value, error) {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			return nil, fmt.Errorf("%s: map keys are %s; only string keys can be converted", path, rv.Type().Key())
		}
		keys := rv.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		d := starlark.NewDict(len(keys))
		for _, k := range keys {
			sv, err := toStarlark(rv.MapIndex(k).Interface(), path.field(k.String()), depth+1)
			if err != nil {
				return nil, err
			}
			_ = d.SetKey(starlark.String(k.String()), sv)
		}
		return d, nil
	case reflect.Slice, reflect.Array:
		if rv.Kind() == reflect.Slice && rv.IsNil() {
			return starlark.NewList(nil), nil
		}
		elems := make([]starlark.Value, rv.Len())
		for i := range elems {
			sv, err := toStarlark(rv.Index(i).Interface(), path.elem(i), depth+1)
			if err != nil {
				return nil, err
			}
			elems[i] = sv
		}
		return starlark.NewList(elems), nil
	case reflect.Pointer:
		if rv.IsNil() {
			return starlark.None, nil
		}
		return toStarlark(rv.Elem().Interface(), path, depth)
	case reflect.Struct:
		data, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %T cannot be converted: %w", path, v, err)
		}
		var plain any
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(&plain); err != nil {
			return nil, fmt.Errorf("%s: %T cannot be converted: %w", path, v, err)
		}
		return toStarlark(plain, path, depth)
	case reflect.String:
		return starlark.String(rv.String()), nil
	case reflect.Bool:
		return starlark.Bool(rv.Bool()), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return starlark.MakeInt64(rv.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return starlark.MakeUint64(rv.Uint()), nil
	case reflect.Float32, reflect.Float64:
		return starlark.Float(rv.Float()), nil
	}
	return nil, fmt.Errorf("%s: a %T is not data; pass maps, lists, strings, numbers and booleans", path, v)
}

// FromStarlark converts a Starlark value to Go data: dicts become
// map[string]any (keys must be strings), lists and tuples []any, ints
// int64 (or float64 beyond int64), floats float64. Functions and other
// non-data values are errors naming where they were found.
func FromStarlark(v starlark.Value) (any, error) {
	return fromStarlark(v, root("value"), 0)
}

func fromStarlark(v starlark.Value, path *pathElem, depth int) (any, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("%s: nested more than %d levels deep (does a value contain itself?)", path, maxDepth)
	}
	switch x := v.(type) {
	case starlark.NoneType:
		return nil, nil
	case starlark.Bool:
		return bool(x), nil
	case starlark.String:
		return string(x), nil
	case starlark.Bytes:
		return string(x), nil
	case starlark.Int:
		if i, ok := x.Int64(); ok {
			return i, nil
		}
		f, _ := new(big.Float).SetInt(x.BigInt()).Float64()
		return f, nil
	case starlark.Float:
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%s: %v is not a finite number", path, f)
		}
		return f, nil
	case *starlark.Dict:
		out := make(map[string]any, x.Len())
		for _, item := range x.Items() {
			k, ok := item[0].(starlark.String)
			if !ok {
				return nil, fmt.Errorf("%s: key %s is a %s; keys must be strings", path, item[0].String(), item[0].Type())
			}
			gv, err := fromStarlark(item[1], path.field(string(k)), depth+1)
			if err != nil {
				return nil, err
			}
			out[string(k)] = gv
		}
		return out, nil
	case *starlark.List:
		out := make([]any, x.Len())
		for i := range out {
			gv, err := fromStarlark(x.Index(i), path.elem(i), depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = gv
		}
		return out, nil
	case starlark.Tuple:
		out := make([]any, len(x))
		for i, e := range x {
			gv, err := fromStarlark(e, path.elem(i), depth+1)
			if err != nil {
				return nil, err
			}
			out[i] = gv
		}
		return out, nil
	case *starlark.Set:
		out := make([]any, 0, x.Len())
		it := x.Iterate()
		defer it.Done()
		var e starlark.Value
		for i := 0; it.Next(&e); i++ {
			gv, err := fromStarlark(e, path.elem(i), depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, gv)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s: a %s is not data; use dicts, lists, strings, numbers, booleans and None", path, v.Type())
}

func sortStrings(s []string) { sort.Strings(s) }
