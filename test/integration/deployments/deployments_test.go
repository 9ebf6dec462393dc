// Package deployments_test installs MLSysOps with the deployer on the
// shared testbed's Karmada (external services: the testbed's ejabberd and
// Redis), checks what it wrote, in the Karmada API, the host cluster and
// the members, the roles of each layer with SubjectAccessReviews, a second
// run that changes nothing, and an uninstall that leaves nothing.
package deployments_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/mlsysops-go/mlsysops/deployments/deployer"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/internal/messaging/authreport"
	"github.com/mlsysops-go/mlsysops/internal/messaging/provision"
	mlstate "github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
)

// baseOptions installs the repository's descriptions onto the shared
// testbed; set the services, then check with o.Validate.
func baseOptions(t *testing.T, env *testbed.Env) *deployer.Options {
	t.Helper()
	root, err := testbed.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	o := deployer.NewOptionsFromEnv(func(string) (string, bool) { return "", false })
	o.Kubeconfig = env.Kubeconfig
	o.Descriptions = filepath.Join(root, "descriptions")
	o.Timeout = 2 * time.Minute
	return o
}

func validated(t *testing.T, o *deployer.Options) *deployer.Options {
	t.Helper()
	if err := o.Validate(true, true); err != nil {
		t.Fatal(err)
	}
	return o
}

// externalOptions are what make up installs with: the testbed's own
// ejabberd and Redis, at the addresses the agents' pods reach.
func externalOptions(t *testing.T, env *testbed.Env) *deployer.Options {
	t.Helper()
	o, err := testbed.InstallOptions(env)
	if err != nil {
		t.Fatal(err)
	}
	return validated(t, o)
}

// bundledOptions runs ejabberd, Redis and PostgreSQL in the host cluster
// (dry runs only: the testbed pulls no public image).
func bundledOptions(t *testing.T, env *testbed.Env) *deployer.Options {
	o := baseOptions(t, env)
	o.KarmadaHostIP = "192.0.2.10"
	return validated(t, o)
}

