package policy

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.starlark.net/starlark"
)

type gpuSpec struct {
	Model  string `json:"model"`
	Memory int    `json:"memory,omitempty"`
}

func TestConvertRoundTrip(t *testing.T) {
	cases := map[string]struct {
		in   any
		want any
	}{
		"nil":                   {in: nil, want: nil},
		"scalars":               {in: []any{true, "s", 3, int64(-4), uint64(5), 1.5, float32(0.5)}, want: []any{true, "s", int64(3), int64(-4), int64(5), 1.5, 0.5}},
		"json numbers":          {in: []any{json.Number("7"), json.Number("2.25")}, want: []any{int64(7), 2.25}},
		"nested maps and lists": {in: map[string]any{"b": []any{map[string]any{"c": nil}}, "a": map[string]string{"x": "y"}}, want: map[string]any{"a": map[string]any{"x": "y"}, "b": []any{map[string]any{"c": nil}}}},
		"typed slices":          {in: []string{"a", "b"}, want: []any{"a", "b"}},
		"typed maps":            {in: map[string]int{"n": 1}, want: map[string]any{"n": int64(1)}},
		"structs through json":  {in: &gpuSpec{Model: "k80", Memory: 2}, want: map[string]any{"model": "k80", "memory": int64(2)}},
		"nil pointer":           {in: (*gpuSpec)(nil), want: nil},
		"time and duration":     {in: []any{time.Unix(10, 500_000_000), 90 * time.Second}, want: []any{10.5, 90.0}},
		"big unsigned":          {in: uint64(math.MaxUint64), want: float64(math.MaxUint64)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sv, err := ToStarlark(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			got, err := FromStarlark(sv)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConvertErrors(t *testing.T) {
	selfList := starlark.NewList(nil)
	_ = selfList.Append(selfList)
	intKeys := starlark.NewDict(1)
	_ = intKeys.SetKey(starlark.MakeInt(1), starlark.String("a"))

	toCases := map[string]struct {
		in   any
		want string
	}{
		"channel":       {in: map[string]any{"c": make(chan int)}, want: "value.c: a chan int is not data; pass maps, lists, strings, numbers and booleans"},
		"int-keyed map": {in: map[int]string{1: "a"}, want: "value: map keys are int; only string keys can be converted"},
		"bad number":    {in: []any{json.Number("x")}, want: `value[0]: "x" is not a number`},
	}
	for name, tc := range toCases {
		t.Run("to "+name, func(t *testing.T) {
			_, err := ToStarlark(tc.in)
			if err == nil || err.Error() != tc.want {
				t.Errorf("error = %v, want %q", err, tc.want)
			}
		})
	}
	fromCases := map[string]struct {
		in   starlark.Value
		want string
	}{
		"function":       {in: starlark.NewBuiltin("f", nil), want: "value: a builtin_function_or_method is not data; use dicts, lists, strings, numbers, booleans and None"},
		"int keys":       {in: intKeys, want: "value: key 1 is a int; keys must be strings"},
		"self reference": {in: selfList, want: "value[0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0]: nested more than 64 levels deep (does a value contain itself?)"},
		"infinity":       {in: starlark.Float(math.Inf(1)), want: "value: +Inf is not a finite number"},
	}
	for name, tc := range fromCases {
		t.Run("from "+name, func(t *testing.T) {
			_, err := FromStarlark(tc.in)
			if err == nil || err.Error() != tc.want {
				t.Errorf("error = %v, want %q", err, tc.want)
			}
		})
	}
}

// Dict keys are sorted, so that policies iterating a description see the
// same order on every call.
func TestConvertSortsKeys(t *testing.T) {
	v, err := ToStarlark(map[string]any{"c": 1, "a": 2, "b": 3})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, k := range v.(*starlark.Dict).Keys() {
		keys = append(keys, string(k.(starlark.String)))
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, keys); diff != "" {
		t.Error(diff)
	}
}

func TestNameFromFile(t *testing.T) {
	cases := map[string]struct {
		file string
		want string
		ok   bool
	}{
		"simple":              {file: "policy-relocate.star", want: "relocate", ok: true},
		"hyphens are kept":    {file: "/etc/mlsysops/policies/policy-cpu-freq.star", want: "cpu-freq", ok: true},
		"upstream python":     {file: "policy-relocate.py"},
		"no prefix":           {file: "relocate.star"},
		"empty name":          {file: "policy-.star"},
		"configmap internals": {file: "..data"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := NameFromFile(tc.file)
			if got != tc.want || ok != tc.ok {
				t.Errorf("NameFromFile(%q) = %q, %v", tc.file, got, ok)
			}
		})
	}
}
