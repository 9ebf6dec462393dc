package generic

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// keyAliases maps keys found in real upstream files to the key of this API.
// An alias applies only where the schema knows the canonical key and not
// the alias.
var keyAliases = map[string]string{
	"suported_frameworks": "supported_frameworks", // upstream MLSysOpsNode CRD
	"reduncancy":          "redundancy",           // upstream MLSysOpsApp CRD
	"mobility":            "mobile",               // upstream test descriptions
	"measurement_unit":    "unit",                 // upstream power.max_consumption, battery, renewable
}

// valueAliases maps enum values found in real upstream files to the value
// of this API. An alias applies only where the enum lacks the value and
// has its replacement.
var valueAliases = map[string]string{
	"lower_or_qqual": "lower_or_equal", // upstream power target relation enum
	"render":         "rende",          // upstream datacenter city enum
	"always":         "Always",         // older upstream restart_policy values
	"on_failure":     "OnFailure",
	"never":          "Never",
}

// reported marks a value whose problem was already reported by a
// normalisation step; the walker drops it silently.
type reported struct{}

// walker checks generic JSON values (as decoded by
// k8s.io/apimachinery/pkg/util/json) against a CRD's OpenAPI schema the way
// the apiserver would, collecting every problem instead of stopping at the
// first, and returns the values normalised: tolerated spellings fixed,
// numeric strings turned into numbers, defaults applied and undecodable
// values removed so that the rest can still be decoded and checked.
type walker struct {
	errs field.ErrorList
}

// walk checks v against s. It returns the normalised value and whether it
// can be decoded into the Go type; a value with a type error cannot.
func (w *walker) walk(p *field.Path, v interface{}, s *Schema) (interface{}, bool) {
	if _, ok := v.(reported); ok {
		return nil, false
	}
	if s.XIntOrString {
		return w.intOrString(p, v, s)
	}
	switch s.Type {
	case "object":
		return w.object(p, v, s)
	case "array":
		return w.array(p, v, s)
	case "string":
		return w.str(p, v, s)
	case "integer":
		return w.integer(p, v, s)
	case "number":
		return w.number(p, v, s)
	case "boolean":
		if _, ok := v.(bool); !ok {
			w.typeError(p, v, "true or false")
			return nil, false
		}
		return v, true
	default:
		return v, true
	}
}

func (w *walker) object(p *field.Path, v interface{}, s *Schema) (interface{}, bool) {
	m, ok := v.(map[string]interface{})
	if !ok {
		w.typeError(p, v, "an object")
		return nil, false
	}
	if len(s.Properties) == 0 && s.AdditionalProperties == nil {
		// A free-form object, such as metadata in a CRD schema.
		return m, true
	}
	out := make(map[string]interface{}, len(m))
	present := make(map[string]bool, len(m))
	for _, key := range sortedKeys(m) {
		val := m[key]
		name := key
		if _, known := s.Properties[key]; !known {
			if canonical, isAlias := keyAliases[key]; isAlias {
				if _, knowsCanonical := s.Properties[canonical]; knowsCanonical {
					if _, both := m[canonical]; both {
						w.errs = append(w.errs, field.Invalid(p.Child(key), field.OmitValueType{},
							fmt.Sprintf("is the upstream spelling of %s, which is set too; keep %s only", canonical, canonical)))
						continue
					}
					name = canonical
				}
			}
		}
		prop, known := s.Properties[name]
		if !known && s.AdditionalProperties != nil {
			prop, known = s.AdditionalProperties, true
		}
		if !known {
			if s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields {
				out[key] = val
				continue
			}
			w.errs = append(w.errs, unknownField(p.Child(key), key, s.Properties))
			continue
		}
		if val == nil && !prop.Nullable {
			// The apiserver drops nulls of non-nullable fields: the field
			// is unset. YAML writes such a null as "key:" with no value.
			continue
		}
		present[name] = true
		if nv, ok := w.walk(p.Child(name), val, prop); ok {
			out[name] = nv
		}
	}
	for _, name := range sortedKeys(s.Properties) {
		prop := s.Properties[name]
		if present[name] || prop.Default == nil {
			continue
		}
		var d interface{}
		if err := json.Unmarshal(prop.Default, &d); err == nil {
			out[name] = d
			present[name] = true
		}
	}
	for _, name := range s.Required {
		if !present[name] {
			w.errs = append(w.errs, field.Required(p.Child(name), ""))
		}
	}
	return out, true
}

