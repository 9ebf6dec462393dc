package agents_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/internal/messaging/provision"
	"github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
	"github.com/mlsysops-go/mlsysops/internal/testbed/services"
)

// Names of the test hierarchy: the member cluster must be a real one of the
// shared testbed; the nodes are the test's own.
const (
	continuumName = "agt-continuum"
	clusterName   = "cloud-1"
	nodeAllowed   = "agt-node-a" // permits cpu_frequency
	nodeForbidden = "agt-node-b" // permits nothing
	testerLocal   = "agt-tester"
)

// agentBinaries are the agent (every layer) and the node-only agent, built
// once per test binary (with -race when the tests run with it).
func agentBinaries(t testing.TB) (full, node string) { return testbed.TestAgentBinary(t) }

const nodeYAML = `MLSysOpsNode:
  name: %s
  cluster_id: %s
  continuum_layer: cloud
  availability: stable
  mobile: false
  environment:
    node_type: virtualized
    os: ubuntu
    container_runtime: [containerd]
  hardware:
    cpu:
      model: Test CPU
      architecture: amd64
      cores: 4
      frequency: [800000000, 3600000000]
    memory: 8
    disk: "100"
  permitted_actions: %s
`

// writeDescriptions writes the test hierarchy's descriptions.
func writeDescriptions(t testing.TB) string {
	dir := t.TempDir()
	files := map[string]string{
		"continuum/" + continuumName + ".yaml": fmt.Sprintf("MLSysOpsContinuum:\n  continuum_id: %s\n  clusters: [%s]\n", continuumName, clusterName),
		"clusters/" + clusterName + ".yaml":    fmt.Sprintf("MLSysOpsCluster:\n  cluster_id: %s\n  nodes: [%s, %s]\n", clusterName, nodeAllowed, nodeForbidden),
		"nodes/" + nodeAllowed + ".yaml":       fmt.Sprintf(nodeYAML, nodeAllowed, clusterName, "[cpu_frequency]"),
		"nodes/" + nodeForbidden + ".yaml":     fmt.Sprintf(nodeYAML, nodeForbidden, clusterName, "[]"),
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// writeSysfs writes a cpufreq fixture with two CPUs (hardware 800-3600 MHz).
func writeSysfs(t testing.TB, root string) {
	for n := 0; n < 2; n++ {
		d := filepath.Join(root, "devices", "system", "cpu", "cpu"+strconv.Itoa(n), "cpufreq")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, v := range map[string]string{
			"scaling_governor": "powersave", "scaling_available_governors": "performance powersave schedutil",
			"scaling_min_freq": "800000", "scaling_max_freq": "3600000", "scaling_cur_freq": "2000000",
			"cpuinfo_min_freq": "800000", "cpuinfo_max_freq": "3600000",
		} {
			if err := os.WriteFile(filepath.Join(d, name), []byte(v+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func readSysfs(t testing.TB, root string, cpu int, file string) string {
	b, err := os.ReadFile(filepath.Join(root, "devices", "system", "cpu", "cpu"+strconv.Itoa(cpu), "cpufreq", file))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// hierarchy is a running continuum, cluster and two node agents against a
// private ejabberd and Redis and the shared testbed's Kubernetes APIs.
type hierarchy struct {
	t        testing.TB
	env      *testbed.Env
	ej       *services.Ejabberd
	redis    *services.Redis
	rdb      redis.UniversalClient
	store    *state.Store
	cfg      testbed.AgentsConfig
	agents   map[string]*testbed.AgentProcess // by name
	descs    string                           // the descriptions folder
	sysfs    map[string]string                // node -> sysfs root
	tester   string                           // a controller account's JID
	testerPW string
}

// startHierarchy provisions every agent of the test descriptions and
// starts those named in only (all when only is empty).
func startHierarchy(t testing.TB, only ...string) *hierarchy {
	t.Helper()
	return startHierarchyOn(t, []*services.Ejabberd{testbed.Ejabberd(t)}, only...)
}

// startHierarchyOn is startHierarchy on the given ejabberd nodes (the
// nodes of one cluster): the agents and the accounts reconciler get every
// node's address.
func startHierarchyOn(t testing.TB, ejs []*services.Ejabberd, only ...string) *hierarchy {
	t.Helper()
	bin, nodeBin := agentBinaries(t)
	env := testbed.Shared(t)
	h := &hierarchy{t: t, env: env, ej: ejs[0], redis: testbed.Redis(t), agents: map[string]*testbed.AgentProcess{}, sysfs: map[string]string{}}
	var c2s, apis []string
	for _, e := range ejs {
		c2s, apis = append(c2s, e.C2SAddr()), append(apis, e.APIURL())
	}
	client, err := h.ej.HTTPClient()
	if err != nil {
		t.Fatal(err)
	}
	prov := provision.NewHTTPAPI(h.ej.APIURL(), h.ej.AdminJID(), h.ej.AdminPassword(), client)
	h.tester = testerLocal + "@" + h.ej.Domain()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if h.testerPW, err = provision.Agent(ctx, prov, h.tester); err != nil {
		t.Fatal(err)
	}
	descs := writeDescriptions(t)
	h.descs = descs
	stateDir := t.TempDir()
	h.cfg = testbed.AgentsConfig{
		Binary: bin, NodeBinary: nodeBin, Descriptions: descs, StateDir: stateDir,
		XMPPAddr: strings.Join(c2s, ","), XMPPDomain: h.ej.Domain(), XMPPCAFile: h.ej.CAFile(),
		XMPPAdminURL: strings.Join(apis, ","), XMPPAdminJID: h.ej.AdminJID(), XMPPAdminPasswordFile: h.ej.AdminPasswordFile(),
		AccountsBinary: testbed.TestAccountsBinary(t), AccountsListen: "127.0.0.1:" + strconv.Itoa(testbed.FreePorts(t, 1)),
		// Only a start, a restart of ejabberd or an agent's report make
		// the reconciler look at the accounts during the test.
		AccountsArgs: []string{"--interval", "1h", "--full-interval", "1h"},
		RedisAddr:    h.redis.Addr(), RedisPassword: h.redis.Password(), Kubeconfig: env.Kubeconfig,
		ListenBase: testbed.FreePorts(t, 4),
		// The shared testbed's placement tests run their own controllers.
		Args: []string{"--placement-controllers=false", "--heartbeat-interval", "500ms", "--monitoring-interval", "2s",
			"--policy-poll-interval", "1s", "--description-poll-interval", "1s", "--xmpp-controllers", h.tester, "--log-level", "debug"},
	}
	set, err := description.LoadDir(descs)
	if err != nil {
		t.Fatal(err)
	}
	all, err := testbed.PlanAgents(set, h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	var as, start []*testbed.AgentProcess
	for _, a := range all {
		if len(only) == 0 || contains(only, a.Name) {
			start = append(start, a)
		}
		if a.Layer == testbed.LayerNode {
			root := filepath.Join(stateDir, "sysfs-"+a.Name)
			writeSysfs(t, root)
			h.sysfs[a.Name] = root
			a.Args = append(a.Args, "--sysfs-root", root)
		}
		as = append(as, a)
		h.agents[a.Name] = a
	}
	if err := testbed.PrepareAgents(h.cfg, as); err != nil {
		t.Fatal(err)
	}
	accounts := testbed.AccountsProcess(h.cfg)
	t.Cleanup(func() {
		for _, a := range as {
			_ = a.Stop(10 * time.Second)
		}
		_ = accounts.Stop(10 * time.Second)
		testbed.CheckRaces(t, as)
		if t.Failed() {
			for _, a := range as {
				t.Logf("--- log of %s:\n%s", a.Process.Name, tail(a.LogFile, 60))
			}
			t.Logf("--- log of %s:\n%s", accounts.Name, tail(accounts.LogFile, 60))
		}
	})
	if _, err := testbed.StartAccounts(ctx, h.cfg); err != nil {
		t.Fatal(err)
	}
	if err := testbed.StartAgents(ctx, start, nil); err != nil {
		t.Fatal(err)
	}
	h.rdb, err = state.NewClient(state.Config{Addrs: []string{h.redis.Addr()}, Password: h.redis.Password()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.rdb.Close() })
	h.store = state.New(h.rdb, state.Options{})
	return h
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func tail(file string, n int) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// status is the part of an agent's /status the tests read.
type status struct {
	Name       string  `json:"name"`
	Registered bool    `json:"registered"`
	Connected  bool    `json:"connected"`
	Mode       int     `json:"mode"`
	Interval   float64 `json:"interval_seconds"`
	Intervals  map[string]float64
	Peers      []struct {
		Peer   string
		Online bool
	} `json:"peers"`
	Policies []struct {
		Name      string
		Version   string
		LastError string
	} `json:"policies"`
	Plans []struct {
		ID         string
		Policy     string
		State      string
		Reason     string
		Plan       map[string]any
		Mechanisms map[string]struct {
			Status string
			Error  string
		}
	} `json:"plans"`
	Nodes map[string]struct {
		Online   bool    `json:"online"`
		Interval float64 `json:"interval_seconds"`
	} `json:"nodes"`
}

func (h *hierarchy) status(name string) (status, error) {
	var st status
	resp, err := http.Get(h.agents[name].URL() + "/status")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("status of %s: %s", name, resp.Status)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// eventually polls cond until it returns nil or the deadline passes.
func eventually(t testing.TB, what string, timeout time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("%s: still not true after %s: %v", what, timeout, err)
}

// metricValue returns the value of one series (name{labels} exactly as
// the agent's /metrics writes it), 0 when it is absent.
func metricValue(t testing.TB, h *hierarchy, agent, series string) float64 {
	t.Helper()
	return testbed.MetricValue(t, h.agents[agent].URL()+"/metrics", series)
}
