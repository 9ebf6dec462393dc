package policystore

import (
	"context"
	"fmt"

	policyv1alpha1 "github.com/karmada-io/karmada/pkg/apis/policy/v1alpha1"
	karmadaclientset "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/kube"
	"github.com/mlsysops-go/mlsysops/northbound/api"
)

// Names of the policy ConfigMaps (the upstream names) and their namespace.
const (
	FrameworkNamespace       = "mlsysops-framework"
	ContinuumPolicyConfigMap = "continuum-policies"
	ClusterPolicyConfigMap   = "cluster-agents-policies"
	NodePolicyConfigMap      = "node-agents-policies"
	PolicyPropagationPolicy  = "mlsysops-agent-policies"
)

// ConfigMapTarget is where one layer's policies are kept.
type ConfigMapTarget struct {
	Client    kubernetes.Interface
	Namespace string
	Name      string
	// Karmada, when set, is the Karmada API the ConfigMap lives in: a
	// PropagationPolicy then carries it to every member cluster.
	Karmada karmadaclientset.Interface
}

// ConfigMapStore keeps policies as keys of one ConfigMap per layer.
type ConfigMapStore struct {
	targets map[string]ConfigMapTarget
}

var _ Store = (*ConfigMapStore)(nil)

// NewConfigMapStore returns a store over the given targets, by layer.
func NewConfigMapStore(targets map[string]ConfigMapTarget) *ConfigMapStore {
	return &ConfigMapStore{targets: targets}
}

// DefaultTargets are the upstream layout: continuum policies on the
// Karmada host cluster, cluster and node policies in the Karmada API.
func DefaultTargets(host kubernetes.Interface, karmada kubernetes.Interface, karmadaPolicies karmadaclientset.Interface) map[string]ConfigMapTarget {
	return map[string]ConfigMapTarget{
		"continuum": {Client: host, Namespace: FrameworkNamespace, Name: ContinuumPolicyConfigMap},
		"cluster":   {Client: karmada, Namespace: FrameworkNamespace, Name: ClusterPolicyConfigMap, Karmada: karmadaPolicies},
		"node":      {Client: karmada, Namespace: FrameworkNamespace, Name: NodePolicyConfigMap, Karmada: karmadaPolicies},
	}
}

func (s *ConfigMapStore) target(layer string) (ConfigMapTarget, error) {
	t, ok := s.targets[layer]
	if !ok || t.Client == nil {
		return ConfigMapTarget{}, fmt.Errorf("no policy ConfigMap configured for layer %q", layer)
	}
	return t, nil
}

func (t ConfigMapTarget) location() string { return "configmap " + t.Namespace + "/" + t.Name }

func (t ConfigMapTarget) get(ctx context.Context) (*corev1.ConfigMap, error) {
	cm, err := t.Client.CoreV1().ConfigMaps(t.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", t.location(), err)
	}
	return cm, nil
}

// List implements Store.
func (s *ConfigMapStore) List(ctx context.Context, layer string) ([]api.Policy, error) {
	t, err := s.target(layer)
	if err != nil {
		return nil, err
	}
	cm, err := t.get(ctx)
	if err != nil || cm == nil {
		return []api.Policy{}, err
	}
	out := []api.Policy{}
	for k, v := range cm.Data {
		if isPolicyKey(k) {
			out = append(out, api.Policy{Layer: layer, Name: k, Size: len(v), Location: t.location()})
		}
	}
	sortPolicies(out)
	return out, nil
}

// Get implements Store.
func (s *ConfigMapStore) Get(ctx context.Context, layer, name string) (api.Policy, error) {
	t, err := s.target(layer)
	if err != nil {
		return api.Policy{}, err
	}
	cm, err := t.get(ctx)
	if err != nil {
		return api.Policy{}, err
	}
	if cm == nil {
		return api.Policy{}, fmt.Errorf("policy %s of layer %s: %w", name, layer, ErrNotFound)
	}
	v, ok := cm.Data[name]
	if !ok {
		return api.Policy{}, fmt.Errorf("policy %s of layer %s: %w", name, layer, ErrNotFound)
	}
	return api.Policy{Layer: layer, Name: name, Size: len(v), Location: t.location(), Source: v}, nil
}

