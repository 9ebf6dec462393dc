package generic

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	"path/filepath"
	"strings"

	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// MaxDocumentSize is the largest description accepted, four times what a
// ConfigMap can hold.
const MaxDocumentSize = 4 << 20

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

// FormatFromFileName picks the format by file extension: JSON for *.json,
// else FormatAuto.
func FormatFromFileName(name string) Format {
	if strings.EqualFold(filepath.Ext(name), ".json") {
		return FormatJSON
	}
	return FormatAuto
}

// Checked is a document checked against the schema of its kind and
// normalised: tolerated spellings fixed, numeric strings turned into
// numbers, frequencies in Hz, defaults applied and the values the schema
// rejected left out, so that the rest can still be decoded and checked.
type Checked struct {
	// Kind is the document's kind.
	Kind string
	// SpecPath is where the description's fields sit in the document, for
	// reporting later problems: the kind (upstream form), spec (resource
	// form) or nil (upstream's own resources, whose fields are at the root).
	SpecPath *field.Path
	// Object is the document in the resource form without metadata:
	// apiVersion, kind, spec and, when the document has one, status.
	Object map[string]interface{}
	// HasMetadata is set when the document is a resource with metadata.
	HasMetadata bool
	// MetadataName is the name the metadata gives, if any.
	MetadataName string
}

// MetadataFunc checks a resource's metadata, the value under metadata:,
// and returns the name it gives and the problems found (paths start at
// metadata).
type MetadataFunc func(v interface{}) (name string, errs field.ErrorList)

