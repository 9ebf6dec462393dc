package description

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

func TestParseApp(t *testing.T) {
	const upstreamYAML = `
MLSysOpsApp:
  name: demo
  components:
    - metadata: {name: web}
      containers: [{image: nginx}]
`
	cases := map[string]struct {
		data     string
		format   Format
		wantName string
		want     []string
	}{
		"upstream YAML":                 {data: upstreamYAML, format: FormatYAML, wantName: "demo"},
		"upstream YAML, format guessed": {data: upstreamYAML, format: FormatAuto, wantName: "demo"},
		"upstream JSON": {
			data:     `{"MLSysOpsApp": {"name": "demo", "components": [{"metadata": {"name": "web"}, "containers": [{"image": "nginx"}]}]}}`,
			format:   FormatJSON,
			wantName: "demo",
		},
		"resource JSON": {
			data:     `{"apiVersion": "mlsysops.eu/v1", "kind": "MLSysOpsApp", "metadata": {"name": "demo"}, "spec": {"components": [{"metadata": {"name": "web"}, "containers": [{"image": "nginx"}]}]}}`,
			format:   FormatAuto,
			wantName: "demo",
		},
		"resource YAML with status": {
			data: `apiVersion: mlsysops.eu/v1
kind: MLSysOpsApp
metadata: {name: demo, namespace: team-a}
spec:
  components: [{metadata: {name: web}, containers: [{image: nginx}]}]
status:
  phase: Running
  components: [{name: web, cluster: cloud-1, nodes: [gpu-1], readyReplicas: 1}]
`,
			wantName: "demo",
		},
		"YAML sent as JSON": {data: upstreamYAML, format: FormatJSON, want: []string{"FieldValueInvalid "}},
		"a node description": {
			data: "MLSysOpsNode:\n  continuum_layer: edge\n  environment: {}\n",
			want: []string{"FieldValueInvalid MLSysOpsNode"},
		},
		"a node resource": {
			data: `{"apiVersion": "mlsysops.eu/v1", "kind": "MLSysOpsNode", "spec": {}}`,
			want: []string{"FieldValueInvalid kind"},
		},
		"no name": {
			data: "MLSysOpsApp:\n  components: [{metadata: {name: web}, containers: [{image: nginx}]}]\n",
			want: []string{"FieldValueRequired MLSysOpsApp.name"},
		},
		"metadata and spec names disagree": {
			data: `{"apiVersion": "mlsysops.eu/v1", "kind": "MLSysOpsApp", "metadata": {"name": "a"}, "spec": {"name": "b", "components": [{"metadata": {"name": "web"}, "containers": [{"image": "nginx"}]}]}}`,
			want: []string{"FieldValueInvalid spec.name"},
		},
		"unknown metadata field": {
			data: `{"apiVersion": "mlsysops.eu/v1", "kind": "MLSysOpsApp", "metadata": {"name": "a", "colour": "blue"}, "spec": {"components": [{"metadata": {"name": "web"}, "containers": [{"image": "nginx"}]}]}}`,
			want: []string{"FieldValueInvalid metadata"},
		},
		"unknown top-level field in resource": {
			data: `{"apiVersion": "mlsysops.eu/v1", "kind": "MLSysOpsApp", "metadata": {"name": "a"}, "spek": {}}`,
			want: []string{"FieldValueRequired spec", "FieldValueNotSupported spek"},
		},
		"extra root key beside the wrapper": {
			data: upstreamYAML + "extra: 1\n",
			want: []string{"FieldValueNotSupported extra"},
		},
		"bare spec without wrapper": {
			data: "name: demo\ncomponents: []\n",
			want: []string{"FieldValueInvalid "},
		},
		"wrapper is a list": {
			data: "MLSysOpsApp: [1, 2]\n",
			want: []string{"FieldValueTypeInvalid MLSysOpsApp"},
		},
		"document is a list": {
			data: "- MLSysOpsApp: {}\n",
			want: []string{"FieldValueInvalid "},
		},
		"duplicate key": {
			data: "MLSysOpsApp:\n  name: a\n  name: b\n",
			want: []string{"FieldValueInvalid "},
		},
		"wrong types everywhere, all reported": {
			data: `MLSysOpsApp:
  name: demo
  cluster_placement: {cluster_id: cloud-1, instances: many}
  components:
    - metadata: {name: web}
      host_network: "yes"
      containers:
        - image: nginx
          command: run
          ports: [{container_port: "80a"}]
`,
			want: []string{
				"FieldValueTypeInvalid MLSysOpsApp.cluster_placement.cluster_id",
				"FieldValueTypeInvalid MLSysOpsApp.cluster_placement.instances",
				"FieldValueTypeInvalid MLSysOpsApp.components[0].containers[0].command",
				"FieldValueTypeInvalid MLSysOpsApp.components[0].containers[0].ports[0].container_port",
				"FieldValueTypeInvalid MLSysOpsApp.components[0].host_network",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			app, errs := ParseApp([]byte(tc.data), tc.format)
			if diff := cmp.Diff(tc.want, summary(errs), cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("ParseApp problems (-want +got):\n%s\nall: %v", diff, errs)
			}
			if len(tc.want) > 0 {
				if app != nil {
					t.Errorf("ParseApp returned an application together with problems")
				}
				return
			}
			if app.Name != tc.wantName {
				t.Errorf("name = %q, want %q", app.Name, tc.wantName)
			}
			if app.APIVersion != "mlsysops.eu/v1" || app.Kind != mlsysopsv1.KindApp {
				t.Errorf("TypeMeta = %+v, want mlsysops.eu/v1 MLSysOpsApp", app.TypeMeta)
			}
		})
	}
}

