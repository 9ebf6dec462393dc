package testbed

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	karmadaclientset "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclientset "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/mlsysops-go/mlsysops/crds"
	"github.com/mlsysops-go/mlsysops/internal/kube"
)

const (
	karmadaSystemNamespace  = "karmada-system"
	karmadaClusterNamespace = "karmada-cluster"
	aggregatedAPIService    = "karmada-aggregated-apiserver"
)

// installKarmadaCRDs creates or updates Karmada's CRDs in the Karmada API
// and waits until they are established.
func installKarmadaCRDs(ctx context.Context, cfg *rest.Config, dir string) error {
	crds, err := kube.ReadCRDs(os.DirFS(dir), ".")
	if err != nil {
		return fmt.Errorf("read Karmada CRDs from %s (run `make deps`): %w", dir, err)
	}
	if len(crds) == 0 {
		return fmt.Errorf("no Karmada CRDs in %s: run `make deps`", dir)
	}
	return applyCRDs(ctx, cfg, crds)
}

// applyCRDs creates or updates crds in the API at cfg and waits until
// they are established.
func applyCRDs(ctx context.Context, cfg *rest.Config, crds []*apiextensionsv1.CustomResourceDefinition) error {
	cs, err := apiextensionsclientset.NewForConfig(cfg)
	if err != nil {
		return err
	}
	return kube.ApplyCRDs(ctx, cs, crds)
}

func ensureNamespace(ctx context.Context, cs kubernetes.Interface, name string) error {
	return kube.EnsureNamespace(ctx, cs, name)
}

// registerAggregatedAPI makes the Karmada apiserver serve cluster.karmada.io
// through the aggregated apiserver listening on port. The aggregator reaches
// an ExternalName Service's host on the APIService port and checks the
// serving certificate against the Service's in-cluster DNS name.
func registerAggregatedAPI(ctx context.Context, cfg *rest.Config, port int, caFile string) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if err := ensureNamespace(ctx, cs, karmadaSystemNamespace); err != nil {
		return err
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: aggregatedAPIService, Namespace: karmadaSystemNamespace},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost"},
	}
	if _, err := cs.CoreV1().Services(karmadaSystemNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create service %s: %w", aggregatedAPIService, err)
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	apiSvc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": "v1alpha1.cluster.karmada.io"},
		"spec": map[string]any{
			"group": "cluster.karmada.io", "version": "v1alpha1",
			"groupPriorityMinimum": int64(2000), "versionPriority": int64(10),
			"caBundle": base64.StdEncoding.EncodeToString(ca),
			"service":  map[string]any{"name": aggregatedAPIService, "namespace": karmadaSystemNamespace, "port": int64(port)},
		},
	}}
	res := dyn.Resource(schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"})
	cur, err := res.Get(ctx, apiSvc.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = res.Create(ctx, apiSvc, metav1.CreateOptions{})
	case err == nil:
		apiSvc.SetResourceVersion(cur.GetResourceVersion())
		_, err = res.Update(ctx, apiSvc, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("register APIService v1alpha1.cluster.karmada.io: %w", err)
	}
	// Available once the aggregator reaches the aggregated apiserver.
	return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.Discovery().ServerResourcesForGroupVersion("cluster.karmada.io/v1alpha1")
		return err == nil, nil
	})
}

