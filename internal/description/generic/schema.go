package generic

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"sync"

	"sigs.k8s.io/yaml"

	"github.com/mlsysops-go/mlsysops/crds"
)

// Schema is the part of an OpenAPI v3 schema (as a CRD's
// openAPIV3Schema holds it) that the check reads. Other keywords, such as
// description or anyOf, are skipped when a CRD is read.
type Schema struct {
	Type                   string             `json:"type,omitempty"`
	Format                 string             `json:"format,omitempty"`
	Properties             map[string]*Schema `json:"properties,omitempty"`
	AdditionalProperties   *Schema            `json:"additionalProperties,omitempty"`
	Items                  *Schema            `json:"items,omitempty"`
	Required               []string           `json:"required,omitempty"`
	Enum                   []json.RawMessage  `json:"enum,omitempty"`
	Default                json.RawMessage    `json:"default,omitempty"`
	Nullable               bool               `json:"nullable,omitempty"`
	Pattern                string             `json:"pattern,omitempty"`
	MinLength              *int64             `json:"minLength,omitempty"`
	MaxLength              *int64             `json:"maxLength,omitempty"`
	MinItems               *int64             `json:"minItems,omitempty"`
	MaxItems               *int64             `json:"maxItems,omitempty"`
	Minimum                *float64           `json:"minimum,omitempty"`
	Maximum                *float64           `json:"maximum,omitempty"`
	ExclusiveMinimum       bool               `json:"exclusiveMinimum,omitempty"`
	ExclusiveMaximum       bool               `json:"exclusiveMaximum,omitempty"`
	XIntOrString           bool               `json:"x-kubernetes-int-or-string,omitempty"`
	XPreserveUnknownFields *bool              `json:"x-kubernetes-preserve-unknown-fields,omitempty"`
	XListType              *string            `json:"x-kubernetes-list-type,omitempty"`
}

// crd is the part of a CustomResourceDefinition that locates its schemas.
type crd struct {
	Spec struct {
		Group string `json:"group"`
		Names struct {
			Kind string `json:"kind"`
		} `json:"names"`
		Versions []struct {
			Name   string `json:"name"`
			Schema *struct {
				OpenAPIV3Schema *Schema `json:"openAPIV3Schema"`
			} `json:"schema"`
		} `json:"versions"`
	} `json:"spec"`
}

// schemaCache reads the embedded CRDs on demand: a node agent reads the
// MLSysOpsNode CRD only, not the much larger MLSysOpsApp one.
var schemaCache = struct {
	sync.Mutex
	read    map[string]bool    // CRD files read
	schemas map[string]*Schema // by kind
}{read: map[string]bool{}, schemas: map[string]*Schema{}}

// SchemaFor returns the OpenAPI schema of the root object of kind, as
// generated into crds/.
func SchemaFor(kind string) (*Schema, error) {
	return schemaFrom(crds.FS, kind)
}

func schemaFrom(fsys fs.FS, kind string) (*Schema, error) {
	schemaCache.Lock()
	defer schemaCache.Unlock()
	if s, ok := schemaCache.schemas[kind]; ok {
		return s, nil
	}
	files, err := fs.Glob(fsys, "*.yaml")
	if err != nil {
		return nil, fmt.Errorf("list embedded CRDs: %w", err)
	}
	// CRD files are named after the plural of their kind
	// (mlsysops.eu_mlsysopsnodes.yaml); read the likely one first.
	likely := strings.ToLower(kind)
	sort.SliceStable(files, func(i, j int) bool {
		return strings.Contains(files[i], likely) && !strings.Contains(files[j], likely)
	})
	for _, name := range files {
		if schemaCache.read[name] {
			continue
		}
		if err := readCRD(fsys, name); err != nil {
			return nil, err
		}
		if s, ok := schemaCache.schemas[kind]; ok {
			return s, nil
		}
	}
	return nil, fmt.Errorf("no CRD schema for kind %s in crds/: run hack/generate.sh", kind)
}

// readCRD adds the schemas of one CRD file to the cache.
func readCRD(fsys fs.FS, name string) error {
	data, err := fs.ReadFile(fsys, name)
	if err != nil {
		return fmt.Errorf("read embedded CRD %s: %w", name, err)
	}
	var c crd
	if err := yaml.Unmarshal(data, &c); err != nil {
		return fmt.Errorf("decode embedded CRD %s: %w", name, err)
	}
	schemaCache.read[name] = true
	if c.Spec.Group != group {
		return nil
	}
	for _, v := range c.Spec.Versions {
		if v.Name != version || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		schemaCache.schemas[c.Spec.Names.Kind] = v.Schema.OpenAPIV3Schema
	}
	return nil
}
