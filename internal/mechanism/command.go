package mechanism

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Helpers to read command values that come from Starlark through JSON-like
// Go values (int64, float64, string, []any, map[string]any).

func getString(cmd map[string]any, key string) (string, bool, error) {
	v, ok := cmd[key]
	if !ok || v == nil {
		return "", false, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", true, fmt.Errorf("%s: want a string, got %v (%T)", key, v, v)
	}
	return s, true, nil
}

// toFloat reads a number.
func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case int32:
		return float64(x), true
	case uint64:
		return float64(x), true
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}

// parseSelection reads which CPUs or GPUs a command is for: "all" (also
// when absent), a number, "0,2", "0-3", "cpu1", or a list of those.
// all is true for "all".
func parseSelection(v any, key string) (all bool, idx []int, err error) {
	if v == nil {
		return true, nil, nil
	}
	add := func(s string) error {
		s = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(s), key))
		if s == "" {
			return nil
		}
		if lo, hi, ok := strings.Cut(s, "-"); ok {
			a, err1 := strconv.Atoi(strings.TrimSpace(lo))
			b, err2 := strconv.Atoi(strings.TrimSpace(hi))
			if err1 != nil || err2 != nil || a < 0 || b < a || b-a > 4096 {
				return fmt.Errorf("%s: %q is not a range such as 0-3", key, s)
			}
			for i := a; i <= b; i++ {
				idx = append(idx, i)
			}
			return nil
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return fmt.Errorf("%s: %q is not \"all\", a number, a list such as \"0,1\" or a range such as \"0-3\"", key, s)
		}
		idx = append(idx, n)
		return nil
	}
	var visit func(v any) error
	visit = func(v any) error {
		switch x := v.(type) {
		case string:
			if strings.EqualFold(strings.TrimSpace(x), "all") {
				all = true
				return nil
			}
			for _, part := range strings.Split(x, ",") {
				if err := add(part); err != nil {
					return err
				}
			}
			return nil
		case []any:
			for _, e := range x {
				if err := visit(e); err != nil {
					return err
				}
			}
			return nil
		default:
			f, ok := toFloat(v)
			if !ok || f < 0 || f != math.Trunc(f) {
				return fmt.Errorf("%s: want \"all\", a number or a list, got %v (%T)", key, v, v)
			}
			idx = append(idx, int(f))
			return nil
		}
	}
	if err := visit(v); err != nil {
		return false, nil, err
	}
	if all {
		return true, nil, nil
	}
	if len(idx) == 0 {
		return false, nil, fmt.Errorf("%s: selects nothing", key)
	}
	sort.Ints(idx)
	out := idx[:1]
	for _, i := range idx[1:] {
		if i != out[len(out)-1] {
			out = append(out, i)
		}
	}
	return false, out, nil
}

// parseQuantity reads a number with an optional unit. units maps lower-case
// unit suffixes to the factor into the result's unit; a bare number is in
// the result's unit. Words such as "min" and "max" are returned as word.
func parseQuantity(v any, key string, units map[string]float64, words ...string) (value float64, word string, err error) {
	if s, ok := v.(string); ok {
		t := strings.ToLower(strings.TrimSpace(s))
		for _, w := range words {
			if t == w {
				return 0, w, nil
			}
		}
		// Longest unit first so that "khz" is not read as "hz".
		suffixes := make([]string, 0, len(units))
		for u := range units {
			suffixes = append(suffixes, u)
		}
		sort.Slice(suffixes, func(i, j int) bool { return len(suffixes[i]) > len(suffixes[j]) })
		factor := 1.0
		for _, u := range suffixes {
			if strings.HasSuffix(t, u) {
				factor = units[u]
				t = strings.TrimSpace(strings.TrimSuffix(t, u))
				break
			}
		}
		f, perr := strconv.ParseFloat(t, 64)
		if perr != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
			return 0, "", fmt.Errorf("%s: %q is not a quantity%s", key, s, wordsHint(words))
		}
		return f * factor, "", nil
	}
	f, ok := toFloat(v)
	if !ok || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, "", fmt.Errorf("%s: want a non-negative number or a string with a unit%s, got %v (%T)", key, wordsHint(words), v, v)
	}
	return f, "", nil
}

func wordsHint(words []string) string {
	if len(words) == 0 {
		return ""
	}
	return " or " + strings.Join(words, " or ")
}
