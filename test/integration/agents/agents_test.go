package agents_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlsysops-go/mlsysops/agents/agent"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/messaging"
	"github.com/mlsysops-go/mlsysops/internal/messaging/authreport"
	"github.com/mlsysops-go/mlsysops/internal/messaging/provision"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
)

func kubeClient(t *testing.T, h *hierarchy, context string) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	if err := mlsysopsv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(h.env.RESTConfig(t, context), client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// registered checks the registry: every agent registered and online.
func (h *hierarchy) allOnline(ctx context.Context, since time.Time) error {
	want := map[string]bool{}
	for _, a := range h.agents {
		want[a.JID] = true
	}
	list, err := h.store.Agents().List(ctx)
	if err != nil {
		return err
	}
	for _, ag := range list {
		if want[ag.JID] {
			if !ag.Online {
				return fmt.Errorf("%s is registered but offline", ag.JID)
			}
			if ag.LastSeen.Before(since) {
				return fmt.Errorf("%s last seen %s, before %s", ag.JID, ag.LastSeen, since)
			}
			delete(want, ag.JID)
		}
	}
	if len(want) > 0 {
		return fmt.Errorf("not registered: %v", want)
	}
	return nil
}

// freshTelemetry checks that every node has a sample newer than since.
func (h *hierarchy) freshTelemetry(ctx context.Context, since time.Time) error {
	for _, n := range []string{nodeAllowed, nodeForbidden} {
		s, err := h.store.Telemetry().Get(ctx, n)
		if err != nil {
			return fmt.Errorf("telemetry of %s: %w", n, err)
		}
		if !s.Time.After(since) {
			return fmt.Errorf("telemetry of %s from %s, not after %s", n, s.Time, since)
		}
		if _, ok := s.Metrics["node_load1"]; !ok {
			return fmt.Errorf("telemetry of %s lacks node_load1: %d metrics", n, len(s.Metrics))
		}
	}
	return nil
}

func TestAgents(t *testing.T) {
	h := startHierarchy(t)
	ctx := context.Background()

	t.Run("register", func(t *testing.T) {
		eventually(t, "every agent registered and online", time.Minute, func() error { return h.allOnline(ctx, time.Time{}) })
		list, err := h.store.Agents().List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, ag := range list {
			if ag.JID == agent.AgentJID("node", nodeAllowed, h.ej.Domain()) && (ag.Cluster != clusterName || ag.Layer != "node") {
				t.Errorf("registry entry of %s: %+v", nodeAllowed, ag)
			}
		}
		// The parent writes the registry before its acknowledgement reaches
		// the node (on a loaded machine the node may even time out and
		// subscribe again): the node's own view is waited for.
		eventually(t, "every node agent registered by its own account", time.Minute, func() error {
			for _, n := range []string{nodeAllowed, nodeForbidden} {
				st, err := h.status(n)
				if err != nil {
					return err
				}
				if !st.Registered {
					return fmt.Errorf("%s: not registered yet", n)
				}
			}
			return nil
		})
	})

	t.Run("telemetry", func(t *testing.T) {
		eventually(t, "node telemetry in Redis", time.Minute, func() error { return h.freshTelemetry(ctx, time.Time{}) })
	})

	t.Run("custom resources", func(t *testing.T) {
		member := kubeClient(t, h, clusterName)
		eventually(t, "MLSysOpsNode CRs in "+clusterName, 2*time.Minute, func() error {
			for _, n := range []string{nodeAllowed, nodeForbidden} {
				var obj mlsysopsv1.MLSysOpsNode
				if err := member.Get(ctx, types.NamespacedName{Namespace: "mlsysops", Name: n}, &obj); err != nil {
					return err
				}
				if obj.Spec.ClusterID != clusterName || obj.Status.Phase != mlsysopsv1.PhaseReady {
					return fmt.Errorf("%s: cluster_id %q phase %q", n, obj.Spec.ClusterID, obj.Status.Phase)
				}
			}
			var cl mlsysopsv1.MLSysOpsCluster
			return member.Get(ctx, types.NamespacedName{Namespace: "mlsysops", Name: clusterName}, &cl)
		})
		karmada := kubeClient(t, h, "karmada-apiserver")
		eventually(t, "MLSysOpsContinuum in Karmada", time.Minute, func() error {
			var obj mlsysopsv1.MLSysOpsContinuum
			if err := karmada.Get(ctx, types.NamespacedName{Namespace: "mlsysops", Name: continuumName}, &obj); err != nil {
				return err
			}
			if len(obj.Spec.Clusters) != 1 || obj.Spec.Clusters[0] != clusterName {
				return fmt.Errorf("clusters %v", obj.Spec.Clusters)
			}
			return nil
		})
	})

	t.Run("policy lifecycle", func(t *testing.T) { testPolicyLifecycle(t, h) })
	t.Run("forbidden plans", func(t *testing.T) { testForbidden(t, h) })
	t.Run("interval from the cluster", func(t *testing.T) { testClusterInterval(t, h) })
	t.Run("mode and ping", func(t *testing.T) { testModeAndPing(t, h) })
	t.Run("malformed description refused", func(t *testing.T) { testMalformed(t, h) })
	t.Run("description edited", func(t *testing.T) { testDescriptionEdited(t, h) })

	for _, name := range []string{nodeAllowed, clusterName, continuumName} {
		t.Run("restart "+name, func(t *testing.T) {
			a := h.agents[name]
			if err := a.Kill(); err != nil {
				t.Fatal(err)
			}
			// The restart must be one the parent saw: wait until it has
			// marked the agent offline (the continuum agent has no
			// parent to notice).
			if a.Layer != testbed.LayerContinuum {
				eventually(t, "the parent marking "+name+" offline", time.Minute, func() error {
					ag, err := h.store.Agents().Get(ctx, a.JID)
					if err != nil {
						return err
					}
					if ag.Online {
						return fmt.Errorf("%s still online, last seen %s", a.JID, ag.LastSeen)
					}
					return nil
				})
			}
			restarted := time.Now()
			if err := a.Start(); err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			if err := a.WaitReady(wctx); err != nil {
				t.Fatal(err)
			}
			eventually(t, "everyone online after the restart", time.Minute, func() error { return h.allOnline(ctx, restarted) })
			eventually(t, "telemetry flows after the restart", time.Minute, func() error { return h.freshTelemetry(ctx, restarted) })
		})
	}

	t.Run("account deleted behind its back", func(t *testing.T) { testLostAccount(t, h) })

	t.Run("restart ejabberd", func(t *testing.T) {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		if err := h.ej.Stop(sctx); err != nil {
			t.Fatal(err)
		}
		if err := h.ej.Start(sctx); err != nil {
			t.Fatal(err)
		}
		restarted := time.Now()
		eventually(t, "everyone online after ejabberd's restart", 2*time.Minute, func() error { return h.allOnline(ctx, restarted) })
		eventually(t, "telemetry flows after ejabberd's restart", time.Minute, func() error { return h.freshTelemetry(ctx, restarted) })
	})
}

const freqPolicy = `
def initialize():
    return {"scope": "global", "configuration": {"analyze_interval": "1s"},
            "telemetry": {"metrics": ["node_load1"], "system_scrape_interval": "%s"},
            "mechanisms": ["CPUFrequencyConfigurator"]}

def analyze(context, application_description, system_description, mechanisms, telemetry, ml_connector):
    return True, context

def plan(context, application_description, system_description, mechanisms, telemetry, ml_connector):
    return {"CPUFrequencyConfigurator": {"command": "set", "cpu": "all", "frequency": "%s"}}, context
`

func writePolicy(t *testing.T, dir, name, body string) {
	t.Helper()
	// Write then rename, as a ConfigMap update would appear at once.
	tmp := filepath.Join(dir, ".tmp-"+name)
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

func testPolicyLifecycle(t *testing.T, h *hierarchy) {
	a := h.agents[nodeAllowed]
	sys := h.sysfs[nodeAllowed]
	// Added: the CPUs are pinned to their maximum, and the policy's 1s
	// scrape interval reaches the cluster.
	writePolicy(t, a.PolicyDir, "policy-freq.star", fmt.Sprintf(freqPolicy, "1s", "max"))
	eventually(t, "policy pins the maximum frequency", time.Minute, func() error {
		if got := readSysfs(t, sys, 1, "scaling_min_freq"); got != "3600000" {
			return fmt.Errorf("cpu1 scaling_min_freq = %s", got)
		}
		return nil
	})
	eventually(t, "node interval 1s seen by the cluster", time.Minute, func() error {
		st, err := h.status(clusterName)
		if err != nil {
			return err
		}
		if got := st.Nodes[nodeAllowed].Interval; got != 1 {
			return fmt.Errorf("cluster sees %s at %vs", nodeAllowed, got)
		}
		return nil
	})
	// Edited: now the minimum.
	writePolicy(t, a.PolicyDir, "policy-freq.star", fmt.Sprintf(freqPolicy, "1s", "min"))
	eventually(t, "edited policy pins the minimum frequency", time.Minute, func() error {
		if got := readSysfs(t, sys, 0, "scaling_max_freq"); got != "800000" {
			return fmt.Errorf("cpu0 scaling_max_freq = %s", got)
		}
		return nil
	})
	// Removed: the policy is gone and its interval request with it.
	if err := os.Remove(filepath.Join(a.PolicyDir, "policy-freq.star")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "policy removed", time.Minute, func() error {
		st, err := h.status(nodeAllowed)
		if err != nil {
			return err
		}
		for _, p := range st.Policies {
			if p.Name == "freq" {
				return errors.New("policy freq still runs")
			}
		}
		if st.Interval != 2 {
			return fmt.Errorf("node interval %vs, want the default 2s back", st.Interval)
		}
		return nil
	})
	eventually(t, "cluster sees the default interval again", time.Minute, func() error {
		st, err := h.status(clusterName)
		if err != nil {
			return err
		}
		if got := st.Nodes[nodeAllowed].Interval; got != 2 {
			return fmt.Errorf("cluster sees %s at %vs", nodeAllowed, got)
		}
		return nil
	})
	// Nothing pins the CPUs any more: a value written now stays, while
	// the engine runs on. A witness policy, analysing every second as the
	// removed one did, shows that it does: once the witness has analysed
	// three more times, the removed policy would have acted too.
	writePolicy(t, a.PolicyDir, "policy-witness.star", witnessPolicy)
	t.Cleanup(func() { _ = os.Remove(filepath.Join(a.PolicyDir, "policy-witness.star")) })
	analyses := func() float64 {
		return metricValue(t, h, nodeAllowed, `mlsysops_mape_analyze_duration_seconds_count{policy="witness"}`)
	}
	eventually(t, "the witness policy analysing", time.Minute, func() error {
		if analyses() < 1 {
			return errors.New("not yet")
		}
		return nil
	})
	freqResults := func() float64 {
		return metricValue(t, h, nodeAllowed, `mlsysops_mape_mechanism_results_total{mechanism="CPUFrequencyConfigurator",status="Success"}`)
	}
	if err := os.WriteFile(filepath.Join(sys, "devices/system/cpu/cpu0/cpufreq/scaling_max_freq"), []byte("2000000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	results, from := freqResults(), analyses()
	eventually(t, "three more analyses of the witness policy", time.Minute, func() error {
		if n := analyses(); n < from+3 {
			return fmt.Errorf("%v since the write", n-from)
		}
		return nil
	})
	if got := readSysfs(t, sys, 0, "scaling_max_freq"); got != "2000000" {
		t.Errorf("after removal the policy still acts: scaling_max_freq = %s", got)
	}
	if got := freqResults(); got != results {
		t.Errorf("after removal %v CPU frequency plans were carried out", got-results)
	}
	if err := os.Remove(filepath.Join(a.PolicyDir, "policy-witness.star")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "witness policy removed", time.Minute, func() error {
		st, err := h.status(nodeAllowed)
		if err != nil {
			return err
		}
		for _, p := range st.Policies {
			if p.Name == "witness" {
				return errors.New("policy witness still runs")
			}
		}
		return nil
	})
}

// witnessPolicy analyses every second and never plans.
const witnessPolicy = `
def initialize():
    return {"scope": "global", "configuration": {"analyze_interval": "1s"}, "mechanisms": []}

def analyze(context, application_description, system_description, mechanisms, telemetry, ml_connector):
    return False, context

def plan(context, application_description, system_description, mechanisms, telemetry, ml_connector):
    return {}, context
`

const fluidityPolicy = `
def initialize():
    return {"scope": "global", "configuration": {"analyze_interval": "2s"}, "mechanisms": ["fluidity_proxy"]}

def analyze(context, application_description, system_description, mechanisms, telemetry, ml_connector):
    return True, context

def plan(context, application_description, system_description, mechanisms, telemetry, ml_connector):
    return {"fluidity_proxy": {"name": "%s", "deployment_plan": {"server": [{"action": "move", "src_host": "a", "target_host": "b"}]}}}, context
`

// restrictedApp is an application whose permitted_actions allow only
// image changes.
const restrictedApp = "agt-restricted"

// testForbidden: a node that does not permit cpu_frequency refuses the
// plan; the cluster refuses a fluidity move of an application it does not
// run, and one of an application whose permitted_actions do not list
// component_relocation (the node's proxy relays the cluster's reason); the
// plans end Failed with the reason.
func testForbidden(t *testing.T, h *hierarchy) {
	ctx := context.Background()
	member := kubeClient(t, h, clusterName)
	app := &mlsysopsv1.MLSysOpsApp{
		ObjectMeta: metav1.ObjectMeta{Name: restrictedApp, Namespace: "mlsysops"},
		Spec: mlsysopsv1.MLSysOpsAppSpec{
			Components:       []mlsysopsv1.Component{{Metadata: mlsysopsv1.ComponentMetadata{Name: "server"}, Containers: []mlsysopsv1.Container{{Image: "registry.example/server:1"}}}},
			PermittedActions: []string{mlsysopsv1.AppActionChangeContainerImage},
		},
	}
	if err := member.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = member.Delete(ctx, app) }()
	a := h.agents[nodeForbidden]
	writePolicy(t, a.PolicyDir, "policy-freq.star", fmt.Sprintf(freqPolicy, "2s", "max"))
	writePolicy(t, a.PolicyDir, "policy-move.star", fmt.Sprintf(fluidityPolicy, "no-such-app"))
	writePolicy(t, a.PolicyDir, "policy-relocate.star", fmt.Sprintf(fluidityPolicy, restrictedApp))
	defer os.Remove(filepath.Join(a.PolicyDir, "policy-freq.star"))
	defer os.Remove(filepath.Join(a.PolicyDir, "policy-move.star"))
	defer os.Remove(filepath.Join(a.PolicyDir, "policy-relocate.star"))
	eventually(t, "the plans failed with their reasons", time.Minute, func() error {
		st, err := h.status(nodeForbidden)
		if err != nil {
			return err
		}
		var freq, move, relocate string
		for _, p := range st.Plans {
			if p.State != "Failed" {
				continue
			}
			switch p.Policy {
			case "freq":
				freq = p.Mechanisms["CPUFrequencyConfigurator"].Error
			case "move":
				move = p.Mechanisms["fluidity_proxy"].Error + " " + p.Reason
			case "relocate":
				relocate = p.Mechanisms["fluidity_proxy"].Error + " " + p.Reason
			}
		}
		if !strings.Contains(freq, "cpu_frequency") {
			return fmt.Errorf("no failed freq plan naming cpu_frequency (got %q)", freq)
		}
		if !strings.Contains(move, "no-such-app is not placed in cluster "+clusterName) {
			return fmt.Errorf("no failed move plan with the cluster's reason (got %q)", move)
		}
		if want := "action component_relocation (fluidity move) is not permitted on application " + restrictedApp + " (permitted_actions: change_container_image)"; !strings.Contains(relocate, want) {
			return fmt.Errorf("no failed relocate plan with %q (got %q)", want, relocate)
		}
		return nil
	})
	// The refusal is the cluster's: its plan log has it as a Failed
	// fluidity outcome, and its metrics count it.
	cst, err := h.status(clusterName)
	if err != nil {
		t.Fatal(err)
	}
	refused := false
	for _, p := range cst.Plans {
		refused = refused || (p.State == "Failed" && strings.Contains(p.Mechanisms["fluidity"].Error, "action component_relocation (fluidity move) is not permitted on application "+restrictedApp))
	}
	if !refused {
		t.Errorf("the cluster's plan log has no Failed fluidity plan refused for %s", restrictedApp)
	}
	if got := metricValue(t, h, clusterName, `mlsysops_mape_mechanism_results_total{mechanism="fluidity",status="Failed"}`); got < 2 {
		t.Errorf("cluster's failed fluidity results = %v, want at least the two refused plans", got)
	}
	if got := readSysfs(t, h.sysfs[nodeForbidden], 0, "scaling_min_freq"); got != "800000" {
		t.Errorf("forbidden plan changed the CPU: scaling_min_freq = %s", got)
	}
}

const clusterIntervalPolicy = `
def initialize():
    return {"scope": "global", "configuration": {"analyze_interval": "1h"},
            "telemetry": {"metrics": [], "system_scrape_interval": "1500ms"}, "mechanisms": []}

def analyze(context, application_description, system_description, mechanisms, telemetry, ml_connector):
    return False, context

def plan(context, application_description, system_description, mechanisms, telemetry, ml_connector):
    return {}, context
`

// testClusterInterval: a cluster policy's interval goes down to the nodes,
// which sample at it and report it back up.
func testClusterInterval(t *testing.T, h *hierarchy) {
	c := h.agents[clusterName]
	writePolicy(t, c.PolicyDir, "policy-fast.star", clusterIntervalPolicy)
	eventually(t, "nodes sample at the cluster's 1.5s and report it", time.Minute, func() error {
		st, err := h.status(clusterName)
		if err != nil {
			return err
		}
		for _, n := range []string{nodeAllowed, nodeForbidden} {
			if got := st.Nodes[n].Interval; got != 1.5 {
				return fmt.Errorf("%s at %vs", n, got)
			}
		}
		return nil
	})
	if err := os.Remove(filepath.Join(c.PolicyDir, "policy-fast.star")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "nodes back at 2s", time.Minute, func() error {
		st, err := h.status(clusterName)
		if err != nil {
			return err
		}
		for _, n := range []string{nodeAllowed, nodeForbidden} {
			if got := st.Nodes[n].Interval; got != 2 {
				return fmt.Errorf("%s at %vs", n, got)
			}
		}
		return nil
	})
}

func testModeAndPing(t *testing.T, h *hierarchy) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tester, err := messaging.New(messaging.Config{
		JID: h.tester, Password: h.testerPW, Layer: messaging.LayerService, Servers: []string{h.ej.C2SAddr()}, CAFile: h.ej.CAFile(),
		HeartbeatInterval: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = tester.Run(ctx) }()
	defer func() { cancel(); <-done }()
	cont := h.agents[continuumName].JID
	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	defer scancel()
	if err := tester.Send(sctx, cont, &messaging.ManagementMode{Mode: messaging.ModeML, Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "every agent in ML mode", time.Minute, func() error {
		for name := range h.agents {
			st, err := h.status(name)
			if err != nil {
				return err
			}
			if st.Mode != messaging.ModeML {
				return fmt.Errorf("%s in mode %d", name, st.Mode)
			}
		}
		return nil
	})
	// The continuum pings every registered agent.
	resp, err := http.Post(h.agents[continuumName].URL()+"/ping", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var results []agent.PingResult
	if err := json.NewDecoder(resp.Body).Decode(&results); err != nil {
		t.Fatal(err)
	}
	if len(results) != len(h.agents)-1 {
		t.Errorf("continuum pinged %d agents, want %d: %+v", len(results), len(h.agents)-1, results)
	}
	for _, r := range results {
		if r.Error != "" || r.LatencyMillis <= 0 {
			t.Errorf("ping %s: %+v", r.JID, r)
		}
	}
	// A controller pings each agent directly.
	for _, a := range h.agents {
		pctx, pcancel := context.WithTimeout(ctx, 20*time.Second)
		resp, _, err := tester.Request(pctx, a.JID, &messaging.Ping{Note: "hi"})
		pcancel()
		if err != nil {
			t.Errorf("ping %s: %v", a.JID, err)
			continue
		}
		if p, ok := resp.(*messaging.Pong); !ok || p.Note != "hi" {
			t.Errorf("ping %s: answer %#v", a.JID, resp)
		}
	}
}

// testMalformed: a stranger's and a forged description never reach the
// cluster's CRs.
func testMalformed(t *testing.T, h *hierarchy) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tester, err := messaging.New(messaging.Config{
		JID: h.tester, Password: h.testerPW, Layer: messaging.LayerService, Servers: []string{h.ej.C2SAddr()}, CAFile: h.ej.CAFile(),
		Parent: h.agents[clusterName].JID, HeartbeatInterval: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = tester.Run(ctx) }()
	defer func() { cancel(); <-done }()
	sctx, scancel := context.WithTimeout(ctx, 20*time.Second)
	defer scancel()
	err = tester.Send(sctx, h.agents[clusterName].JID, &messaging.NodeDescriptionSubmitted{Node: "intruder", Description: json.RawMessage(`{"MLSysOpsNode":{"name":"intruder","cluster_id":"cloud-1"}}`)})
	var rej *messaging.RejectedError
	if !errors.As(err, &rej) {
		t.Fatalf("a description from a non-child: err = %v, want a rejection", err)
	}
	var obj mlsysopsv1.MLSysOpsNode
	if err := kubeClient(t, h, clusterName).Get(ctx, types.NamespacedName{Namespace: "mlsysops", Name: "intruder"}, &obj); err == nil {
		t.Error("the intruder's MLSysOpsNode exists")
	}
}

// testDescriptionEdited replaces a node's description the way the kubelet
// updates a mounted ConfigMap (the file becomes a link into a new folder,
// swapped in one rename): the node agent applies the new label without a
// restart, and its cluster agent writes it into the MLSysOpsNode.
func testDescriptionEdited(t *testing.T, h *hierarchy) {
	ctx := context.Background()
	a := h.agents[nodeAllowed]
	pid, ok := a.Pid()
	if !ok {
		t.Fatal("the node agent is not running")
	}
	dir := filepath.Join(h.descs, "nodes")
	gen := filepath.Join(dir, "..2")
	if err := os.MkdirAll(gen, 0o755); err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf(nodeYAML, nodeAllowed, clusterName, "[cpu_frequency]") + "  labels: [\"zone:b\"]\n"
	if err := os.WriteFile(filepath.Join(gen, nodeAllowed+".yaml"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, ".tmp-link")
	if err := os.Symlink(filepath.Join("..2", nodeAllowed+".yaml"), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, nodeAllowed+".yaml")); err != nil {
		t.Fatal(err)
	}
	member := kubeClient(t, h, clusterName)
	eventually(t, "the new label in the MLSysOpsNode", time.Minute, func() error {
		var obj mlsysopsv1.MLSysOpsNode
		if err := member.Get(ctx, types.NamespacedName{Namespace: "mlsysops", Name: nodeAllowed}, &obj); err != nil {
			return err
		}
		if !contains(obj.Spec.Labels, "zone:b") {
			return fmt.Errorf("labels %v", obj.Spec.Labels)
		}
		return nil
	})
	if now, ok := a.Pid(); !ok || now != pid {
		t.Errorf("the node agent restarted (pid %d, now %d running=%v)", pid, now, ok)
	}
}

// testLostAccount deletes a node agent's account while the agent is down,
// as a crash of ejabberd that lost it would: the restarted agent is
// refused, reports it through an Event in its member cluster, and the
// accounts reconciler (which watches that cluster through Karmada's
// proxy, and makes no periodic pass during the test) restores the account;
// the agent then logs in and becomes ready.
func testLostAccount(t *testing.T, h *hierarchy) {
	ctx := context.Background()
	a := h.agents[nodeAllowed]
	accountsMetrics := "http://" + h.cfg.AccountsListen + "/metrics"
	repairs := testbed.MetricValue(t, accountsMetrics, `mlsysops_accounts_repairs_total{kind="account"}`)
	if err := a.Kill(); err != nil {
		t.Fatal(err)
	}
	hc, err := h.ej.HTTPClient()
	if err != nil {
		t.Fatal(err)
	}
	prov := provision.NewHTTPAPI(h.ej.APIURL(), h.ej.AdminJID(), h.ej.AdminPassword(), hc)
	if err := prov.DeleteAccount(ctx, a.JID); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := a.WaitReady(wctx); err != nil {
		t.Fatalf("the agent whose account was deleted is not ready again: %v", err)
	}
	t.Logf("ready again %v after its restart", time.Since(restarted).Round(time.Millisecond))
	if f := metricValue(t, h, nodeAllowed, `mlsysops_messaging_auth_failures_total{agent="`+a.JID+`",reason="refused"}`); f < 1 {
		t.Errorf("the agent counted %v refused logins, want at least 1", f)
	}
	if got := testbed.MetricValue(t, accountsMetrics, `mlsysops_accounts_repairs_total{kind="account"}`); got != repairs+1 {
		t.Errorf("account repairs = %v, want %v", got, repairs+1)
	}
	if got := testbed.MetricValue(t, accountsMetrics, `mlsysops_accounts_reconcile_passes_total{kind="account",trigger="report"}`); got < 1 {
		t.Errorf("no account check triggered by a report")
	}
	password, err := messaging.ReadPasswordFile(filepath.Join(h.cfg.StateDir, "pki", provision.PasswordFileName(a.JID)))
	if err != nil {
		t.Fatal(err)
	}
	// The report is an Event about the agent's Node in its member cluster.
	cs := kubernetes.NewForConfigOrDie(h.env.RESTConfig(t, clusterName))
	ev, err := cs.CoreV1().Events(authreport.DefaultNamespace).Get(ctx, authreport.EventName(a.JID), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the agent's report: %v", err)
	}
	if ev.Reason != authreport.Reason || ev.InvolvedObject.Kind != "Node" || ev.InvolvedObject.Name != nodeAllowed ||
		ev.Annotations[authreport.AnnotationAccount] != a.JID || strings.Contains(ev.Message, password) {
		t.Errorf("report event: reason %q, about %s/%s, account %q, message %q", ev.Reason, ev.InvolvedObject.Kind,
			ev.InvolvedObject.Name, ev.Annotations[authreport.AnnotationAccount], ev.Message)
	}
	eventually(t, "everyone online after the repair", time.Minute, func() error { return h.allOnline(ctx, restarted) })
}
