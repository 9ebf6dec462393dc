package deployer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	clusterv1alpha1 "github.com/karmada-io/karmada/pkg/apis/cluster/v1alpha1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/mlsysops-go/mlsysops/deployments/charts"
	"github.com/mlsysops-go/mlsysops/internal/kube"
)

// Deployer installs, upgrades, inspects and removes MLSysOps on a Karmada
// federation.
type Deployer struct {
	opts *Options
	out  io.Writer
	cl   *Clusters
	plan *Plan

	mu    sync.Mutex
	start time.Time
}

// New returns a deployer writing its progress to out.
func New(opts *Options, out io.Writer) *Deployer {
	if out == nil {
		out = io.Discard
	}
	return &Deployer{opts: opts, out: out, start: time.Now()}
}

// progress prints one line, prefixed with the time since the start.
func (d *Deployer) progress(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintf(d.out, "[%5.1fs] %s\n", time.Since(d.start).Seconds(), fmt.Sprintf(format, args...))
}

// Report is what an install did to each object.
type Report struct {
	Results []Result
	// OperatorToken is the northbound API's operator token (kept in the
	// Secret mlsysops-northbound-tokens; never printed).
	OperatorToken string
}

// Count returns how many objects had the outcome.
func (r *Report) Count(o Outcome) int {
	n := 0
	for _, x := range r.Results {
		if x.Outcome == o {
			n++
		}
	}
	return n
}

// Rendered is an installation's objects: the charts' and the deployer's
// Secrets, for each API.
type Rendered struct {
	Plan          *Plan
	Material      *Material
	Host, Karmada []*unstructured.Unstructured
	// HostSecrets and KarmadaSecrets are the Secrets with the material.
	HostSecrets, KarmadaSecrets []*unstructured.Unstructured
}

// Render works out the plan and renders both charts. Without clusters
// (render for GitOps) the material is empty: no Secret is rendered and
// bundled mode has no CA.
func Render(ctx context.Context, o *Options, cl *Clusters) (*Rendered, error) {
	p, err := NewPlan(o)
	if err != nil {
		return nil, err
	}
	m := &Material{Passwords: map[string]string{}}
	if cl != nil {
		if m, err = LoadMaterial(ctx, cl, o, p); err != nil {
			return nil, err
		}
	} else if o.XMPPCAFile != "" {
		if m.CABundle, err = os.ReadFile(o.XMPPCAFile); err != nil {
			return nil, fmt.Errorf("--xmpp-ca-file: %w", err)
		}
	}
	hv, kv, err := p.Values(o, m)
	if err != nil {
		return nil, err
	}
	r := &Rendered{Plan: p, Material: m}
	if r.Host, err = charts.Render(charts.Host, hv); err != nil {
		return nil, err
	}
	if r.Karmada, err = charts.Render(charts.Karmada, kv); err != nil {
		return nil, err
	}
	if cl != nil {
		r.HostSecrets, r.KarmadaSecrets = p.SecretObjects(o, m)
	}
	return r, nil
}

// byStage returns the objects of one stage.
func byStage(objs []*unstructured.Unstructured, stage string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetAnnotations()[charts.StageKey] == stage {
			out = append(out, o)
		}
	}
	return out
}