// Check reads one document of any kind (or of kind want, when set), in the
// upstream or the resource form, and checks it against its kind's schema;
// meta checks the metadata of a resource. It returns nil and the problems
// when the document cannot be read that far; else the checked document and
// the problems the schema check found, if any.
func Check(data []byte, format Format, want string, meta MetadataFunc) (*Checked, field.ErrorList) {
	doc, errs := decode(data, format)
	if len(errs) > 0 {
		return nil, errs
	}
	kind, specPath, errs := detectKind(doc, want)
	if len(errs) > 0 {
		return nil, errs
	}
	root, err := SchemaFor(kind)
	if err != nil {
		return nil, field.ErrorList{field.InternalError(nil, err)}
	}
	specSchema := root.Properties["spec"]
	if specSchema == nil {
		return nil, field.ErrorList{field.InternalError(nil, fmt.Errorf("the CRD schema of %s has no spec", kind))}
	}

	c := &Checked{Kind: kind}
	w := &walker{}
	if m, ok := doc["metadata"]; ok && m != nil && specPath.String() == "spec" {
		c.HasMetadata = true
		var metaErrs field.ErrorList
		c.MetadataName, metaErrs = meta(m)
		w.errs = append(w.errs, metaErrs...)
	}
	var cr map[string]interface{}
	if fields := rootSpecFields(doc, specSchema); specPath.String() == "spec" && fields != nil {
		// Upstream's own resources keep the description's fields at the
		// root of the object, next to apiVersion, kind and metadata.
		specPath = nil
		w.errs = append(w.errs, normalizeFrequencies(kind, fields, specPath)...)
		out, _ := w.walk(specPath, fields, specSchema)
		cr = map[string]interface{}{"spec": out}
		if status, ok := doc["status"]; ok && status != nil {
			statusSchema := root.Properties["status"]
			if statusSchema == nil {
				statusSchema = &Schema{}
			}
			if st, ok := w.walk(field.NewPath("status"), status, statusSchema); ok {
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
			return nil, w.errs
		}
		w.errs = append(w.errs, normalizeFrequencies(kind, spec, specPath)...)
		out, _ := w.walk(specPath, spec, specSchema)
		cr = map[string]interface{}{"spec": out}
	}
	if cr == nil {
		return nil, w.errs
	}
	cr["apiVersion"] = APIVersion
	cr["kind"] = kind
	c.Object, c.SpecPath = cr, specPath
	return c, w.errs
}

// Walk checks v against the schema s the way the apiserver would,
// collecting every problem (paths start at p), and returns v normalised as
// Check does.
func Walk(p *field.Path, v interface{}, s *Schema) (interface{}, field.ErrorList) {
	w := &walker{}
	out, _ := w.walk(p, v, s)
	return out, w.errs
}

// Spec returns the checked spec; nil when the document's spec was not an
// object.
func (c *Checked) Spec() map[string]interface{} {
	spec, _ := c.Object["spec"].(map[string]interface{})
	return spec
}

// Name applies the naming rules to a checked document read from file (or
// from no file, when file is empty) and returns the object's name: a
// node's host name (name, else the file name), a cluster's cluster_id, a
// datacenter's datacenter_id, the continuum agent's host name (name, else
// the file name), an application's name (else the file name). A name given
// in metadata must agree. The name is empty when there is none.
func (c *Checked) Name(file string) (string, field.ErrorList) {
	var (
		errs      field.ErrorList
		specField = "name"
		fromFile  = file != ""
	)
	switch c.Kind {
	case KindCluster:
		specField, fromFile = "cluster_id", false
	case KindDatacenter:
		specField, fromFile = "datacenter_id", false
	}
	specName, _ := c.Spec()[specField].(string)
	metaName := c.MetadataName
	name := metaName
	switch {
	case metaName != "" && specName != "" && metaName != specName:
		errs = append(errs, field.Invalid(c.SpecPath.Child(specField), specName, fmt.Sprintf("must equal metadata.name %q", metaName)))
	case name == "" && specName != "":
		name = specName
	case name == "" && fromFile:
		name = FileStem(file)
	}
	namePath := c.SpecPath.Child(specField)
	if c.HasMetadata && metaName != "" {
		namePath = field.NewPath("metadata", "name")
	}
	if name == "" {
		if specName == "" && specField != "name" {
			// cluster_id and datacenter_id are required by the schema,
			// which has reported them already.
			return "", errs
		}
		return "", append(errs, field.Required(namePath, "name the "+c.Kind))
	}
	check := validation.IsDNS1123Subdomain
	if c.Kind == KindApp {
		// An application's name is also the value of the mlsysops.eu/app
		// label on its workloads.
		check = validation.IsDNS1123Label
	}
	for _, msg := range check(name) {
		if metaName == "" && specName == "" {
			errs = append(errs, DocumentError(fmt.Sprintf("the file name gives the name %q, which is not valid: %s; rename the file or set %s", name, msg, namePath)))
			continue
		}
		errs = append(errs, field.Invalid(namePath, name, msg))
	}
	return name, errs
}

// FileStem is the file name without folder and extension: the host name
// of a node description.
func FileStem(file string) string {
	base := filepath.Base(file)
	return strings.TrimSuffix(base, filepath.Ext(base))
}

// decode turns a YAML or JSON document into generic values, rejecting
// documents that are too large, not a mapping, or several documents.
func decode(data []byte, format Format) (map[string]interface{}, field.ErrorList) {
	if len(data) > MaxDocumentSize {
		return nil, field.ErrorList{DocumentError(fmt.Sprintf("is %d bytes; descriptions are limited to %d bytes", len(data), MaxDocumentSize))}
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
		return nil, field.ErrorList{DocumentError("is not valid JSON: " + err.Error())}
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
			return nil, field.ErrorList{DocumentError("is not valid YAML: " + err.Error())}
		}
		j, err := yaml.YAMLToJSONStrict(chunk)
		if err != nil {
			return nil, field.ErrorList{DocumentError("is not valid YAML: " + yamlMessage(err, line))}
		}
		line += bytes.Count(chunk, []byte("\n"))
		if string(bytes.TrimSpace(j)) != "null" {
			docs = append(docs, j)
		}
	}
	switch len(docs) {
	case 0:
		return nil, field.ErrorList{DocumentError("is empty")}
	case 1:
	default:
		return nil, field.ErrorList{DocumentError(fmt.Sprintf("holds %d YAML documents; put one description in each file", len(docs)))}
	}
	var v interface{}
	if err := utiljson.Unmarshal(docs[0], &v); err != nil {
		return nil, field.ErrorList{DocumentError("is not valid YAML: " + err.Error())}
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
		return nil, field.ErrorList{DocumentError(fmt.Sprintf("must be a mapping (one root key such as %s:, or apiVersion/kind/metadata/spec), not %s", KindNode, ValueKind(v)))}
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
		case !isKnownKind(kind):
			errs = append(errs, field.NotSupported(field.NewPath("kind"), doc["kind"], knownKinds))
		case want != "" && kind != want:
			errs = append(errs, field.Invalid(field.NewPath("kind"), kind, "expected "+want))
		}
		if av, _ := doc["apiVersion"].(string); av != APIVersion {
			errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), doc["apiVersion"], []string{APIVersion}))
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
		expected := "one root key naming the kind (" + strings.Join(knownKinds, ", ") + ") or apiVersion " + APIVersion + " with a kind"
		if want != "" {
			expected = "a root key " + want + ": or apiVersion " + APIVersion + " with kind " + want
		}
		return "", nil, field.ErrorList{DocumentError("does not say what it describes: expected " + expected + "; found keys " + strings.Join(sortedKeys(doc), ", "))}
	case len(found) > 1:
		return "", nil, field.ErrorList{DocumentError("has several root keys naming a kind (" + strings.Join(found, ", ") + "); put one description in each file")}
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
func rootSpecFields(doc map[string]interface{}, spec *Schema) map[string]interface{} {
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