func TestParseAppTolerance(t *testing.T) {
	app, errs := ParseApp([]byte(`MLSysOpsApp:
  name: demo
  components:
    - metadata: {name: web}
      restart_policy: on_failure
      storage:
        buckets: [{bucket_id: b, reduncancy: one, server_side_encryption: off}]
      node_placement: {mobility: true}
      containers:
        - image: nginx
          platform_requirements:
            cpu: {requests: 0.25, limits: 1, frequency: "2.4GHz"}
            mcu: {frequency: 0.168}
            disk: "20"
            gpu: {memory: "16", limits: "1"}
          ports: [{container_port: "8080"}]
`), FormatYAML)
	if len(errs) > 0 {
		t.Fatalf("ParseApp: %v", errs)
	}
	c := app.Spec.Components[0]
	pr := c.Containers[0].PlatformRequirements
	got := map[string]interface{}{
		"restart_policy":         c.RestartPolicy,
		"redundancy":             c.Storage.Buckets[0].Redundancy,
		"server_side_encryption": c.Storage.Buckets[0].ServerSideEncryption,
		"mobile":                 c.NodePlacement.Mobile,
		"cpu.requests":           pr.CPU.Requests.String(),
		"cpu.limits":             pr.CPU.Limits.String(),
		"cpu.frequency":          pr.CPU.Frequency,
		"mcu.frequency":          pr.MCU.Frequency,
		"disk":                   pr.Disk,
		"gpu.memory":             pr.GPU.Memory,
		"gpu.limits":             pr.GPU.Limits,
		"port":                   c.Containers[0].Ports[0].ContainerPort,
		"port protocol default":  c.Containers[0].Ports[0].Protocol,
	}
	want := map[string]interface{}{
		"restart_policy":         "OnFailure",
		"redundancy":             "one",
		"server_side_encryption": "off",
		"mobile":                 true,
		"cpu.requests":           "250m",
		"cpu.limits":             "1",
		"cpu.frequency":          int64(2_400_000_000),
		"mcu.frequency":          int64(168_000_000),
		"disk":                   int64(20),
		"gpu.memory":             int64(16),
		"gpu.limits":             int32(1),
		"port":                   int32(8080),
		"port protocol default":  "TCP",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tolerated values (-want +got):\n%s", diff)
	}
}

