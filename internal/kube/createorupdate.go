package kube

import (
	"context"
	"reflect"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// CreateOrUpdate is controllerutil.CreateOrUpdate on c (a cached client),
// going on with a live read (live) when the cache has not seen the object
// yet but the API server has it: made by an earlier pass a moment before,
// under load the cache can take seconds to show it, and each pass in
// between would otherwise fail its create (AlreadyExists) and be retried,
// a failed POST each time. obj carries the name and namespace only, as
// for controllerutil.CreateOrUpdate; f mutates obj.
func CreateOrUpdate(ctx context.Context, c client.Client, live client.Reader, obj client.Object, f controllerutil.MutateFn) (controllerutil.OperationResult, error) {
	blank := obj.DeepCopyObject()
	op, err := controllerutil.CreateOrUpdate(ctx, c, obj, f)
	if !apierrors.IsAlreadyExists(err) || live == nil {
		return op, err
	}
	// f has mutated obj for the create: start again from the name.
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(blank).Elem())
	if err := live.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		return controllerutil.OperationResultNone, err
	}
	existing := obj.DeepCopyObject()
	if err := f(); err != nil {
		return controllerutil.OperationResultNone, err
	}
	if equality.Semantic.DeepEqual(existing, obj) {
		return controllerutil.OperationResultNone, nil
	}
	if err := c.Update(ctx, obj); err != nil {
		return controllerutil.OperationResultNone, err
	}
	return controllerutil.OperationResultUpdated, nil
}
