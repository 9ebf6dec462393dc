package charts_test

import (
	"fmt"
	"io/fs"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/mlsysops-go/mlsysops/agents/continuum"
	"github.com/mlsysops-go/mlsysops/crds"
	"github.com/mlsysops-go/mlsysops/deployments/charts"
)

// karmadaValues are the least values the Karmada chart renders with.
func karmadaValues() map[string]any {
	return map[string]any{
		"clusters": map[string]any{"c1": []any{"c1", "n1"}},
		"redis":    map[string]any{"address": "192.0.2.1:6379"},
		"xmpp":     map[string]any{"server": "192.0.2.1:5222"},
	}
}

// TestChartCRDs: the chart's copy of the CRDs is the repository's
// (make generate writes it).
func TestChartCRDs(t *testing.T) {
	chart, err := charts.FS(charts.Karmada)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := fs.Glob(crds.FS, "*.yaml")
	got, _ := fs.Glob(chart, "files/crds/*.yaml")
	if len(got) != len(want) {
		t.Fatalf("chart has %d CRD files, crds/ %d: run make generate", len(got), len(want))
	}
	for _, name := range want {
		w, _ := fs.ReadFile(crds.FS, name)
		g, err := fs.ReadFile(chart, "files/crds/"+name)
		if err != nil || string(g) != string(w) {
			t.Errorf("files/crds/%s differs from crds/%s: run make generate", name, name)
		}
	}
}

// TestAPIObjectsMatchTheAgent: what the chart installs for the continuum
// agent (which then only checks it) is what the agent installs itself
// with --install-api (the applications' policy: with the bindings).
func TestAPIObjectsMatchTheAgent(t *testing.T) {
	objs, err := charts.Render(charts.Karmada, merge(karmadaValues(), map[string]any{"propagation": "binding"}))
	if err != nil {
		t.Fatal(err)
	}
	find := func(kind, name string) *unstructured.Unstructured {
		for _, o := range objs {
			if o.GetKind() == kind && o.GetName() == name {
				return o
			}
		}
		t.Fatalf("no %s %s rendered", kind, name)
		return nil
	}
	cpp, err := continuum.CRDPropagation()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		kind string
		obj  runtime.Object
		name string
	}{
		{"ClusterPropagationPolicy", cpp, continuum.CRDPropagationPolicy},
		{"PropagationPolicy", continuum.AppPropagation(), continuum.AppPropagationPolicy},
		{"ResourceInterpreterCustomization", continuum.AppInterpretation(), continuum.AppInterpreter},
	} {
		want, err := runtime.DefaultUnstructuredConverter.ToUnstructured(c.obj)
		if err != nil {
			t.Fatal(err)
		}
		got := find(c.kind, c.name)
		if diff := cmp.Diff(want["spec"], got.Object["spec"]); diff != "" {
			t.Errorf("%s %s: chart and agent differ (-agent +chart):\n%s", c.kind, c.name, diff)
		}
	}
}

// TestStages: every object has a known install stage, and the ones the
// agents need exist before them.
func TestStages(t *testing.T) {
	host, err := charts.Render(charts.Host, map[string]any{"karmadaHostIP": "192.0.2.1"})
	if err != nil {
		t.Fatal(err)
	}
	karmada, err := charts.Render(charts.Karmada, karmadaValues())
	if err != nil {
		t.Fatal(err)
	}
	stageOf := map[string]string{}
	for _, o := range append(host, karmada...) {
		if charts.StageIndex(o) == len(charts.Stages) {
			t.Errorf("%s %s: unknown stage %q", o.GetKind(), o.GetName(), o.GetAnnotations()[charts.StageKey])
		}
		stageOf[o.GetKind()+"/"+o.GetName()] = o.GetAnnotations()[charts.StageKey]
	}
	for obj, want := range map[string]string{
		"Namespace/mlsysops-framework":                      "services",
		"CustomResourceDefinition/mlsysopsapps.mlsysops.eu": "continuum",
		"DaemonSet/mlsysops-continuum-agent":                "continuum",
		"DaemonSet/mlsysops-cluster-agent":                  "clusters",
		"DaemonSet/mlsysops-node-agent":                     "nodes",
		"Deployment/mlsysops-redis":                         "services",
	} {
		if stageOf[obj] != want {
			t.Errorf("%s: stage %q, want %q", obj, stageOf[obj], want)
		}
	}
}

