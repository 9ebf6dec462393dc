package kube

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclientset "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"

	corev1 "k8s.io/api/core/v1"
)

// ReadCRDs parses every *.yaml file under dir of fsys as a CRD.
func ReadCRDs(fsys fs.FS, dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var out []*apiextensionsv1.CustomResourceDefinition
	err := fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(b, crd); err != nil {
			return fmt.Errorf("parse CRD %s: %w", path.Base(p), err)
		}
		if crd.Kind != "CustomResourceDefinition" {
			return nil
		}
		out = append(out, crd)
		return nil
	})
	return out, err
}

// ApplyCRDs creates or updates the CRDs and waits until all are
// established.
func ApplyCRDs(ctx context.Context, cs apiextensionsclientset.Interface, crds []*apiextensionsv1.CustomResourceDefinition) error {
	api := cs.ApiextensionsV1().CustomResourceDefinitions()
	names := make([]string, 0, len(crds))
	for _, crd := range crds {
		crd = crd.DeepCopy()
		// Several agents may apply the same CRDs at once.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := api.Get(ctx, crd.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				_, err = api.Create(ctx, crd, metav1.CreateOptions{})
				if apierrors.IsAlreadyExists(err) {
					return apierrors.NewConflict(apiextensionsv1.Resource("customresourcedefinitions"), crd.Name, err)
				}
				return err
			case err != nil:
				return err
			}
			crd.ResourceVersion = cur.ResourceVersion
			_, err = api.Update(ctx, crd, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("apply CRD %s: %w", crd.Name, err)
		}
		names = append(names, crd.Name)
	}
	var pending string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, n := range names {
			crd, err := api.Get(ctx, n, metav1.GetOptions{})
			if err != nil || !Established(crd) {
				pending = n
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s not established: %w", pending, err)
	}
	return nil
}

// Established reports whether the CRD's Established condition is true.
func Established(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

// EnsureNamespace creates a namespace unless it exists.
func EnsureNamespace(ctx context.Context, cs kubernetes.Interface, name string) error {
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	return nil
}
