package description

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"path/filepath"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

// MaxDocumentSize is the largest description accepted, four times what a
// ConfigMap can hold.
const MaxDocumentSize = 4 << 20

// Object is any MLSysOps kind: *MLSysOpsApp, *MLSysOpsNode,
// *MLSysOpsCluster, *MLSysOpsContinuum or *MLSysOpsDatacenter.
type Object interface {
	metav1.Object
	runtime.Object
}

// Format is the syntax of a document.
type Format int

const (
	// FormatAuto reads JSON when the document looks like JSON, else YAML.
	FormatAuto Format = iota
	// FormatYAML reads YAML (and therefore JSON).
	FormatYAML
	// FormatJSON reads JSON only.
	FormatJSON
)

// FormatFromContentType maps an HTTP Content-Type to a Format:
// application/json (and +json types) is JSON, YAML types are YAML, anything
// else (or nothing) is FormatAuto.
func FormatFromContentType(contentType string) Format {
	mediaType, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return FormatAuto
	}
	switch {
	case mediaType == "application/json" || strings.HasSuffix(mediaType, "+json"):
		return FormatJSON
	case strings.Contains(mediaType, "yaml"):
		return FormatYAML
	default:
		return FormatAuto
	}
}

// formatFromFileName picks the format by file extension.
func formatFromFileName(name string) Format {
	if strings.EqualFold(filepath.Ext(name), ".json") {
		return FormatJSON
	}
	return FormatAuto
}

// knownKinds lists every kind in a fixed order, for messages.
var knownKinds = []string{
	mlsysopsv1.KindContinuum, mlsysopsv1.KindCluster, mlsysopsv1.KindNode,
	mlsysopsv1.KindDatacenter, mlsysopsv1.KindApp,
}

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
	obj, _, errs := parseDocument(file, data, formatFromFileName(file), "")
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
	doc, errs := decode(data, format)
	if len(errs) > 0 {
		return nil, nil, errs
	}
	kind, specPath, errs := detectKind(doc, want)
	if len(errs) > 0 {
		return nil, nil, errs
	}
	root, err := schemaFor(kind)
	if err != nil {
		return nil, nil, field.ErrorList{field.InternalError(nil, err)}
	}
	specSchema := root.Properties["spec"]

	w := &walker{}
	var (
		meta    metav1.ObjectMeta
		cr      map[string]interface{}
		hasMeta bool
	)
	if m, ok := doc["metadata"]; ok && m != nil && specPath.String() == "spec" {
		hasMeta = true
		w.errs = append(w.errs, decodeMeta(m, &meta)...)
	}
	if fields := rootSpecFields(doc, &specSchema); specPath.String() == "spec" && fields != nil {
		// Upstream's own resources keep the description's fields at the
		// root of the object, next to apiVersion, kind and metadata.
		specPath = nil
		w.errs = append(w.errs, normalizeFrequencies(kind, fields, specPath)...)
		out, _ := w.walk(specPath, fields, &specSchema)
		cr = map[string]interface{}{"spec": out}
		if status, ok := doc["status"]; ok && status != nil {
			statusSchema := root.Properties["status"]
			if st, ok := w.walk(field.NewPath("status"), status, &statusSchema); ok {
				cr["status"] = st
			}
		}
	} else if specPath.String() == "spec" {
		// Resource form: the rest of the object against the CRD's root
		// schema; metadata was checked above, as the apiserver would.
		if spec, ok := doc["spec"].(map[string]interface{}); ok {
			w.errs = append(w.errs, normalizeFrequencies(kind, spec, specPath)...)
		}
		rest := make(map[string]interface{}, len(doc))
		for k, v := range doc {
			if k != "metadata" {
				rest[k] = v
			}
		}
		out, _ := w.walk(nil, rest, root)
		cr, _ = out.(map[string]interface{})
	} else {
		spec, ok := doc[kind].(map[string]interface{})
		if !ok {
			if doc[kind] == nil {
				w.errs = append(w.errs, field.Required(specPath, "the description is empty"))
			} else {
				w.typeError(specPath, doc[kind], "an object")
			}
			return nil, nil, w.errs
		}
		w.errs = append(w.errs, normalizeFrequencies(kind, spec, specPath)...)
		out, _ := w.walk(specPath, spec, &specSchema)
		cr = map[string]interface{}{"spec": out}
	}
	if cr == nil {
		return nil, nil, w.errs
	}
	cr["apiVersion"] = mlsysopsv1.SchemeGroupVersion.String()
	cr["kind"] = kind
	obj := newObject(kind)
	if err := decodeInto(cr, obj); err != nil {
		// The schema check should have caught anything that does not
		// decode; reaching this is a bug, reported rather than panicking.
		return nil, nil, append(w.errs, field.InternalError(specPath, err))
	}
	meta.DeepCopyInto(objectMeta(obj))
	errs = append(w.errs, nameObject(obj, file, specPath, hasMeta)...)
	errs = append(errs, validateSemantics(obj, specPath)...)
	if len(errs) > 0 {
		sort.SliceStable(errs, func(i, j int) bool { return pathLess(errs[i].Field, errs[j].Field) })
		return nil, specPath, errs
	}
	return obj, specPath, nil
}