// TestValuesRefused: values the charts cannot work with are refused with
// what to set.
func TestValuesRefused(t *testing.T) {
	cases := map[string]struct {
		chart  string
		values map[string]any
		want   []string
	}{
		"no clusters":       {charts.Karmada, map[string]any{}, []string{"clusters: name the member clusters"}},
		"no redis":          {charts.Karmada, map[string]any{"clusters": map[string]any{"c": []any{"c"}}, "xmpp": map[string]any{"server": "x:1"}}, []string{"redis.address"}},
		"bundled, no IP":    {charts.Host, map[string]any{}, []string{"karmadaHostIP"}},
		"external, no xmpp": {charts.Host, map[string]any{"services": map[string]any{"mode": "external"}, "redis": map[string]any{"address": "r:1"}, "postgres": map[string]any{"address": "p:1"}}, []string{"xmpp.server"}},
		"bad mode":          {charts.Host, map[string]any{"services": map[string]any{"mode": "cloud"}}, []string{`services.mode: services.mode must be one of the following: "bundled", "external"`}},
		"external, no S3": {charts.Host, map[string]any{"services": map[string]any{"mode": "external"}, "karmadaHostIP": "192.0.2.1",
			"xmpp": map[string]any{"server": "x:1", "adminAPI": "https://x:2/api"}, "redis": map[string]any{"address": "r:1"}, "postgres": map[string]any{"address": "p:1"}},
			[]string{"mlconnector.s3.endpoint: the S3 endpoint"}},
		"external, no download URL": {charts.Host, map[string]any{"services": map[string]any{"mode": "external"}, "mlconnector": map[string]any{"s3": map[string]any{"endpoint": "http://s3:7070"}},
			"xmpp": map[string]any{"server": "x:1", "adminAPI": "https://x:2/api"}, "redis": map[string]any{"address": "r:1"}, "postgres": map[string]any{"address": "p:1"}},
			[]string{"mlconnector.downloadURL: the ML connector's URL as pods in the member clusters reach it"}},
		"bad connector values": {charts.Host, map[string]any{"karmadaHostIP": "192.0.2.1", "mlconnector": map[string]any{"access": "nodeport", "s3": map[string]any{"bucket": "Models", "endpoint": "s3.example.org"}}},
			[]string{"- mlconnector.access: mlconnector.access must be one of the following", "- mlconnector.s3.bucket: Does not match pattern", "- mlconnector.s3.endpoint: Does not match pattern"}},
		"every problem with its path": {charts.Karmada, map[string]any{
			"image":     map[string]any{"pullPolicy": "Sometimes"},
			"nodeAgent": map[string]any{"cpuFrequencyControl": "yes", "cpufreq": true},
			"clusters":  map[string]any{"Bad_Name": []any{"n"}},
		}, []string{
			"- image.pullPolicy: image.pullPolicy must be one of the following",
			"- nodeAgent.cpuFrequencyControl: Invalid type. Expected: boolean, given: string",
			"- nodeAgent: Additional property cpufreq is not allowed",
			`- clusters: Property name of "Bad_Name" does not match`,
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := charts.Render(tc.chart, tc.values)
			for _, w := range tc.want {
				if err == nil || !contains(err.Error(), w) {
					t.Errorf("err = %v, want one saying %q", err, w)
				}
			}
		})
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// TestMLConnectorOptional: the ML connector and the bundled S3 server
// are rendered unless mlconnector.enabled is false, and external mode
// without S3 works then.
func TestMLConnectorOptional(t *testing.T) {
	external := map[string]any{"services": map[string]any{"mode": "external"},
		"xmpp": map[string]any{"server": "x:1", "adminAPI": "https://x:2/api"}, "redis": map[string]any{"address": "r:1"}, "postgres": map[string]any{"address": "p:1"}}
	off := map[string]any{"enabled": false}
	cases := map[string]struct {
		values map[string]any
		want   []string
	}{
		"bundled": {map[string]any{"karmadaHostIP": "192.0.2.1"},
			[]string{"Deployment mlsysops-mlconnector", "Deployment mlsysops-s3", "PersistentVolumeClaim mlsysops-s3", "Service mlsysops-mlconnector", "Service mlsysops-s3", "ServiceAccount mlsysops-mlconnector"}},
		"bundled, no connector":  {map[string]any{"karmadaHostIP": "192.0.2.1", "mlconnector": off}, nil},
		"external, no connector": {merge(external, map[string]any{"mlconnector": off}), nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objs, err := charts.Render(charts.Host, tc.values)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range objs {
				if contains(o.GetName(), "mlconnector") || contains(o.GetName(), "-s3") {
					got = append(got, o.GetKind()+" "+o.GetName())
				}
			}
			sort.Strings(got)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("connector objects (-want +got):\n%s", diff)
			}
		})
	}
}

