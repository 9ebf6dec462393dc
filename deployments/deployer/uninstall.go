package deployer

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/mlsysops-go/mlsysops/deployments/charts"
)

// PurgeKey is the annotation of objects the applications need (the
// mlsysops.eu CRDs, their propagation, the applications' namespace):
// uninstall removes them only with --purge.
const PurgeKey = "mlsysops.eu/uninstall"

var appGVR = schema.GroupVersionResource{Group: "mlsysops.eu", Version: "v1", Resource: "mlsysopsapps"}

// Uninstall removes what install wrote, found by its labels, in reverse
// stage order, with the agents' XMPP accounts; Karmada removes the
// propagated objects from the member clusters, which it waits for. The
// applications, the CRDs and the applications' namespace stay unless
// Purge is set, in which case the applications go first, while their
// cluster agents still run and can remove what they placed.
func (d *Deployer) Uninstall(ctx context.Context) error {
	o := d.opts
	if d.cl == nil {
		cl, err := Connect(ctx, o)
		if err != nil {
			return err
		}
		d.cl = cl
	}
	cl := d.cl
	if o.Purge {
		if err := d.purgeApps(ctx); err != nil {
			return err
		}
	}
	// The accounts reconciler would create the accounts again: it stops
	// first.
	if err := d.stopAccountsReconciler(ctx); err != nil {
		return err
	}
	if err := d.removeAccounts(ctx); err != nil {
		// The objects go anyway; the accounts can be removed by hand.
		d.progress("XMPP accounts not removed: %v", err)
	}
	var all []ownedObject
	for _, c := range []*Cluster{cl.Karmada, cl.Host} {
		objs, err := c.Owned(ctx)
		if err != nil {
			return err
		}
		for _, obj := range objs {
			if obj.GetAnnotations()[PurgeKey] == "purge" && !o.Purge {
				continue
			}
			all = append(all, ownedObject{c, obj})
		}
	}
	deletionOrder(all)
	deleted := 0
	for _, it := range all {
		ok, err := it.c.Delete(ctx, it.obj, o.DryRun)
		if err != nil {
			return err
		}
		if ok {
			deleted++
			d.progress("  deleted %s", ref(it.c.Name, it.obj.GetKind(), it.obj.GetNamespace(), it.obj.GetName()))
		}
	}
	if o.DryRun {
		d.progress("dry run: %d objects would be deleted", deleted)
		return nil
	}
	if err := d.waitGone(ctx, func(ctx context.Context) ([]string, error) {
		var left []string
		for _, it := range all {
			ok, err := it.c.Exists(ctx, it.obj)
			if err != nil {
				return nil, err
			}
			if ok {
				left = append(left, ref(it.c.Name, it.obj.GetKind(), it.obj.GetNamespace(), it.obj.GetName()))
			}
		}
		left = append(left, d.memberLeftovers(ctx)...)
		return left, nil
	}); err != nil {
		return err
	}
	kept := "the applications, the mlsysops.eu CRDs and the namespace mlsysops stay (uninstall --purge removes them)"
	if o.Purge {
		kept = "applications purged"
	}
	d.progress("uninstalled: %d objects deleted, none left in the host cluster, the Karmada API or any member; %s", deleted, kept)
	return nil
}

// ownedObject is an object of the installation and the API it is in.
type ownedObject struct {
	c   *Cluster
	obj *unstructured.Unstructured
}

// deletionOrder sorts objects to delete: reverse stage order; within a
// stage workloads and policies before what they use, namespaces last.
func deletionOrder(all []ownedObject) {
	sort.SliceStable(all, func(i, j int) bool {
		a, b := all[i].obj, all[j].obj
		if x, y := charts.StageIndex(a), charts.StageIndex(b); x != y {
			return x > y
		}
		return kindOrder(a) > kindOrder(b)
	})
}

