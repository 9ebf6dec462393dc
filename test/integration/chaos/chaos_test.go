//go:build chaos

// Package chaos_test is the soak of issue 16: a steady workload through
// the real shared testbed (applications submitted, updated and removed
// through the northbound API and kubectl, ML deployments through the ML
// connector) while a seeded fault injector kills, pauses and restarts the
// agents of every layer and the testbed's components, makes nodes
// NotReady and removes them, several at once. An invariant checker runs
// throughout and at the end; every violation names the seed that replays
// the run's plan of operations and faults:
//
//	make chaos SEED=<seed> CHAOS_DURATION=30m
//
// `make test` runs it for MLSYSOPS_CHAOS_DURATION (5 minutes by default).
package chaos_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mlsysops-go/mlsysops/agents/continuum"
	"github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
	mlapi "github.com/mlsysops-go/mlsysops/mlconnector/api"
	mlclient "github.com/mlsysops-go/mlsysops/mlconnector/client"
	nbclient "github.com/mlsysops-go/mlsysops/northbound/client"
)

// Environment of the soak (`make chaos` sets them from CHAOS_DURATION and
// SEED).
const (
	envDuration = "MLSYSOPS_CHAOS_DURATION"
	envSeed     = "MLSYSOPS_CHAOS_SEED"
	// defaultDuration is the length of `make test`'s run.
	defaultDuration = 5 * time.Minute
)

// grace is the agents' child grace period: pauses last longer.
const grace = 10 * time.Second

// settleWithin bounds how long after the last fault every accepted
// submission may take to reach its terminal state.
const settleWithin = 8 * time.Minute

// run is one soak: the testbed, its clients, and what was found.
type run struct {
	t      *testing.T
	seed   uint64
	prefix string
	root   string
	env    *testbed.Env
	agents *testbed.TestAgents

	karmada client.Client
	members map[string]kubernetes.Interface
	nb      *nbclient.Client
	ml      *mlclient.Client
	store   *state.Store
	rdb     redis.UniversalClient
	modelID string

	// kwokNodes are the simulated nodes (the fault injector removes
	// them), nodeCluster maps every node to its cluster.
	kwokNodes   []string
	nodeCluster map[string]string

	mu         sync.Mutex
	violations []string
	down       map[string]bool // agents a fault keeps down
	start      time.Time
}

// violate records a violation of an invariant (or of the harness) with
// the seed that replays the run.
func (r *run) violate(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.violations = append(r.violations, msg)
	r.mu.Unlock()
	r.t.Errorf("VIOLATION at +%s (seed %d, replay: make chaos SEED=%d): %s", time.Since(r.start).Round(time.Second), r.seed, r.seed, msg)
}

func (r *run) logf(format string, args ...any) {
	r.t.Logf("+%s "+format, append([]any{time.Since(r.start).Round(time.Second)}, args...)...)
}

func (r *run) agent(target string) *testbed.AgentProcess {
	layer, name, _ := strings.Cut(target, "/")
	for _, a := range r.agents.All {
		if a.Layer == layer && a.Name == name {
			return a
		}
	}
	panic("no agent " + target)
}

func (r *run) expectDown(target string, down bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if down {
		r.down[target] = true
	} else {
		delete(r.down, target)
	}
}

func config(t *testing.T) (time.Duration, uint64) {
	d := defaultDuration
	if v := os.Getenv(envDuration); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil || d <= 0 {
			t.Fatalf("%s=%q: want a positive duration such as 30m", envDuration, v)
		}
	}
	seed := uint64(time.Now().UnixNano() % 1_000_000_000)
	if v := os.Getenv(envSeed); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("%s=%q: want a number", envSeed, v)
		}
	}
	return d, seed
}