// Install installs or updates MLSysOps, stage by stage (services,
// continuum, clusters, nodes), each applied with server-side apply and
// waited for until ready. A failure names the object, the cluster and the
// reason, and leaves what was applied: running again continues.
func (d *Deployer) Install(ctx context.Context) (*Report, error) {
	o := d.opts
	p, err := NewPlan(o)
	if err != nil {
		return nil, err
	}
	d.plan = p
	d.progress("descriptions: continuum %s, %d clusters, %d nodes (%s)", p.Continuum, len(p.Clusters), len(p.Set.Nodes), o.Descriptions)
	if d.cl == nil {
		if d.cl, err = Connect(ctx, o); err != nil {
			return nil, err
		}
	}
	cl := d.cl
	d.progress("host cluster %s, Karmada API %s", cl.Host.Config.Host, cl.Karmada.Config.Host)
	if err := d.preflight(ctx); err != nil {
		return nil, err
	}
	r, err := Render(ctx, o, cl)
	if err != nil {
		return nil, err
	}
	rep := &Report{OperatorToken: r.Material.OperatorToken}
	applied := map[string]bool{}
	apply := func(c *Cluster, objs []*unstructured.Unstructured) error {
		for _, obj := range objs {
			applied[ownedKey(c, obj)] = true
			res, err := c.Apply(ctx, obj, o.DryRun)
			if err != nil {
				return err
			}
			if obj.GetKind() == "CustomResourceDefinition" {
				c.Mapper.Reset()
			}
			rep.Results = append(rep.Results, res)
			if res.Outcome != Unchanged {
				d.progress("  %s %s", res.Outcome, res.Ref())
			}
		}
		return nil
	}
	for _, stage := range charts.Stages {
		karmada := byStage(r.Karmada, stage)
		host := append(byStage(r.HostSecrets, stage), byStage(r.Host, stage)...)
		karmada = append(karmada, byStage(r.KarmadaSecrets, stage)...)
		charts.Sort(host)
		charts.Sort(karmada)
		d.progress("stage %s: %d objects in the Karmada API, %d in the host cluster", stage, len(karmada), len(host))
		if err := apply(cl.Karmada, karmada); err != nil {
			return rep, fmt.Errorf("stage %s: %w", stage, err)
		}
		if stage == "continuum" {
			if err := d.waitCRDs(ctx, karmada); err != nil {
				return rep, fmt.Errorf("stage %s: %w", stage, err)
			}
			kcs, err := d.kubeconfigs(ctx)
			if err != nil {
				return rep, fmt.Errorf("stage %s: %w", stage, err)
			}
			host = append(kcs, host...)
			charts.Sort(host)
		}
		if err := apply(cl.Host, host); err != nil {
			return rep, fmt.Errorf("stage %s: %w", stage, err)
		}
		if err := d.waitReady(ctx, stage, append(workloads(cl.Host, host), workloads(cl.Karmada, karmada)...)); err != nil {
			return rep, err
		}
		if stage == "services" && !o.DryRun {
			if err := provisionAccounts(ctx, cl, o, p, r.Material, d.progress); err != nil {
				return rep, fmt.Errorf("stage %s: %w", stage, err)
			}
		}
		if stage == "continuum" && !o.DryRun && !o.NoWait {
			if err := pruneAccounts(ctx, cl, o, p, r.Material, d.progress); err != nil {
				return rep, fmt.Errorf("stage %s: %w", stage, err)
			}
		}
	}
	if err := d.prune(ctx, applied, rep); err != nil {
		return rep, err
	}
	changed := rep.Count(Created) + rep.Count(Changed) + rep.Count(Deleted)
	switch {
	case o.DryRun:
		d.progress("dry run: %d objects accepted by the apiservers, nothing written", len(rep.Results))
	case changed == 0:
		d.progress("nothing changed: all %d objects were already as described", len(rep.Results))
	default:
		d.progress("done: %d created, %d changed, %d unchanged, %d deleted", rep.Count(Created), rep.Count(Changed), rep.Count(Unchanged), rep.Count(Deleted))
	}
	return rep, nil
}

// prune deletes the installation's objects that this install did not
// render (applied holds those it did): what an earlier version or other
// options made and the present ones no longer have, such as the ML
// connector's objects once it is turned off, or a cluster's agent Secret
// once the cluster left the descriptions. Like
// uninstall, it keeps what the applications need (PurgeKey; the continuum
// agent removes the applications' policy itself when it no longer uses
// it); unlike uninstall, it keeps volumes, whose data outlive a bundled
// service turned off. Copies Karmada propagated into the host cluster,
// when the host is also a member, are Karmada's to remove.
func (d *Deployer) prune(ctx context.Context, applied map[string]bool, rep *Report) error {
	var stale []ownedObject
	for _, c := range []*Cluster{d.cl.Host, d.cl.Karmada} {
		objs, err := c.Owned(ctx)
		if err != nil {
			return fmt.Errorf("prune: %w", err)
		}
		for _, obj := range objs {
			if applied[ownedKey(c, obj)] || obj.GetAnnotations()[PurgeKey] == "purge" || karmadaCopy(obj) {
				continue
			}
			if obj.GetKind() == "PersistentVolumeClaim" {
				// Data (a bundled service's, since turned off): the
				// operator's to delete, once it is no longer needed.
				d.progress("  kept %s: no longer part of the installation, but it holds data (delete it by hand)", ref(c.Name, obj.GetKind(), obj.GetNamespace(), obj.GetName()))
				continue
			}
			stale = append(stale, ownedObject{c, obj})
		}
	}
	deletionOrder(stale)
	for _, it := range stale {
		c, obj := it.c, it.obj
		ok, err := c.Delete(ctx, obj, d.opts.DryRun)
		if err != nil {
			return fmt.Errorf("prune: %w", err)
		}
		if ok {
			res := Result{Cluster: c.Name, Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName(), Outcome: Deleted}
			rep.Results = append(rep.Results, res)
			d.progress("  %s %s: no longer part of the installation", res.Outcome, res.Ref())
		}
	}
	return nil
}

// ownedKey names an object of the installation in c.
func ownedKey(c *Cluster, o *unstructured.Unstructured) string {
	return ref(c.Name, o.GetObjectKind().GroupVersionKind().GroupKind().String(), o.GetNamespace(), o.GetName())
}

// karmadaCopy tells a copy Karmada's execution controller wrote (a host
// cluster that is also a member holds copies of the member workloads).
func karmadaCopy(o *unstructured.Unstructured) bool {
	_, work := o.GetAnnotations()["work.karmada.io/name"]
	return o.GetLabels()["karmada.io/managed"] == "true" || work
}