// installWebhookConfiguration points Karmada's admission webhooks at the
// local karmada-webhook.
func installWebhookConfiguration(ctx context.Context, cfg *rest.Config, file string, port int, caFile string) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("read %s (run `make deps`): %w", file, err)
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	b = bytes.ReplaceAll(b, []byte("https://karmada-webhook.karmada-system.svc:443"), []byte("https://127.0.0.1:"+strconv.Itoa(port)))
	b = bytes.ReplaceAll(b, []byte("{{caBundle}}"), []byte(base64.StdEncoding.EncodeToString(ca)))
	for _, doc := range bytes.Split(b, []byte("\n---")) {
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return err
		}
		switch tm.Kind {
		case "MutatingWebhookConfiguration":
			var w admissionregistrationv1.MutatingWebhookConfiguration
			if err := yaml.Unmarshal(doc, &w); err != nil {
				return err
			}
			api := cs.AdmissionregistrationV1().MutatingWebhookConfigurations()
			cur, err := api.Get(ctx, w.Name, metav1.GetOptions{})
			if err == nil {
				w.ResourceVersion = cur.ResourceVersion
				_, err = api.Update(ctx, &w, metav1.UpdateOptions{})
			} else if apierrors.IsNotFound(err) {
				_, err = api.Create(ctx, &w, metav1.CreateOptions{})
			}
			if err != nil {
				return fmt.Errorf("apply mutating webhooks: %w", err)
			}
		case "ValidatingWebhookConfiguration":
			var w admissionregistrationv1.ValidatingWebhookConfiguration
			if err := yaml.Unmarshal(doc, &w); err != nil {
				return err
			}
			api := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations()
			cur, err := api.Get(ctx, w.Name, metav1.GetOptions{})
			if err == nil {
				w.ResourceVersion = cur.ResourceVersion
				_, err = api.Update(ctx, &w, metav1.UpdateOptions{})
			} else if apierrors.IsNotFound(err) {
				_, err = api.Create(ctx, &w, metav1.CreateOptions{})
			}
			if err != nil {
				return fmt.Errorf("apply validating webhooks: %w", err)
			}
		}
	}
	return nil
}

// joinCluster registers a member cluster in Karmada in Push mode: a Secret
// with a bearer token the member's apiserver accepts and the CA that signed
// its serving certificate, and the Cluster object that points at both.
func joinCluster(ctx context.Context, cfg *rest.Config, name, server, token, caFile string) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	kc, err := karmadaclientset.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if err := ensureNamespace(ctx, cs, karmadaClusterNamespace); err != nil {
		return err
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: karmadaClusterNamespace},
		Data:       map[string][]byte{clusterv1alpha1.SecretTokenKey: []byte(token), clusterv1alpha1.SecretCADataKey: ca},
	}
	secrets := cs.CoreV1().Secrets(karmadaClusterNamespace)
	if cur, err := secrets.Get(ctx, name, metav1.GetOptions{}); err == nil {
		secret.ResourceVersion = cur.ResourceVersion
		_, err = secrets.Update(ctx, secret, metav1.UpdateOptions{})
		if err != nil {
			return fmt.Errorf("update secret for cluster %s: %w", name, err)
		}
	} else if _, err := secrets.Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create secret for cluster %s: %w", name, err)
	}
	ref := &clusterv1alpha1.LocalSecretReference{Namespace: karmadaClusterNamespace, Name: name}
	want := clusterv1alpha1.ClusterSpec{
		SyncMode:              clusterv1alpha1.Push,
		APIEndpoint:           server,
		SecretRef:             ref,
		ImpersonatorSecretRef: ref,
	}
	clusters := kc.ClusterV1alpha1().Clusters()
	cur, err := clusters.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = clusters.Create(ctx, &clusterv1alpha1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: want}, metav1.CreateOptions{})
	case err == nil:
		if cur.Spec.APIEndpoint != server || cur.Spec.SecretRef == nil || *cur.Spec.SecretRef != *ref {
			cur.Spec.SyncMode, cur.Spec.APIEndpoint, cur.Spec.SecretRef, cur.Spec.ImpersonatorSecretRef = want.SyncMode, server, ref, ref
			_, err = clusters.Update(ctx, cur, metav1.UpdateOptions{})
		}
	}
	if err != nil {
		return fmt.Errorf("register cluster %s in Karmada: %w", name, err)
	}
	return nil
}

