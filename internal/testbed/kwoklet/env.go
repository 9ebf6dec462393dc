package kwoklet

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Env resolves a container's environment as the kubelet does: first the
// service variables (base, e.g. KUBERNETES_SERVICE_HOST), then envFrom in
// order, then env in order, each value expanded with $(VAR) over the
// variables defined before it; valueFrom reads the downward API, resources,
// ConfigMaps and Secrets. It returns KEY=value strings in a stable order.
func Env(ctx context.Context, pod *corev1.Pod, c *corev1.Container, base map[string]string, src Source) ([]string, error) {
	vars := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vars[k]; !ok {
			order = append(order, k)
		}
		vars[k] = v
	}
	for _, k := range sortedKeys(base) {
		set(k, base[k])
	}
	for _, ef := range c.EnvFrom {
		var data map[string]string
		switch {
		case ef.ConfigMapRef != nil:
			cm, err := src.ConfigMap(ctx, pod.Namespace, ef.ConfigMapRef.Name)
			if apierrors.IsNotFound(err) && isOptional(ef.ConfigMapRef.Optional) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("envFrom ConfigMap %s: %w", ef.ConfigMapRef.Name, err)
			}
			data = cm.Data
		case ef.SecretRef != nil:
			s, err := src.Secret(ctx, pod.Namespace, ef.SecretRef.Name)
			if apierrors.IsNotFound(err) && isOptional(ef.SecretRef.Optional) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("envFrom Secret %s: %w", ef.SecretRef.Name, err)
			}
			data = map[string]string{}
			for k, v := range s.Data {
				data[k] = string(v)
			}
		}
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			set(ef.Prefix+k, data[k])
		}
	}
	for _, e := range c.Env {
		v, err := envValue(ctx, pod, c, e, vars, src)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		if v == nil {
			continue
		}
		set(e.Name, *v)
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+vars[k])
	}
	return out, nil
}

// envValue is one variable's value; nil for an optional reference that is
// missing.
func envValue(ctx context.Context, pod *corev1.Pod, c *corev1.Container, e corev1.EnvVar, vars map[string]string, src Source) (*string, error) {
	if e.ValueFrom == nil {
		v := Expand(e.Value, vars)
		return &v, nil
	}
	f := e.ValueFrom
	var v string
	var err error
	switch {
	case f.FieldRef != nil:
		v, err = fieldValue(pod, f.FieldRef.FieldPath)
	case f.ResourceFieldRef != nil:
		ref := *f.ResourceFieldRef
		if ref.ContainerName == "" {
			ref.ContainerName = c.Name
		}
		v, err = resourceValue(pod, &ref)
	case f.ConfigMapKeyRef != nil:
		r := f.ConfigMapKeyRef
		cm, gerr := src.ConfigMap(ctx, pod.Namespace, r.Name)
		if apierrors.IsNotFound(gerr) && isOptional(r.Optional) {
			return nil, nil
		}
		if gerr != nil {
			return nil, gerr
		}
		var ok bool
		if v, ok = cm.Data[r.Key]; !ok {
			if isOptional(r.Optional) {
				return nil, nil
			}
			return nil, fmt.Errorf("ConfigMap %s has no key %s", r.Name, r.Key)
		}
	case f.SecretKeyRef != nil:
		r := f.SecretKeyRef
		s, gerr := src.Secret(ctx, pod.Namespace, r.Name)
		if apierrors.IsNotFound(gerr) && isOptional(r.Optional) {
			return nil, nil
		}
		if gerr != nil {
			return nil, gerr
		}
		b, ok := s.Data[r.Key]
		if !ok {
			if isOptional(r.Optional) {
				return nil, nil
			}
			return nil, fmt.Errorf("Secret %s has no key %s", r.Name, r.Key)
		}
		v = string(b)
	}
	if err != nil {
		return nil, err
	}
	return &v, nil
}

// Expand replaces $(VAR) with VAR's value where VAR is defined, keeps
// $(UNDEFINED) as written, and turns $$ into $, as Kubernetes expands
// env values, commands and arguments.
func Expand(s string, vars map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}
