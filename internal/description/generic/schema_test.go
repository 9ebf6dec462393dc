package generic

import (
	"io/fs"
	"reflect"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/mlsysops-go/mlsysops/crds"
)

// TestSchemaKeywords checks that Schema reads every keyword the embedded
// CRDs use, except those that do not change what the check accepts.
func TestSchemaKeywords(t *testing.T) {
	read := map[string]bool{}
	st := reflect.TypeOf(Schema{})
	for i := 0; i < st.NumField(); i++ {
		read[strings.Split(st.Field(i).Tag.Get("json"), ",")[0]] = true
	}
	ignored := map[string]string{
		"description":                "documentation",
		"anyOf":                      "the integer-or-string unions, read through x-kubernetes-int-or-string",
		"x-kubernetes-list-map-keys": "lists of objects are checked item by item",
	}
	files, err := fs.Glob(crds.FS, "*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no embedded CRDs: %v", err)
	}
	used := map[string]bool{}
	var walk func(s map[string]interface{})
	walk = func(s map[string]interface{}) {
		for k, v := range s {
			used[k] = true
			switch k {
			case "properties":
				for _, p := range v.(map[string]interface{}) {
					walk(p.(map[string]interface{}))
				}
			case "items", "additionalProperties":
				if m, ok := v.(map[string]interface{}); ok {
					walk(m)
				}
			}
		}
	}
	for _, f := range files {
		data, err := fs.ReadFile(crds.FS, f)
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Spec struct {
				Versions []struct {
					Schema struct {
						OpenAPIV3Schema map[string]interface{} `json:"openAPIV3Schema"`
					} `json:"schema"`
				} `json:"versions"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(data, &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, v := range doc.Spec.Versions {
			walk(v.Schema.OpenAPIV3Schema)
		}
	}
	var missing []string
	for k := range used {
		if !read[k] && ignored[k] == "" {
			missing = append(missing, k)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("the CRDs use keywords Schema does not read: %s; add them to Schema and the check", strings.Join(missing, ", "))
	}
}

// TestSchemaForReadsOneCRD checks that the node's schema is read from its
// own CRD, without the application CRD, which is the largest.
func TestSchemaForReadsOneCRD(t *testing.T) {
	schemaCache.Lock()
	saved := schemaCache.read
	savedSchemas := schemaCache.schemas
	schemaCache.read, schemaCache.schemas = map[string]bool{}, map[string]*Schema{}
	schemaCache.Unlock()
	t.Cleanup(func() {
		schemaCache.Lock()
		schemaCache.read, schemaCache.schemas = saved, savedSchemas
		schemaCache.Unlock()
	})

	s, err := SchemaFor(KindNode)
	if err != nil {
		t.Fatal(err)
	}
	if s.Properties["spec"] == nil || s.Properties["spec"].Properties["cluster_id"] == nil {
		t.Errorf("node schema has no spec.cluster_id")
	}
	if got := len(schemaCache.read); got != 1 {
		t.Errorf("read %d CRD files for the node schema, want 1: %v", got, schemaCache.read)
	}
	for _, kind := range knownKinds {
		if _, err := SchemaFor(kind); err != nil {
			t.Errorf("SchemaFor(%s): %v", kind, err)
		}
	}
	if _, err := SchemaFor("MLSysOpsGizmo"); err == nil || !strings.Contains(err.Error(), "no CRD schema for kind MLSysOpsGizmo") {
		t.Errorf("SchemaFor(unknown kind) = %v", err)
	}
}
