package fluidity

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/resource"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/mechanism"
)

func TestPermitPlacement(t *testing.T) {
	move := Action{Kind: ActionMove, SrcHost: "a", TargetHost: "b"}
	deploy := Action{Kind: ActionDeploy, Host: "a"}
	remove := Action{Kind: ActionRemove, Host: "a"}
	spec := Action{Kind: ActionChangeSpec, NewSpec: map[string]any{"runtime_class_name": "nvidia"}}
	cases := map[string]struct {
		permitted []string
		initial   bool
		action    Action
		wantErr   string
	}{
		"absent list permits a move":       {action: move},
		"star permits a move":              {permitted: []string{"*"}, action: move},
		"relocation permits a move":        {permitted: []string{"component_relocation"}, action: move},
		"relocation permits a remove":      {permitted: []string{"component_relocation"}, action: remove},
		"initial deploy needs nothing":     {permitted: []string{"acceleration"}, initial: true, action: deploy},
		"change_spec is checked elsewhere": {permitted: []string{"acceleration"}, action: spec},
		"move refused": {permitted: []string{"change_container_image"}, action: move,
			wantErr: `action component_relocation (fluidity move) is not permitted on application shop (permitted_actions: change_container_image); add "component_relocation" or "*" to permitted_actions in the application's MLSysOpsApp description to allow it`},
		"later deploy refused": {permitted: []string{"acceleration"}, action: deploy,
			wantErr: `action component_relocation (fluidity deploy) is not permitted on application shop (permitted_actions: acceleration); add "component_relocation" or "*" to permitted_actions in the application's MLSysOpsApp description to allow it`},
		"remove refused": {permitted: []string{"traffic_redirection"}, action: remove,
			wantErr: `action component_relocation (fluidity remove) is not permitted on application shop (permitted_actions: traffic_redirection); add "component_relocation" or "*" to permitted_actions in the application's MLSysOpsApp description to allow it`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := PermitPlacement(mechanism.NewAppPermissions("shop", tc.permitted), tc.initial, tc.action)
			checkForbidden(t, err, tc.wantErr)
		})
	}
}

func checkForbidden(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case want != "" && err == nil:
		t.Fatalf("no error, want %q", want)
	case err != nil && err.Error() != want:
		t.Fatalf("error:\n got %s\nwant %s", err, want)
	case err != nil && !errors.Is(err, mechanism.ErrForbidden):
		t.Fatalf("error %v does not wrap ErrForbidden", err)
	}
}

// component is a fixture builder: one container running image.
func component(image string, edit func(c *mlsysopsv1.Component)) *mlsysopsv1.Component {
	c := &mlsysopsv1.Component{Metadata: mlsysopsv1.ComponentMetadata{Name: "worker"}, Containers: []mlsysopsv1.Container{{Image: image}}}
	if edit != nil {
		edit(c)
	}
	return c
}

func TestSpecChangeActions(t *testing.T) {
	cpu := resource.MustParse("250m")
	cases := map[string]struct {
		after       *mlsysopsv1.Component
		wantActions []SpecAction
		wantOther   []string
	}{
		"nothing changed": {after: component("img:1", nil)},
		"image and pull policy": {
			after: component("img:2", func(c *mlsysopsv1.Component) { c.Containers[0].ImagePullPolicy = "Always" }),
			wantActions: []SpecAction{{Action: mlsysopsv1.AppActionChangeContainerImage,
				Fields: []string{"containers[0].image", "containers[0].image_pull_policy"}}},
		},
		"resources, runtime class and acceleration": {
			after: component("img:1", func(c *mlsysopsv1.Component) {
				c.RuntimeClassName = "nvidia"
				c.Containers[0].PlatformRequirements = &mlsysopsv1.PlatformRequirements{CPU: &mlsysopsv1.CPURequirements{Requests: &cpu}}
				c.Containers[0].AccelerationAPI = []mlsysopsv1.AppAccelerationAPI{{CallName: "image_inference"}}
			}),
			wantActions: []SpecAction{
				{Action: mlsysopsv1.AppActionAcceleration, Fields: []string{"containers[0].acceleration_api"}},
				{Action: mlsysopsv1.AppActionChangeContainerResourceRequirements, Fields: []string{"containers[0].platform_requirements"}},
				{Action: mlsysopsv1.AppActionChangeContainerRuntimeClass, Fields: []string{"runtime_class_name"}},
			},
		},
		"fields no action names": {
			after: component("img:1", func(c *mlsysopsv1.Component) {
				c.Containers[0].Command = []string{"serve"}
				c.NodePlacement = &mlsysopsv1.NodePlacement{Node: "edge-1"}
			}),
			wantOther: []string{"containers[0].command", "node_placement"},
		},
		"another container": {
			after: component("img:1", func(c *mlsysopsv1.Component) {
				c.Containers = append(c.Containers, mlsysopsv1.Container{Image: "sidecar:1"})
			}),
			wantOther: []string{"containers (their number)"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			actions, other, err := SpecChangeActions(component("img:1", nil), tc.after)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantActions, actions); diff != "" {
				t.Errorf("actions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantOther, other); diff != "" {
				t.Errorf("other (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPermitSpecChange(t *testing.T) {
	image := component("img:2", nil)
	command := component("img:1", func(c *mlsysopsv1.Component) { c.Containers[0].Command = []string{"serve"} })
	cases := map[string]struct {
		permitted []string
		after     *mlsysopsv1.Component
		wantErr   string
	}{
		"absent list permits all":       {after: command},
		"image permitted":               {permitted: []string{"change_container_image"}, after: image},
		"star permits unnamed changes":  {permitted: []string{"*"}, after: command},
		"no change needs no permission": {permitted: []string{"acceleration"}, after: component("img:1", nil)},
		"image refused": {permitted: []string{"component_relocation"}, after: image,
			wantErr: `action change_container_image (change_spec of containers[0].image) is not permitted on application shop (permitted_actions: component_relocation); add "change_container_image" or "*" to permitted_actions in the application's MLSysOpsApp description to allow it`},
		"unnamed change refused": {permitted: []string{"change_container_image"}, after: command,
			wantErr: `action * (change_spec of containers[0].command, which no narrower action covers) is not permitted on application shop (permitted_actions: change_container_image); add "*" to permitted_actions in the application's MLSysOpsApp description to allow it`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := PermitSpecChange(mechanism.NewAppPermissions("shop", tc.permitted), component("img:1", nil), tc.after)
			checkForbidden(t, err, tc.wantErr)
		})
	}
}
