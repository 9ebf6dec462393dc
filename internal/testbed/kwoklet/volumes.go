package kwoklet

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Source reads what a pod's volumes and environment refer to.
type Source interface {
	// ConfigMap and Secret return the object, or an error for which
	// apierrors.IsNotFound holds.
	ConfigMap(ctx context.Context, ns, name string) (*corev1.ConfigMap, error)
	Secret(ctx context.Context, ns, name string) (*corev1.Secret, error)
	// Token returns a token of the pod's ServiceAccount bound to the pod,
	// as the kubelet requests it for a projected serviceAccountToken.
	Token(ctx context.Context, pod *corev1.Pod, audience string, expirationSeconds int64) (string, error)
}

// Default file modes of the kubelet.
const (
	defaultMode = 0o644
)

// volumeFiles returns the files of an atomic-writer volume (ConfigMap,
// Secret, projected, downward API); ok is false for other kinds.
func volumeFiles(ctx context.Context, pod *corev1.Pod, v *corev1.Volume, src Source) (files map[string]File, ok bool, err error) {
	files = map[string]File{}
	mode := func(m *int32) os.FileMode {
		if m == nil {
			return defaultMode
		}
		return os.FileMode(*m)
	}
	switch {
	case v.ConfigMap != nil:
		err = addConfigMap(ctx, pod, files, v.ConfigMap.Name, v.ConfigMap.Items, v.ConfigMap.Optional, mode(v.ConfigMap.DefaultMode), src)
	case v.Secret != nil:
		err = addSecret(ctx, pod, files, v.Secret.SecretName, v.Secret.Items, v.Secret.Optional, mode(v.Secret.DefaultMode), src)
	case v.DownwardAPI != nil:
		err = addDownward(pod, files, v.DownwardAPI.Items, mode(v.DownwardAPI.DefaultMode))
	case v.Projected != nil:
		dm := mode(v.Projected.DefaultMode)
		for _, s := range v.Projected.Sources {
			switch {
			case s.ConfigMap != nil:
				err = addConfigMap(ctx, pod, files, s.ConfigMap.Name, s.ConfigMap.Items, s.ConfigMap.Optional, dm, src)
			case s.Secret != nil:
				err = addSecret(ctx, pod, files, s.Secret.Name, s.Secret.Items, s.Secret.Optional, dm, src)
			case s.DownwardAPI != nil:
				err = addDownward(pod, files, s.DownwardAPI.Items, dm)
			case s.ServiceAccountToken != nil:
				exp := int64(3600)
				if s.ServiceAccountToken.ExpirationSeconds != nil {
					exp = *s.ServiceAccountToken.ExpirationSeconds
				}
				var tok string
				if tok, err = src.Token(ctx, pod, s.ServiceAccountToken.Audience, exp); err == nil {
					files[s.ServiceAccountToken.Path] = File{Data: []byte(tok), Mode: dm}
				}
			}
			if err != nil {
				return nil, true, err
			}
		}
	default:
		return nil, false, nil
	}
	if err != nil {
		return nil, true, err
	}
	return files, true, nil
}

func isOptional(p *bool) bool { return p != nil && *p }

func addConfigMap(ctx context.Context, pod *corev1.Pod, files map[string]File, name string, items []corev1.KeyToPath, optional *bool, mode os.FileMode, src Source) error {
	cm, err := src.ConfigMap(ctx, pod.Namespace, name)
	if apierrors.IsNotFound(err) && isOptional(optional) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ConfigMap %s/%s: %w", pod.Namespace, name, err)
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return addKeys(files, "ConfigMap "+name, data, items, optional, mode)
}

func addSecret(ctx context.Context, pod *corev1.Pod, files map[string]File, name string, items []corev1.KeyToPath, optional *bool, mode os.FileMode, src Source) error {
	s, err := src.Secret(ctx, pod.Namespace, name)
	if apierrors.IsNotFound(err) && isOptional(optional) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("Secret %s/%s: %w", pod.Namespace, name, err)
	}
	return addKeys(files, "Secret "+name, s.Data, items, optional, mode)
}