// TestDryRun sends everything install writes, in both service modes, as a
// server-side dry run to the testbed's host cluster and Karmada API: they
// validate and admit every object (schemas, Karmada's webhooks), and
// nothing is stored. The namespaces must exist for the objects in them to
// be checked, so the test creates them (and only them) first.
func TestDryRun(t *testing.T) {
	env := testbed.Shared(t)
	ctx := context.Background()
	for _, kctx := range []string{testbed.ContextHost, testbed.ContextKarmada} {
		cs := kubernetes.NewForConfigOrDie(env.RESTConfig(t, kctx))
		for _, ns := range []string{deployer.Namespace, deployer.AppNamespace} {
			_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if ns == deployer.Namespace {
				t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
			}
		}
	}
	for name, o := range map[string]*deployer.Options{"external": externalOptions(t, env), "bundled": bundledOptions(t, env)} {
		t.Run(name, func(t *testing.T) {
			o.DryRun = true
			var out bytes.Buffer
			rep, err := deployer.New(o, &out).Install(ctx)
			if err != nil {
				t.Fatalf("%v\n%s", err, out.String())
			}
			if len(rep.Results) < 60 {
				t.Errorf("only %d objects checked", len(rep.Results))
			}
			t.Logf("dry run: %d objects accepted", len(rep.Results))
			cl, err := deployer.Connect(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []*deployer.Cluster{cl.Host, cl.Karmada} {
				objs, err := c.Owned(ctx)
				if err != nil {
					t.Fatal(err)
				}
				for _, obj := range objs {
					// What an uninstall keeps (the API and the applications'
					// namespace) may be there from an earlier install.
					if obj.GetKind() != "CustomResourceDefinition" && obj.GetKind() != "Namespace" && obj.GetAnnotations()[deployer.PurgeKey] != "purge" {
						t.Errorf("the dry run stored %s %s/%s in the %s API", obj.GetKind(), obj.GetNamespace(), obj.GetName(), c.Name)
					}
				}
			}
		})
	}
}

// TestInstall installs, checks, installs again and uninstalls.
func TestInstall(t *testing.T) {
	env := testbed.Shared(t)
	ctx := context.Background()
	o := externalOptions(t, env)
	// Installed as the releases before the Works were the default
	// installed: the continuum schedules Karmada's bindings. The upgrade
	// below moves it to the default, the Works, as a user's upgrade does.
	o.Propagation = "binding"
	// The accounts reconciler makes no periodic pass during the test: a
	// lost account can only come back through its agent's report.
	noPasses := filepath.Join(t.TempDir(), "accounts.yaml")
	if err := os.WriteFile(noPasses, []byte("accounts: {interval: 2h, fullInterval: 2h}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o.HostValues = append(o.HostValues, noPasses)
	cl, err := deployer.Connect(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Whatever happened, leave the shared testbed clean.
		u := *o
		u.Timeout = 2 * time.Minute
		if err := deployer.New(&u, nil).Uninstall(context.Background()); err != nil {
			t.Logf("cleanup uninstall: %v", err)
		}
	})

	// edge-1 is out of Karmada during the install and joins after it.
	joinLater := leaveKarmada(t, cl, "edge-1")

	var first *deployer.Report
	t.Run("install", func(t *testing.T) {
		// The install waits for every workload: the continuum agent and
		// the northbound API on the host's real node, the cluster and node
		// agents in every member (containers on the real nodes, processes
		// of the kwoklets on the KWOK nodes).
		var out bytes.Buffer
		start := time.Now()
		first, err = deployer.New(o, &out).Install(ctx)
		if err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
		t.Logf("install: %d objects (%d created, %d changed) in %s:\n%s", len(first.Results), first.Count(deployer.Created), first.Count(deployer.Changed), time.Since(start).Round(time.Millisecond), out.String())
	})

	t.Run("a member cluster joining after the install gets its agents", func(t *testing.T) {
		testJoinLater(t, o, env, "edge-1", joinLater)
	})

	var app *mlsysopsv1.MLSysOpsApp
	top := t
	t.Run("agents run from the DaemonSets, register and place an app", func(t *testing.T) {
		app = testAgentsRun(t, top, env)
	})
	if app == nil {
		t.Fatal("no application running: the later steps need one")
	}
	t.Run("the member cluster that joined after the install receives an application", func(t *testing.T) {
		testJoinedReceivesApp(t, env, "edge-1")
	})
	t.Run("cluster agent replicas: one leads, the other follows and takes over", func(t *testing.T) {
		testAgentReplicas(t, env, "cloud-1")
	})

	t.Run("second run changes nothing", func(t *testing.T) {
		changed, out := installAgain(t, o)
		if len(changed) > 0 {
			t.Errorf("the second run wrote %d objects:\n%s", len(changed), strings.Join(changed, "\n"))
		}
		if !strings.Contains(out, "nothing changed") {
			t.Errorf("the second run does not say nothing changed:\n%s", out)
		}
	})

	t.Run("objects the charts no longer render are pruned", func(t *testing.T) { testPrune(t, env, o) })

	t.Run("ml connector", func(t *testing.T) { testMLConnector(t, env, cl) })
	t.Run("node-system-descriptions replaced by hand", func(t *testing.T) { testDescriptionReplaced(t, env) })
	t.Run("agents' secrets", func(t *testing.T) { testSecrets(t, env, cl) })
	t.Run("redis users per component", func(t *testing.T) { testRedisUsers(t, env, cl) })
	t.Run("xmpp accounts", func(t *testing.T) { testAccounts(t, env, true) })
	t.Run("admission policy", func(t *testing.T) { testAdmission(t, env) })

	t.Run("status", func(t *testing.T) {
		// A node agent per node of cloud-1, as its descriptions say.
		set, err := description.LoadDir("../../../descriptions")
		if err != nil {
			t.Fatal(err)
		}
		cloud := 0
		for _, n := range set.Nodes {
			if n.Spec.ClusterID == "cloud-1" {
				cloud++
			}
		}
		var out bytes.Buffer
		err = deployer.New(o, nil).Status(ctx, &out)
		t.Logf("status:\n%s", out.String())
		for _, want := range []string{
			"ready     DaemonSet mlsysops-framework/mlsysops-cluster-agent: cloud-1 1/1 ready, 1 updated; edge-1 1/1 ready, 1 updated",
			fmt.Sprintf("ready     DaemonSet mlsysops-framework/mlsysops-node-agent: cloud-1 %d/%d ready", cloud, cloud),
			"ready     DaemonSet mlsysops-framework/mlsysops-continuum-agent: 1/1 ready",
			"ready     Deployment mlsysops-framework/mlsysops-mlconnector: 1/1 ready",
		} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("status does not say %q", want)
			}
		}
		if err != nil || strings.Contains(out.String(), "NOT READY") {
			t.Errorf("status: %v", err)
		}
	})

	t.Run("a forbidden call is refused", func(t *testing.T) { testForbiddenCalls(t, env) })
	t.Run("the accounts reconciler restores a lost account", func(t *testing.T) { testLostAccount(t, env, cl) })
	t.Run("passwords rotated without downtime", func(t *testing.T) { testRotate(t, env, o, cl, app) })
	t.Run("a node taken out of the descriptions loses its account", func(t *testing.T) { testNodeDecommissioned(t, env, o, cl) })

	t.Run("upgrade", func(t *testing.T) {
		// The new tag is on the real nodes as a registry push would make
		// it; the application keeps running through the rollout.
		if err := testbed.TagRealNodeImages(ctx, env, "0.1.1-test"); err != nil {
			t.Fatal(err)
		}
		copies := appCopies(t, env, app.Name)
		watch := watchApp(t, env, app.Name)
		up := *o
		up.Tag = "0.1.1-test"
		// The default propagation, the Works: the continuum agent moves
		// the application off its binding as it restarts.
		up.Propagation = ""
		var out bytes.Buffer
		rep, err := deployer.New(&up, &out).Upgrade(ctx)
		if err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
		checkMovedToWorks(t, env, app.Name, copies)
		if left := watch(); len(left) > 0 {
			t.Errorf("the application left Running during the upgrade: %v", left)
		}
		var changed []string
		for _, r := range rep.Results {
			if r.Outcome == deployer.Changed {
				changed = append(changed, r.Kind+" "+r.Name)
			}
		}
		t.Logf("upgrade changed: %s\nrollout:\n%s", strings.Join(changed, ", "), out.String())
		if !strings.Contains(out.String(), "0/") && !strings.Contains(out.String(), "rolling out") {
			t.Errorf("the upgrade's output does not show the rollout:\n%s", out.String())
		}
		for _, member := range env.Clusters {
			cs := kubernetes.NewForConfigOrDie(env.RESTConfig(t, member))
			for name, image := range map[string]string{"mlsysops-cluster-agent": "docker.io/mlsysops/agent:0.1.1-test", "mlsysops-node-agent": "docker.io/mlsysops/agent-node:0.1.1-test"} {
				ds, err := cs.AppsV1().DaemonSets(deployer.Namespace).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if got := ds.Spec.Template.Spec.Containers[0].Image; got != image {
					t.Errorf("member %s: %s runs %s, want %s", member, name, got, image)
				}
				if ds.Status.UpdatedNumberScheduled != ds.Status.DesiredNumberScheduled || ds.Status.NumberAvailable != ds.Status.DesiredNumberScheduled {
					t.Errorf("member %s: %s not rolled out: %+v", member, name, ds.Status)
				}
			}
		}
	})
	t.Run("rbac", func(t *testing.T) { testRBAC(t, env) })

	t.Run("uninstall", func(t *testing.T) {
		// Applications stay unless --purge: this one is the test's.
		deleteApp(t, env, app)
		var out bytes.Buffer
		start := time.Now()
		if err := deployer.New(o, &out).Uninstall(ctx); err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
		t.Logf("uninstall in %s:\n%s", time.Since(start).Round(time.Millisecond), out.String())
		for _, c := range []*deployer.Cluster{cl.Host, cl.Karmada} {
			objs, err := c.Owned(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, obj := range objs {
				if obj.GetAnnotations()[deployer.PurgeKey] != "purge" {
					t.Errorf("left in the %s API: %s %s/%s", c.Name, obj.GetKind(), obj.GetNamespace(), obj.GetName())
				}
			}
		}
		for _, member := range env.Clusters {
			cs := kubernetes.NewForConfigOrDie(env.RESTConfig(t, member))
			if _, err := cs.CoreV1().Namespaces().Get(ctx, deployer.Namespace, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("member %s: namespace %s still there (err %v)", member, deployer.Namespace, err)
			}
			for _, r := range []string{"mlsysops-cluster-agent", "mlsysops-member-reader"} {
				if _, err := cs.RbacV1().ClusterRoles().Get(ctx, r, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					t.Errorf("member %s: ClusterRole %s still there (err %v)", member, r, err)
				}
			}
		}
		testAccounts(t, env, false)
	})
}

// testSecrets: each member holds the passwords of its own agents only,
// and their cluster agents' Redis user (never Redis's default password);
// the host holds the continuum's and the API's.
func testSecrets(t *testing.T, env *testbed.Env, cl *deployer.Clusters) {
	ctx := context.Background()
	for _, member := range env.Clusters {
		cs := kubernetes.NewForConfigOrDie(env.RESTConfig(t, member))
		testbed.Eventually(t, "Secrets in "+member, time.Minute, func() error {
			list, err := cs.CoreV1().Secrets(deployer.Namespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			var names []string
			for _, s := range list.Items {
				if s.Type != corev1.SecretTypeServiceAccountToken {
					names = append(names, s.Name)
				}
			}
			sort.Strings(names)
			redisUser, _ := deployer.RedisUserSecret(mlstate.ComponentCluster)
			want := []string{deployer.SecretAgentsPrefix + member, redisUser}
			if strings.Join(names, ",") != strings.Join(want, ",") {
				return fmt.Errorf("secrets %v, want %v", names, want)
			}
			return nil
		})
	}
	// The cluster agent of cloud-1 and each of its nodes have a key.
	s, err := cl.Karmada.Kube.CoreV1().Secrets(deployer.Namespace).Get(ctx, deployer.SecretAgentsPrefix+"cloud-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, jid := range []string{"cloud-1.cluster@" + env.XMPPDomain, "cloud-1@" + env.XMPPDomain, "cloud-gpu-a100-1@" + env.XMPPDomain} {
		if len(s.Data[deployer.AgentSecretKey(jid)]) < 20 {
			t.Errorf("no password for %s in %s", jid, s.Name)
		}
	}
	if _, ok := s.Data[deployer.AgentSecretKey("edge-1@"+env.XMPPDomain)]; ok {
		t.Error("cloud-1's Secret holds edge-1's password")
	}
}

// testAccounts checks, through ejabberd's admin API, that every agent's
// account exists (or, after uninstall, that none does).
func testAccounts(t *testing.T, env *testbed.Env, want bool) {
	client, err := adminClient(env)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]string{"host": env.XMPPDomain})
	req, _ := http.NewRequest(http.MethodPost, env.XMPPAdminURL+"/registered_users", bytes.NewReader(body))
	req.SetBasicAuth(env.XMPPAdminJID, env.XMPPAdminPassword)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var users []string
	if err := json.NewDecoder(resp.Body).Decode(&users); err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, u := range users {
		have[u] = true
	}
	for _, u := range []string{"mls-continuum.continuum", "northbound", "cloud-1.cluster", "edge-1.cluster", "cloud-1", "edge-t4-1", "far-edge-rpi-1"} {
		if have[u] != want {
			t.Errorf("account %s@%s registered = %v, want %v", u, env.XMPPDomain, have[u], want)
		}
	}
}

