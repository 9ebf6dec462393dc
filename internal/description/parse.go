package description

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/description/generic"
)

// MaxDocumentSize is the largest description accepted, four times what a
// ConfigMap can hold.
const MaxDocumentSize = generic.MaxDocumentSize

// Object is any MLSysOps kind: *MLSysOpsApp, *MLSysOpsNode,
// *MLSysOpsCluster, *MLSysOpsContinuum or *MLSysOpsDatacenter.
type Object interface {
	metav1.Object
	runtime.Object
}

// Format is the syntax of a document.
type Format = generic.Format

const (
	// FormatAuto reads JSON when the document looks like JSON, else YAML.
	FormatAuto = generic.FormatAuto
	// FormatYAML reads YAML (and therefore JSON).
	FormatYAML = generic.FormatYAML
	// FormatJSON reads JSON only.
	FormatJSON = generic.FormatJSON
)

// FormatFromContentType maps an HTTP Content-Type to a Format:
// application/json (and +json types) is JSON, YAML types are YAML, anything
// else (or nothing) is FormatAuto.
func FormatFromContentType(contentType string) Format {
	return generic.FormatFromContentType(contentType)
}

// FrequencyHz reads a frequency the way upstream files write it and returns
// it in Hz. Numbers below 100 are GHz (2.4), numbers below 100000 are MHz
// (600), larger numbers are Hz (2400000000); a string may carry a unit
// ("2.4GHz", "600 MHz", "32kHz", "2400000000Hz").
func FrequencyHz(v interface{}) (int64, error) { return generic.FrequencyHz(v) }

func newObject(kind string) Object {
	switch kind {
	case mlsysopsv1.KindApp:
		return &mlsysopsv1.MLSysOpsApp{}
	case mlsysopsv1.KindNode:
		return &mlsysopsv1.MLSysOpsNode{}
	case mlsysopsv1.KindCluster:
		return &mlsysopsv1.MLSysOpsCluster{}
	case mlsysopsv1.KindContinuum:
		return &mlsysopsv1.MLSysOpsContinuum{}
	case mlsysopsv1.KindDatacenter:
		return &mlsysopsv1.MLSysOpsDatacenter{}
	}
	return nil
}

// Parse reads one description or application of any kind, in the upstream
// or the custom resource form, from data read from file (file names the
// object when the document does not, and picks JSON for *.json). It
// returns every problem found; the object is nil when there is any.
func Parse(file string, data []byte) (Object, field.ErrorList) {
	obj, _, errs := parseDocument(file, data, generic.FormatFromFileName(file), "")
	return obj, errs
}

// ParseApp reads an application description, as the northbound API and
// the continuum agent receive it: JSON or YAML, in the upstream form
// ({"MLSysOpsApp": {...}}) or the custom resource form. The application
// must be named (MLSysOpsApp.name or metadata.name). It returns every
// problem found; the application is nil when there is any.
func ParseApp(data []byte, format Format) (*mlsysopsv1.MLSysOpsApp, field.ErrorList) {
	obj, _, errs := parseDocument("", data, format, mlsysopsv1.KindApp)
	if len(errs) > 0 {
		return nil, errs
	}
	return obj.(*mlsysopsv1.MLSysOpsApp), nil
}

// parseDocument parses, checks and decodes one document. want, if set, is
// the only kind accepted. It also returns the path of the spec in the
// document (the kind for the upstream form, spec for the resource form),
// for reporting later problems.
func parseDocument(file string, data []byte, format Format, want string) (Object, *field.Path, field.ErrorList) {
	var meta metav1.ObjectMeta
	checked, errs := generic.Check(data, format, want, func(v interface{}) (string, field.ErrorList) {
		errs := decodeMeta(v, &meta)
		return meta.Name, errs
	})
	if checked == nil {
		return nil, nil, errs
	}
	obj := newObject(checked.Kind)
	if err := decodeInto(checked.Object, obj); err != nil {
		// The schema check should have caught anything that does not
		// decode; reaching this is a bug, reported rather than panicking.
		return nil, nil, append(errs, field.InternalError(checked.SpecPath, err))
	}
	meta.DeepCopyInto(objectMeta(obj))
	name, nameErrs := checked.Name(file)
	if name != "" {
		obj.SetName(name)
	}
	errs = append(errs, nameErrs...)
	errs = append(errs, validateSemantics(obj, checked.SpecPath)...)
	if len(errs) > 0 {
		sort.SliceStable(errs, func(i, j int) bool { return generic.PathLess(errs[i].Field, errs[j].Field) })
		return nil, checked.SpecPath, errs
	}
	return obj, checked.SpecPath, nil
}

// decodeMeta checks and decodes a resource's metadata.
func decodeMeta(v interface{}, meta *metav1.ObjectMeta) field.ErrorList {
	p := field.NewPath("metadata")
	if _, ok := v.(map[string]interface{}); !ok {
		return field.ErrorList{field.TypeInvalid(p, generic.ShownValue(v), "must be an object, not "+generic.ValueKind(v))}
	}
	data, err := json.Marshal(v)
	if err != nil {
		return field.ErrorList{field.InternalError(p, err)}
	}
	strict, err := kjson.UnmarshalStrict(data, meta)
	var errs field.ErrorList
	if err != nil {
		*meta = metav1.ObjectMeta{}
		return field.ErrorList{field.Invalid(p, field.OmitValueType{}, err.Error())}
	}
	for _, e := range strict {
		errs = append(errs, field.Invalid(p, field.OmitValueType{}, e.Error()))
	}
	if meta.Namespace != "" {
		for _, msg := range validation.IsDNS1123Label(meta.Namespace) {
			errs = append(errs, field.Invalid(p.Child("namespace"), meta.Namespace, msg))
		}
	}
	return errs
}

func decodeInto(cr map[string]interface{}, obj Object) error {
	data, err := json.Marshal(cr)
	if err != nil {
		return fmt.Errorf("encode checked document: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(obj); err != nil {
		return fmt.Errorf("decode checked document into %T: %w", obj, err)
	}
	return nil
}

func objectMeta(obj Object) *metav1.ObjectMeta {
	switch o := obj.(type) {
	case *mlsysopsv1.MLSysOpsApp:
		return &o.ObjectMeta
	case *mlsysopsv1.MLSysOpsNode:
		return &o.ObjectMeta
	case *mlsysopsv1.MLSysOpsCluster:
		return &o.ObjectMeta
	case *mlsysopsv1.MLSysOpsContinuum:
		return &o.ObjectMeta
	case *mlsysopsv1.MLSysOpsDatacenter:
		return &o.ObjectMeta
	}
	panic(fmt.Sprintf("description: unexpected object type %T", obj))
}
