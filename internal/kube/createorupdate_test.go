package kube

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// TestCreateOrUpdateBehindTheCache: an object the API server has but the
// cache does not show yet is updated from a live read, not created again.
func TestCreateOrUpdateBehindTheCache(t *testing.T) {
	ctx := context.Background()
	server := fake.NewClientBuilder().WithObjects(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", Labels: map[string]string{"kept": "yes"}},
		Data:       map[string]string{"a": "1"},
	}).Build()
	creates := 0
	// The cache: reads find nothing, writes reach the server.
	cached := interceptor.NewClient(server.(client.WithWatch), interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, "c")
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			creates++
			return c.Create(ctx, obj, opts...)
		},
	})
	mutate := func(cm *corev1.ConfigMap, v string) controllerutil.MutateFn {
		return func() error {
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			cm.Data["a"] = v
			return nil
		}
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}}
	op, err := CreateOrUpdate(ctx, cached, server, cm, mutate(cm, "2"))
	if err != nil || op != controllerutil.OperationResultUpdated {
		t.Fatalf("op %v, err %v; want updated", op, err)
	}
	got := &corev1.ConfigMap{}
	if err := server.Get(ctx, client.ObjectKey{Name: "c", Namespace: "ns"}, got); err != nil {
		t.Fatal(err)
	}
	if got.Data["a"] != "2" || got.Labels["kept"] != "yes" {
		t.Errorf("on the server: data %v, labels %v; want a=2 and the label kept", got.Data, got.Labels)
	}
	cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}}
	if op, err := CreateOrUpdate(ctx, cached, server, cm, mutate(cm, "2")); err != nil || op != controllerutil.OperationResultNone {
		t.Errorf("again with nothing to change: op %v, err %v; want none", op, err)
	}
	if creates != 2 {
		t.Errorf("%d creates tried, want one per call", creates)
	}
	// Without a live reader the create's error is returned as it was.
	cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}}
	if _, err := CreateOrUpdate(ctx, cached, nil, cm, mutate(cm, "3")); !apierrors.IsAlreadyExists(err) {
		t.Errorf("without a live reader: %v, want AlreadyExists", err)
	}
}