func merge(a, b map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// TestPropagationWork: with propagation work the Karmada chart installs no
// policy for the applications and gives the continuum agent Works instead
// of bindings; with propagation binding it may only read, patch and
// delete Works (to move the applications an install with propagation
// work placed), and in both the admission policy holds it to its
// applications' Works. The host chart passes the agent the same
// --propagation.
func TestPropagationWork(t *testing.T) {
	kinds := func(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
		out := map[string]*unstructured.Unstructured{}
		for _, o := range objs {
			out[o.GetKind()+" "+o.GetName()] = o
		}
		return out
	}
	for _, mode := range []string{"", "binding", "work"} {
		t.Run("propagation "+mode, func(t *testing.T) {
			kv, hv := karmadaValues(), map[string]any{"karmadaHostIP": "192.0.2.1"}
			if mode != "" {
				kv["propagation"] = mode
				hv["continuumAgent"] = map[string]any{"propagation": mode}
			}
			k, err := charts.Render(charts.Karmada, kv)
			if err != nil {
				t.Fatal(err)
			}
			h, err := charts.Render(charts.Host, hv)
			if err != nil {
				t.Fatal(err)
			}
			work := mode != "binding" // the charts' default is work
			got := kinds(k)
			for obj, want := range map[string]bool{
				"PropagationPolicy mlsysops-apps":                                 !work,
				"ClusterRole mlsysops-continuum-agent-works":                      true,
				"ClusterRoleBinding mlsysops-continuum-agent-works":               true,
				"ValidatingAdmissionPolicy mlsysops-continuum-agent-works":        true,
				"ValidatingAdmissionPolicyBinding mlsysops-continuum-agent-works": true,
			} {
				if _, ok := got[obj]; ok != want {
					t.Errorf("%s rendered: %v, want %v", obj, ok, want)
				}
			}
			// With the bindings, the agent only moves the Works left by
			// the other propagation (migrate.go): it writes none.
			worksRules, _, _ := unstructured.NestedSlice(got["ClusterRole mlsysops-continuum-agent-works"].Object, "rules")
			verbs := toString(worksRules[0].(map[string]any)["verbs"])
			wantVerbs := "[get list patch delete]"
			if work {
				wantVerbs = "[get list watch create update delete]"
			}
			if verbs != wantVerbs {
				t.Errorf("the continuum agent may %s Works, want %s", verbs, wantVerbs)
			}
			role := got["Role mlsysops-continuum-agent"]
			rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
			// The bindings' scheduler writes their status; with the
			// Works, the agent only moves bindings left by the other
			// propagation (migrate.go).
			schedules := false
			for _, r := range rules {
				r := r.(map[string]any)
				if contains(toString(r["resources"]), "resourcebindings/status") && contains(toString(r["verbs"]), "patch") {
					schedules = true
				}
			}
			if schedules == work {
				t.Errorf("the continuum agent may patch the bindings' status: %v, want %v", schedules, !work)
			}
			want := "--propagation=binding"
			if work {
				want = "--propagation=work"
			}
			ds := kinds(h)["DaemonSet mlsysops-continuum-agent"]
			if ds == nil {
				t.Fatal("no continuum agent rendered")
			}
			containers, _, _ := unstructured.NestedSlice(ds.Object, "spec", "template", "spec", "containers")
			if args := toString(containers[0].(map[string]any)["args"]); !contains(args, want) {
				t.Errorf("continuum agent args %s, want %s", args, want)
			}
		})
	}
	if _, err := charts.Render(charts.Karmada, merge(karmadaValues(), map[string]any{"propagation": "policy"})); err == nil || !contains(err.Error(), "propagation") {
		t.Errorf("propagation policy: err = %v, want one naming propagation", err)
	}
}

func toString(v any) string { return fmt.Sprint(v) }
