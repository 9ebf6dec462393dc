package fluidity

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/description"
)

func TestParsePlan(t *testing.T) {
	cases := map[string]struct {
		cmd     map[string]any
		want    *Plan
		wantErr string
	}{
		"every action": {
			cmd: map[string]any{"name": "app", "deployment_plan": map[string]any{
				"a": []any{
					map[string]any{"action": "move", "src_host": "n1", "target_host": "n2"},
					map[string]any{"action": "change_spec", "host": "n2", "new_spec": map[string]any{"restart_policy": "Always"}},
				},
				"b":            []any{map[string]any{"action": "remove", "host": "n3"}, map[string]any{"action": "deploy", "host": "n4"}},
				"initial_plan": false,
			}, "plan_uid": "p1"},
			want: &Plan{App: "app", Components: map[string][]Action{
				"a": {
					{Kind: ActionMove, SrcHost: "n1", TargetHost: "n2"},
					{Kind: ActionChangeSpec, Host: "n2", NewSpec: map[string]any{"restart_policy": "Always"}},
				},
				"b": {{Kind: ActionRemove, Host: "n3"}, {Kind: ActionDeploy, Host: "n4"}},
			}},
		},
		"initial deploy": {
			cmd: map[string]any{"name": "app", "deployment_plan": map[string]any{
				"a": []any{map[string]any{"action": "deploy", "host": "n1"}}, "initial_plan": true,
			}},
			want: &Plan{App: "app", Initial: true, Components: map[string][]Action{"a": {{Kind: ActionDeploy, Host: "n1"}}}},
		},
		"no name": {
			cmd:     map[string]any{"deployment_plan": map[string]any{}},
			wantErr: "fluidity: the command needs name (the application)",
		},
		"no deployment plan": {
			cmd:     map[string]any{"name": "app"},
			wantErr: "fluidity: the command for app needs deployment_plan: {component: [actions]}",
		},
		"every problem listed": {
			cmd: map[string]any{"name": "app", "deployment_plan": map[string]any{
				"a": []any{
					map[string]any{"action": "move", "src_host": "n1"},
					map[string]any{"action": "teleport"},
					map[string]any{"host": "n1"},
					"deploy",
				},
				"b":            map[string]any{"action": "deploy"},
				"c":            []any{map[string]any{"action": "change_spec", "new_spec": "x"}, map[string]any{"action": "remove"}},
				"initial_plan": "yes",
			}},
			wantErr: `fluidity: bad plan for app: a[0]: move needs src_host and target_host; a[1]: unknown action "teleport" (deploy, move, remove, change_spec); ` +
				`a[2]: action is missing (deploy, move, remove, change_spec); a[3]: want an object {action: ...}; b: want a list of actions; ` +
				`c[0]: change_spec needs new_spec (the component's spec, or the fields to change); c[1]: remove needs host; initial_plan: want true or false`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParsePlan(tc.cmd)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error = %v\nwant    %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("plan (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOverrideStep(t *testing.T) {
	cases := map[string]struct {
		ov      *Override
		act     Action
		current []string
		want    *Override
		changed bool
		wantErr string
	}{
		"move": {
			ov: &Override{}, act: Action{Kind: ActionMove, SrcHost: "a", TargetHost: "b"}, current: []string{"a"},
			want: &Override{Nodes: []string{"b"}}, changed: true,
		},
		"move one of two": {
			ov: &Override{}, act: Action{Kind: ActionMove, SrcHost: "a", TargetHost: "c"}, current: []string{"a", "b"},
			want: &Override{Nodes: []string{"b", "c"}}, changed: true,
		},
		"move from a pinned node": {
			ov: &Override{Nodes: []string{"b"}}, act: Action{Kind: ActionMove, SrcHost: "b", TargetHost: "c"}, current: []string{"a"},
			want: &Override{Nodes: []string{"c"}}, changed: true,
		},
		"move from elsewhere": {
			ov: &Override{}, act: Action{Kind: ActionMove, SrcHost: "x", TargetHost: "b"}, current: []string{"a"},
			wantErr: "move from x: the component runs on [a]",
		},
		"move to itself": {
			ov: &Override{}, act: Action{Kind: ActionMove, SrcHost: "a", TargetHost: "a"}, current: []string{"a"},
			wantErr: "move from a to itself",
		},
		"deploy where it runs": {
			ov: &Override{}, act: Action{Kind: ActionDeploy, Host: "a"}, current: []string{"a"},
			want: &Override{},
		},
		"deploy adds a node": {
			ov: &Override{}, act: Action{Kind: ActionDeploy, Host: "b"}, current: []string{"c", "a"},
			want: &Override{Nodes: []string{"a", "b", "c"}}, changed: true,
		},
		"deploy a stopped component": {
			ov: &Override{Nodes: []string{"a"}, Stopped: true}, act: Action{Kind: ActionDeploy, Host: "b"}, current: []string{"a"},
			want: &Override{Nodes: []string{"b"}}, changed: true,
		},
		"remove one of two": {
			ov: &Override{}, act: Action{Kind: ActionRemove, Host: "a"}, current: []string{"a", "b"},
			want: &Override{Nodes: []string{"b"}}, changed: true,
		},
		"remove the last": {
			ov: &Override{Spec: &mlsysopsv1.Component{}}, act: Action{Kind: ActionRemove, Host: "a"}, current: []string{"a"},
			want: &Override{Nodes: []string{"a"}, Stopped: true, Spec: &mlsysopsv1.Component{}}, changed: true,
		},
		"remove from elsewhere": {
			ov: &Override{}, act: Action{Kind: ActionRemove, Host: "b"}, current: []string{"a"},
			wantErr: "remove from b: the component runs on [a]",
		},
		"move a stopped component": {
			ov: &Override{Nodes: []string{"a"}, Stopped: true}, act: Action{Kind: ActionMove, SrcHost: "a", TargetHost: "b"}, current: []string{"a"},
			wantErr: "move from a: the component runs on no node (it was removed; deploy it first)",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			changed, err := tc.ov.Step(tc.act, tc.current)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("error = %v, want %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if changed != tc.changed {
				t.Errorf("changed = %v, want %v", changed, tc.changed)
			}
			if diff := cmp.Diff(tc.want, tc.ov); diff != "" {
				t.Errorf("override (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOverrideReplicasAndRunning(t *testing.T) {
	app := &mlsysopsv1.MLSysOpsAppSpec{}
	three := &mlsysopsv1.Component{NodePlacement: &mlsysopsv1.NodePlacement{Scaling: &mlsysopsv1.Scaling{Instances: 3}}}
	one := &mlsysopsv1.Component{}
	cases := map[string]struct {
		ov       *Override
		comp     *mlsysopsv1.Component
		replicas int32
		running  []string
	}{
		"none":                  {ov: nil, comp: three, replicas: 3, running: []string{"cur"}},
		"spec only":             {ov: &Override{Spec: one}, comp: one, replicas: 1, running: []string{"cur"}},
		"pinned to more":        {ov: &Override{Nodes: []string{"a", "b"}}, comp: one, replicas: 2, running: []string{"a", "b"}},
		"pinned to fewer nodes": {ov: &Override{Nodes: []string{"a"}}, comp: three, replicas: 3, running: []string{"a"}},
		"stopped":               {ov: &Override{Nodes: []string{"a"}, Stopped: true}, comp: three, replicas: 0, running: nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.ov.Replicas(app, tc.comp); got != tc.replicas {
				t.Errorf("replicas = %d, want %d", got, tc.replicas)
			}
			if diff := cmp.Diff(tc.running, tc.ov.Running([]string{"cur"})); diff != "" {
				t.Errorf("running (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOverrideAnnotationRoundTrip(t *testing.T) {
	ov := &Override{Plan: "p1", Base: "abc", Nodes: []string{"a"}, Spec: &mlsysopsv1.Component{Metadata: mlsysopsv1.ComponentMetadata{Name: "c"}}}
	got, err := ReadOverride(map[string]string{mlsysopsv1.AnnotationOverride: ov.Encode()})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ov, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if got, err := ReadOverride(nil); got != nil || err != nil {
		t.Errorf("no annotation: %v %v", got, err)
	}
	if _, err := ReadOverride(map[string]string{mlsysopsv1.AnnotationOverride: "{"}); err == nil {
		t.Error("a broken annotation was read")
	}
}

func exampleApp(t *testing.T, name string) *mlsysopsv1.MLSysOpsApp {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "apps", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	app, errs := description.ParseApp(data, description.FormatYAML)
	if len(errs) > 0 {
		t.Fatal(errs.ToAggregate())
	}
	return app
}

func TestChangeSpec(t *testing.T) {
	app := exampleApp(t, "test-application")
	server := &app.Spec.Components[0]

	t.Run("fields merge into the component", func(t *testing.T) {
		got, err := ChangeSpec(app, server, map[string]any{
			"containers": []any{map[string]any{"image": "registry.example/test-app:2", "platform_requirements": map[string]any{
				"cpu": map[string]any{"requests": "250m"}, "memory": map[string]any{"limits": "256Mi"},
			}}},
			"restart_policy": nil,
		})
		if err != nil {
			t.Fatal(err)
		}
		if got.Metadata.Name != "server-app" || got.NodePlacement == nil || got.NodePlacement.Node != "edge-t4-1" {
			t.Errorf("what new_spec did not name changed: %+v", got)
		}
		if got.RestartPolicy != "" {
			t.Errorf("null did not delete restart_policy: %q", got.RestartPolicy)
		}
		c := got.Containers[0]
		if c.Image != "registry.example/test-app:2" || c.PlatformRequirements.CPU.Requests.String() != "250m" || c.PlatformRequirements.Memory.Limits.String() != "256Mi" {
			t.Errorf("container = %+v", c)
		}
		if len(c.Env) != 0 {
			t.Errorf("lists are replaced, but env survived: %+v", c.Env)
		}
		if server.Containers[0].Image == c.Image {
			t.Error("the application's component was changed in place")
		}
	})
	t.Run("the whole component, as upstream sends it", func(t *testing.T) {
		whole, err := toMap(server)
		if err != nil {
			t.Fatal(err)
		}
		whole["restart_policy"] = "Always"
		got, err := ChangeSpec(app, server, whole)
		if err != nil {
			t.Fatal(err)
		}
		want := server.DeepCopy()
		want.RestartPolicy = "Always"
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("component (-want +got):\n%s", diff)
		}
	})
	for name, tc := range map[string]struct {
		spec    map[string]any
		wantErr string
	}{
		"rename": {
			spec:    map[string]any{"metadata": map[string]any{"name": "other"}},
			wantErr: "new_spec must keep the component's name server-app (metadata.name)",
		},
		"invalid value": {
			spec:    map[string]any{"restart_policy": "Sometimes"},
			wantErr: "new_spec of server-app is not valid:",
		},
		"no containers": {
			spec:    map[string]any{"containers": []any{}},
			wantErr: "new_spec of server-app is not valid:",
		},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ChangeSpec(app, server, tc.spec)
			if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
				t.Fatalf("error = %v, want %s...", err, tc.wantErr)
			}
		})
	}
}

// TestRenderOverrideGolden renders the test application's components with
// overrides (a client pinned to two nodes with a changed spec, a server
// removed from its node) and compares with testdata/overrides.output.yaml.
func TestRenderOverrideGolden(t *testing.T) {
	app := exampleApp(t, "test-application")
	server, client := &app.Spec.Components[0], &app.Spec.Components[1]
	spec, err := ChangeSpec(app, client, map[string]any{"containers": []any{map[string]any{"image": "registry.example/test-app:2"}}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		comp  *mlsysopsv1.Component
		nodes []string
		ov    *Override
	}{
		{client, []string{"edge-node-2", "edge-node-1"}, &Override{Plan: "plan-1", Base: SpecHash(client), Nodes: []string{"edge-node-1", "edge-node-2"}, Spec: spec}},
		{server, []string{"edge-t4-1"}, &Override{Plan: "plan-2", Base: SpecHash(server), Nodes: []string{"edge-t4-1"}, Stopped: true}},
	}
	var out bytes.Buffer
	for _, tc := range cases {
		objs, err := Render(app, tc.ov.Effective(tc.comp), tc.nodes, tc.ov)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range []any{objs.Deployment, objs.Service} {
			if o == (*corev1.Service)(nil) {
				continue
			}
			b, err := yaml.Marshal(o)
			if err != nil {
				t.Fatal(err)
			}
			out.WriteString("---\n")
			out.Write(b)
		}
	}
	golden := filepath.Join("testdata", "overrides.output.yaml")
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), out.String()); diff != "" {
		t.Errorf("rendered objects differ from %s (-want +got):\n%s", golden, diff)
	}
}