// decode turns a YAML or JSON document into generic values, rejecting
// documents that are too large, not a mapping, or several documents.
func decode(data []byte, format Format) (map[string]interface{}, field.ErrorList) {
	if len(data) > MaxDocumentSize {
		return nil, field.ErrorList{documentError(fmt.Sprintf("is %d bytes; descriptions are limited to %d bytes", len(data), MaxDocumentSize))}
	}
	if format == FormatAuto {
		if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '{' {
			if doc, errs := decodeJSON(data); len(errs) == 0 {
				return doc, nil
			}
		}
		format = FormatYAML
	}
	if format == FormatJSON {
		return decodeJSON(data)
	}
	return decodeYAML(data)
}

func decodeJSON(data []byte) (map[string]interface{}, field.ErrorList) {
	var v interface{}
	if err := utiljson.Unmarshal(data, &v); err != nil {
		return nil, field.ErrorList{documentError("is not valid JSON: " + err.Error())}
	}
	return asDocument(v)
}

func decodeYAML(data []byte) (map[string]interface{}, field.ErrorList) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var (
		docs [][]byte
		line = 1
	)
	for {
		chunk, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, field.ErrorList{documentError("is not valid YAML: " + err.Error())}
		}
		j, err := yaml.YAMLToJSONStrict(chunk)
		if err != nil {
			return nil, field.ErrorList{documentError("is not valid YAML: " + yamlMessage(err, line))}
		}
		line += bytes.Count(chunk, []byte("\n"))
		if string(bytes.TrimSpace(j)) != "null" {
			docs = append(docs, j)
		}
	}
	switch len(docs) {
	case 0:
		return nil, field.ErrorList{documentError("is empty")}
	case 1:
	default:
		return nil, field.ErrorList{documentError(fmt.Sprintf("holds %d YAML documents; put one description in each file", len(docs)))}
	}
	var v interface{}
	if err := utiljson.Unmarshal(docs[0], &v); err != nil {
		return nil, field.ErrorList{documentError("is not valid YAML: " + err.Error())}
	}
	return asDocument(v)
}

// yamlMessage shortens the YAML library's error and makes its line number
// relative to the file rather than to the document.
func yamlMessage(err error, firstLine int) string {
	msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
	msg = strings.TrimPrefix(msg, "yaml: ")
	if firstLine > 1 {
		msg += fmt.Sprintf(" (in the document starting at line %d)", firstLine)
	}
	return msg
}

func asDocument(v interface{}) (map[string]interface{}, field.ErrorList) {
	m, ok := v.(map[string]interface{})
	if !ok {
		return nil, field.ErrorList{documentError(fmt.Sprintf("must be a mapping (one root key such as %s:, or apiVersion/kind/metadata/spec), not %s", mlsysopsv1.KindNode, kindOf(v)))}
	}
	return m, nil
}

// detectKind tells the form and kind of a document. The resource form has
// apiVersion and kind; the upstream form has one root key naming the kind.
func detectKind(doc map[string]interface{}, want string) (string, *field.Path, field.ErrorList) {
	_, hasKind := doc["kind"]
	_, hasAPIVersion := doc["apiVersion"]
	if hasKind || hasAPIVersion {
		var errs field.ErrorList
		kind, _ := doc["kind"].(string)
		switch {
		case !hasKind:
			errs = append(errs, field.Required(field.NewPath("kind"), "one of "+strings.Join(knownKinds, ", ")))
		case newObject(kind) == nil:
			errs = append(errs, field.NotSupported(field.NewPath("kind"), doc["kind"], knownKinds))
		case want != "" && kind != want:
			errs = append(errs, field.Invalid(field.NewPath("kind"), kind, "expected "+want))
		}
		if av, _ := doc["apiVersion"].(string); av != mlsysopsv1.SchemeGroupVersion.String() {
			errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), doc["apiVersion"], []string{mlsysopsv1.SchemeGroupVersion.String()}))
		}
		return kind, field.NewPath("spec"), errs
	}
	var found []string
	for _, k := range knownKinds {
		if _, ok := doc[k]; ok {
			found = append(found, k)
		}
	}
	switch {
	case len(found) == 0:
		expected := "one root key naming the kind (" + strings.Join(knownKinds, ", ") + ") or apiVersion " + mlsysopsv1.SchemeGroupVersion.String() + " with a kind"
		if want != "" {
			expected = "a root key " + want + ": or apiVersion " + mlsysopsv1.SchemeGroupVersion.String() + " with kind " + want
		}
		return "", nil, field.ErrorList{documentError("does not say what it describes: expected " + expected + "; found keys " + strings.Join(sortedKeys(doc), ", "))}
	case len(found) > 1:
		return "", nil, field.ErrorList{documentError("has several root keys naming a kind (" + strings.Join(found, ", ") + "); put one description in each file")}
	}
	kind := found[0]
	var errs field.ErrorList
	if want != "" && kind != want {
		errs = append(errs, field.Invalid(field.NewPath(kind), field.OmitValueType{}, "expected "+want))
	}
	for _, k := range sortedKeys(doc) {
		if k != kind {
			errs = append(errs, &field.Error{Type: field.ErrorTypeNotSupported, Field: k, BadValue: field.OmitValueType{},
				Detail: "unknown root key; an upstream description has the single root key " + kind})
		}
	}
	return kind, field.NewPath(kind), errs
}

