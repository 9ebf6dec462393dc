package deployments_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/mlsysops-go/mlsysops/deployments/deployer"
	"github.com/mlsysops-go/mlsysops/internal/members"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
)

const (
	layerLabel   = "mlsysops.eu/continuumLayer"
	clusterAgent = "mlsysops-cluster-agent"
)

// testAgentReplicas labels a second real node of member for the cluster
// layer (a real node: on a KWOK node every pod shares the node's network
// namespace, where the node agent holds the agents' port): the DaemonSet
// runs a second replica of the member's cluster agent there (the same agent, named after the cluster by the installer's
// OverridePolicy). Both pods become Ready, exactly one holds the Lease and
// says it leads, the other says it follows that one. Then the leader is
// lost as a node is (its process SIGKILLed, its pod removed at once): the
// Lease passes to another replica, which leads, and the handover time is
// logged (measured, not asserted).
func testAgentReplicas(t *testing.T, env *testbed.Env, member string) {
	ctx := context.Background()
	cs := kubernetes.NewForConfigOrDie(env.RESTConfig(t, member))
	real := map[string]bool{}
	for _, n := range env.RealNodes {
		real[n.Name] = true
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: layerLabel + "=node"})
	if err != nil {
		t.Fatal(err)
	}
	var second string
	for _, n := range nodes.Items {
		if real[n.Name] && n.Name != member {
			second = n.Name
			break
		}
	}
	if second == "" {
		t.Fatalf("%s has no real node labelled %s=node to run a second replica on", member, layerLabel)
	}
	setLayer(t, cs, second, "cluster")
	t.Cleanup(func() { setLayer(t, cs, second, "node") })

	var pods []corev1.Pod
	testbed.Eventually(t, "two ready replicas of "+member+"'s cluster agent", 3*time.Minute, func() error {
		list, err := cs.CoreV1().Pods(deployer.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + clusterAgent})
		if err != nil {
			return err
		}
		pods = nil
		for _, p := range list.Items {
			if !podReady(&p) {
				return fmt.Errorf("pod %s on %s not ready", p.Name, p.Spec.NodeName)
			}
			pods = append(pods, p)
		}
		if len(pods) != 2 {
			return fmt.Errorf("%d ready pods, want 2", len(pods))
		}
		return nil
	})
	holder := func() (string, error) {
		l, err := cs.CoordinationV1().Leases(deployer.Namespace).Get(ctx, clusterAgent, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		if l.Spec.HolderIdentity == nil {
			return "", nil
		}
		return *l.Spec.HolderIdentity, nil
	}
	token := agentHTTPToken(t, cs)
	testAgentHTTPToken(t, &pods[0], token)
	var leader corev1.Pod
	testbed.Eventually(t, "one replica leads, the other follows it", time.Minute, func() error {
		h, err := holder()
		if err != nil {
			return err
		}
		roles := map[string]string{}
		for _, p := range pods {
			st, err := replicaStatus(ctx, &p, token)
			if err != nil {
				return err
			}
			if st.Name != member {
				return fmt.Errorf("replica %s is agent %q, want %q", p.Name, st.Name, member)
			}
			if st.Election.Leader != h {
				return fmt.Errorf("replica %s sees leader %q, the Lease %q", p.Name, st.Election.Leader, h)
			}
			roles[p.Name] = st.Election.Role
			if p.Name == h {
				leader = p
			}
		}
		if leader.Name != h || roles[h] != "leader" || len(roles) != 2 {
			return fmt.Errorf("lease held by %q; roles %v", h, roles)
		}
		for name, role := range roles {
			if name != h && role != "follower" {
				return fmt.Errorf("lease held by %q; roles %v", h, roles)
			}
		}
		return nil
	})
	t.Logf("%s: %s on %s leads, the other replica follows", member, leader.Name, leader.Spec.NodeName)

	// The leader is lost: its process dies and its pod goes.
	pid := containerPID(t, &leader)
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL the leader (pid %d): %v", pid, err)
	}
	if err := cs.CoreV1().Pods(deployer.Namespace).Delete(ctx, leader.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	var next string
	testbed.Eventually(t, "another replica takes the Lease", 2*time.Minute, func() error {
		h, err := holder()
		if err != nil {
			return err
		}
		if h == "" || h == leader.Name {
			return fmt.Errorf("lease still held by %q", h)
		}
		next = h
		return nil
	})
	took := time.Since(killed)
	testbed.Eventually(t, "the new leader "+next+" leads and is ready", 2*time.Minute, func() error {
		p, err := cs.CoreV1().Pods(deployer.Namespace).Get(ctx, next, metav1.GetOptions{})
		if err != nil {
			return err
		}
		st, err := replicaStatus(ctx, p, token)
		if err != nil {
			return err
		}
		if st.Election.Role != "leader" || !podReady(p) {
			return fmt.Errorf("role %s, ready %v", st.Election.Role, podReady(p))
		}
		return nil
	})
	t.Logf("%s: leader %s SIGKILLed and removed; %s took the Lease after %s and was ready as leader after %s",
		member, leader.Name, next, took.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))
}

