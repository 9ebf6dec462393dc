package api

import (
	"bytes"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mlsysops-go/mlsysops/internal/httpapi"
)

// Problem is one problem of a request, with its field path.
type Problem = httpapi.FieldProblem

// problems collects the problems of one body.
type problems []Problem

func (p *problems) required(field string) {
	*p = append(*p, Problem{Field: field, Type: httpapi.FieldRequired, Message: "Required value"})
}

func (p *problems) invalid(field string, value any, format string, args ...any) {
	*p = append(*p, Problem{Field: field, Type: httpapi.FieldInvalid,
		Message: fmt.Sprintf("Invalid value: %s: %s", quote(value), fmt.Sprintf(format, args...))})
}

func (p *problems) notSupported(field string, value any, supported ...string) {
	*p = append(*p, Problem{Field: field, Type: httpapi.FieldNotSupported,
		Message: fmt.Sprintf("Unsupported value: %s: supported values: %s", quote(value), strings.Join(supported, ", "))})
}

func (p *problems) duplicate(field string, value any) {
	*p = append(*p, Problem{Field: field, Type: httpapi.FieldDuplicate, Message: fmt.Sprintf("Duplicate value: %s", quote(value))})
}

func (p *problems) tooMany(field string, n, max int) {
	*p = append(*p, Problem{Field: field, Type: httpapi.FieldTooMany, Message: fmt.Sprintf("Too many: %d: must have at most %d items", n, max)})
}

func quote(v any) string {
	if s, ok := v.(string); ok {
		if len(s) > 80 {
			s = s[:77] + "..."
		}
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprint(v)
}

// text checks a free-text field: required or not, at most max bytes.
func (p *problems) text(field, v string, required bool, max int) {
	switch {
	case v == "" && required:
		p.required(field)
	case len(v) > max:
		*p = append(*p, Problem{Field: field, Type: httpapi.FieldTooLong, Message: fmt.Sprintf("Too long: may not be more than %d bytes", max)})
	case strings.TrimSpace(v) == "" && v != "":
		p.invalid(field, v, "must not be blank")
	}
}

var (
	// nameRE is what identifiers (kinds, tags, formats, aliases) look like.
	nameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]{0,62}[A-Za-z0-9])?$`)
	// formatRE is a model format name.
	formatRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9_-]{0,30}[a-z0-9])?$`)
)

// Limits of a model description.
const (
	maxNameLen  = 100
	maxKindLen  = 50
	maxTextLen  = 256
	maxListLen  = 1000
	maxFeatures = 10000
	maxTags     = 100
)