// waitClustersReady waits until every named Cluster reports Ready.
func waitClustersReady(ctx context.Context, cfg *rest.Config, names []string, timeout time.Duration) error {
	kc, err := karmadaclientset.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var notReady []string
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		notReady = notReady[:0]
		for _, n := range names {
			c, err := kc.ClusterV1alpha1().Clusters().Get(ctx, n, metav1.GetOptions{})
			if err != nil || !meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady) {
				notReady = append(notReady, n)
			}
		}
		return len(notReady) == 0, nil
	})
	if err != nil {
		sort.Strings(notReady)
		return fmt.Errorf("clusters not Ready in Karmada: %s (see logs/karmada-controller-manager.log)", strings.Join(notReady, ", "))
	}
	return nil
}

// unjoinStale removes Cluster objects the testbed created for clusters that
// are no longer described.
func unjoinStale(ctx context.Context, cfg *rest.Config, keep map[string]bool) error {
	kc, err := karmadaclientset.NewForConfig(cfg)
	if err != nil {
		return err
	}
	list, err := kc.ClusterV1alpha1().Clusters().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, c := range list.Items {
		if !keep[c.Name] {
			if err := kc.ClusterV1alpha1().Clusters().Delete(ctx, c.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
	}
	return nil
}

func (tb *Testbed) karmadaConfig() (*rest.Config, error) {
	return restConfig(tb.l.path("kubeconfig"), ContextKarmada)
}

func (tb *Testbed) installKarmadaCRDs(ctx context.Context) error {
	cfg, err := tb.karmadaConfig()
	if err != nil {
		return err
	}
	if err := installKarmadaCRDs(ctx, cfg, filepath.Join(tb.opts.BinDir, "karmada-crds", "bases")); err != nil {
		return fmt.Errorf("karmada CRDs: %w", err)
	}
	tb.progress("installed", "karmada CRDs")
	if testing.Testing() {
		// The tests' agents install the MLSysOps API themselves.
		return nil
	}
	// The MLSysOps API's CRDs before Karmada's controller manager starts:
	// its resource detector then follows MLSysOpsApps from its first look
	// instead of up to 30 s after the installer made them (waitDetector).
	// The installer applies the same CRDs again.
	mls, err := kube.ReadCRDs(crds.FS, ".")
	if err != nil {
		return err
	}
	if err := applyCRDs(ctx, cfg, mls); err != nil {
		return fmt.Errorf("MLSysOps CRDs in Karmada: %w", err)
	}
	tb.progress("installed in Karmada", "mlsysops CRDs")
	return nil
}

func (tb *Testbed) registerKarmadaAPIs(ctx context.Context) error {
	cfg, err := tb.karmadaConfig()
	if err != nil {
		return err
	}
	if err := registerAggregatedAPI(ctx, cfg, tb.l.port(portKarmadaAgg), tb.certs.ca.CertFile); err != nil {
		return fmt.Errorf("%w; see %s", err, tb.rel(tb.l.path("logs", "karmada-aggregated-apiserver.log")))
	}
	if err := installWebhookConfiguration(ctx, cfg, filepath.Join(tb.opts.BinDir, "karmada-crds", "webhook-configuration.yaml"), tb.l.port(portKarmadaWebhook), tb.certs.ca.CertFile); err != nil {
		return err
	}
	tb.progress("registered (cluster.karmada.io, admission webhooks)", "karmada APIs")
	return nil
}

func (tb *Testbed) joinClusters(ctx context.Context) error {
	cfg, err := tb.karmadaConfig()
	if err != nil {
		return err
	}
	token, err := tb.memberToken()
	if err != nil {
		return err
	}
	keep := map[string]bool{}
	for _, name := range tb.clusters {
		keep[name] = true
		server := tb.apiServerURL(name)
		if err := joinCluster(ctx, cfg, name, server, token, tb.certs.ca.CertFile); err != nil {
			return err
		}
	}
	if err := unjoinStale(ctx, cfg, keep); err != nil {
		return err
	}
	if err := waitClustersReady(ctx, cfg, tb.clusters, 2*time.Minute); err != nil {
		return err
	}
	tb.progress("%s joined in Push mode, Ready", "member clusters", strings.Join(tb.clusters, ", "))
	return nil
}
