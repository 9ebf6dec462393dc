package charts_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/mlsysops-go/mlsysops/deployments/charts"
)

// TestElectedAgents: the continuum agent and the cluster agents run as
// replicas of one agent on every labelled node: --leader-elect with a
// Lease of their own namespace, a role that may create Leases and read and
// renew only that one, one replica per node, a PodDisruptionBudget, and a
// name that does not depend on the node (the continuum's; the cluster's,
// set per member by an OverridePolicy on env/0, NODE_NAME).
func TestElectedAgents(t *testing.T) {
	host, err := charts.Render(charts.Host, map[string]any{"karmadaHostIP": "192.0.2.1", "continuum": map[string]any{"name": "mls-continuum"}})
	if err != nil {
		t.Fatal(err)
	}
	kv := karmadaValues()
	kv["clusters"] = map[string]any{"c1": []any{"c1", "n1"}, "c2": []any{"c2"}}
	karmada, err := charts.Render(charts.Karmada, kv)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, lease string
		objs        []*unstructured.Unstructured
		wantName    string // NODE_NAME's value; empty: the node's
	}{
		{"mlsysops-continuum-agent", "mlsysops-framework/mlsysops-continuum-agent", host, "mls-continuum"},
		{"mlsysops-cluster-agent", "mlsysops-framework/mlsysops-cluster-agent", karmada, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ds appsv1.DaemonSet
			decode(t, find(t, tc.objs, "DaemonSet", tc.name), &ds)
			pod := ds.Spec.Template.Spec
			c := pod.Containers[0]
			for _, want := range []string{"--leader-elect", "--leader-elect-lease=" + tc.lease} {
				if !slices.Contains(c.Args, want) {
					t.Errorf("args %v lack %s", c.Args, want)
				}
			}
			env := map[string]string{}
			for _, e := range c.Env {
				env[e.Name] = e.Value
				if e.Name == "POD_NAME" && (e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name") {
					t.Errorf("POD_NAME is not the pod's name: %+v", e)
				}
			}
			if _, ok := env["POD_NAME"]; !ok {
				t.Error("no POD_NAME: replicas would have no stable identity in the Lease")
			}
			if c.Env[0].Name != "NODE_NAME" || c.Env[0].Value != tc.wantName {
				t.Errorf("env/0 = %s=%q, want NODE_NAME=%q", c.Env[0].Name, c.Env[0].Value, tc.wantName)
			}
			sel := labels.SelectorFromSet(ds.Spec.Selector.MatchLabels)
			aa := pod.Affinity.PodAntiAffinity
			if aa == nil || len(aa.RequiredDuringSchedulingIgnoredDuringExecution) != 1 ||
				aa.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey != "kubernetes.io/hostname" ||
				!cmp.Equal(aa.RequiredDuringSchedulingIgnoredDuringExecution[0].LabelSelector.MatchLabels, ds.Spec.Selector.MatchLabels) {
				t.Errorf("no one-replica-per-node anti-affinity: %+v", aa)
			}
			var pdb policyv1.PodDisruptionBudget
			decode(t, find(t, tc.objs, "PodDisruptionBudget", tc.name), &pdb)
			if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 || !sel.Matches(labels.Set(ds.Spec.Template.Labels)) ||
				!cmp.Equal(pdb.Spec.Selector.MatchLabels, ds.Spec.Selector.MatchLabels) {
				t.Errorf("budget %+v does not keep all but one replica of %v", pdb.Spec, ds.Spec.Selector.MatchLabels)
			}
			var role rbacv1.Role
			decode(t, find(t, karmada, "Role", tc.name+"-lease"), &role)
			want := []rbacv1.PolicyRule{
				{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
				{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{tc.name}, Verbs: []string{"get", "update"}},
			}
			if diff := cmp.Diff(want, role.Rules); diff != "" || role.Namespace != "mlsysops-framework" {
				t.Errorf("lease role in %s (-want +got):\n%s", role.Namespace, diff)
			}
		})
	}

	// Each described cluster names its agent after itself.
	for _, cluster := range []string{"c1", "c2"} {
		op := find(t, karmada, "OverridePolicy", "mlsysops-cluster-agent-"+cluster)
		rules, _, _ := unstructured.NestedSlice(op.Object, "spec", "overrideRules")
		want := []any{map[string]any{
			"targetCluster": map[string]any{"clusterNames": []any{cluster}},
			"overriders": map[string]any{"plaintext": []any{map[string]any{
				"path": "/spec/template/spec/containers/0/env/0", "operator": "replace",
				"value": map[string]any{"name": "NODE_NAME", "value": cluster},
			}}},
		}}
		if diff := cmp.Diff(want, rules); diff != "" {
			t.Errorf("override of %s (-want +got):\n%s", cluster, diff)
		}
		// Both agents mount the member's own Secret, required.
		op = find(t, karmada, "OverridePolicy", "mlsysops-agents-"+cluster)
		rules, _, _ = unstructured.NestedSlice(op.Object, "spec", "overrideRules")
		want = []any{map[string]any{
			"targetCluster": map[string]any{"clusterNames": []any{cluster}},
			"overriders": map[string]any{"plaintext": []any{map[string]any{
				"path": "/spec/template/spec/volumes/0", "operator": "replace",
				"value": map[string]any{"name": "xmpp-credentials", "secret": map[string]any{"secretName": "mlsysops-agents-" + cluster, "defaultMode": float64(288)}},
			}}},
		}}
		if diff := cmp.Diff(want, rules); diff != "" {
			t.Errorf("credentials override of %s (-want +got):\n%s", cluster, diff)
		}
	}
	for _, name := range []string{"mlsysops-cluster-agent", "mlsysops-node-agent"} {
		var ds appsv1.DaemonSet
		decode(t, find(t, karmada, "DaemonSet", name), &ds)
		if v := ds.Spec.Template.Spec.Volumes[0]; v.Name != "xmpp-credentials" || v.Projected == nil {
			t.Errorf("%s: volumes/0 is %s, the override replaces the projected xmpp-credentials there", name, v.Name)
		}
	}
}

func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
	return nil
}

func decode(t *testing.T, u *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
}