// testLostAccount deletes a node agent's account behind everyone's back,
// as an ejabberd crash that lost it would, and the agent's pod, so that
// its agent logs in again: the new agent (a KWOK node's, run by the
// kwoklet) is refused and reports it with an Event in its member cluster
// (its token, Role mlsysops-login-reports), and the installed accounts
// reconciler, which watches that cluster through Karmada's proxy and makes
// no periodic pass during the test, creates the account again with the
// password of the agent's Secret and links it with its cluster agent; the
// new pod becomes ready.
func testLostAccount(t *testing.T, env *testbed.Env, cl *deployer.Clusters) {
	ctx := context.Background()
	client, err := adminClient(env)
	if err != nil {
		t.Fatal(err)
	}
	prov := provision.NewHTTPAPI(env.XMPPAdminURL, env.XMPPAdminJID, env.XMPPAdminPassword, client)
	node, cluster := "far-edge-rpi-1@"+env.XMPPDomain, "edge-1.cluster@"+env.XMPPDomain
	sec, err := cl.Host.Kube.CoreV1().Secrets(deployer.Namespace).Get(ctx, deployer.SecretAccountsPasswords, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	password := string(sec.Data[deployer.AgentSecretKey(node)])
	if password == "" {
		t.Fatalf("Secret %s holds no password for %s", deployer.SecretAccountsPasswords, node)
	}
	cs := kubernetes.NewForConfigOrDie(env.RESTConfig(t, "edge-1"))
	sel := metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=mlsysops-node-agent", FieldSelector: "spec.nodeName=far-edge-rpi-1"}
	pods, err := cs.CoreV1().Pods(deployer.Namespace).List(ctx, sel)
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("the node agent's pod on far-edge-rpi-1: %v (%d pods)", err, len(pods.Items))
	}
	if err := prov.DeleteAccount(ctx, node); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	if err := cs.CoreV1().Pods(deployer.Namespace).Delete(ctx, pods.Items[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var last error
	for time.Since(deleted) < 3*time.Minute {
		if last = accountInPlace(ctx, prov, node, password, cluster); last == nil {
			t.Logf("account %s back after %s", node, time.Since(deleted).Round(time.Second))
			break
		}
		time.Sleep(2 * time.Second)
	}
	if last != nil {
		t.Fatalf("account %s not restored within 3 minutes: %v", node, last)
	}
	ev, err := cs.CoreV1().Events(authreport.DefaultNamespace).Get(ctx, authreport.EventName(node), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the agent's report of its refused login: %v", err)
	}
	if ev.Reason != authreport.Reason || ev.InvolvedObject.Kind != "Node" || ev.InvolvedObject.Name != "far-edge-rpi-1" || strings.Contains(ev.Message, password) {
		t.Errorf("report event: reason %q, about %s/%s, message %q", ev.Reason, ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Message)
	}
	testbed.Eventually(t, "the new node agent pod on far-edge-rpi-1 ready", 2*time.Minute, func() error {
		pods, err := cs.CoreV1().Pods(deployer.Namespace).List(ctx, sel)
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

// accountInPlace reports what is missing of an account: the account, its
// password, its roster link with parent.
func accountInPlace(ctx context.Context, prov *provision.HTTPAPI, account, password, parent string) error {
	ok, err := prov.CheckPassword(ctx, account, password)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("no account with the Secret's password")
	}
	items, err := prov.Roster(ctx, account)
	if err != nil {
		return err
	}
	for _, it := range items {
		if it.JID == parent {
			return nil
		}
	}
	return fmt.Errorf("roster %v has no %s", items, parent)
}

// A SubjectAccessReview check: user may (or may not) do verb on resource.
type access struct {
	verb, group, resource, subresource, namespace, name string
	allowed                                             bool
}

func (a access) String() string {
	s := a.verb + " " + a.resource
	if a.group != "" {
		s += "." + a.group
	}
	if a.subresource != "" {
		s += "/" + a.subresource
	}
	if a.name != "" {
		s += " " + a.name
	}
	if a.namespace != "" {
		s += " in " + a.namespace
	}
	return s
}

func checkAccess(t *testing.T, cs kubernetes.Interface, where, user string, groups []string, checks []access) {
	t.Helper()
	for _, c := range checks {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: groups,
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Verb: c.verb, Group: c.group, Resource: c.resource, Subresource: c.subresource, Namespace: c.namespace, Name: c.name,
			},
		}}
		got, err := cs.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), sar, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		if got.Status.Allowed != c.allowed {
			t.Errorf("%s: %s may %s: allowed=%v, want %v", where, user, c, got.Status.Allowed, c.allowed)
		}
	}
}