// kubeconfigs returns the host Secrets with the Karmada kubeconfigs of the
// continuum agent and the API (placeholders in a dry run, where no token
// is ever issued).
func (d *Deployer) kubeconfigs(ctx context.Context) ([]*unstructured.Unstructured, error) {
	if d.opts.DryRun {
		var out []*unstructured.Unstructured
		for _, id := range karmadaIdentities {
			out = append(out, secretObject(id.HostSecret, "continuum", map[string][]byte{"kubeconfig": []byte("dry-run")}))
		}
		return out, nil
	}
	return kubeconfigSecrets(ctx, d.cl, d.opts, d.opts.Timeout)
}

// waitCRDs waits for the CRDs among objs to be established.
func (d *Deployer) waitCRDs(ctx context.Context, objs []*unstructured.Unstructured) error {
	if d.opts.DryRun {
		return nil
	}
	ext := d.cl.Karmada.Dyn.Resource(apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions"))
	for _, obj := range objs {
		if obj.GetKind() != "CustomResourceDefinition" {
			continue
		}
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			u, err := ext.Get(ctx, obj.GetName(), metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			var crd apiextensionsv1.CustomResourceDefinition
			if err := fromUnstructured(u, &crd); err != nil {
				return false, err
			}
			return kube.Established(&crd), nil
		})
		if err != nil {
			return fmt.Errorf("CRD %s not established in the Karmada API: %w", obj.GetName(), err)
		}
	}
	d.cl.Karmada.Mapper.Reset()
	return nil
}

// preflight reports the member clusters: described ones not joined yet get
// their agents when they join; joined ones not described get none.
func (d *Deployer) preflight(ctx context.Context) error {
	list, err := d.cl.KarmadaClient.ClusterV1alpha1().Clusters().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list Karmada member clusters: %w", err)
	}
	joined := map[string]bool{}
	var names []string
	for i := range list.Items {
		c := &list.Items[i]
		joined[c.Name] = true
		state := "Ready"
		if !meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1alpha1.ClusterConditionReady) {
			state = "not Ready"
		}
		names = append(names, c.Name+" ("+state+")")
	}
	sort.Strings(names)
	d.progress("member clusters: %s", strings.Join(names, ", "))
	for _, c := range d.plan.clusterNames() {
		if !joined[c] {
			d.progress("cluster %s is described but not joined: its agents start when it joins", c)
		}
	}
	return d.waitTerminatingNamespaces(ctx)
}

// waitTerminatingNamespaces waits until namespaces of the installation
// that are being deleted (an uninstall just before) are gone: nothing can
// be created in them until then.
func (d *Deployer) waitTerminatingNamespaces(ctx context.Context) error {
	if d.opts.DryRun {
		return nil
	}
	return d.waitGone(ctx, func(ctx context.Context) ([]string, error) {
		var left []string
		for _, c := range []*Cluster{d.cl.Host, d.cl.Karmada} {
			for _, name := range []string{Namespace, AppNamespace} {
				ns, err := c.Kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					continue
				}
				if err != nil {
					return nil, fmt.Errorf("read namespace %s in the %s API: %w", name, c.Name, err)
				}
				if ns.DeletionTimestamp != nil {
					left = append(left, ref(c.Name, "Namespace", "", name)+" (terminating)")
				}
			}
		}
		return left, nil
	})
}

// errNotInstalled says that upgrade found nothing to upgrade.
var errNotInstalled = errors.New("MLSysOps is not installed here (no continuum agent DaemonSet in the host cluster): run install first")

// Upgrade installs the new version over an existing installation: every
// agent rolls to the new image one node at a time (the DaemonSets'
// rolling update), and the wait shows the rollout in every cluster.
// Applications keep running: the agents rebuild their state on start.
func (d *Deployer) Upgrade(ctx context.Context) (*Report, error) {
	if d.cl == nil {
		cl, err := Connect(ctx, d.opts)
		if err != nil {
			return nil, err
		}
		d.cl = cl
	}
	exists, err := d.cl.Host.Exists(ctx, daemonSetRef(Namespace, "mlsysops-continuum-agent"))
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, errNotInstalled
	}
	return d.Install(ctx)
}

func daemonSetRef(ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("apps/v1")
	u.SetKind("DaemonSet")
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

func fromUnstructured(u *unstructured.Unstructured, into any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into)
}

// WaitInstalled waits until every workload of the installation is ready:
// in the host cluster (api "host"), the Karmada API's members ("karmada"),
// or both (""). It is install's wait, for an install run with NoWait.
func (d *Deployer) WaitInstalled(ctx context.Context, api string) error {
	if d.cl == nil {
		cl, err := Connect(ctx, d.opts)
		if err != nil {
			return err
		}
		d.cl = cl
	}
	if d.plan == nil {
		if p, err := NewPlan(d.opts); err == nil {
			d.plan = p
		}
	}
	var ws []workload
	for _, c := range []*Cluster{d.cl.Host, d.cl.Karmada} {
		if api != "" && api != c.Name {
			continue
		}
		objs, err := c.Owned(ctx)
		if err != nil {
			return err
		}
		ws = append(ws, workloads(c, objs)...)
	}
	o := *d.opts
	o.NoWait = false
	saved := d.opts
	d.opts = &o
	defer func() { d.opts = saved }()
	return d.waitReady(ctx, "installed", ws)
}