// TestChaos runs the workload and the faults for the configured time,
// checks the invariants throughout, and at the end checks that everything
// settled: every accepted submission in its terminal state, exactly the
// desired workloads, nothing orphaned or duplicated, the API, Redis and
// the resources in agreement, every agent answering, and no runaway
// growth of goroutines or memory.
func TestChaos(t *testing.T) {
	duration, seed := config(t)
	ctrllog.SetLogger(logr.Discard())
	env := testbed.Shared(t)
	root, err := testbed.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	r := &run{t: t, seed: seed, root: root, env: env, members: map[string]kubernetes.Interface{}, nodeCluster: map[string]string{},
		down: map[string]bool{}, prefix: fmt.Sprintf("cx%04x", time.Now().UnixNano()&0xffff)}
	t.Logf("chaos: seed %d (replay: make chaos SEED=%d), %s of faults, names %s-*", seed, seed, duration, r.prefix)
	r.agents = testbed.StartTestAgents(t, env, testbed.TestAgentsOptions{
		Nodes: true,
		Args:  []string{"--child-grace-period", grace.String(), "--capacity-report-interval", "5s", "--pending-settle", "20s"},
	})
	// The shipped policies make plans while the faults go on.
	for _, a := range r.agents.All {
		copyPolicies(t, filepath.Join(root, "policies", a.Layer), a.PolicyDir)
	}
	r.clients(t)
	r.model(t)

	baseline := r.agentMetrics(t)
	r.start = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	w := newWorkload(r, seed)
	w.modelID = r.modelID
	in := newInjector(r, seed)
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); w.loop(ctx) }()
	go func() { defer wg.Done(); in.loop(ctx) }()
	go func() { defer wg.Done(); r.watch(ctx) }()
	wg.Wait()
	last := in.lastFault()
	r.logf("faults over (the last ended at +%s); checking that everything settles", last.Sub(r.start).Round(time.Second))

	r.settled(w, last)
	r.checkGrowth(t, baseline)
	testbed.CheckRaces(t, r.agents.All)

	faults := in.report()
	var fk []string
	total := 0
	for k, v := range faults {
		fk = append(fk, fmt.Sprintf("%s=%d", k, v))
		total += v
	}
	sort.Strings(fk)
	var ok []string
	for k, v := range w.ops {
		ok = append(ok, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(ok)
	var rej []string
	for k, v := range w.rejects {
		rej = append(rej, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(rej)
	t.Logf("chaos report: seed %d, %s faulted (last fault ended +%s), settled %s after it\n  faults (%d): %s\n  operations accepted: %s\n  operations refused: %s\n  violations: %d",
		seed, duration, last.Sub(r.start).Round(time.Second), time.Since(last).Round(time.Second), total,
		strings.Join(fk, " "), strings.Join(ok, " "), strings.Join(rej, " "), len(r.violations))

	r.cleanup(w)
	if len(r.violations) > 0 {
		r.keepLogs()
	}
}

// keepLogs copies the agents' logs, which go with the test's temporary
// folder, into the testbed's state (chaos/<seed>), where the components'
// logs are: a violation is traced in both.
func (r *run) keepLogs() {
	dst := filepath.Join(r.env.StateDir, "chaos", strconv.FormatUint(r.seed, 10))
	if err := os.MkdirAll(dst, 0o755); err != nil {
		r.t.Logf("keep the agents' logs: %v", err)
		return
	}
	files, _ := filepath.Glob(filepath.Join(r.agents.Config.StateDir, "logs", "*.log"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil {
			err = os.WriteFile(filepath.Join(dst, filepath.Base(f)), b, 0o644)
		}
		if err != nil {
			r.t.Logf("keep %s: %v", f, err)
		}
	}
	r.t.Logf("the agents' logs are kept in %s; the testbed's components' in %s", dst, filepath.Join(r.env.StateDir, "logs"))
}

func copyPolicies(t *testing.T, from, to string) {
	files, _ := filepath.Glob(filepath.Join(from, "*.star"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, filepath.Base(f)), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func (r *run) clients(t *testing.T) {
	scheme, err := continuum.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	if r.karmada, err = client.New(r.env.RESTConfig(t, testbed.ContextKarmada), client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	real := map[string]bool{}
	for _, n := range r.env.RealNodes {
		real[n.Name] = true
	}
	for _, c := range r.env.Clusters {
		cs := kubernetes.NewForConfigOrDie(r.env.RESTConfig(t, c))
		r.members[c] = cs
		nodes, err := cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes.Items {
			r.nodeCluster[n.Name] = c
			if !real[n.Name] {
				r.kwokNodes = append(r.kwokNodes, n.Name)
			}
		}
	}
	sort.Strings(r.kwokNodes)
	if r.nb, err = nbclient.New(nbclient.Config{URL: r.env.NorthboundURL, Token: r.env.NorthboundToken, Timeout: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if r.ml, err = mlclient.New(mlclient.Config{URL: r.env.MLConnectorURL, Token: r.env.NorthboundToken, Timeout: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	rdb, err := state.NewClient(state.Config{Addrs: []string{r.env.RedisAddr}, Password: r.env.RedisPassword})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	r.store = state.New(rdb, state.Options{})
	r.rdb = rdb
}

// model registers the model the ML deployments serve.
func (r *run) model(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m, err := r.ml.CreateModel(ctx, mlapi.ModelSpec{ModelName: r.prefix + "-iris", ModelKind: "classification",
		FeatureList: []mlapi.Feature{
			{FeatureName: "sepal_length", Type: mlapi.FeatureContinuous}, {FeatureName: "sepal_width", Type: mlapi.FeatureContinuous},
			{FeatureName: "petal_length", Type: mlapi.FeatureContinuous}, {FeatureName: "petal_width", Type: mlapi.FeatureContinuous},
			{FeatureName: "target", Type: mlapi.FeatureCategorical, Kind: mlapi.FeatureTarget},
		}})
	if err != nil {
		t.Fatal(err)
	}
	r.modelID = m.ModelID
	onnx, err := os.ReadFile(filepath.Join(r.root, "mlconnector", "serving", "testdata", "iris_mlp.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.ml.Upload(ctx, m.ModelID, mlapi.FileModel, "iris.onnx", strings.NewReader(string(onnx)), ""); err != nil {
		t.Fatal(err)
	}
}
