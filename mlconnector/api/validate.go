package api

import (
	"bytes"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mlsysops-go/mlsysops/internal/httpapi"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
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
			if !CleanString(k) {
				p.invalid(path, k, "keys must not contain a NUL character and must be UTF-8")
			}
			walkStrings(it.Value(), join(path, k), p)
		}
	case reflect.String:
		if !CleanString(v.String()) {
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

// CleanString reports whether s is UTF-8 without control characters but
// tab and newline.
func CleanString(s string) bool {
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

// ValidAlias reports whether s can name an alias: an identifier that is
// neither a number nor "latest".
func ValidAlias(s string) bool {
	if !nameRE.MatchString(s) || s == "latest" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return true
		}
	}
	return false
}

// Layers are the continuum layers a placement may name.
var Layers = []string{"cloud", "edge_infrastructure", "edge", "far_edge"}

var (
	// imageRE is a container image reference: registry/path:tag@digest.
	imageRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9._:/-]*[a-z0-9])?(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$`)
	uuidRE  = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
)

// MaxDeploymentIDLen bounds deployment ids: they name the application and
// its namespace (mls-<id>) in the member clusters.
const MaxDeploymentIDLen = 50

// ValidModelID reports whether s can be a model id (a UUID).
func ValidModelID(s string) bool { return uuidRE.MatchString(s) }

// Validate returns every problem of a deployment request, and normalises
// it (default replicas, lower-case layer, "*" as empty).
func (d *DeploymentSpec) Validate() []Problem {
	var p problems
	if d.DeploymentID != "" {
		if len(d.DeploymentID) > MaxDeploymentIDLen || len(validation.IsDNS1123Label(d.DeploymentID)) > 0 {
			p.invalid("deployment_id", d.DeploymentID, "a deployment id is a DNS label of at most %d characters: lower-case letters, digits and '-'; leave it empty to have one made", MaxDeploymentIDLen)
		}
	}
	switch {
	case d.ModelID == "":
		p.required("modelid")
	case !ValidModelID(d.ModelID):
		p.invalid("modelid", d.ModelID, "not a model id (a UUID from POST /v1/models)")
	}
	p.text("ownerid", d.OwnerID, true, 128)
	if d.Version != "" && d.Version != "latest" {
		if n, err := strconv.Atoi(string(d.Version)); err == nil {
			if n < 1 {
				p.invalid("version", string(d.Version), "versions start at 1")
			}
		} else if !ValidAlias(string(d.Version)) {
			p.invalid("version", string(d.Version), "a version number, an alias or latest")
		}
	}
	d.Placement.ClusterID = star(d.Placement.ClusterID)
	d.Placement.Node = star(d.Placement.Node)
	d.Placement.Continuum = strings.ToLower(star(d.Placement.Continuum))
	if c := d.Placement.ClusterID; c != "" && len(validation.IsDNS1123Subdomain(c)) > 0 {
		p.invalid("placement.clusterID", c, "a cluster name (a DNS subdomain), or * for any")
	}
	if n := d.Placement.Node; n != "" && len(validation.IsDNS1123Subdomain(n)) > 0 {
		p.invalid("placement.node", n, "a node (host) name, or * for any")
	}
	if l := d.Placement.Continuum; l != "" && !slices.Contains(Layers, l) {
		p.notSupported("placement.continuum", l, append(append([]string(nil), Layers...), "*")...)
	}
	switch {
	case d.Replicas == 0:
		d.Replicas = 1
	case d.Replicas < 0 || d.Replicas > 100:
		p.invalid("replicas", d.Replicas, "from 1 to 100")
	}
	if c := d.Resources.CPU; c != "" {
		q, err := resource.ParseQuantity(c)
		if err != nil || q.Sign() <= 0 || q.Cmp(resource.MustParse("1000")) > 0 {
			p.invalid("resources.cpu", c, "a positive CPU quantity such as 500m or 2, at most 1000")
		}
	}
	if m := d.Resources.Memory; m != "" {
		q, err := resource.ParseQuantity(m)
		if err != nil || q.Cmp(resource.MustParse("1Mi")) < 0 || q.Cmp(resource.MustParse("16Ti")) > 0 {
			p.invalid("resources.memory", m, "a memory quantity such as 512Mi or 4Gi, from 1Mi to 16Ti")
		}
	}
	if g := d.Resources.GPU; g != nil {
		if g.Count < 0 || g.Count > 16 {
			p.invalid("resources.gpu.count", g.Count, "from 0 to 16")
		}
		if g.Model != "" && (len(g.Model) > 63 || len(validation.IsValidLabelValue(g.Model)) > 0) {
			p.invalid("resources.gpu.model", g.Model, "a GPU product as the nvidia.com/gpu.product label writes it (NVIDIA-L4)")
		}
		if g.MinMemoryGB < 0 || g.MinMemoryGB > 1024 {
			p.invalid("resources.gpu.min_memory_gb", g.MinMemoryGB, "from 0 to 1024")
		}
		if g.Count == 0 && (g.Model != "" || g.MinMemoryGB > 0) {
			p.invalid("resources.gpu.count", 0, "a GPU model or memory needs a count of at least 1")
		}
	}
	if d.Runtime != "" && !nameRE.MatchString(d.Runtime) {
		p.invalid("runtime", d.Runtime, "a runtime name (GET /v1/runtimes)")
	}
	if d.Image != "" && (len(d.Image) > 512 || !imageRE.MatchString(d.Image)) {
		p.invalid("image", d.Image, "a container image reference (registry/name:tag)")
	}
	if d.InferenceData != 0 {
		p.notSupported("inference_data", d.InferenceData, "0 (values in the request)")
	}
	p = append(p, CheckStrings(d, "")...)
	return p
}

func star(s string) string {
	if s == "*" {
		return ""
	}
	return s
}

// Validate returns every problem of a recorded operation.
func (o *OperationCreate) Validate() []Problem {
	var p problems
	p.text("ownerid", o.OwnerID, true, 128)
	if o.DeploymentID == "" {
		p.required("deploymentid")
	} else if len(o.DeploymentID) > MaxDeploymentIDLen || len(validation.IsDNS1123Label(o.DeploymentID)) > 0 {
		p.invalid("deploymentid", o.DeploymentID, "not a deployment id")
	}
	if o.ModelID == "" {
		p.required("modelid")
	} else if !ValidModelID(o.ModelID) {
		p.invalid("modelid", o.ModelID, "not a model id")
	}
	if len(bytes.TrimSpace(o.Data)) == 0 || string(bytes.TrimSpace(o.Data)) == "null" {
		p.required("data")
	}
	for _, f := range []struct {
		name string
		raw  []byte
	}{{"data", o.Data}, {"result", o.Result}} {
		if bytes.Contains(f.raw, []byte(`\u0000`)) {
			p.invalid(f.name, "", "must not contain a NUL character")
		}
	}
	p = append(p, CheckStrings(struct {
		OwnerID string `json:"ownerid"`
	}{o.OwnerID}, "")...)
	return p
}

// Validate returns every problem of a runtime registration.
func (rt *Runtime) Validate() []Problem {
	var p problems
	if !nameRE.MatchString(rt.Name) {
		p.invalid("name", rt.Name, "1 to 64 letters, digits, '.', '_' or '-'")
	}
	if len(rt.Formats) == 0 {
		p.required("formats")
	}
	for i, f := range rt.Formats {
		if !formatRE.MatchString(f) {
			p.invalid(fmt.Sprintf("formats[%d]", i), f, "a format is lower-case letters, digits, - and _")
		}
	}
	switch {
	case rt.Image == "":
		p.required("image")
	case len(rt.Image) > 512 || !imageRE.MatchString(rt.Image):
		p.invalid("image", rt.Image, "a container image reference (registry/name:tag)")
	}
	if rt.Port < 1 || rt.Port > 65535 {
		p.invalid("port", rt.Port, "from 1 to 65535")
	}
	if len(rt.Args) > 64 {
		p.tooMany("args", len(rt.Args), 64)
	}
	for i, a := range rt.Args {
		p.text(fmt.Sprintf("args[%d]", i), a, false, 1024)
	}
	p = append(p, CheckStrings(rt, "")...)
	return p
}
