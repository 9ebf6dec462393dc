package testbed

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/internal/messaging/provision"
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
	All    []*AgentProcess
	byName map[string]*AgentProcess
}

var testAgentBinary struct {
	once     sync.Once
	path     string
	nodePath string
	err      error
}

// TestAgentBinary builds the agent (every layer) and the node-only agent
// from this checkout once per test binary and returns their paths.
func TestAgentBinary(t testing.TB) (full, node string) {
	t.Helper()
	testAgentBinary.once.Do(func() {
		root, err := RepoRoot()
		if err != nil {
			testAgentBinary.err = err
			return
		}
		dir, err := os.MkdirTemp("", "mlsysops-agent-bin-")
		if err != nil {
			testAgentBinary.err = err
			return
		}
		testAgentBinary.path = filepath.Join(dir, "mlsysops-agent")
		testAgentBinary.nodePath = filepath.Join(dir, "mlsysops-agent-node")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		if testAgentBinary.err = BuildAgent(ctx, root, testAgentBinary.path); testAgentBinary.err == nil {
			testAgentBinary.err = BuildNodeAgent(ctx, root, testAgentBinary.nodePath)
		}
	})
	if testAgentBinary.err != nil {
		t.Fatalf("build the agent: %v", testAgentBinary.err)
	}
	return testAgentBinary.path, testAgentBinary.nodePath
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
	set, err := description.LoadDir(descs)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := adminClient(env)
	if err != nil {
		t.Fatal(err)
	}
	a := &TestAgents{t: t, byName: map[string]*AgentProcess{}}
	full, node := TestAgentBinary(t)
	a.Config = AgentsConfig{
		Binary: full, NodeBinary: node, Descriptions: descs, StateDir: t.TempDir(),
		XMPPAddr: env.XMPPAddr, XMPPDomain: env.XMPPDomain, XMPPCAFile: env.XMPPCAFile,
		Provisioner: provision.NewHTTPAPI(env.XMPPAdminURL, env.XMPPAdminJID, env.XMPPAdminPassword, admin),
		RedisAddr:   env.RedisAddr, RedisPassword: env.RedisPassword, Kubeconfig: env.Kubeconfig,
		ListenBase: FreePorts(t, 2+len(set.Clusters)+len(set.Nodes)),
		// Quick liveness, so failures are noticed within seconds.
		// Profiles on the loopback listener, for benchmarks.
		Args: append([]string{"--heartbeat-interval", "500ms", "--log-level", "debug", "--profiling",
			"--xmpp-controllers", northboundXMPPUser + "@" + env.XMPPDomain}, opts.Args...),
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
		a.byName[ag.Layer+"/"+ag.Name] = ag
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := ProvisionAgents(ctx, a.Config, a.All); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for i := len(a.All) - 1; i >= 0; i-- {
			_ = a.All[i].Stop(10 * time.Second)
		}
		if t.Failed() {
			for _, ag := range a.All {
				t.Logf("--- last lines of %s:\n%s", ag.Process.Name, proc.Tail(ag.LogFile, 40))
			}
		}
	})
	if err := StartAgents(ctx, a.All, func(name, msg string) { t.Logf("%s %s", name, msg) }); err != nil {
		t.Fatal(err)
	}
	return a
}

// Get returns the agent of a layer and name (LayerCluster, "cloud-1").
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

// Log returns the last n lines of an agent's log.
func (a *TestAgents) Log(layer, name string, n int) string {
	return proc.Tail(a.Get(layer, name).LogFile, n)
}

// adminClient is an HTTP client for ejabberd's admin API, trusting the
// testbed's CA.
func adminClient(env *Env) (*http.Client, error) {
	b, err := os.ReadFile(env.XMPPCAFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("no certificate in %s", env.XMPPCAFile)
	}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}, nil
}