func TestParseLimits(t *testing.T) {
	big := "MLSysOpsCluster:\n  cluster_id: a\n  nodes: [x]\n# " + strings.Repeat("x", MaxDocumentSize) + "\n"
	_, errs := Parse("big.yaml", []byte(big))
	if diff := cmp.Diff([]string{"FieldValueInvalid "}, summary(errs)); diff != "" {
		t.Errorf("oversized document (-want +got):\n%s", diff)
	}
	// An alias bomb expands to billions of nodes; it must be refused, not
	// expanded.
	var bomb strings.Builder
	bomb.WriteString("a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	prev := "a"
	for _, name := range []string{"b", "c", "d", "e", "f", "g", "h", "i"} {
		bomb.WriteString(name + ": &" + name + " [" + strings.TrimSuffix(strings.Repeat("*"+prev+", ", 9), ", ") + "]\n")
		prev = name
	}
	bomb.WriteString("MLSysOpsNode: *i\n")
	_, errs = Parse("bomb.yaml", []byte(bomb.String()))
	if diff := cmp.Diff([]string{"FieldValueInvalid "}, summary(errs)); diff != "" {
		t.Errorf("alias bomb (-want +got):\n%s", diff)
	}
	_, errs = Parse("empty.yaml", []byte("# only a comment\n"))
	if diff := cmp.Diff([]string{"FieldValueInvalid "}, summary(errs)); diff != "" {
		t.Errorf("empty document (-want +got):\n%s", diff)
	}
}

func TestParseNaming(t *testing.T) {
	cases := map[string]struct {
		file, data string
		wantName   string
		want       []string
	}{
		"node named by its name": {
			file: "nodes/whatever.yaml", data: "MLSysOpsNode: {name: n1, continuum_layer: edge, environment: {}}", wantName: "n1",
		},
		"node named by its file": {
			file: "nodes/n2.yaml", data: "MLSysOpsNode: {continuum_layer: edge, environment: {}}", wantName: "n2",
		},
		"node file name not a valid name": {
			file: "nodes/Node_2.yaml", data: "MLSysOpsNode: {continuum_layer: edge, environment: {}}",
			want: []string{"FieldValueInvalid "},
		},
		"cluster named by cluster_id, not its file": {
			file: "clusters/host-a.yaml", data: "MLSysOpsCluster: {cluster_id: c1, nodes: [a]}", wantName: "c1",
		},
		"cluster resource whose name differs from cluster_id": {
			file: "c.yaml", data: `{"apiVersion": "mlsysops.eu/v1", "kind": "MLSysOpsCluster", "metadata": {"name": "c2"}, "spec": {"cluster_id": "c1", "nodes": ["a"]}}`,
			want: []string{"FieldValueInvalid spec.cluster_id"},
		},
		"continuum named by its file": {
			file: "continuum/karmada-host.yml", data: "MLSysOpsContinuum: {continuum_id: x, clusters: [c1]}", wantName: "karmada-host",
		},
		"datacenter named by datacenter_id": {
			file: "dc.yaml", data: "MLSysOpsDatacenter: {datacenter_id: dc-1, cluster_id: c1, continuum: cloud, nodes: [a]}", wantName: "dc-1",
		},
		"JSON file": {
			file: "n3.json", data: `{"MLSysOpsNode": {"continuum_layer": "edge", "environment": {}}}`, wantName: "n3",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			obj, errs := Parse(tc.file, []byte(tc.data))
			if diff := cmp.Diff(tc.want, summary(errs), cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("Parse problems (-want +got):\n%s\nall: %v", diff, errs)
			}
			if len(tc.want) == 0 && obj.GetName() != tc.wantName {
				t.Errorf("name = %q, want %q", obj.GetName(), tc.wantName)
			}
		})
	}
}

func TestFormatFromContentType(t *testing.T) {
	cases := map[string]Format{
		"application/json":                FormatJSON,
		"application/json; charset=utf-8": FormatJSON,
		"application/merge-patch+json":    FormatJSON,
		"application/yaml":                FormatYAML,
		"application/x-yaml":              FormatYAML,
		"text/yaml; charset=utf-8":        FormatYAML,
		"text/plain":                      FormatAuto,
		"":                                FormatAuto,
		"garbage;;":                       FormatAuto,
	}
	for ct, want := range cases {
		if got := FormatFromContentType(ct); got != want {
			t.Errorf("FormatFromContentType(%q) = %v, want %v", ct, got, want)
		}
	}
}

func TestFrequencyHz(t *testing.T) {
	cases := map[string]struct {
		in      interface{}
		want    int64
		wantErr bool
	}{
		"GHz number":         {in: 2.4, want: 2_400_000_000},
		"GHz integer":        {in: int64(3), want: 3_000_000_000},
		"MHz number":         {in: int64(600), want: 600_000_000},
		"Hz number":          {in: int64(1_500_000_000), want: 1_500_000_000},
		"Hz float":           {in: 2.45e9, want: 2_450_000_000},
		"GHz string":         {in: "1.7", want: 1_700_000_000},
		"GHz with unit":      {in: "2.4GHz", want: 2_400_000_000},
		"MHz with unit":      {in: "1500 MHz", want: 1_500_000_000},
		"kHz with unit":      {in: "32kHz", want: 32_000},
		"Hz with unit":       {in: "100Hz", want: 100},
		"rounding":           {in: 1.4, want: 1_400_000_000},
		"zero":               {in: int64(0), wantErr: true},
		"negative":           {in: -1.0, wantErr: true},
		"words":              {in: "fast", wantErr: true},
		"boolean":            {in: true, wantErr: true},
		"absurdly high":      {in: "1e30", wantErr: true},
		"not a number (NaN)": {in: "NaN", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := FrequencyHz(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("FrequencyHz(%v) error = %v, want error %v", tc.in, err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("FrequencyHz(%v) = %d, want %d", tc.in, got, tc.want)
			}
		})
	}
}