// Validate returns every problem of a model description.
func (m *ModelSpec) Validate() []Problem {
	var p problems
	p.text("modelname", m.ModelName, true, maxNameLen)
	p.text("modelkind", m.ModelKind, true, maxKindLen)
	if m.Format != "" && !formatRE.MatchString(m.Format) {
		p.invalid("format", m.Format, "a format is lower-case letters, digits, - and _ (onnx, lightgbm, xgboost)")
	}
	list := func(field string, n, max int) bool {
		if n > max {
			p.tooMany(field, n, max)
			return false
		}
		return true
	}
	if list("hyperparameter", len(m.Hyperparameter), maxListLen) {
		for i, h := range m.Hyperparameter {
			p.text(fmt.Sprintf("hyperparameter[%d].parameter", i), h.Parameter, true, maxTextLen)
		}
	}
	if list("modelperformance", len(m.ModelPerformance), maxListLen) {
		for i, x := range m.ModelPerformance {
			p.text(fmt.Sprintf("modelperformance[%d].metric", i), x.Metric, true, maxTextLen)
		}
	}
	for _, rl := range []struct {
		field string
		list  []Resource
	}{{"trainingresource", m.TrainingResource}, {"runresource", m.RunResource}} {
		if list(rl.field, len(rl.list), maxListLen) {
			for i, r := range rl.list {
				p.text(fmt.Sprintf("%s[%d].resource_name", rl.field, i), r.ResourceName, true, maxTextLen)
			}
		}
	}
	if list("featurelist", len(m.FeatureList), maxFeatures) {
		seen := map[string]bool{}
		for i, f := range m.FeatureList {
			field := fmt.Sprintf("featurelist[%d]", i)
			p.text(field+".feature_name", f.FeatureName, true, maxTextLen)
			if f.FeatureName != "" {
				if seen[f.FeatureName] {
					p.duplicate(field+".feature_name", f.FeatureName)
				}
				seen[f.FeatureName] = true
			}
			if f.Type != FeatureContinuous && f.Type != FeatureCategorical {
				if f.Type == "" {
					p.required(field + ".type")
				} else {
					p.notSupported(field+".type", f.Type, FeatureContinuous+" (continuous)", FeatureCategorical+" (categorical)")
				}
			}
			if f.Kind != FeatureInput && f.Kind != FeatureTarget {
				p.notSupported(field+".kind", f.Kind, "0 (input)", "1 (target)")
			}
		}
	}
	if list("inference", len(m.Inference), maxListLen) {
		for i, x := range m.Inference {
			p.text(fmt.Sprintf("inference[%d].type", i), x.Type, true, maxTextLen)
		}
	}
	if list("drift_detection", len(m.DriftDetection), 10) {
		for i, d := range m.DriftDetection {
			field := fmt.Sprintf("drift_detection[%d]", i)
			if d.IsTrue != 0 && d.IsTrue != 1 {
				p.notSupported(field+".is_true", d.IsTrue, "0 (off)", "1 (on)")
			}
			if d.Method < DriftMeanShift || d.Method > DriftKS {
				p.notSupported(field+".method", d.Method, "0 (mean shift, Welch's t-test)", "1 (MMD)", "2 (Kolmogorov-Smirnov)")
			}
		}
	}
	if on, _ := m.DriftDetection.Enabled(); on && len(m.Inputs()) == 0 {
		p.invalid("drift_detection", "on", "drift detection compares input features: list them in featurelist with kind 0")
	}
	if list("modeltags", len(m.ModelTags), maxTags) {
		seen := map[string]bool{}
		for i, t := range m.ModelTags {
			field := fmt.Sprintf("modeltags[%d]", i)
			switch {
			case t == "":
				p.required(field)
			case !nameRE.MatchString(t):
				p.invalid(field, t, "a tag is 1 to 64 letters, digits, '.', '_' or '-', starting and ending with a letter or digit")
			case seen[t]:
				p.duplicate(field, t)
			}
			seen[t] = true
		}
	}
	p = append(p, CheckStrings(m, "")...)
	return p
}

// CheckStrings reports every string of v (a struct, walked through its
// JSON fields) that PostgreSQL could not store: with a NUL character or
// not UTF-8. Scalars are checked as JSON text.
func CheckStrings(v any, prefix string) []Problem {
	var p problems
	walkStrings(reflect.ValueOf(v), prefix, &p)
	return p
}

var scalarRT = reflect.TypeOf(Scalar(nil))

func walkStrings(v reflect.Value, path string, p *problems) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			walkStrings(v.Elem(), path, p)
		}
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			child := path
			if !f.Anonymous {
				if name == "" {
					name = f.Name
				}
				child = join(path, name)
			}
			walkStrings(v.Field(i), child, p)
		}
	case reflect.Slice, reflect.Array:
		if v.Type() == scalarRT {
			b := v.Bytes()
			if bytes.Contains(b, []byte(`\u0000`)) || !utf8.Valid(b) {
				p.invalid(path, string(b), "must not contain a NUL character and must be UTF-8")
			}
			return
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return
		}
		for i := 0; i < v.Len(); i++ {
			walkStrings(v.Index(i), fmt.Sprintf("%s[%d]", path, i), p)
		}
	case reflect.Map:
		it := v.MapRange()
		for it.Next() {
			k := fmt.Sprint(it.Key().Interface())
			if !cleanString(k) {
				p.invalid(path, k, "keys must not contain a NUL character and must be UTF-8")
			}
			walkStrings(it.Value(), join(path, k), p)
		}
	case reflect.String:
		if !cleanString(v.String()) {
			p.invalid(path, v.String(), "must not contain a NUL or other control character and must be UTF-8")
		}
	}
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// cleanString reports whether s is UTF-8 without control characters but
// tab and newline.
func cleanString(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) && r != '\t' && r != '\n' && r != '\r' {
			return false
		}
	}
	return true
}
