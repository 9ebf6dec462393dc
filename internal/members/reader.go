package members

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/placement"
)

// Reader reads member clusters through Karmada's cluster proxy
// (/apis/cluster.karmada.io/v1alpha1/clusters/<name>/proxy/...), with the
// Karmada API's credentials.
type Reader struct {
	proxy rest.Interface
}

// NewReader returns a reader on the Karmada API at cfg.
func NewReader(cfg *rest.Config) (*Reader, error) {
	pc := rest.CopyConfig(cfg)
	pc.GroupVersion = &clusterv1alpha1.SchemeGroupVersion
	pc.APIPath = "/apis"
	pc.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	rc, err := rest.RESTClientFor(pc)
	if err != nil {
		return nil, fmt.Errorf("karmada cluster proxy client: %w", err)
	}
	return &Reader{proxy: rc}, nil
}

// Nodes reads a member cluster's nodes and the requests of its running
// pods: its capacity, as placement sees it.
func (r *Reader) Nodes(ctx context.Context, cluster string) ([]placement.Node, error) {
	var nodes corev1.NodeList
	if err := r.get(ctx, cluster, "nodes", nil, &nodes); err != nil {
		return nil, err
	}
	var pods corev1.PodList
	if err := r.get(ctx, cluster, "pods", map[string]string{"fieldSelector": "status.phase!=Succeeded,status.phase!=Failed"}, &pods); err != nil {
		return nil, err
	}
	return placement.NodesWithPods(nodes.Items, pods.Items), nil
}

// AppPods lists the pods of an application in a member cluster, sorted by
// name.
func (r *Reader) AppPods(ctx context.Context, cluster, app string) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := r.get(ctx, cluster, "pods", map[string]string{"labelSelector": mlsysopsv1.LabelApp + "=" + app}, &pods); err != nil {
		return nil, err
	}
	sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Name < pods.Items[j].Name })
	return pods.Items, nil
}

// AppEvents lists the cluster agent's events about an application in a
// member cluster (its plans: on the application and on the Deployments
// they changed), oldest first.
func (r *Reader) AppEvents(ctx context.Context, cluster, app string) ([]corev1.Event, error) {
	var evs corev1.EventList
	sel := "involvedObject.namespace=" + Namespace(app) + ",source=" + mlsysopsv1.EventSourceClusterAgent
	if err := r.get(ctx, cluster, "events", map[string]string{"fieldSelector": sel}, &evs); err != nil {
		return nil, err
	}
	sort.SliceStable(evs.Items, func(i, j int) bool { return EventTime(&evs.Items[i]).Before(EventTime(&evs.Items[j])) })
	return evs.Items, nil
}

// EventTime is when an event last happened, whichever of its times the
// recorder set.
func EventTime(ev *corev1.Event) time.Time {
	switch {
	case !ev.LastTimestamp.IsZero():
		return ev.LastTimestamp.Time
	case !ev.EventTime.IsZero():
		return ev.EventTime.Time
	}
	return ev.FirstTimestamp.Time
}

// AppServices lists the Services the cluster agent created for an
// application's components in a member cluster, sorted by name.
func (r *Reader) AppServices(ctx context.Context, cluster, app string) ([]corev1.Service, error) {
	var svcs corev1.ServiceList
	sel := mlsysopsv1.LabelApp + "=" + app + "," + mlsysopsv1.LabelManagedBy + "=" + mlsysopsv1.ManagedByValue
	if err := r.get(ctx, cluster, "services", map[string]string{"labelSelector": sel}, &svcs); err != nil {
		return nil, err
	}
	sort.Slice(svcs.Items, func(i, j int) bool { return svcs.Items[i].Name < svcs.Items[j].Name })
	return svcs.Items, nil
}

func (r *Reader) get(ctx context.Context, cluster, res string, params map[string]string, into runtime.Object) error {
	req := r.proxy.Get().Resource("clusters").Name(cluster).SubResource("proxy", "api", "v1", res)
	for key, v := range params {
		req = req.Param(key, v)
	}
	b, err := req.DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("cluster %s: list %s through the Karmada cluster proxy: %w", cluster, res, err)
	}
	if err := runtime.DecodeInto(clientgoscheme.Codecs.UniversalDecoder(corev1.SchemeGroupVersion), b, into); err != nil {
		return fmt.Errorf("cluster %s: decode %s: %w", cluster, res, err)
	}
	return nil
}

// Apps lists the MLSysOpsApps in a member's application namespace: the
// copies Karmada propagated there.
func (r *Reader) Apps(ctx context.Context, cluster string) ([]mlsysopsv1.MLSysOpsApp, error) {
	b, err := r.appsPath(cluster).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: list MLSysOpsApps through the Karmada cluster proxy: %w", cluster, err)
	}
	var list mlsysopsv1.MLSysOpsAppList
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("cluster %s: decode MLSysOpsApps: %w", cluster, err)
	}
	return list.Items, nil
}

// DeleteApp deletes a member's copy of an application, only while it is
// still the object with uid (not one created again since). Gone already
// is not an error.
func (r *Reader) DeleteApp(ctx context.Context, cluster, name string, uid types.UID) error {
	body, err := json.Marshal(metav1.DeleteOptions{
		TypeMeta:      metav1.TypeMeta{APIVersion: "v1", Kind: "DeleteOptions"},
		Preconditions: &metav1.Preconditions{UID: &uid},
	})
	if err != nil {
		return err
	}
	res := r.proxy.Delete().Resource("clusters").Name(cluster).
		SubResource("proxy", "apis", mlsysopsv1.SchemeGroupVersion.Group, mlsysopsv1.SchemeGroupVersion.Version, "namespaces", mlsysopsv1.Namespace, "mlsysopsapps", name).
		Body(body).Do(ctx)
	if err := res.Error(); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("cluster %s: delete MLSysOpsApp %s through the Karmada cluster proxy: %w", cluster, name, err)
	}
	return nil
}

func (r *Reader) appsPath(cluster string) *rest.Request {
	return r.proxy.Get().Resource("clusters").Name(cluster).
		SubResource("proxy", "apis", mlsysopsv1.SchemeGroupVersion.Group, mlsysopsv1.SchemeGroupVersion.Version, "namespaces", mlsysopsv1.Namespace, "mlsysopsapps")
}