// Put implements Store. The ConfigMap and its namespace are created when
// missing; concurrent writers retry on conflict.
func (s *ConfigMapStore) Put(ctx context.Context, layer, name string, source []byte) (bool, error) {
	t, err := s.target(layer)
	if err != nil {
		return false, err
	}
	// The deployer creates the ConfigMaps, their namespace and their
	// propagation: then the API needs no right beyond the ConfigMaps
	// themselves and reading the PropagationPolicy.
	if cm, err := t.get(ctx); err != nil {
		return false, err
	} else if cm == nil {
		if err := kube.EnsureNamespace(ctx, t.Client, t.Namespace); err != nil {
			return false, fmt.Errorf("namespace %s: %w", t.Namespace, err)
		}
	}
	if t.Karmada != nil {
		if err := ensurePropagation(ctx, t.Karmada); err != nil {
			return false, err
		}
	}
	created := false
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := t.get(ctx)
		if err != nil {
			return err
		}
		if cm == nil {
			cm = &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: t.Namespace, Name: t.Name, Labels: map[string]string{
					mlsysopsv1.LabelManagedBy: mlsysopsv1.ManagedByNorthbound, mlsysopsv1.LabelPolicyLayer: layer,
				}},
				Data: map[string]string{name: string(source)},
			}
			_, err := t.Client.CoreV1().ConfigMaps(t.Namespace).Create(ctx, cm, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(corev1.Resource("configmaps"), t.Name, err)
			}
			created = true
			return err
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		_, exists := cm.Data[name]
		created = !exists
		cm.Data[name] = string(source)
		_, err = t.Client.CoreV1().ConfigMaps(t.Namespace).Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return false, fmt.Errorf("write policy %s to %s: %w", name, t.location(), err)
	}
	return created, nil
}

// Delete implements Store.
func (s *ConfigMapStore) Delete(ctx context.Context, layer, name string) error {
	t, err := s.target(layer)
	if err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := t.get(ctx)
		if err != nil {
			return err
		}
		if cm == nil {
			return fmt.Errorf("policy %s of layer %s: %w", name, layer, ErrNotFound)
		}
		if _, ok := cm.Data[name]; !ok {
			return fmt.Errorf("policy %s of layer %s: %w", name, layer, ErrNotFound)
		}
		delete(cm.Data, name)
		_, err = t.Client.CoreV1().ConfigMaps(t.Namespace).Update(ctx, cm, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("delete policy %s from %s: %w", name, t.location(), err)
		}
		return nil
	})
}

// ensurePropagation makes sure the cluster and node policy ConfigMaps (and
// their namespace) reach every member cluster, including clusters joined
// later.
func ensurePropagation(ctx context.Context, kc karmadaclientset.Interface) error {
	want := policyv1alpha1.PropagationSpec{
		ResourceSelectors: []policyv1alpha1.ResourceSelector{
			{APIVersion: "v1", Kind: "ConfigMap", Namespace: FrameworkNamespace, Name: ClusterPolicyConfigMap},
			{APIVersion: "v1", Kind: "ConfigMap", Namespace: FrameworkNamespace, Name: NodePolicyConfigMap},
		},
		Placement:          policyv1alpha1.Placement{},
		ConflictResolution: policyv1alpha1.ConflictOverwrite,
	}
	pps := kc.PolicyV1alpha1().PropagationPolicies(FrameworkNamespace)
	cur, err := pps.Get(ctx, PolicyPropagationPolicy, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		pp := &policyv1alpha1.PropagationPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: FrameworkNamespace, Name: PolicyPropagationPolicy},
			Spec:       want,
		}
		if _, err := pps.Create(ctx, pp, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create PropagationPolicy %s/%s: %w", FrameworkNamespace, PolicyPropagationPolicy, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("read PropagationPolicy %s/%s: %w", FrameworkNamespace, PolicyPropagationPolicy, err)
	}
	if equality.Semantic.DeepEqual(cur.Spec.ResourceSelectors, want.ResourceSelectors) &&
		equality.Semantic.DeepEqual(cur.Spec.Placement, want.Placement) && cur.Spec.ConflictResolution == want.ConflictResolution {
		return nil
	}
	cur.Spec.ResourceSelectors = want.ResourceSelectors
	cur.Spec.Placement = want.Placement
	cur.Spec.ConflictResolution = want.ConflictResolution
	if _, err := pps.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update PropagationPolicy %s/%s: %w", FrameworkNamespace, PolicyPropagationPolicy, err)
	}
	return nil
}