func (w *walker) array(p *field.Path, v interface{}, s *Schema) (interface{}, bool) {
	a, ok := v.([]interface{})
	if !ok {
		w.typeError(p, v, "a list")
		return nil, false
	}
	if s.MinItems != nil && int64(len(a)) < *s.MinItems {
		if *s.MinItems == 1 {
			w.errs = append(w.errs, field.Required(p, "must have at least one item"))
		} else {
			w.errs = append(w.errs, field.Invalid(p, field.OmitValueType{}, fmt.Sprintf("must have at least %d items, has %d", *s.MinItems, len(a))))
		}
	}
	if s.MaxItems != nil && int64(len(a)) > *s.MaxItems {
		w.errs = append(w.errs, field.TooMany(p, len(a), int(*s.MaxItems)))
	}
	if s.Items == nil {
		return a, true
	}
	items := s.Items
	out := make([]interface{}, len(a))
	for i, item := range a {
		if item == nil {
			if !items.Nullable {
				w.errs = append(w.errs, field.Required(p.Index(i), "a list item must not be null"))
			}
			out[i] = zeroValue(items)
			continue
		}
		nv, ok := w.walk(p.Index(i), item, items)
		if !ok {
			// Keep the index so later paths still point at the right item.
			nv = zeroValue(items)
		}
		out[i] = nv
	}
	if s.XListType != nil && *s.XListType == "set" {
		seen := make(map[string]bool, len(out))
		for i, item := range a {
			if item == nil {
				continue
			}
			key := fmt.Sprint(out[i])
			if seen[key] {
				w.errs = append(w.errs, field.Duplicate(p.Index(i), out[i]))
			}
			seen[key] = true
		}
	}
	return out, true
}

func (w *walker) str(p *field.Path, v interface{}, s *Schema) (interface{}, bool) {
	var str string
	switch x := v.(type) {
	case string:
		str = x
	case bool:
		// YAML 1.1 reads an unquoted on/off as a boolean; where the enum
		// wants "on" and "off" that is what the author meant.
		enum := enumStrings(s)
		if contains(enum, "on") && contains(enum, "off") {
			str = map[bool]string{true: "on", false: "off"}[x]
			break
		}
		w.typeError(p, v, "a string")
		return nil, false
	default:
		w.typeError(p, v, "a string")
		return nil, false
	}
	if enum := enumStrings(s); len(enum) > 0 {
		if !contains(enum, str) {
			if alias, ok := valueAliases[str]; ok && contains(enum, alias) {
				str = alias
			} else {
				w.errs = append(w.errs, field.NotSupported(p, str, enum))
			}
		}
	}
	w.stringBounds(p, str, s)
	return str, true
}

func (w *walker) stringBounds(p *field.Path, str string, s *Schema) {
	if s.MinLength != nil && int64(len(str)) < *s.MinLength {
		if str == "" {
			w.errs = append(w.errs, field.Required(p, "must not be empty"))
		} else {
			w.errs = append(w.errs, field.Invalid(p, str, fmt.Sprintf("must be at least %d characters long", *s.MinLength)))
		}
	}
	if s.MaxLength != nil && int64(len(str)) > *s.MaxLength {
		w.errs = append(w.errs, field.TooLong(p, str, int(*s.MaxLength)))
	}
}

func (w *walker) intOrString(p *field.Path, v interface{}, s *Schema) (interface{}, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case float64:
		// The schema allows integers and strings only; a fraction such as
		// cpu: 0.5 is written as the string "0.5", which means the same.
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x), true
		}
		v = strconv.FormatFloat(x, 'f', -1, 64)
	case string:
	default:
		w.typeError(p, v, "a number or a string")
		return nil, false
	}
	str := v.(string)
	if s.Pattern != "" {
		re, err := compilePattern(s.Pattern)
		if err == nil && !re.MatchString(str) {
			w.errs = append(w.errs, field.Invalid(p, str, "must be a quantity such as 500m, 2, 512Mi or 4Gi"))
			return nil, false
		}
	}
	w.stringBounds(p, str, s)
	return str, true
}

func (w *walker) integer(p *field.Path, v interface{}, s *Schema) (interface{}, bool) {
	var n int64
	switch x := v.(type) {
	case int64:
		n = x
	case float64:
		if x != math.Trunc(x) || math.Abs(x) >= 1<<63 {
			w.typeError(p, v, "a whole number")
			return nil, false
		}
		n = int64(x)
	case string:
		// Upstream files write some numbers as strings (memory: "4").
		parsed, ok := parseNumericString(x)
		if !ok || parsed != math.Trunc(parsed) || math.Abs(parsed) >= 1<<63 {
			w.typeError(p, v, "a whole number")
			return nil, false
		}
		n = int64(parsed)
	default:
		w.typeError(p, v, "a whole number")
		return nil, false
	}
	if s.Format == "int32" && (n > math.MaxInt32 || n < math.MinInt32) {
		w.errs = append(w.errs, field.Invalid(p, n, "is too large"))
		return nil, false
	}
	w.numberBounds(p, float64(n), n, s)
	return n, true
}

