package kwoklet

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestWriteAtomic(t *testing.T) {
	dir := t.TempDir()
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return "<" + err.Error() + ">"
		}
		return string(b)
	}
	changed, err := WriteAtomic(dir, map[string]File{"a.yaml": {Data: []byte("A1"), Mode: 0o644}, "sub/b": {Data: []byte("B"), Mode: 0o400}}, -1, -1)
	if err != nil || !changed {
		t.Fatalf("first write: %v %v", changed, err)
	}
	if read("a.yaml") != "A1" || read("sub/b") != "B" {
		t.Fatalf("files: %q %q", read("a.yaml"), read("sub/b"))
	}
	if target, _ := os.Readlink(filepath.Join(dir, "a.yaml")); target != "..data/a.yaml" {
		t.Errorf("a.yaml links to %q, want ..data/a.yaml (the kubelet's layout)", target)
	}
	gen1, _ := os.Readlink(filepath.Join(dir, "..data"))
	if changed, err := WriteAtomic(dir, map[string]File{"a.yaml": {Data: []byte("A1"), Mode: 0o644}, "sub/b": {Data: []byte("B"), Mode: 0o400}}, -1, -1); err != nil || changed {
		t.Errorf("same content: changed=%v err=%v", changed, err)
	}
	if _, err := WriteAtomic(dir, map[string]File{"a.yaml": {Data: []byte("A2"), Mode: 0o644}, "c": {Data: []byte("C"), Mode: 0o644}}, -1, -1); err != nil {
		t.Fatal(err)
	}
	gen2, _ := os.Readlink(filepath.Join(dir, "..data"))
	if gen1 == gen2 {
		t.Error("an update kept the generation")
	}
	if read("a.yaml") != "A2" || read("c") != "C" {
		t.Errorf("after the update: %q %q", read("a.yaml"), read("c"))
	}
	if _, err := os.Lstat(filepath.Join(dir, "sub")); err == nil {
		t.Error("a removed key's link is still there")
	}
	if _, err := os.Stat(filepath.Join(dir, gen1)); err == nil {
		t.Error("the old generation is still there")
	}
	if _, err := WriteAtomic(dir, map[string]File{"../x": {Data: []byte("x"), Mode: 0o644}}, -1, -1); err == nil {
		t.Error("a path out of the volume was written")
	}
}

// fakeSource serves ConfigMaps and Secrets from maps (unit tests only).
type fakeSource struct {
	cms     map[string]*corev1.ConfigMap
	secrets map[string]*corev1.Secret
}

func (f fakeSource) ConfigMap(_ context.Context, ns, name string) (*corev1.ConfigMap, error) {
	if cm, ok := f.cms[name]; ok {
		return cm, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}

func (f fakeSource) Secret(_ context.Context, ns, name string) (*corev1.Secret, error) {
	if s, ok := f.secrets[name]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

func (f fakeSource) Token(_ context.Context, pod *corev1.Pod, audience string, exp int64) (string, error) {
	return "token-of-" + pod.Name, nil
}

func testPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "agent-x", Namespace: "ns", UID: "u1", Labels: map[string]string{"app": "a"}},
		Spec: corev1.PodSpec{NodeName: "edge-1", Containers: []corev1.Container{{
			Name:      "agent",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("96Mi"), corev1.ResourceCPU: resource.MustParse("250m")}},
		}}},
		Status: corev1.PodStatus{HostIP: "10.1.1.1", PodIP: "10.1.64.5"},
	}
}

func TestEnv(t *testing.T) {
	pod := testPod()
	c := &pod.Spec.Containers[0]
	c.EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}, Prefix: "CFG_"}}
	c.Env = []corev1.EnvVar{
		{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
		{Name: "FILE", Value: "/run/xmpp-$(NODE_NAME)_at_d.password"},
		{Name: "LITERAL", Value: "$$(NODE_NAME) $(UNDEFINED)"},
		{Name: "MEM", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
		{Name: "CPU", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.cpu"}}},
		{Name: "PW", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "password"}}},
		{Name: "GONE", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "missing"}, Key: "k", Optional: ptrTo(true)}}},
		{Name: "HOST", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.hostIP"}}},
	}
	src := fakeSource{
		cms:     map[string]*corev1.ConfigMap{"cfg": {Data: map[string]string{"B": "2", "A": "1"}}},
		secrets: map[string]*corev1.Secret{"s": {Data: map[string][]byte{"password": []byte("pw")}}},
	}
	got, err := Env(context.Background(), pod, c, map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, src)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"KUBERNETES_SERVICE_HOST=10.0.0.1", "CFG_A=1", "CFG_B=2", "NODE_NAME=edge-1",
		"FILE=/run/xmpp-edge-1_at_d.password", "LITERAL=$(NODE_NAME) $(UNDEFINED)", "MEM=96", "CPU=1", "PW=pw", "HOST=10.1.1.1",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	c.Env = append(c.Env, corev1.EnvVar{Name: "X", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "missing"}, Key: "k"}}})
	if _, err := Env(context.Background(), pod, c, nil, src); err == nil {
		t.Error("a missing Secret that is not optional gave no error")
	}
}

func TestVolumeFiles(t *testing.T) {
	pod := testPod()
	src := fakeSource{
		cms: map[string]*corev1.ConfigMap{"descs": {Data: map[string]string{"edge-1.yaml": "E", "cloud-1.yaml": "C"}}},
		secrets: map[string]*corev1.Secret{
			"agents-edge": {Data: map[string][]byte{"xmpp-edge-1_at_d.password": []byte("pw1")}},
		},
	}
	mode := int32(0o440)
	cases := map[string]struct {
		vol  corev1.Volume
		want map[string]File
	}{
		"configMap": {corev1.Volume{VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "descs"}}}},
			map[string]File{"edge-1.yaml": {Data: []byte("E"), Mode: 0o644}, "cloud-1.yaml": {Data: []byte("C"), Mode: 0o644}}},
		"projected, optional secrets, token": {corev1.Volume{VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: &mode, Sources: []corev1.VolumeProjection{
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "agents-cloud"}, Optional: ptrTo(true)}},
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "agents-edge"}, Optional: ptrTo(true)}},
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
			{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}}},
		}}}},
			map[string]File{"xmpp-edge-1_at_d.password": {Data: []byte("pw1"), Mode: 0o440}, "token": {Data: []byte("token-of-agent-x"), Mode: 0o440}, "namespace": {Data: []byte("ns"), Mode: 0o440}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok, err := volumeFiles(context.Background(), pod, &tc.vol, src)
			if err != nil || !ok {
				t.Fatalf("ok=%v err=%v", ok, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	missing := corev1.Volume{VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "nope"}}}
	if _, _, err := volumeFiles(context.Background(), pod, &missing, src); err == nil {
		t.Error("a missing Secret that is not optional gave no error")
	}
}

func ptrTo[T any](v T) *T { return &v }
