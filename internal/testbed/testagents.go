package testbed

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/internal/testbed/proc"
)

// TestAgentsOptions says which agents StartTestAgents runs and how.
type TestAgentsOptions struct {
	// Nodes also starts a node agent for every described node (the
	// continuum and cluster agents always run).
	Nodes bool
	// NodeNames, when set with Nodes, limits the node agents to these
	// nodes.
	NodeNames []string
	// Args are added to every agent's command line (after the defaults,
	// so they win).
	Args []string
	// Descriptions is the description folder; empty is the checkout's
	// descriptions/ (the shared testbed's).
	Descriptions string
	// Only, when set, runs node agents for these nodes alone (the others
	// run elsewhere, or not at all); Nodes is then implied.
	Only []string
	// AccountsArgs are added to the accounts reconciler's command line.
	AccountsArgs []string
	// Replicas, when above 1, runs the continuum and cluster agents as
	// that many replicas each, with leader election (AgentsConfig.Replicas);
	// ReplicaArgs go to those replicas only.
	Replicas    int
	ReplicaArgs []string
	// Redis, when set, is the Redis the agents use instead of the shared
	// testbed's (a Sentinel group or a Cluster, say).
	Redis *state.Config
}

// TestAgents are the real agent processes of the shared testbed's
// descriptions, run for one test: the continuum agent on Karmada, a
// cluster agent per member cluster and, optionally, a node agent per node,
// with the testbed's ejabberd and Redis. They run the placement
// controllers, so tests that use them must not run controllers of their
// own at the same time.
type TestAgents struct {
	t      testing.TB
	Config AgentsConfig
	// All lists the agents in start order.
	All []*AgentProcess
	// Accounts is the accounts reconciler that created the agents'
	// accounts and keeps them in place (AccountsProcess).
	Accounts *proc.Process
	byName   map[string]*AgentProcess
	replicas map[string][]*AgentProcess
}

func processes(as []*AgentProcess) []*proc.Process {
	out := make([]*proc.Process, 0, len(as))
	for _, a := range as {
		out = append(out, a.Process)
	}
	return out
}

var testAgentBinary struct {
	once         sync.Once
	path         string
	nodePath     string
	accountsPath string
	err          error
}

// TestAgentBinary builds the agent (every layer), the node-only agent and
// the accounts reconciler from this checkout once per test binary and
// returns the agents' paths. When the test binary runs with the race
// detector (RaceDetector), so do the agents.
func TestAgentBinary(t testing.TB) (full, node string) {
	t.Helper()
	testAgentBinary.once.Do(func() {
		root, err := RepoRoot()
		if err != nil {
			testAgentBinary.err = err
			return
		}
		// One folder per checkout and flavour, reused by every test
		// binary (a fresh one each time left 100+ MB behind per run).
		sum := sha256.Sum256([]byte(root))
		flavour := hex.EncodeToString(sum[:6])
		if RaceDetector {
			flavour += "-race"
		}
		dir := filepath.Join(os.TempDir(), "mlsysops-agent-bin", flavour)
		testAgentBinary.path = filepath.Join(dir, agentBinary)
		testAgentBinary.nodePath = filepath.Join(dir, nodeAgentBinary)
		testAgentBinary.accountsPath = filepath.Join(dir, accountsBinary)
		testAgentBinary.err = stageAgents(root, dir)
	})
	if testAgentBinary.err != nil {
		t.Fatalf("build the agent: %v", testAgentBinary.err)
	}
	return testAgentBinary.path, testAgentBinary.nodePath
}