// kindOrder ranks kinds for deletion (higher first).
func kindOrder(o *unstructured.Unstructured) int {
	switch o.GetKind() {
	case "DaemonSet", "Deployment", "StatefulSet":
		return 9
	case "PropagationPolicy", "ClusterPropagationPolicy":
		return 8
	case "Namespace":
		return 0
	case "CustomResourceDefinition":
		return 1
	}
	return 5
}

// memberLeftovers lists the installation's objects still in member
// clusters: the namespace mlsysops-framework and the cluster-scoped roles,
// read through Karmada's cluster proxy.
func (d *Deployer) memberLeftovers(ctx context.Context) []string {
	list, err := d.cl.KarmadaClient.ClusterV1alpha1().Clusters().List(ctx, metav1.ListOptions{})
	if err != nil {
		return []string{"member clusters unreadable: " + err.Error()}
	}
	var left []string
	for _, c := range list.Items {
		var ns corev1.Namespace
		if err := d.proxyGet(ctx, c.Name, "api/v1/namespaces/"+Namespace, nil, &ns); err == nil {
			left = append(left, fmt.Sprintf("Namespace %s (member %s, %s)", Namespace, c.Name, ns.Status.Phase))
		} else if !isNotFound(err) {
			left = append(left, fmt.Sprintf("member %s unreadable: %v", c.Name, err))
		}
		for _, r := range []string{"mlsysops-cluster-agent", "mlsysops-member-reader", "mlsysops-member-app-sweeper"} {
			var u unstructured.Unstructured
			if err := d.proxyGet(ctx, c.Name, "apis/rbac.authorization.k8s.io/v1/clusterroles/"+r, nil, &u.Object); err == nil {
				left = append(left, fmt.Sprintf("ClusterRole %s (member %s)", r, c.Name))
			}
		}
	}
	return left
}

func isNotFound(err error) bool {
	var se *apierrors.StatusError
	return apierrors.IsNotFound(err) || (errors.As(err, &se) && se.ErrStatus.Code == 404)
}

// waitGone waits until left reports nothing, printing what is left when
// it changes.
func (d *Deployer) waitGone(ctx context.Context, left func(context.Context) ([]string, error)) error {
	var last string
	var cur []string
	err := wait.PollUntilContextTimeout(ctx, time.Second, d.opts.Timeout, true, func(ctx context.Context) (bool, error) {
		var err error
		if cur, err = left(ctx); err != nil {
			return false, err
		}
		if s := strings.Join(cur, ", "); s != last && s != "" {
			last = s
			d.progress("waiting for %d objects to go: %s", len(cur), s)
		}
		return len(cur) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("still there after %s: %s: %w", d.opts.Timeout, strings.Join(cur, ", "), err)
	}
	return nil
}

// purgeApps deletes every application from the Karmada API and waits until
// they are gone there and in the members.
func (d *Deployer) purgeApps(ctx context.Context) error {
	apps := d.cl.Karmada.Dyn.Resource(appGVR).Namespace(AppNamespace)
	list, err := apps.List(ctx, metav1.ListOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) || strings.Contains(err.Error(), "the server could not find the requested resource") {
			return nil
		}
		return fmt.Errorf("list applications: %w", err)
	}
	for _, a := range list.Items {
		if d.opts.DryRun {
			continue
		}
		if err := apps.Delete(ctx, a.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete application %s: %w", a.GetName(), err)
		}
		d.progress("  deleted application %s", a.GetName())
	}
	if d.opts.DryRun || len(list.Items) == 0 {
		return nil
	}
	return d.waitGone(ctx, func(ctx context.Context) ([]string, error) {
		l, err := apps.List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		var left []string
		for _, a := range l.Items {
			left = append(left, "MLSysOpsApp "+a.GetName())
		}
		return left, nil
	})
}