func sa(name string) (string, []string) {
	return "system:serviceaccount:" + deployer.Namespace + ":" + name,
		[]string{"system:serviceaccounts", "system:serviceaccounts:" + deployer.Namespace, "system:authenticated"}
}

// testRBAC asserts per layer what each identity may do: what its code
// calls, and not reading Secrets outside its namespace (or at all), nor
// writing nodes or RBAC.
func testRBAC(t *testing.T, env *testbed.Env) {
	ctx := context.Background()
	const (
		mls, fw = deployer.AppNamespace, deployer.Namespace
		mgroup  = "mlsysops.eu"
		karmada = "policy.karmada.io"
		rbac    = "rbac.authorization.k8s.io"
	)
	forbiddenEverywhere := []access{
		{verb: "get", resource: "secrets", namespace: "kube-system"},
		{verb: "list", resource: "secrets", namespace: "default"},
		{verb: "get", resource: "secrets", namespace: mls},
		{verb: "update", resource: "nodes", name: "cloud-1"},
		{verb: "patch", resource: "nodes", subresource: "status", name: "cloud-1"},
		{verb: "create", group: rbac, resource: "clusterroles"},
		{verb: "create", group: rbac, resource: "clusterrolebindings"},
		{verb: "create", group: rbac, resource: "rolebindings", namespace: fw},
		{verb: "escalate", group: rbac, resource: "clusterroles", name: "cluster-admin"},
	}
	karmadaCS := kubernetes.NewForConfigOrDie(env.RESTConfig(t, testbed.ContextKarmada))
	user, groups := sa("mlsysops-continuum-agent")
	checkAccess(t, karmadaCS, "Karmada API", user, groups, append([]access{
		{verb: "create", group: mgroup, resource: "mlsysopsapps", namespace: mls, allowed: true},
		{verb: "watch", group: mgroup, resource: "mlsysopsapps", namespace: mls, allowed: true},
		{verb: "delete", group: mgroup, resource: "mlsysopsapps", namespace: mls, allowed: true},
		{verb: "update", group: mgroup, resource: "mlsysopsapps", subresource: "status", namespace: mls, allowed: true},
		{verb: "update", group: mgroup, resource: "mlsysopscontinuums", subresource: "status", namespace: mls, allowed: true},
		// The default propagation: it writes each placed cluster's Work
		// itself (held by the admission policy to its applications'
		// Works, which TestWorksAdmissionPolicy exercises), with no
		// policy for the applications; it may only delete the one an
		// install with bindings left, and move that install's
		// applications off their bindings (patch, delete), in its
		// namespace only. It schedules no binding and writes no policy.
		{verb: "create", group: "work.karmada.io", resource: "works", namespace: "karmada-es-cloud-1", allowed: true},
		{verb: "update", group: "work.karmada.io", resource: "works", name: "a-mlsysopsapp", namespace: "karmada-es-cloud-1", allowed: true},
		{verb: "delete", group: "work.karmada.io", resource: "works", name: "a-mlsysopsapp", namespace: "karmada-es-cloud-1", allowed: true},
		{verb: "watch", group: "work.karmada.io", resource: "works", allowed: true},
		{verb: "update", group: "work.karmada.io", resource: "works", subresource: "status", namespace: "karmada-es-cloud-1"},
		{verb: "delete", group: karmada, resource: "propagationpolicies", name: "mlsysops-apps", namespace: mls, allowed: true},
		{verb: "get", group: karmada, resource: "propagationpolicies", name: "mlsysops-apps", namespace: mls},
		{verb: "create", group: karmada, resource: "propagationpolicies", namespace: mls},
		{verb: "delete", group: karmada, resource: "propagationpolicies", name: "mlsysops-framework", namespace: fw},
		{verb: "list", group: "work.karmada.io", resource: "resourcebindings", namespace: mls, allowed: true},
		{verb: "patch", group: "work.karmada.io", resource: "resourcebindings", namespace: mls, allowed: true},
		{verb: "delete", group: "work.karmada.io", resource: "resourcebindings", namespace: mls, allowed: true},
		{verb: "patch", group: "work.karmada.io", resource: "resourcebindings", subresource: "status", namespace: mls},
		{verb: "patch", group: "work.karmada.io", resource: "resourcebindings", namespace: fw},
		{verb: "create", group: "work.karmada.io", resource: "resourcebindings", namespace: mls},
		{verb: "list", group: "cluster.karmada.io", resource: "clusters", allowed: true},
		{verb: "get", group: "cluster.karmada.io", resource: "clusters", subresource: "proxy", name: "cloud-1", allowed: true},
		// Deleting, through the proxy, members' copies Karmada left behind.
		{verb: "delete", group: "cluster.karmada.io", resource: "clusters", subresource: "proxy", name: "cloud-1", allowed: true},
		{verb: "create", group: "cluster.karmada.io", resource: "clusters", subresource: "proxy", name: "cloud-1"},
		{verb: "get", group: "apiextensions.k8s.io", resource: "customresourcedefinitions", name: "mlsysopsapps.mlsysops.eu", allowed: true},
		// Its replicas' election: its own Lease only, in its namespace.
		{verb: "create", group: "coordination.k8s.io", resource: "leases", namespace: fw, allowed: true},
		{verb: "update", group: "coordination.k8s.io", resource: "leases", name: "mlsysops-continuum-agent", namespace: fw, allowed: true},
		{verb: "update", group: "coordination.k8s.io", resource: "leases", name: "mlsysops-cluster-agent", namespace: fw},
		{verb: "delete", group: "coordination.k8s.io", resource: "leases", name: "mlsysops-continuum-agent", namespace: fw},
		{verb: "create", group: "coordination.k8s.io", resource: "leases", namespace: "kube-system"},
		// Not: the API's installation, other namespaces' policies,
		// cluster-wide policies.
		{verb: "update", group: "apiextensions.k8s.io", resource: "customresourcedefinitions", name: "mlsysopsapps.mlsysops.eu"},
		{verb: "create", group: karmada, resource: "clusterpropagationpolicies"},
		{verb: "create", group: karmada, resource: "propagationpolicies", namespace: fw},
		{verb: "create", group: mgroup, resource: "mlsysopsapps", namespace: "default"},
		{verb: "get", resource: "secrets", namespace: fw},
	}, forbiddenEverywhere...))
	user, groups = sa("mlsysops-northbound")
	checkAccess(t, karmadaCS, "Karmada API", user, groups, append([]access{
		{verb: "list", group: mgroup, resource: "mlsysopsapps", namespace: mls, allowed: true},
		{verb: "create", group: mgroup, resource: "mlsysopsnodes", namespace: mls, allowed: true},
		{verb: "update", resource: "configmaps", name: "node-agents-policies", namespace: fw, allowed: true},
		{verb: "get", group: karmada, resource: "propagationpolicies", name: "mlsysops-agent-policies", namespace: fw, allowed: true},
		{verb: "get", group: "cluster.karmada.io", resource: "clusters", subresource: "proxy", name: "edge-1", allowed: true},
		{verb: "create", group: mgroup, resource: "mlsysopsapps", namespace: mls},
		{verb: "update", resource: "configmaps", name: "node-system-descriptions", namespace: fw},
		{verb: "get", resource: "secrets", namespace: fw},
	}, forbiddenEverywhere...))

	hostCS := kubernetes.NewForConfigOrDie(env.RESTConfig(t, testbed.ContextHost))
	checkAccess(t, hostCS, "host cluster", user, groups, append([]access{
		{verb: "update", resource: "configmaps", name: "continuum-policies", namespace: fw, allowed: true},
		{verb: "update", resource: "configmaps", name: "continuum-agent-config", namespace: fw},
		{verb: "get", resource: "secrets", namespace: fw},
	}, forbiddenEverywhere...))
	user, groups = sa("mlsysops-continuum-agent")
	checkAccess(t, hostCS, "host cluster", user, groups, append([]access{
		// A refused XMPP login, reported for the accounts reconciler.
		{verb: "create", resource: "events", namespace: "default", allowed: true},
		{verb: "patch", resource: "events", namespace: "default", allowed: true},
		{verb: "list", resource: "events", namespace: "default"},
		{verb: "create", resource: "events", namespace: fw},
		{verb: "get", resource: "configmaps", namespace: fw},
		{verb: "list", resource: "pods", namespace: fw},
	}, forbiddenEverywhere...))
	// The accounts reconciler: the continuum agent's reports in the host,
	// the members through Karmada's proxy, nothing else (its passwords and
	// the admin credential are mounted, never read through the API).
	user, groups = sa("mlsysops-accounts")
	checkAccess(t, hostCS, "host cluster", user, groups, append([]access{
		{verb: "watch", resource: "events", namespace: "default", allowed: true},
		{verb: "create", resource: "events", namespace: "default"},
		{verb: "get", resource: "secrets", namespace: fw},
		{verb: "get", resource: "configmaps", namespace: fw},
	}, forbiddenEverywhere...))
	checkAccess(t, karmadaCS, "Karmada API", user, groups, append([]access{
		{verb: "list", group: "cluster.karmada.io", resource: "clusters", allowed: true},
		{verb: "get", group: "cluster.karmada.io", resource: "clusters", subresource: "proxy", name: "edge-1", allowed: true},
		{verb: "list", group: mgroup, resource: "mlsysopsapps", namespace: mls},
		{verb: "get", resource: "secrets", namespace: fw},
	}, forbiddenEverywhere...))

	for _, member := range env.Clusters {
		cs := kubernetes.NewForConfigOrDie(env.RESTConfig(t, member))
		testbed.Eventually(t, "roles propagated to "+member, time.Minute, func() error {
			for _, r := range []string{"mlsysops-cluster-agent", "mlsysops-member-reader", "mlsysops-member-app-sweeper"} {
				if _, err := cs.RbacV1().ClusterRoleBindings().Get(ctx, r, metav1.GetOptions{}); err != nil {
					return err
				}
			}
			_, err := cs.RbacV1().RoleBindings(mls).Get(ctx, "mlsysops-cluster-agent", metav1.GetOptions{})
			return err
		})
		where := "member " + member
		user, groups = sa("mlsysops-cluster-agent")
		checkAccess(t, cs, where, user, groups, append([]access{
			{verb: "create", resource: "namespaces", allowed: true},
			{verb: "delete", resource: "namespaces", name: "mls-shop", allowed: true},
			{verb: "create", group: "apps", resource: "deployments", namespace: "mls-shop", allowed: true},
			{verb: "create", resource: "services", namespace: "mls-shop", allowed: true},
			{verb: "watch", resource: "pods", allowed: true},
			{verb: "list", resource: "nodes", allowed: true},
			{verb: "update", group: mgroup, resource: "mlsysopsapps", namespace: mls, allowed: true},
			{verb: "patch", group: mgroup, resource: "mlsysopsapps", subresource: "status", namespace: mls, allowed: true},
			{verb: "create", group: mgroup, resource: "mlsysopsnodes", namespace: mls, allowed: true},
			{verb: "update", group: mgroup, resource: "mlsysopsclusters", subresource: "status", namespace: mls, allowed: true},
			{verb: "create", group: mgroup, resource: "mlsysopsapps", namespace: mls},
			{verb: "create", group: mgroup, resource: "mlsysopsnodes", namespace: "default"},
			{verb: "get", resource: "secrets", namespace: fw},
			{verb: "create", group: "apps", resource: "daemonsets", namespace: fw},
			// Its replicas' election: its own Lease only, in its namespace.
			{verb: "create", group: "coordination.k8s.io", resource: "leases", namespace: fw, allowed: true},
			{verb: "get", group: "coordination.k8s.io", resource: "leases", name: "mlsysops-cluster-agent", namespace: fw, allowed: true},
			{verb: "update", group: "coordination.k8s.io", resource: "leases", name: "mlsysops-cluster-agent", namespace: fw, allowed: true},
			{verb: "update", group: "coordination.k8s.io", resource: "leases", name: "mlsysops-continuum-agent", namespace: fw},
			{verb: "create", group: "coordination.k8s.io", resource: "leases", namespace: "kube-node-lease"},
			{verb: "update", group: "coordination.k8s.io", resource: "leases", name: "cloud-1", namespace: "kube-node-lease"},
		}, forbiddenEverywhere...))
		user, groups = sa("mlsysops-node-agent")
		checkAccess(t, cs, where, user, groups, append([]access{
			{verb: "create", resource: "events", namespace: "default", allowed: true},
			{verb: "patch", resource: "events", namespace: "default", allowed: true},
			{verb: "list", resource: "events", namespace: "default"},
			{verb: "create", resource: "events", namespace: mls},
			{verb: "get", resource: "pods", namespace: fw},
			{verb: "get", resource: "nodes", name: "cloud-1"},
			{verb: "get", resource: "secrets", namespace: fw},
			{verb: "get", group: mgroup, resource: "mlsysopsnodes", namespace: mls},
		}, forbiddenEverywhere...))
		// The continuum agent's reads through Karmada's cluster proxy
		// arrive as its Karmada identity (impersonated).
		user, _ = sa("mlsysops-continuum-agent")
		checkAccess(t, cs, where, user, []string{"system:authenticated"}, append([]access{
			{verb: "list", resource: "nodes", allowed: true},
			{verb: "list", resource: "pods", allowed: true},
			{verb: "list", resource: "services", allowed: true},
			{verb: "list", group: mgroup, resource: "mlsysopsapps", namespace: mls, allowed: true},
			{verb: "delete", group: mgroup, resource: "mlsysopsapps", namespace: mls, allowed: true},
			{verb: "create", group: mgroup, resource: "mlsysopsapps", namespace: mls},
			{verb: "update", group: mgroup, resource: "mlsysopsapps", namespace: mls},
			{verb: "delete", resource: "namespaces", name: "mls-shop"},
			{verb: "create", resource: "pods", namespace: "default"},
		}, forbiddenEverywhere...))
		// The accounts reconciler's reads through the proxy.
		user, _ = sa("mlsysops-accounts")
		checkAccess(t, cs, where, user, []string{"system:authenticated"}, append([]access{
			{verb: "watch", resource: "events", namespace: "default", allowed: true},
			{verb: "list", resource: "events", namespace: mls},
			{verb: "list", resource: "pods"},
		}, forbiddenEverywhere...))
	}
}