func (w *walker) number(p *field.Path, v interface{}, s *Schema) (interface{}, bool) {
	var f float64
	switch x := v.(type) {
	case int64:
		w.numberBounds(p, float64(x), x, s)
		return x, true
	case float64:
		f = x
	case string:
		parsed, ok := parseNumericString(x)
		if !ok {
			w.typeError(p, v, "a number")
			return nil, false
		}
		f = parsed
	default:
		w.typeError(p, v, "a number")
		return nil, false
	}
	w.numberBounds(p, f, f, s)
	return f, true
}

func (w *walker) numberBounds(p *field.Path, f float64, shown interface{}, s *Schema) {
	if s.Minimum != nil {
		if s.ExclusiveMinimum && f <= *s.Minimum {
			w.errs = append(w.errs, field.Invalid(p, shown, "must be greater than "+formatNumber(*s.Minimum)))
		} else if f < *s.Minimum {
			w.errs = append(w.errs, field.Invalid(p, shown, "must be greater than or equal to "+formatNumber(*s.Minimum)))
		}
	}
	if s.Maximum != nil {
		if s.ExclusiveMaximum && f >= *s.Maximum {
			w.errs = append(w.errs, field.Invalid(p, shown, "must be less than "+formatNumber(*s.Maximum)))
		} else if f > *s.Maximum {
			w.errs = append(w.errs, field.Invalid(p, shown, "must be less than or equal to "+formatNumber(*s.Maximum)))
		}
	}
}

func (w *walker) typeError(p *field.Path, v interface{}, want string) {
	w.errs = append(w.errs, field.TypeInvalid(p, ShownValue(v), fmt.Sprintf("must be %s, not %s", want, ValueKind(v))))
}

// unknownField reports a key the schema does not know, suggesting the
// nearest known key.
func unknownField(p *field.Path, key string, known map[string]*Schema) *field.Error {
	names := sortedKeys(known)
	detail := "unknown field"
	if best := closest(key, names); best != "" {
		detail += fmt.Sprintf("; did you mean %q?", best)
	} else if len(names) > 0 {
		detail += "; known fields here: " + strings.Join(names, ", ")
	}
	return &field.Error{Type: field.ErrorTypeNotSupported, Field: p.String(), BadValue: field.OmitValueType{}, Detail: detail}
}

// closest returns the name nearest to key by edit distance, if it is close
// enough to be a likely typo.
func closest(key string, names []string) string {
	best, bestDist := "", 3
	for _, n := range names {
		if d := editDistance(strings.ToLower(key), n); d < bestDist {
			best, bestDist = n, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return math.MaxInt32
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func zeroValue(s *Schema) interface{} {
	if s.XIntOrString {
		return "0"
	}
	switch s.Type {
	case "object":
		return map[string]interface{}{}
	case "array":
		return []interface{}{}
	case "string":
		return ""
	case "integer":
		return int64(0)
	case "number":
		return float64(0)
	case "boolean":
		return false
	default:
		return nil
	}
}

func enumStrings(s *Schema) []string {
	if len(s.Enum) == 0 {
		return nil
	}
	out := make([]string, 0, len(s.Enum))
	for _, e := range s.Enum {
		var v interface{}
		if err := json.Unmarshal(e, &v); err != nil {
			continue
		}
		out = append(out, fmt.Sprint(v))
	}
	return out
}

var (
	patternsMu sync.Mutex
	patterns   = map[string]*regexp.Regexp{}
)

func compilePattern(p string) (*regexp.Regexp, error) {
	patternsMu.Lock()
	defer patternsMu.Unlock()
	if re, ok := patterns[p]; ok {
		return re, nil
	}
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, err
	}
	patterns[p] = re
	return re, nil
}

// parseNumericString parses a number written as a string, as upstream
// files do for memory, disk and GPU memory.
func parseNumericString(s string) (float64, bool) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

func formatNumber(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// ValueKind names the kind of a generic value for messages: "an object",
// "a list", "a numeric string", "an integer"...
func ValueKind(v interface{}) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case map[string]interface{}:
		return "an object"
	case []interface{}:
		return "a list"
	case string:
		if _, ok := parseNumericString(x); ok {
			return "a numeric string"
		}
		return "a string"
	case bool:
		return "a boolean"
	case int64:
		return "an integer"
	case float64:
		if x == math.Trunc(x) {
			return "an integer"
		}
		return "a number with a fraction"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// ShownValue is what an error prints as the offending value: scalars as
// they are, objects and lists by their kind only.
func ShownValue(v interface{}) interface{} {
	switch x := v.(type) {
	case map[string]interface{}:
		return field.OmitValueType{}
	case []interface{}:
		return field.OmitValueType{}
	case string:
		if len(x) > 80 {
			return x[:77] + "..."
		}
		return x
	default:
		return v
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
