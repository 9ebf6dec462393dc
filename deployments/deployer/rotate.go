package deployer

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// RestartedAtKey is the pod template annotation a rotation sets to
// restart a workload, as `kubectl rollout restart` does. It is written
// with a field manager of its own (rotateManager), so that install's
// server-side apply, which does not render it, leaves it in place and
// restarts nothing.
const RestartedAtKey = "mlsysops.eu/restarted-at"

const rotateManager = "mlsysops-rotate"

// Workloads whose XMPP password file is a subPath mount of a Secret key
// (which the kubelet never updates in a running pod), so they restart to
// read a rotated password: host DaemonSets and the Karmada API's.
var (
	rotateHostRestarts    = []string{"mlsysops-continuum-agent"}
	rotateKarmadaRestarts = []string{"mlsysops-cluster-agent", "mlsysops-node-agent"}
)

// RotatePasswords gives every XMPP account of the installation (each
// agent's and the API's) a new generated password, without downtime: no
// open XMPP session is cut, and the application workloads and the API
// keep running. In order:
//
//  1. the Secrets with the passwords are written (the agents' in the
//     Karmada API, which propagates each cluster's to that cluster only);
//  2. it waits until every member cluster holds its new Secret;
//  3. the accounts reconciler restarts, so that it reads the new
//     passwords, and sets them on ejabberd at its first pass (sessions
//     stay open: ejabberd checks a password at login only);
//  4. the deployer makes sure through the admin API that ejabberd has
//     every new password;
//  5. the agents whose password file cannot change under them (subPath
//     mounts: the continuum, cluster and node agents) restart, one node at
//     a time (their DaemonSets' rolling update), and log in with the new
//     password. The API's file is a whole Secret volume, which the kubelet
//     updates in place: it reads it at its next login and does not
//     restart.
//
// An agent that loses its session between 4 and its restart in 5 is
// refused until it restarts (within the rollout); one that restarted is
// never refused.
func (d *Deployer) RotatePasswords(ctx context.Context) (*Report, error) {
	o := *d.opts
	o.rotateXMPP = true
	p, err := NewPlan(&o)
	if err != nil {
		return nil, err
	}
	d.plan = p
	if d.cl == nil {
		if d.cl, err = Connect(ctx, &o); err != nil {
			return nil, err
		}
	}
	cl := d.cl
	exists, err := cl.Host.Exists(ctx, daemonSetRef(Namespace, rotateHostRestarts[0]))
	if err != nil {
		return nil, err
	}
	if !exists {
		return nil, errNotInstalled
	}
	r, err := Render(ctx, &o, cl)
	if err != nil {
		return nil, err
	}
	rep := &Report{OperatorToken: r.Material.OperatorToken}
	names := map[string]bool{SecretAccountsPasswords: true}
	for _, a := range p.Accounts {
		names[a.Secret] = true
	}
	var members []*unstructured.Unstructured
	for _, set := range []struct {
		c    *Cluster
		objs []*unstructured.Unstructured
	}{{cl.Host, r.HostSecrets}, {cl.Karmada, r.KarmadaSecrets}} {
		for _, s := range set.objs {
			if !names[s.GetName()] {
				continue
			}
			res, err := set.c.Apply(ctx, s, o.DryRun)
			if err != nil {
				return rep, fmt.Errorf("rotate: %w", err)
			}
			rep.Results = append(rep.Results, res)
			if set.c == cl.Karmada {
				members = append(members, s)
			}
		}
	}
	d.progress("rotate: new passwords of %d XMPP accounts written to their Secrets", len(p.Accounts))
	if o.DryRun {
		return rep, nil
	}
	if err := d.waitMemberSecrets(ctx, members); err != nil {
		return rep, fmt.Errorf("rotate: %w", err)
	}
	reconciler := &unstructured.Unstructured{}
	reconciler.SetAPIVersion("apps/v1")
	reconciler.SetKind("Deployment")
	reconciler.SetNamespace(Namespace)
	reconciler.SetName(accountsReconciler)
	at := time.Now().UTC().Format(time.RFC3339)
	if err := restart(ctx, cl.Host, reconciler, at); err != nil {
		return rep, fmt.Errorf("rotate: %w", err)
	}
	if err := d.waitReady(ctx, "rotate", []workload{{cl.Host, reconciler}}); err != nil {
		return rep, err
	}
	if err := provisionAccounts(ctx, cl, &o, p, r.Material, d.progress); err != nil {
		return rep, fmt.Errorf("rotate: %w", err)
	}
	var ws []workload
	for _, set := range []struct {
		c     *Cluster
		names []string
	}{{cl.Host, rotateHostRestarts}, {cl.Karmada, rotateKarmadaRestarts}} {
		for _, name := range set.names {
			ds := daemonSetRef(Namespace, name)
			if err := restart(ctx, set.c, ds, at); err != nil {
				return rep, fmt.Errorf("rotate: %w", err)
			}
			ws = append(ws, workload{set.c, ds})
		}
	}
	if err := d.waitReady(ctx, "rotate", ws); err != nil {
		return rep, err
	}
	d.progress("rotate: done; every agent logs in with its new password")
	return rep, nil
}

// restart sets RestartedAtKey on a workload's pod template, which rolls
// its pods with the workload's update strategy.
func restart(ctx context.Context, c *Cluster, w *unstructured.Unstructured, at string) error {
	ri, _, err := c.resource(w)
	if err != nil {
		return err
	}
	patch := fmt.Appendf(nil, `{"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`, RestartedAtKey, at)
	if _, err := ri.Patch(ctx, w.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: rotateManager}); err != nil {
		return fmt.Errorf("restart %s: %w", ref(c.Name, w.GetKind(), w.GetNamespace(), w.GetName()), err)
	}
	return nil
}

// waitMemberSecrets waits until each member cluster holds the data of the
// Secrets the Karmada API propagates to it (mlsysops-agents-<cluster>):
// an agent restarted before would read its old password.
func (d *Deployer) waitMemberSecrets(ctx context.Context, secrets []*unstructured.Unstructured) error {
	deadline := time.Now().Add(d.opts.Timeout)
	for _, s := range secrets {
		member, ok := strings.CutPrefix(s.GetName(), SecretAgentsPrefix)
		if !ok || d.plan.Clusters[member] == nil {
			continue
		}
		var want corev1.Secret
		if err := fromUnstructured(s, &want); err != nil {
			return err
		}
		for {
			var got corev1.Secret
			err := d.proxyGet(ctx, member, "api/v1/namespaces/"+Namespace+"/secrets/"+s.GetName(), nil, &got)
			if err == nil && sameData(got.Data, want.Data) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("cluster %s does not hold the new Secret %s after %s (Karmada propagates it): %v", member, s.GetName(), d.opts.Timeout, err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Second):
			}
		}
	}
	d.progress("rotate: every member cluster holds its agents' new passwords")
	return nil
}

func sameData(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !bytes.Equal(v, b[k]) {
			return false
		}
	}
	return true
}