// addKeys adds every key (or the listed items) of a ConfigMap or Secret.
func addKeys(files map[string]File, what string, data map[string][]byte, items []corev1.KeyToPath, optional *bool, mode os.FileMode) error {
	if len(items) == 0 {
		for k, v := range data {
			files[k] = File{Data: v, Mode: mode}
		}
		return nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if isOptional(optional) {
				continue
			}
			return fmt.Errorf("%s has no key %s", what, it.Key)
		}
		m := mode
		if it.Mode != nil {
			m = os.FileMode(*it.Mode)
		}
		files[it.Path] = File{Data: v, Mode: m}
	}
	return nil
}

func addDownward(pod *corev1.Pod, files map[string]File, items []corev1.DownwardAPIVolumeFile, mode os.FileMode) error {
	for _, it := range items {
		var v string
		var err error
		switch {
		case it.FieldRef != nil:
			v, err = fieldValue(pod, it.FieldRef.FieldPath)
		case it.ResourceFieldRef != nil:
			v, err = resourceValue(pod, it.ResourceFieldRef)
		}
		if err != nil {
			return err
		}
		m := mode
		if it.Mode != nil {
			m = os.FileMode(*it.Mode)
		}
		files[it.Path] = File{Data: []byte(v), Mode: m}
	}
	return nil
}

// fieldValue resolves a downward API field path of the pod.
func fieldValue(pod *corev1.Pod, path string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP":
		return pod.Status.HostIP, nil
	case "status.podIP":
		return pod.Status.PodIP, nil
	case "status.hostIPs":
		var ips []string
		for _, ip := range pod.Status.HostIPs {
			ips = append(ips, ip.IP)
		}
		return strings.Join(ips, ","), nil
	case "status.podIPs":
		var ips []string
		for _, ip := range pod.Status.PodIPs {
			ips = append(ips, ip.IP)
		}
		return strings.Join(ips, ","), nil
	}
	for _, p := range []struct {
		prefix string
		m      map[string]string
	}{{"metadata.labels['", pod.Labels}, {"metadata.annotations['", pod.Annotations}} {
		if strings.HasPrefix(path, p.prefix) && strings.HasSuffix(path, "']") {
			return p.m[strings.TrimSuffix(strings.TrimPrefix(path, p.prefix), "']")], nil
		}
	}
	return "", fmt.Errorf("downward API field %q is not supported", path)
}

func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(k + "=" + strconv.Quote(m[k]))
	}
	return b.String()
}

// resourceValue resolves a resourceFieldRef (limits.cpu, requests.memory,
// ...) of a container, in units of its divisor, rounded up as the kubelet
// does.
func resourceValue(pod *corev1.Pod, ref *corev1.ResourceFieldSelector) (string, error) {
	var c *corev1.Container
	for i := range pod.Spec.Containers {
		if ref.ContainerName == "" || pod.Spec.Containers[i].Name == ref.ContainerName {
			c = &pod.Spec.Containers[i]
			break
		}
	}
	if c == nil {
		return "", fmt.Errorf("resourceFieldRef: no container %q", ref.ContainerName)
	}
	kind, res, ok := strings.Cut(ref.Resource, ".")
	if !ok {
		return "", fmt.Errorf("resourceFieldRef %q is not supported", ref.Resource)
	}
	list := c.Resources.Limits
	if kind == "requests" {
		list = c.Resources.Requests
	}
	q, ok := list[corev1.ResourceName(res)]
	if !ok {
		return "0", nil
	}
	div := ref.Divisor
	if div.IsZero() {
		div = resource.MustParse("1")
	}
	if res == "cpu" {
		m := q.MilliValue()
		d := div.MilliValue()
		return strconv.FormatInt((m+d-1)/d, 10), nil
	}
	v, d := q.Value(), div.Value()
	return strconv.FormatInt((v+d-1)/d, 10), nil
}
