package crds_test

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/mlsysops-go/mlsysops/crds"
)

func loadCRDs(t *testing.T) map[string]*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	files, err := fs.Glob(crds.FS, "*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, f := range files {
		data, err := fs.ReadFile(crds.FS, f)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[crd.Spec.Names.Kind] = crd
	}
	return out
}

func TestCRDNamesAndColumns(t *testing.T) {
	all := loadCRDs(t)
	cases := map[string]struct {
		plural, short string
		columns       []string
	}{
		"MLSysOpsApp":        {"mlsysopsapps", "mlsapp", []string{"Phase", "Cluster", "Age"}},
		"MLSysOpsNode":       {"mlsysopsnodes", "mlsnode", []string{"Cluster", "Layer", "Arch", "GPU", "GPUs", "Phase", "Age"}},
		"MLSysOpsCluster":    {"mlsysopsclusters", "mlscluster", []string{"Cluster", "Datacenter", "Phase", "Age"}},
		"MLSysOpsContinuum":  {"mlsysopscontinuums", "mlscontinuum", []string{"Continuum", "Clusters", "Phase", "Age"}},
		"MLSysOpsDatacenter": {"mlsysopsdatacenters", "mlsdatacenter", []string{"Cluster", "Layer", "Phase", "Age"}},
	}
	if len(all) != len(cases) {
		t.Errorf("crds/ holds %d CRDs, want %d", len(all), len(cases))
	}
	for kind, tc := range cases {
		t.Run(kind, func(t *testing.T) {
			crd, ok := all[kind]
			if !ok {
				t.Fatalf("no CRD for %s", kind)
			}
			if crd.Name != tc.plural+".mlsysops.eu" || crd.Spec.Group != "mlsysops.eu" || crd.Spec.Names.Plural != tc.plural {
				t.Errorf("names = %s / %s / %s", crd.Name, crd.Spec.Group, crd.Spec.Names.Plural)
			}
			if crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
				t.Errorf("scope = %s, want Namespaced like upstream", crd.Spec.Scope)
			}
			if diff := cmp.Diff([]string{tc.short}, crd.Spec.Names.ShortNames); diff != "" {
				t.Errorf("short names (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"mlsysops"}, crd.Spec.Names.Categories); diff != "" {
				t.Errorf("categories (-want +got):\n%s", diff)
			}
			if len(crd.Spec.Versions) != 1 {
				t.Fatalf("%d versions, want v1 only", len(crd.Spec.Versions))
			}
			v := crd.Spec.Versions[0]
			if v.Name != "v1" || !v.Served || !v.Storage {
				t.Errorf("version %s served=%v storage=%v", v.Name, v.Served, v.Storage)
			}
			if v.Subresources == nil || v.Subresources.Status == nil {
				t.Errorf("no status subresource")
			}
			var cols []string
			for _, c := range v.AdditionalPrinterColumns {
				cols = append(cols, c.Name)
			}
			if diff := cmp.Diff(tc.columns, cols); diff != "" {
				t.Errorf("printer columns (-want +got):\n%s", diff)
			}
			status := v.Schema.OpenAPIV3Schema.Properties["status"]
			for _, f := range []string{"observedGeneration", "phase", "conditions"} {
				if _, ok := status.Properties[f]; !ok {
					t.Errorf("status has no %s", f)
				}
			}
			walk(t, "", v.Schema.OpenAPIV3Schema, func(path string, s *apiextensionsv1.JSONSchemaProps) {
				if s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields {
					t.Errorf("%s preserves unknown fields; the schema should describe every field", path)
				}
			})
		})
	}
}

func TestCRDSchemaDetails(t *testing.T) {
	all := loadCRDs(t)
	get := func(kind, path string) apiextensionsv1.JSONSchemaProps {
		t.Helper()
		s := *all[kind].Spec.Versions[0].Schema.OpenAPIV3Schema
		for _, step := range strings.Split(path, ".") {
			if step == "[]" {
				s = *s.Items.Schema
				continue
			}
			next, ok := s.Properties[step]
			if !ok {
				t.Fatalf("%s has no %s", kind, path)
			}
			s = next
		}
		return s
	}
	enum := func(s apiextensionsv1.JSONSchemaProps) []string {
		var out []string
		for _, e := range s.Enum {
			out = append(out, strings.Trim(string(e.Raw), `"`))
		}
		return out
	}
	// GPU and FPGA models are free strings: upstream's k80|k40 enum cannot
	// name the GPUs people run.
	for _, p := range []string{"spec.hardware.gpu.model", "spec.hardware.fpga.model"} {
		if s := get("MLSysOpsNode", p); s.Type != "string" || len(s.Enum) != 0 {
			t.Errorf("MLSysOpsNode %s: type %s enum %v, want a free string", p, s.Type, enum(s))
		}
	}
	if s := get("MLSysOpsApp", "spec.components.[].containers.[].platform_requirements.gpu.model"); len(s.Enum) != 0 {
		t.Errorf("app GPU model has an enum %v", enum(s))
	}
	cases := map[string]struct {
		kind, path string
		want       []string
	}{
		"node layer":             {"MLSysOpsNode", "spec.continuum_layer", []string{"cloud", "edge_infrastructure", "edge", "far_edge"}},
		"node permitted actions": {"MLSysOpsNode", "spec.permitted_actions.[]", []string{"set_power_cap", "traffic_redirection", "acceleration", "cpu_frequency", "gpu_frequency", "change_container_cpu_set", "change_container_image", "*"}},
		"placement layer":        {"MLSysOpsApp", "spec.components.[].node_placement.continuum_layer.[]", []string{"cloud", "far_edge", "edge_infrastructure", "edge", "*"}},
		"restart policy":         {"MLSysOpsApp", "spec.components.[].restart_policy", []string{"Always", "OnFailure", "Never"}},
		"app phase":              {"MLSysOpsApp", "status.phase", []string{"Queued", "Scheduling", "Deploying", "Running", "Degraded", "Unschedulable", "Failed", "Removing"}},
	}
	for name, tc := range cases {
		if diff := cmp.Diff(tc.want, enum(get(tc.kind, tc.path))); diff != "" {
			t.Errorf("%s enum (-want +got):\n%s", name, diff)
		}
	}
	if d := get("MLSysOpsApp", "spec.components.[].containers.[].ports.[].protocol").Default; d == nil || string(d.Raw) != `"TCP"` {
		t.Errorf("port protocol default = %v, want TCP", d)
	}
	if d := get("MLSysOpsNode", "spec.hardware.gpu.instances").Default; d == nil || string(d.Raw) != "1" {
		t.Errorf("GPU instances default = %v, want 1", d)
	}
	if req := get("MLSysOpsNode", "spec").Required; !cmp.Equal(req, []string{"continuum_layer", "environment"}) {
		t.Errorf("node required = %v", req)
	}
}

func walk(t *testing.T, path string, s *apiextensionsv1.JSONSchemaProps, fn func(string, *apiextensionsv1.JSONSchemaProps)) {
	fn(path, s)
	for name, p := range s.Properties {
		p := p
		walk(t, path+"."+name, &p, fn)
	}
	if s.Items != nil && s.Items.Schema != nil {
		walk(t, path+"[]", s.Items.Schema, fn)
	}
}
