package handlers

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/northbound/api"
)

func TestSnake(t *testing.T) {
	for in, want := range map[string]string{
		"clusterPlacement": "cluster_placement", "clusterID": "cluster_id", "imagePullPolicy": "image_pull_policy",
		"containerPort": "container_port", "hostIP": "host_ip", "mlsysops-id": "mlsysops-id", "name": "name",
		"already_snake": "already_snake", "Component": "component", "HTTPServer": "http_server",
	} {
		if got := snake(in); got != want {
			t.Errorf("snake(%q) = %q, want %q", in, got, want)
		}
	}
}

// The ML connector's generated description, as upstream POSTs it.
const legacyML = `{"MLSysOpsApplication": {"name": "ml-app-1", "mlsysops-id": "f3a1c2d4",
  "clusterPlacement": {"clusterID": ["cloud-1"], "instances": 1},
  "components": [{"Component": {"name": "ml-comp", "uid": "f3a1c2d4"},
    "nodePlacement": {"node": "*", "continuumLayer": ["cloud"]}, "restartPolicy": "OnFailure",
    "containers": [{"image": "registry.example.org/models/f3a1c2d4:0.0.1", "imagePullPolicy": "IfNotPresent",
      "ports": [{"containerPort": 8000}]}]}]}}`

func TestParseMLDeploymentLegacy(t *testing.T) {
	id, app, err := parseMLDeployment([]byte(legacyML), description.FormatJSON)
	if err != nil {
		t.Fatal(err)
	}
	if id != "f3a1c2d4" || app.Name != id {
		t.Errorf("id %q, app name %q, want f3a1c2d4", id, app.Name)
	}
	c := app.Spec.Components[0]
	if c.Metadata.Name != "ml-comp" || c.Metadata.UID != "f3a1c2d4" || c.RestartPolicy != "OnFailure" ||
		c.NodePlacement == nil || c.NodePlacement.Node != "" || len(c.NodePlacement.ContinuumLayer) != 1 ||
		c.Containers[0].ImagePullPolicy != "IfNotPresent" || c.Containers[0].Ports[0].ContainerPort != 8000 || !c.ExternalAccess {
		t.Errorf("converted component: %+v", c)
	}
	if cp := app.Spec.ClusterPlacement; cp == nil || cp.ClusterID[0] != "cloud-1" || cp.Instances != 1 {
		t.Errorf("cluster placement: %+v", cp)
	}
}

func TestParseMLDeploymentLegacyProblems(t *testing.T) {
	cases := map[string]struct {
		body string
		want []api.FieldProblem
	}{
		"no id": {
			body: `{"MLSysOpsApplication": {"components": []}, "extra": 1}`,
			want: []api.FieldProblem{
				{Field: "extra", Type: "FieldValueNotSupported", Message: "Unsupported value: unknown root key; the legacy form has the single root key MLSysOpsApplication"},
				{Field: "MLSysOpsApplication.mlsysops-id", Type: "FieldValueRequired", Message: "Required value: the deployment id"},
			},
		},
		"bad values are reported with the keys the client wrote": {
			body: `{"MLSysOpsApplication": {"mlsysops-id": "Bad_ID", "components": [{"Component": {"name": "c"},
			  "restartPolicy": "Sometimes", "containers": [{"image": "i", "imagePullPolicy": "Later"}]}]}}`,
			want: []api.FieldProblem{
				{Field: "MLSysOpsApplication.components[0].containers[0].imagePullPolicy", Type: "FieldValueNotSupported",
					Message: `Unsupported value: "Later": supported values: "Always", "Never", "IfNotPresent"`},
				{Field: "MLSysOpsApplication.components[0].restartPolicy", Type: "FieldValueNotSupported",
					Message: `Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"`},
				{Field: "MLSysOpsApplication.mlsysops-id", Type: "FieldValueInvalid",
					Message: `Invalid value: "Bad_ID": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, err := parseMLDeployment([]byte(tc.body), description.FormatJSON)
			var e *Error
			if !errors.As(err, &e) || e.Status != 422 {
				t.Fatalf("error %v, want a 422", err)
			}
			if diff := cmp.Diff(tc.want, e.Problems); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseMLDeploymentApplicationForm(t *testing.T) {
	id, app, err := parseMLDeployment([]byte("MLSysOpsApp:\n  name: model-7\n  components:\n  - metadata: {name: serve}\n    containers: [{image: i, ports: [{container_port: 8080}]}]\n"+
		"  - metadata: {name: batch}\n    containers: [{image: j}]\n"), description.FormatYAML)
	if err != nil || id != "model-7" || app.Name != "model-7" {
		t.Fatalf("id %q, err %v", id, err)
	}
	// The component with a port is the inference endpoint.
	if !app.Spec.Components[0].ExternalAccess || app.Spec.Components[1].ExternalAccess {
		t.Errorf("external access: serve %v, batch %v; want only the component with a port exposed",
			app.Spec.Components[0].ExternalAccess, app.Spec.Components[1].ExternalAccess)
	}
}
