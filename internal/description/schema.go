package description

import (
	"fmt"
	"io/fs"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/mlsysops-go/mlsysops/crds"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

var (
	schemasOnce sync.Once
	schemas     map[string]*apiextensionsv1.JSONSchemaProps
	schemasErr  error
)

// schemaFor returns the OpenAPI schema of the root object of kind, as
// generated into crds/.
func schemaFor(kind string) (*apiextensionsv1.JSONSchemaProps, error) {
	schemasOnce.Do(func() { schemas, schemasErr = loadSchemas(crds.FS) })
	if schemasErr != nil {
		return nil, schemasErr
	}
	s, ok := schemas[kind]
	if !ok {
		return nil, fmt.Errorf("no CRD schema for kind %s in crds/: run hack/generate.sh", kind)
	}
	return s, nil
}

func loadSchemas(fsys fs.FS) (map[string]*apiextensionsv1.JSONSchemaProps, error) {
	files, err := fs.Glob(fsys, "*.yaml")
	if err != nil {
		return nil, fmt.Errorf("list embedded CRDs: %w", err)
	}
	out := make(map[string]*apiextensionsv1.JSONSchemaProps, len(files))
	for _, name := range files {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("read embedded CRD %s: %w", name, err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &crd); err != nil {
			return nil, fmt.Errorf("decode embedded CRD %s: %w", name, err)
		}
		if crd.Spec.Group != mlsysopsv1.GroupName {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if v.Name != mlsysopsv1.Version || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				continue
			}
			out[crd.Spec.Names.Kind] = v.Schema.OpenAPIV3Schema
		}
	}
	return out, nil
}