// rootSpecFields returns the description fields of a resource written in
// upstream's layout (no spec; the fields at the root), or nil when the
// resource has a spec or no root key the spec knows (then a misspelt spec
// is reported as such).
func rootSpecFields(doc map[string]interface{}, spec *apiextensionsv1.JSONSchemaProps) map[string]interface{} {
	if _, hasSpec := doc["spec"]; hasSpec {
		return nil
	}
	fields := map[string]interface{}{}
	known := false
	for k, v := range doc {
		switch k {
		case "apiVersion", "kind", "metadata", "status":
			continue
		}
		fields[k] = v
		if _, ok := spec.Properties[k]; ok {
			known = true
		}
		if _, ok := spec.Properties[keyAliases[k]]; ok {
			known = true
		}
	}
	if !known {
		return nil
	}
	return fields
}

// decodeMeta checks and decodes a resource's metadata.
func decodeMeta(v interface{}, meta *metav1.ObjectMeta) field.ErrorList {
	p := field.NewPath("metadata")
	if _, ok := v.(map[string]interface{}); !ok {
		return field.ErrorList{field.TypeInvalid(p, shownValue(v), "must be an object, not "+kindOf(v))}
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

// fileStem is the file name without folder and extension: the host name
// of a node description.
func fileStem(file string) string {
	base := filepath.Base(file)
	return strings.TrimSuffix(base, filepath.Ext(base))
}

// nameObject sets metadata.name the way the agents expect it: a node's
// host name (name, else the file name), a cluster's cluster_id, a
// datacenter's datacenter_id, the continuum agent's host name (name, else
// the file name), an application's name (else the file name). A name given
// in metadata must agree.
func nameObject(obj Object, file string, spec *field.Path, hasMeta bool) field.ErrorList {
	var (
		errs      field.ErrorList
		specName  string
		specField = "name"
		fromFile  = file != ""
	)
	switch o := obj.(type) {
	case *mlsysopsv1.MLSysOpsApp:
		specName = o.Spec.Name
	case *mlsysopsv1.MLSysOpsNode:
		specName = o.Spec.Name
	case *mlsysopsv1.MLSysOpsContinuum:
		specName = o.Spec.Name
	case *mlsysopsv1.MLSysOpsCluster:
		specName, specField, fromFile = o.Spec.ClusterID, "cluster_id", false
	case *mlsysopsv1.MLSysOpsDatacenter:
		specName, specField, fromFile = o.Spec.DatacenterID, "datacenter_id", false
	}
	metaName := obj.GetName()
	name := metaName
	switch {
	case metaName != "" && specName != "" && metaName != specName:
		errs = append(errs, field.Invalid(spec.Child(specField), specName, fmt.Sprintf("must equal metadata.name %q", metaName)))
	case name == "" && specName != "":
		name = specName
	case name == "" && fromFile:
		name = fileStem(file)
	}
	namePath := spec.Child(specField)
	if hasMeta && metaName != "" {
		namePath = field.NewPath("metadata", "name")
	}
	if name == "" {
		if specName == "" && specField != "name" {
			// cluster_id and datacenter_id are required by the schema,
			// which has reported them already.
			return errs
		}
		return append(errs, field.Required(namePath, "name the "+obj.GetObjectKind().GroupVersionKind().Kind))
	}
	check := validation.IsDNS1123Subdomain
	if _, isApp := obj.(*mlsysopsv1.MLSysOpsApp); isApp {
		// An application's name is also the value of the mlsysops.eu/app
		// label on its workloads.
		check = validation.IsDNS1123Label
	}
	for _, msg := range check(name) {
		if metaName == "" && specName == "" {
			errs = append(errs, documentError(fmt.Sprintf("the file name gives the name %q, which is not valid: %s; rename the file or set %s", name, msg, namePath)))
			continue
		}
		errs = append(errs, field.Invalid(namePath, name, msg))
	}
	obj.SetName(name)
	return errs
}