// stopAccountsReconciler deletes the accounts reconciler's Deployment and
// waits until its pods are gone.
func (d *Deployer) stopAccountsReconciler(ctx context.Context) error {
	if d.opts.DryRun {
		return nil
	}
	host := d.cl.Host.Kube
	bg := metav1.DeletePropagationBackground
	err := host.AppsV1().Deployments(Namespace).Delete(ctx, accountsReconciler, metav1.DeleteOptions{PropagationPolicy: &bg})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Deployment %s/%s in the host cluster: %w", Namespace, accountsReconciler, err)
	}
	return d.waitGone(ctx, func(ctx context.Context) ([]string, error) {
		pods, err := host.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + accountsReconciler})
		if err != nil {
			return nil, err
		}
		var left []string
		for _, p := range pods.Items {
			left = append(left, ref(d.cl.Host.Name, "Pod", p.Namespace, p.Name))
		}
		return left, nil
	})
}

// accountsReconciler names the accounts reconciler's Deployment and pods.
const accountsReconciler = "mlsysops-accounts"

// removeAccounts deletes the XMPP accounts whose passwords the
// installation's Secrets hold, through the admin API the admin Secret
// names (external services) or the bundled server.
func (d *Deployer) removeAccounts(ctx context.Context) error {
	cl := d.cl
	admin, err := readSecret(ctx, cl.Host, SecretEjabberdAdmin)
	if err != nil || admin == nil {
		return fmt.Errorf("no ejabberd admin Secret %s: %v", SecretEjabberdAdmin, err)
	}
	var accounts []string
	collect := func(c *Cluster, name string) error {
		data, err := readSecret(ctx, c, name)
		if err != nil {
			return err
		}
		for k := range data {
			if jid, ok := JIDOfKey(k); ok {
				accounts = append(accounts, jid)
			}
		}
		return nil
	}
	for _, s := range []string{SecretContinuumXMPP, SecretNorthboundXMPP} {
		if err := collect(cl.Host, s); err != nil {
			return err
		}
	}
	secrets, err := cl.Karmada.Kube.CoreV1().Secrets(Namespace).List(ctx, metav1.ListOptions{LabelSelector: charts.LabelPartOf + "=" + charts.PartOfValue})
	if err != nil {
		return err
	}
	for _, s := range secrets.Items {
		if strings.HasPrefix(s.Name, SecretAgentsPrefix) {
			if err := collect(cl.Karmada, s.Name); err != nil {
				return err
			}
		}
	}
	accounts = compact(accounts)
	if len(accounts) == 0 || d.opts.DryRun {
		return nil
	}
	o := *d.opts
	o.EjabberdAdmin = string(admin["jid"])
	if api := string(admin["api"]); api != "" {
		o.Services, o.EjabberdAPI = ModeExternal, api
	} else {
		o.Services = ModeBundled
	}
	if _, domain, ok := strings.Cut(o.EjabberdAdmin, "@"); ok {
		o.XMPPDomain = domain
	}
	var ca []byte
	if cm, err := cl.Host.Kube.CoreV1().ConfigMaps(Namespace).Get(ctx, "mlsysops-xmpp-ca", metav1.GetOptions{}); err == nil {
		ca = []byte(cm.Data["ca.crt"])
	}
	prov, stop, err := provisioner(ctx, cl, &o, string(admin["password"]), ca)
	if err != nil {
		return err
	}
	defer stop()
	if err := removeAccounts(ctx, prov, accounts); err != nil {
		return err
	}
	d.progress("XMPP accounts removed: %d", len(accounts))
	return nil
}

// JIDOfKey inverts AgentSecretKey.
func JIDOfKey(k string) (string, bool) {
	if !strings.HasPrefix(k, "xmpp-") || !strings.HasSuffix(k, ".password") {
		return "", false
	}
	s := strings.TrimSuffix(strings.TrimPrefix(k, "xmpp-"), ".password")
	i := strings.LastIndex(s, "_at_")
	if i <= 0 {
		return "", false
	}
	return s[:i] + "@" + s[i+len("_at_"):], true
}

func compact(list []string) []string {
	sort.Strings(list)
	out := list[:0]
	for i, s := range list {
		if s == "" || (i > 0 && s == list[i-1]) {
			continue
		}
		out = append(out, s)
	}
	return out
}
