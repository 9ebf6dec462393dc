package deployments_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/mlsysops-go/mlsysops/deployments/deployer"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/messaging/authreport"
	"github.com/mlsysops-go/mlsysops/internal/messaging/provision"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
)

// adminAPI is the testbed ejabberd's admin API as the admin account.
func adminAPI(t *testing.T, env *testbed.Env) *provision.HTTPAPI {
	t.Helper()
	client, err := adminClient(env)
	if err != nil {
		t.Fatal(err)
	}
	return provision.NewHTTPAPI(env.XMPPAdminURL, env.XMPPAdminJID, env.XMPPAdminPassword, client)
}

// accountPasswords reads every account's password from the installation's
// record (SecretAccountsPasswords), by JID.
func accountPasswords(t *testing.T, cl *deployer.Clusters) map[string]string {
	t.Helper()
	s, err := cl.Host.Kube.CoreV1().Secrets(deployer.Namespace).Get(context.Background(), deployer.SecretAccountsPasswords, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for k, v := range s.Data {
		j, ok := deployer.JIDOfKey(k)
		if !ok {
			t.Fatalf("Secret %s holds key %q", deployer.SecretAccountsPasswords, k)
		}
		out[j] = string(v)
	}
	return out
}

// refusedLogins lists the Events of refused XMPP logins (authreport) newer
// than since, in the host cluster and every member.
func refusedLogins(t *testing.T, env *testbed.Env, since time.Time) []string {
	t.Helper()
	var out []string
	for _, kctx := range append([]string{testbed.ContextHost}, env.Clusters...) {
		cs := kubernetes.NewForConfigOrDie(env.RESTConfig(t, kctx))
		evs, err := cs.CoreV1().Events(authreport.DefaultNamespace).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs.Items {
			last := e.LastTimestamp.Time
			if e.Series != nil {
				last = e.Series.LastObservedTime.Time
			}
			if e.Reason == authreport.Reason && !last.Before(since.Truncate(time.Second)) {
				out = append(out, fmt.Sprintf("%s: %s %s: %s", kctx, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message))
			}
		}
	}
	return out
}

// testRotate rotates every XMPP password with the deployer while the
// test's application runs: the application stays Running throughout, no
// agent's login is refused, ejabberd accepts every new password and none
// of the old ones, and every agent is back and ready (the rotation waits
// for their rollout, and an agent is ready once logged in).
func testRotate(t *testing.T, env *testbed.Env, o *deployer.Options, cl *deployer.Clusters, app *mlsysopsv1.MLSysOpsApp) {
	ctx := context.Background()
	old := accountPasswords(t, cl)
	start := time.Now()
	watch := watchApp(t, env, app.Name)
	var out bytes.Buffer
	_, err := deployer.New(o, &out).RotatePasswords(ctx)
	left := watch()
	t.Logf("rotate-passwords in %s:\n%s", time.Since(start).Round(time.Millisecond), out.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("the application left Running during the rotation: %v", left)
	}
	rotated := accountPasswords(t, cl)
	if len(rotated) != len(old) || len(old) < 10 {
		t.Fatalf("%d accounts after the rotation, %d before", len(rotated), len(old))
	}
	prov := adminAPI(t, env)
	for j, pw := range rotated {
		if pw == old[j] {
			t.Errorf("%s: password not rotated", j)
			continue
		}
		if ok, err := prov.CheckPassword(ctx, j, pw); err != nil || !ok {
			t.Errorf("%s: ejabberd refuses the new password (%v)", j, err)
		}
		if ok, err := prov.CheckPassword(ctx, j, old[j]); err != nil || ok {
			t.Errorf("%s: ejabberd still accepts the old password (%v)", j, err)
		}
	}
	if refused := refusedLogins(t, env, start); len(refused) > 0 {
		t.Errorf("logins refused during the rotation:\n%s", strings.Join(refused, "\n"))
	}
	// Each member's copy of its agents' Secret holds the new passwords.
	for _, member := range env.Clusters {
		cs := kubernetes.NewForConfigOrDie(env.RESTConfig(t, member))
		s, err := cs.CoreV1().Secrets(deployer.Namespace).Get(ctx, deployer.SecretAgentsPrefix+member, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range s.Data {
			if j, ok := deployer.JIDOfKey(k); ok && rotated[j] != string(v) {
				t.Errorf("%s: the Secret's password of %s is not the rotated one", member, j)
			}
		}
	}
}

// testNodeDecommissioned takes a node out of the descriptions (its agent
// turned off with the mlsysops.eu/node-agent=off label, as for
// maintenance) and installs: the node's XMPP account is deleted, with its
// links, and its cluster agent's roster no longer holds it. Installing the
// whole descriptions again brings the account and its link back.
func testNodeDecommissioned(t *testing.T, env *testbed.Env, o *deployer.Options, cl *deployer.Clusters) {
	ctx := context.Background()
	const member, node = "cloud-1", "cloud-fpga-1"
	account, parent := node+"@"+env.XMPPDomain, member+".cluster@"+env.XMPPDomain
	dir := t.TempDir()
	for _, sub := range []string{"continuum", "clusters", "nodes"} {
		files, _ := filepath.Glob(filepath.Join(o.Descriptions, sub, "*.yaml"))
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if filepath.Base(f) == node+".yaml" {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if filepath.Base(f) == member+".yaml" && sub == "clusters" {
				b = bytes.ReplaceAll(b, []byte("    - "+node+"\n"), nil)
			}
			if err := os.WriteFile(filepath.Join(dir, sub, filepath.Base(f)), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	cs := kubernetes.NewForConfigOrDie(env.RESTConfig(t, member))
	label := func(v *string) {
		t.Helper()
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{"mlsysops.eu/node-agent": v}}})
		if _, err := cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	off := "off"
	label(&off)
	t.Cleanup(func() { label(nil) })
	prov := adminAPI(t, env)
	install := func(descs string) {
		t.Helper()
		oo := *o
		oo.Descriptions = descs
		var out bytes.Buffer
		if _, err := deployer.New(&oo, &out).Install(ctx); err != nil {
			t.Fatalf("install with %s: %v\n%s", descs, err, out.String())
		}
		t.Logf("install with %s:\n%s", descs, out.String())
	}
	install(dir)
	users, err := prov.Accounts(ctx, env.XMPPDomain)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range users {
		if u == account {
			t.Errorf("%s still registered after its node left the descriptions", account)
		}
	}
	items, err := prov.Roster(ctx, parent)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if it.JID == account {
			t.Errorf("%s's roster still holds %s", parent, account)
		}
	}

	label(nil)
	install(o.Descriptions)
	pw := accountPasswords(t, cl)[account]
	testbed.Eventually(t, account+" back with its link", time.Minute, func() error {
		return accountInPlace(ctx, prov, account, pw, parent)
	})
	testbed.Eventually(t, "the node agent on "+node+" ready again", 2*time.Minute, func() error {
		pods, err := cs.CoreV1().Pods(deployer.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=mlsysops-node-agent", FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return err
		}
		for i := range pods.Items {
			if pods.Items[i].DeletionTimestamp == nil && podReady(&pods.Items[i]) {
				return nil
			}
		}
		return fmt.Errorf("%d pods, none ready", len(pods.Items))
	})
}