// testAdmission acts as the cluster agent in a member (impersonation,
// server-side dry runs): RBAC lets it delete any namespace, the admission
// policy only those it labels; Deployments only inside them.
func testAdmission(t *testing.T, env *testbed.Env) {
	ctx := context.Background()
	member := env.Clusters[0]
	admin := kubernetes.NewForConfigOrDie(env.RESTConfig(t, member))
	testbed.Eventually(t, "the admission policy in "+member, time.Minute, func() error {
		_, err := admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Get(ctx, "mlsysops-cluster-agent", metav1.GetOptions{})
		return err
	})
	cfg := env.RESTConfig(t, member)
	user, groups := sa("mlsysops-cluster-agent")
	cfg.Impersonate.UserName, cfg.Impersonate.Groups = user, groups
	agent := kubernetes.NewForConfigOrDie(cfg)
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	managed := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "mls-admission-test", Labels: map[string]string{"app.kubernetes.io/managed-by": "mlsysops"}}}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, managed, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.CoreV1().Namespaces().Delete(context.Background(), managed.Name, metav1.DeleteOptions{})
	})
	// kube-system and default cannot be deleted by anyone: another
	// namespace the agent does not own.
	plain := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "admission-test-plain"}}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, plain, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.CoreV1().Namespaces().Delete(context.Background(), plain.Name, metav1.DeleteOptions{})
	})
	dep := func(ns string) *appsv1.Deployment {
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: ns},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example.org/c:1"}}},
				},
			},
		}
	}
	testbed.Eventually(t, "the policy enforced", time.Minute, func() error {
		err := agent.CoreV1().Namespaces().Delete(ctx, plain.Name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
			return fmt.Errorf("delete %s as the cluster agent: %v, want a refusal", plain.Name, err)
		}
		if !strings.Contains(err.Error(), "may only change namespaces labelled") {
			return fmt.Errorf("refused, but not by the policy: %v", err)
		}
		return nil
	})
	for name, c := range map[string]struct {
		do      func() error
		allowed bool
	}{
		"create a labelled namespace": {func() error {
			_, err := agent.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "mls-new", Labels: managed.Labels}}, dry)
			return err
		}, true},
		"create an unlabelled namespace": {func() error {
			_, err := agent.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, dry)
			return err
		}, false},
		"create the applications' namespace": {func() error {
			_, err := agent.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: deployer.AppNamespace}}, dry)
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		}, true},
		"delete a labelled namespace": {func() error {
			return agent.CoreV1().Namespaces().Delete(ctx, managed.Name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		}, true},
		"a Deployment in a labelled namespace": {func() error {
			_, err := agent.AppsV1().Deployments(managed.Name).Create(ctx, dep(managed.Name), dry)
			return err
		}, true},
		"a Deployment in kube-system": {func() error {
			_, err := agent.AppsV1().Deployments("kube-system").Create(ctx, dep("kube-system"), dry)
			return err
		}, false},
	} {
		err := c.do()
		if c.allowed && err != nil {
			t.Errorf("%s: %v, want allowed", name, err)
		}
		if !c.allowed && (err == nil || !strings.Contains(err.Error(), "may only change namespaces labelled")) {
			t.Errorf("%s: %v, want the policy's refusal", name, err)
		}
	}
}
