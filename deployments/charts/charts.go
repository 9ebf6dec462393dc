// Package charts holds the MLSysOps Helm charts and renders them with the
// Helm SDK, as `helm template` would:
//
//   - mlsysops-host, for the Karmada host cluster: the continuum agent, the
//     northbound API and, in bundled mode, ejabberd, Redis and PostgreSQL;
//   - mlsysops-karmada, for the Karmada API: the mlsysops.eu CRDs, the
//     cluster and node agent DaemonSets, descriptions, configuration,
//     identities and roles, and the propagation policies.
//
// The charts are plain Helm charts (helm install works on them); the
// deployer renders them here and applies the objects itself, stage by
// stage, with server-side apply. Objects carry the annotation StageKey.
package charts

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

//go:embed all:mlsysops-host all:mlsysops-karmada
var files embed.FS

// Names of the charts.
const (
	Host    = "mlsysops-host"
	Karmada = "mlsysops-karmada"
)

// StageKey is the annotation that says in which install stage an object is
// applied: one of Stages.
const StageKey = "mlsysops.eu/install-stage"

// Stages are the install stages in order: the services the agents need,
// the continuum agent and API, the cluster agents, the node agents.
var Stages = []string{"services", "continuum", "clusters", "nodes"}

// Labels every object of the charts carries.
const (
	LabelPartOf   = "app.kubernetes.io/part-of"
	PartOfValue   = "mlsysops"
	LabelInstance = "app.kubernetes.io/instance"
)

// Load returns the named chart.
func Load(name string) (*chart.Chart, error) {
	var bufs []*loader.BufferedFile
	err := fs.WalkDir(files, name, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(files, p)
		if err != nil {
			return err
		}
		bufs = append(bufs, &loader.BufferedFile{Name: strings.TrimPrefix(p, name+"/"), Data: b})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", name, err)
	}
	if len(bufs) == 0 {
		return nil, fmt.Errorf("no chart %s (want %s or %s)", name, Host, Karmada)
	}
	c, err := loader.LoadFiles(bufs)
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", name, err)
	}
	return c, nil
}

// FS returns the files of the named chart, rooted at the chart's folder
// (for `helm package` and for tests).
func FS(name string) (fs.FS, error) { return fs.Sub(files, name) }

// Version is the charts' version, which is the project's (Chart.yaml).
func Version() (string, error) {
	c, err := Load(Host)
	if err != nil {
		return "", err
	}
	return c.Metadata.Version, nil
}

// AppVersion is the version of the images the charts install by default.
func AppVersion() (string, error) {
	c, err := Load(Host)
	if err != nil {
		return "", err
	}
	return c.Metadata.AppVersion, nil
}

// Release names the release the objects belong to (the label
// app.kubernetes.io/instance).
const Release = "mlsysops"

// Render renders the named chart with values over its defaults and returns
// its objects in a stable order: by stage, then by kind (namespaces, CRDs,
// identities and roles, configuration, workloads, policies), namespace and
// name.
func Render(name string, values map[string]any) ([]*unstructured.Unstructured, error) {
	c, err := Load(name)
	if err != nil {
		return nil, err
	}
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = chartutil.KubeVersion{Version: "v1.31.3", Major: "1", Minor: "31"}
	vals, err := chartutil.ToRenderValues(c, values, chartutil.ReleaseOptions{Name: Release, Namespace: "mlsysops-framework", IsInstall: true}, caps)
	if err != nil {
		return nil, fmt.Errorf("values of %s: %w", name, err)
	}
	out, err := engine.Engine{Strict: true}.Render(c, vals)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", name, err)
	}
	names := make([]string, 0, len(out))
	for n := range out {
		if strings.HasSuffix(n, ".yaml") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var objs []*unstructured.Unstructured
	for _, n := range names {
		list, err := Decode([]byte(out[n]))
		if err != nil {
			return nil, fmt.Errorf("render %s: %s: %w", name, path.Base(n), err)
		}
		for _, o := range list {
			if o.GetAnnotations()[StageKey] == "" {
				return nil, fmt.Errorf("render %s: %s: %s %s has no %s annotation", name, path.Base(n), o.GetKind(), o.GetName(), StageKey)
			}
		}
		objs = append(objs, list...)
	}
	Sort(objs)
	return objs, nil
}

// Decode splits a multi-document YAML stream into objects; empty documents
// are skipped.
func Decode(data []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "" || u.GetAPIVersion() == "" {
			return nil, fmt.Errorf("a document without apiVersion or kind: %.80q", doc)
		}
		out = append(out, u)
	}
}

// kindRank orders kinds so that what others need is applied first.
// Karmada's propagation policies go before the objects they select:
// Karmada's detector takes an object it finds no policy for twice more
// (a failed pass and its retry, then the policy's arrival), and the
// continuum agent checks the applications' policy at start.
var kindRank = map[string]int{
	"Namespace": 0, "CustomResourceDefinition": 1,
	"ServiceAccount": 2, "Secret": 3, "ClusterRole": 4, "ClusterRoleBinding": 5, "Role": 6, "RoleBinding": 7,
	"ResourceInterpreterCustomization": 8, "PropagationPolicy": 8, "ClusterPropagationPolicy": 8,
	"ConfigMap": 9, "PersistentVolumeClaim": 10,
	"ValidatingAdmissionPolicy": 10, "ValidatingAdmissionPolicyBinding": 10,
	"Service": 11, "Deployment": 12, "StatefulSet": 13, "DaemonSet": 14, "PodDisruptionBudget": 14,
}

// StageIndex is the position of an object's stage in Stages, or
// len(Stages) for an unknown one.
func StageIndex(o *unstructured.Unstructured) int {
	s := o.GetAnnotations()[StageKey]
	for i, st := range Stages {
		if st == s {
			return i
		}
	}
	return len(Stages)
}

// Sort orders objects by stage, kind, namespace and name.
func Sort(objs []*unstructured.Unstructured) {
	rank := func(o *unstructured.Unstructured) int {
		if r, ok := kindRank[o.GetKind()]; ok {
			return r
		}
		return len(kindRank)
	}
	sort.SliceStable(objs, func(i, j int) bool {
		a, b := objs[i], objs[j]
		if x, y := StageIndex(a), StageIndex(b); x != y {
			return x < y
		}
		if x, y := rank(a), rank(b); x != y {
			return x < y
		}
		if a.GetNamespace() != b.GetNamespace() {
			return a.GetNamespace() < b.GetNamespace()
		}
		return a.GetName() < b.GetName()
	})
}

// Encode writes objects as one YAML stream, each document after "---".
func Encode(w io.Writer, objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		b, err := yaml.Marshal(o.Object)
		if err != nil {
			return fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
		}
		if _, err := fmt.Fprintf(w, "---\n%s", b); err != nil {
			return err
		}
	}
	return nil
}