// stageAgents builds the three binaries into dir/staging and installs
// copies of them in dir. The staging files stay from one test binary to
// the next: go build leaves a file that is up to date alone, so only the
// first package of a run links the agents (about 20 s with -race on two
// cores). The copies are renamed into place, so agents still running
// from an earlier copy keep their file. A lock keeps two test binaries
// from building into the same files at once.
func stageAgents(root, dir string) error {
	staging := filepath.Join(dir, "staging")
	if err := os.MkdirAll(staging, 0o755); err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(dir, "staging.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	full, node, accounts := filepath.Join(staging, agentBinary), filepath.Join(staging, nodeAgentBinary), filepath.Join(staging, accountsBinary)
	if RaceDetector {
		err = BuildRaceAgents(ctx, root, full, node)
	} else if err = BuildAgent(ctx, root, full); err == nil {
		err = BuildNodeAgent(ctx, root, node)
	}
	if err == nil {
		err = BuildAccounts(ctx, root, accounts)
	}
	for _, f := range []string{agentBinary, nodeAgentBinary, accountsBinary} {
		if err != nil {
			return err
		}
		err = installCopy(filepath.Join(staging, f), filepath.Join(dir, f))
	}
	return err
}

// installCopy copies the executable src to dst through a temporary file
// renamed into place.
func installCopy(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := fmt.Sprintf("%s.%d", dst, os.Getpid())
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err = io.Copy(out, in); err == nil {
		err = out.Close()
	} else {
		out.Close()
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// TestAccountsBinary builds the accounts reconciler (with the agents, once
// per test binary) and returns its path.
func TestAccountsBinary(t testing.TB) string {
	t.Helper()
	TestAgentBinary(t)
	return testAgentBinary.accountsPath
}

// StartTestAgents provisions and starts the agents of the shared
// testbed's descriptions and stops them when the test ends (printing the
// logs of every agent when it failed).
func StartTestAgents(t testing.TB, env *Env, opts TestAgentsOptions) *TestAgents {
	t.Helper()
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	descs := filepath.Join(root, "descriptions")
	if opts.Descriptions != "" {
		descs = opts.Descriptions
	}
	set, err := description.LoadDir(descs)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Only != nil {
		// Agents are planned (and given ports) for these nodes alone.
		only := *set
		only.Nodes = nil
		for _, n := range set.Nodes {
			if slices.Contains(opts.Only, n.Name) {
				only.Nodes = append(only.Nodes, n)
			}
		}
		set, opts.Nodes = &only, true
	}
	a := &TestAgents{t: t, byName: map[string]*AgentProcess{}, replicas: map[string][]*AgentProcess{}}
	full, node := TestAgentBinary(t)
	state := t.TempDir()
	// The reconciler reads the admin password from a file, never from its
	// command line.
	adminPW := filepath.Join(state, "ejabberd-admin.password")
	if err := os.WriteFile(adminPW, []byte(env.XMPPAdminPassword), 0o600); err != nil {
		t.Fatal(err)
	}
	a.Config = AgentsConfig{
		Binary: full, NodeBinary: node, Descriptions: descs, StateDir: state,
		XMPPAddr: strings.Join(env.XMPPAddrs, ","), XMPPDomain: env.XMPPDomain, XMPPCAFile: env.XMPPCAFile,
		XMPPAdminURL: strings.Join(env.XMPPAdminURLs, ","), XMPPAdminJID: env.XMPPAdminJID, XMPPAdminPasswordFile: adminPW,
		AccountsBinary: TestAccountsBinary(t), AccountsListen: "127.0.0.1:" + strconv.Itoa(FreePorts(t, 1)),
		AccountsArgs: opts.AccountsArgs,
		RedisAddr:    env.RedisAddr, RedisPassword: env.RedisPassword, Kubeconfig: env.Kubeconfig,
		ListenBase: FreePorts(t, 1+max(opts.Replicas, 1)*(1+len(set.Clusters))+agentPorts(opts.Nodes, len(set.Nodes))),
		Replicas:   opts.Replicas, ReplicaArgs: opts.ReplicaArgs,
		// Quick liveness, so failures are noticed within seconds.
		// Profiles on the loopback listener, for benchmarks.
		Args: append([]string{"--heartbeat-interval", "500ms", "--log-level", "debug", "--profiling",
			"--xmpp-controllers", northboundXMPPUser + "@" + env.XMPPDomain}, opts.Args...),
	}
	// On the testbed's Redis, which defines the components' ACL users,
	// the agents log in as theirs.
	if env.Agents.RedisPasswordFile != "" {
		a.Config.RedisUserDir = filepath.Dir(env.Agents.RedisPasswordFile)
	}
	if r := opts.Redis; r != nil {
		a.Config.RedisUserDir = ""
		a.Config.RedisAddr, a.Config.RedisPassword = strings.Join(r.Addrs, ","), r.Password
		a.Config.RedisMode, a.Config.RedisMasterName, a.Config.RedisSentinelPassword = string(r.Mode), r.MasterName, r.SentinelPassword
	}
	all, err := PlanAgents(set, a.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, ag := range all {
		if ag.Layer == LayerNode && (!opts.Nodes || (len(opts.NodeNames) > 0 && !slices.Contains(opts.NodeNames, ag.Name))) {
			continue
		}
		a.All = append(a.All, ag)
		if ag.Replica == 0 {
			a.byName[ag.Layer+"/"+ag.Name] = ag
		}
		a.replicas[ag.Layer+"/"+ag.Name] = append(a.replicas[ag.Layer+"/"+ag.Name], ag)
	}
	// The accounts reconciler creates every described agent's account
	// before it is ready: a few a second on a loaded machine, so a swarm
	// of a thousand needs minutes more than the default set.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute+time.Duration(len(all))*500*time.Millisecond)
	defer cancel()
	if err := PrepareAgents(a.Config, a.All); err != nil {
		t.Fatal(err)
	}
	a.Accounts = AccountsProcess(a.Config)
	t.Cleanup(func() {
		for i := len(a.All) - 1; i >= 0; i-- {
			_ = a.All[i].Stop(10 * time.Second)
		}
		_ = a.Accounts.Stop(10 * time.Second)
		CheckRaces(t, a.All)
		if t.Failed() {
			for _, p := range append([]*proc.Process{a.Accounts}, processes(a.All)...) {
				t.Logf("--- last lines of %s:\n%s", p.Name, proc.Tail(p.LogFile, 40))
			}
		}
	})
	// A member cluster an earlier test stopped, or one a loaded machine
	// made miss its health checks, is not placed on: start from a
	// continuum Karmada sees whole.
	clusters := make([]string, 0, len(set.Clusters))
	for _, c := range set.Clusters {
		clusters = append(clusters, c.Name)
	}
	if err := waitClustersReady(ctx, env.RESTConfig(t, ContextKarmada), clusters, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := StartAccounts(ctx, a.Config); err != nil {
		t.Fatal(err)
	}
	if err := StartAgents(ctx, a.All, func(name, msg string) { t.Logf("%s %s", name, msg) }); err != nil {
		t.Fatal(err)
	}
	return a
}

// agentPorts is how many ports node agents take: the ports follow the
// continuum's and the clusters' in plan order.
func agentPorts(nodeAgents bool, nodes int) int {
	if nodeAgents {
		return nodes
	}
	return 0
}

// Replicas returns every replica of the agent of a layer and name (one
// without TestAgentsOptions.Replicas).
func (a *TestAgents) Replicas(layer, name string) []*AgentProcess {
	a.t.Helper()
	rs := a.replicas[layer+"/"+name]
	if len(rs) == 0 {
		a.t.Fatalf("no %s agent %s in the test agents", layer, name)
	}
	return rs
}

// CheckRaces fails the test for every data race an agent's log reports
// (agents built with -race print the report and go on).
func CheckRaces(t testing.TB, agents []*AgentProcess) {
	t.Helper()
	for _, ag := range agents {
		b, err := os.ReadFile(ag.LogFile)
		if err != nil {
			continue
		}
		log := string(b)
		i := strings.Index(log, raceReport)
		if i < 0 {
			continue
		}
		report := log[i:]
		if end := strings.Index(report, "\n==================\n"); end > 0 {
			report = report[:end]
		}
		t.Errorf("%s: %d data race(s) reported in %s; the first:\n%s", ag.Process.Name, strings.Count(log, raceReport), ag.LogFile, report)
	}
}

// raceReport begins each report of the race detector.
const raceReport = "WARNING: DATA RACE"

// Get returns the agent of a layer and name (LayerCluster, "cloud-1"); its
// first replica when it has several.
func (a *TestAgents) Get(layer, name string) *AgentProcess {
	a.t.Helper()
	ag := a.byName[layer+"/"+name]
	if ag == nil {
		a.t.Fatalf("no %s agent %s in the test agents", layer, name)
	}
	return ag
}

// Kill kills an agent with SIGKILL, as a crash would, and waits until it
// is gone.
func (a *TestAgents) Kill(layer, name string) {
	a.t.Helper()
	ag := a.Get(layer, name)
	if err := ag.Kill(); err != nil {
		a.t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if _, ok := ag.Pid(); !ok {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	a.t.Fatalf("%s survived SIGKILL", ag.Process.Name)
}

// Start starts a stopped or killed agent again and waits until it is
// ready.
func (a *TestAgents) Start(layer, name string) {
	a.t.Helper()
	ag := a.Get(layer, name)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := StartAgents(ctx, []*AgentProcess{ag}, nil); err != nil {
		a.t.Fatal(err)
	}
}

// StopAll stops every agent (for a comparison without them); StartAll
// starts them again.
func (a *TestAgents) StopAll() {
	a.t.Helper()
	for i := len(a.All) - 1; i >= 0; i-- {
		if err := a.All[i].Stop(10 * time.Second); err != nil {
			a.t.Fatal(err)
		}
	}
}

// UseBinary makes the continuum and cluster agents run the agent
// executable path from their next start, path "" this checkout's (an A/B
// comparison of two builds on one testbed; stop them first).
func (a *TestAgents) UseBinary(path string) {
	if path == "" {
		path = a.Config.Binary
	}
	for _, ag := range a.All {
		if ag.Layer != LayerNode {
			ag.Process.Path = path
		}
	}
}

// StartAll starts every agent that is not running, layer by layer, and
// waits until they are ready.
func (a *TestAgents) StartAll() {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := StartAgents(ctx, a.All, nil); err != nil {
		a.t.Fatal(err)
	}
}

// WaitCapacityReports waits until the continuum agent holds a fresh
// capacity report, with its node list, of every cluster named: agents
// just started have not sent them yet, and placement reads the members
// through Karmada meanwhile.
func (a *TestAgents) WaitCapacityReports(clusters []string) {
	a.t.Helper()
	var cont *AgentProcess
	for _, ag := range a.All {
		if ag.Layer == LayerContinuum {
			cont = ag
		}
	}
	if cont == nil || cont.URL() == "" {
		a.t.Fatal("no continuum agent with a status endpoint")
	}
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		var st struct {
			Reports map[string]struct {
				Fresh  bool `json:"fresh"`
				Listed int  `json:"nodes_listed"`
			} `json:"capacity_reports"`
		}
		if resp, err := http.Get(cont.URL() + "/status"); err == nil {
			err = json.NewDecoder(resp.Body).Decode(&st)
			resp.Body.Close()
			fresh := 0
			for _, c := range clusters {
				if r := st.Reports[c]; err == nil && r.Fresh && r.Listed > 0 {
					fresh++
				}
			}
			if fresh == len(clusters) {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	a.t.Fatalf("the continuum agent has no fresh capacity report of each of %v after 3 minutes", clusters)
}

// Log returns the last n lines of an agent's log.
func (a *TestAgents) Log(layer, name string, n int) string {
	return proc.Tail(a.Get(layer, name).LogFile, n)
}