// replicaState is what a replica's /status says of itself.
type replicaState struct {
	Name     string `json:"name"`
	Election struct {
		Role   string `json:"role"`
		Leader string `json:"leader"`
	} `json:"election"`
}

// agentHTTPToken is the token of the agents' HTTP endpoints in a member
// (its copy of the cluster's agents' Secret).
func agentHTTPToken(t *testing.T, cs kubernetes.Interface) string {
	t.Helper()
	list, err := cs.CoreV1().Secrets(deployer.Namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Items {
		if strings.HasPrefix(s.Name, deployer.SecretAgentsPrefix) && len(s.Data[deployer.AgentHTTPTokenKey]) >= 16 {
			return string(s.Data[deployer.AgentHTTPTokenKey])
		}
	}
	t.Fatalf("no Secret %s* with %s in the member", deployer.SecretAgentsPrefix, deployer.AgentHTTPTokenKey)
	return ""
}

// testAgentHTTPToken: an installed agent answers /status only with the
// installation's token, while its probes and /metrics stay open.
func testAgentHTTPToken(t *testing.T, p *corev1.Pod, token string) {
	t.Helper()
	for _, c := range []struct {
		path, token string
		want        int
	}{{"/status", "", http.StatusUnauthorized}, {"/status", "not-the-token-0123456789", http.StatusUnauthorized},
		{"/status", token, http.StatusOK}, {"/healthz", "", http.StatusOK}, {"/metrics", "", http.StatusOK}} {
		code, err := agentGet(context.Background(), p, c.path, c.token)
		if err != nil {
			t.Fatal(err)
		}
		if code != c.want {
			t.Errorf("pod %s %s with token %v: %d, want %d", p.Name, c.path, c.token != "", code, c.want)
		}
	}
}

func agentGet(ctx context.Context, p *corev1.Pod, path, token string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(p.Status.PodIP, "9464")+path, nil)
	if err != nil {
		return 0, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// replicaStatus reads a replica's /status at its pod's address, with the
// agents' HTTP token.
func replicaStatus(ctx context.Context, p *corev1.Pod, token string) (*replicaState, error) {
	if p.Status.PodIP == "" {
		return nil, fmt.Errorf("pod %s has no address yet", p.Name)
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(p.Status.PodIP, "9464")+"/status", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("replica %s: %w", p.Name, err)
	}
	defer resp.Body.Close()
	var st replicaState
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, fmt.Errorf("replica %s: /status: %w", p.Name, err)
	}
	return &st, nil
}

// setLayer sets a node's mlsysops.eu/continuumLayer label.
func setLayer(t *testing.T, cs kubernetes.Interface, node, layer string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, layerLabel, layer)
	if _, err := cs.CoreV1().Nodes().Patch(context.Background(), node, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Errorf("label node %s %s=%s: %v", node, layerLabel, layer, err)
	}
}

// testJoinedReceivesApp: the member that joined after the install
// receives an application placed on it, which runs there.
func testJoinedReceivesApp(t *testing.T, env *testbed.Env, member string) {
	app := deployExample(t, t, env, "edge-camera-arm64.yaml")
	if len(app.Status.Components) == 0 {
		t.Fatalf("application %s Running with no component", app.Name)
	}
	for _, c := range app.Status.Components {
		if c.Cluster != member || len(c.Nodes) == 0 {
			t.Errorf("component %s placed on %q %v, want a node of %s", c.Name, c.Cluster, c.Nodes, member)
		}
	}
	// It runs there: the component's pods, in the member itself.
	cs := kubernetes.NewForConfigOrDie(env.RESTConfig(t, member))
	ns := members.Namespace(app.Name)
	testbed.Eventually(t, app.Name+"'s pods running in "+member, 2*time.Minute, func() error {
		pods, err := cs.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(pods.Items) == 0 {
			return fmt.Errorf("no pod in namespace %s", ns)
		}
		for i := range pods.Items {
			if !podReady(&pods.Items[i]) {
				return fmt.Errorf("pod %s not ready (%s)", pods.Items[i].Name, pods.Items[i].Status.Phase)
			}
		}
		return nil
	})
	t.Logf("%s joined after the install and runs %s (%d components)", member, app.Name, len(app.Status.Components))
}

// containerPID finds the agent process of pod p (a container on a real
// node of the testbed, a process of this machine) by the POD_NAME its
// environment holds.
func containerPID(t *testing.T, p *corev1.Pod) int {
	t.Helper()
	want := []byte("POD_NAME=" + p.Name + "\x00")
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var found []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", d.Name(), "environ"))
		if err != nil || !bytes.Contains(env, want) {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if bytes.Contains(cmd, []byte("mlsysops-agent")) {
			found = append(found, pid)
		}
	}
	if len(found) != 1 {
		t.Fatalf("pod %s on %s: want one agent process, found %v", p.Name, p.Spec.NodeName, found)
	}
	return found[0]
}
