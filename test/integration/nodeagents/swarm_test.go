// Package nodeagents_test runs many node agents, with the real node-agent
// code, through the testbed's ejabberd to their real cluster agents, and
// measures what a thousand cost the server and their parents: the
// connection storm, telemetry and heartbeats fanning in, message latency,
// ejabberd's CPU and memory, and how fast a lost agent is noticed.
//
// The agents run in this process (a "swarm"): each is the agent command
// of the node-only binary, with the command line the testbed would give
// it, its own account, TLS session, telemetry sampler and MAPE engine.
// On a real continuum each node runs one agent on its own machine, and
// what it costs there is BenchmarkNodeAgent's (test/integration/agents:
// about 18 MB resident, 0.3 % of a core); a thousand processes of it
// would not fit beside the testbed on one machine, and would measure the
// machine, not the server. One agent of every run is a real process, the
// one that is killed.
package nodeagents_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mlsysops-go/mlsysops/agents/agent"
	_ "github.com/mlsysops-go/mlsysops/agents/node"
	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
	"github.com/mlsysops-go/mlsysops/internal/testbed/gen"
)

// heartbeat is the agents' production heartbeat interval (the test
// agents' default, 500 ms, would be four times the traffic).
const heartbeat = 2 * time.Second

// swarmDescriptions copies the checkout's descriptions and adds n
// generated nodes, alternately to each cluster, listed in their cluster's
// description. It returns the folder and the new nodes' names.
func swarmDescriptions(t testing.TB, n int) (string, []string) {
	t.Helper()
	root, err := testbed.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src := filepath.Join(root, "descriptions")
	err = filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if info.IsDir() {
			return os.MkdirAll(filepath.Join(dir, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	set, err := description.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var clusters []string
	for _, c := range set.Clusters {
		clusters = append(clusters, c.Name)
	}
	sort.Strings(clusters)
	added := map[string][]string{}
	var names []string
	for i := range n {
		cluster := clusters[i%len(clusters)]
		name := fmt.Sprintf("swarm-%04d", i)
		ty := "cloud"
		if strings.HasPrefix(cluster, "edge") {
			ty = "edge"
		}
		b, err := gen.NodeDescription(name, cluster, ty, uint64(i))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "nodes", name+".yaml"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		added[cluster] = append(added[cluster], name)
		names = append(names, name)
	}
	// Each cluster file ends with its node list.
	for cluster, ns := range added {
		f, err := os.OpenFile(filepath.Join(dir, "clusters", cluster+".yaml"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range ns {
			fmt.Fprintf(f, "    - %s\n", name)
		}
		f.Close()
	}
	if set, err = description.LoadDir(dir); err != nil {
		t.Fatalf("descriptions with the swarm: %v", err)
	}
	if len(set.Nodes) < n {
		t.Fatalf("%d nodes described, want at least %d", len(set.Nodes), n)
	}
	return dir, names
}

// swarm is node agents running in this process.
type swarm struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	errs   []error
}

// startSwarm provisions and starts the node agents named, in this process,
// with the command lines the testbed gives node agents: each has its
// account and password file, its parent, the continuum's name and the
// descriptions; no HTTP endpoints, no policy folder (see
// policy.Watcher: a folder each would take an inotify instance each).
func startSwarm(t testing.TB, ta *testbed.TestAgents, descs string, names []string) *swarm {
	t.Helper()
	set, err := description.LoadDir(descs)
	if err != nil {
		t.Fatal(err)
	}
	cfg := ta.Config
	cfg.ListenBase = 0
	all, err := testbed.PlanAgents(set, cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	var mine []*testbed.AgentProcess
	for _, a := range all {
		if a.Layer == testbed.LayerNode && want[a.Name] {
			mine = append(mine, a)
		}
	}
	// Their accounts and password files are the accounts reconciler's,
	// which StartTestAgents waited for (its first full pass covers every
	// agent of the descriptions).
	if err := testbed.PrepareAgents(cfg, mine); err != nil {
		t.Fatal(err)
	}
	s := &swarm{}
	sctx, scancel := context.WithCancel(context.Background())
	s.cancel = scancel
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	noPolicies := filepath.Join(t.TempDir(), "no-policies")
	for _, a := range mine {
		args := append(append([]string(nil), a.Process.Args...),
			"--policy-directory", noPolicies, "--log-level", swarmLogLevel(), "--heartbeat-interval", heartbeat.String())
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			cmd := agent.NewCommand(sctx, log)
			cmd.SetArgs(args)
			cmd.SetOut(io.Discard)
			cmd.SetErr(io.Discard)
			if err := cmd.Execute(); err != nil && sctx.Err() == nil {
				s.mu.Lock()
				s.errs = append(s.errs, fmt.Errorf("%s: %w", a.Name, err))
				s.mu.Unlock()
			}
		}()
	}
	t.Cleanup(s.stop)
	return s
}

// swarmLogLevel is the swarm agents' log level: error, or
// $MLSYSOPS_SWARM_LOG_LEVEL (warn to see why agents reconnect in a
// connection storm). They log to this process's standard error.
func swarmLogLevel() string {
	if l := os.Getenv("MLSYSOPS_SWARM_LOG_LEVEL"); l != "" {
		return l
	}
	return "error"
}

func (s *swarm) stop() {
	s.cancel()
	s.wg.Wait()
}

// failed returns the errors of agents that stopped by themselves.
func (s *swarm) failed() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]error(nil), s.errs...)
}

// clusterStatus reads a cluster agent's /status: which described nodes'
// agents are online.
func clusterStatus(ctx context.Context, a *testbed.AgentProcess) (map[string]bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.URL()+"/status", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var st struct {
		Nodes map[string]struct {
			Online bool `json:"online"`
		} `json:"nodes"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(st.Nodes))
	for n, s := range st.Nodes {
		out[n] = s.Online
	}
	return out, nil
}

// onlineAt counts the nodes online at every cluster agent.
func onlineAt(ctx context.Context, ta *testbed.TestAgents) (int, map[string]bool, error) {
	all := map[string]bool{}
	for _, a := range ta.All {
		if a.Layer != testbed.LayerCluster {
			continue
		}
		st, err := clusterStatus(ctx, a)
		if err != nil {
			return 0, nil, err
		}
		for n, on := range st {
			all[n] = on
		}
	}
	n := 0
	for _, on := range all {
		if on {
			n++
		}
	}
	return n, all, nil
}

// waitOnline waits until want nodes are online at their cluster agents and
// returns how long that took.
func waitOnline(t testing.TB, ta *testbed.TestAgents, want int, timeout time.Duration, sw *swarm) time.Duration {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	last := 0
	var lastErr error
	for {
		n, _, err := onlineAt(ctx, ta)
		if err == nil && n >= want {
			return time.Since(start)
		}
		if err != nil {
			lastErr = err
		} else {
			last = n
		}
		if sw != nil {
			if errs := sw.failed(); len(errs) > 0 {
				t.Fatalf("%d swarm agents stopped: %v", len(errs), errs[0])
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%d of %d node agents online at their cluster agents after %v (last error reading their status: %v)", last, want, timeout, lastErr)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// detectLoss kills the node agent running as a process and returns how
// long its cluster agent took to see it offline.
func detectLoss(t testing.TB, ta *testbed.TestAgents, victim string) time.Duration {
	t.Helper()
	ag := ta.Get(testbed.LayerNode, victim)
	start := time.Now()
	ta.Kill(testbed.LayerNode, victim)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for {
		_, st, err := onlineAt(ctx, ta)
		if err == nil && !st[victim] {
			return time.Since(start)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the loss of node agent %s (pid file %s) was not noticed in 3 minutes", victim, ag.PIDFile)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// metrics reads a Prometheus endpoint into sums by metric name and label
// set ("name{a=b}" keys, labels as written).
func metrics(ctx context.Context, url string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] += v
	}
	return out, sc.Err()
}

// sumOf sums the series of a metric whose labels contain every fragment.
func sumOf(m map[string]float64, name string, fragments ...string) float64 {
	var s float64
	for k, v := range m {
		if !strings.HasPrefix(k, name+"{") && k != name {
			continue
		}
		ok := true
		for _, f := range fragments {
			ok = ok && strings.Contains(k, f)
		}
		if ok {
			s += v
		}
	}
	return s
}

// clusterMetrics sums the metrics of every cluster agent.
func clusterMetrics(t testing.TB, ta *testbed.TestAgents) map[string]float64 {
	t.Helper()
	sum := map[string]float64{}
	for _, a := range ta.All {
		if a.Layer != testbed.LayerCluster {
			continue
		}
		m, err := metrics(context.Background(), a.URL())
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range m {
			sum[k] += v
		}
	}
	return sum
}

// quantile estimates a quantile of the transit-time histogram of a
// message type from two readings (the window between them), by linear
// interpolation within its bucket.
func quantile(before, after map[string]float64, msgType string, q float64) float64 {
	type bucket struct{ le, n float64 }
	var bs []bucket
	prefix := "mlsysops_messaging_transit_seconds_bucket{"
	byLE := map[float64]float64{}
	for k, v := range after {
		if !strings.HasPrefix(k, prefix) || !strings.Contains(k, `type="`+msgType+`"`) {
			continue
		}
		i := strings.Index(k, `le="`)
		if i < 0 {
			continue
		}
		leText := k[i+4 : strings.IndexByte(k[i+4:], '"')+i+4]
		le := math.Inf(1)
		if leText != "+Inf" {
			le, _ = strconv.ParseFloat(leText, 64)
		}
		byLE[le] += v - before[k]
	}
	for le, n := range byLE {
		bs = append(bs, bucket{le, n})
	}
	sort.Slice(bs, func(i, j int) bool { return bs[i].le < bs[j].le })
	if len(bs) == 0 || bs[len(bs)-1].n == 0 {
		return math.NaN()
	}
	total := bs[len(bs)-1].n
	target := q * total
	lower, prev := 0.0, 0.0
	for _, b := range bs {
		if b.n >= target {
			if math.IsInf(b.le, 1) {
				return lower
			}
			return lower + (b.le-lower)*(target-prev)/math.Max(b.n-prev, 1)
		}
		lower, prev = b.le, b.n
	}
	return lower
}

// ejabberdUsage is the testbed ejabberd's resident memory and CPU seconds
// so far (its Erlang VM and helpers).
func ejabberdUsage(t testing.TB, env *testbed.Env) (rss int64, cpu float64) {
	t.Helper()
	u := testbed.PIDFileUsage(filepath.Join(env.StateDir, "ejabberd", "ejabberd.pid"))
	if u.RSSBytes == 0 {
		t.Fatal("the testbed's ejabberd does not run")
	}
	return u.RSSBytes, u.CPUSeconds
}

// heapInUse is this process's heap and stacks after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}

// The short version: fifty node agents of the swarm and one process
// connect through ejabberd to their cluster agents, every one is online
// there and reports telemetry, and the process killed is noticed.
func TestNodeAgentsSmoke(t *testing.T) {
	env := testbed.Shared(t)
	descs, names := swarmDescriptions(t, 50)
	ta := testbed.StartTestAgents(t, env, testbed.TestAgentsOptions{
		Descriptions: descs, Args: []string{"--heartbeat-interval", heartbeat.String()},
		Only: []string{"far-edge-rpi-1"},
	})
	sw := startSwarm(t, ta, descs, names)
	waitOnline(t, ta, len(names)+1, 5*time.Minute, sw)
	before := clusterMetrics(t, ta)
	time.Sleep(15 * time.Second)
	after := clusterMetrics(t, ta)
	for _, typ := range []string{"telemetry_report", "heartbeat"} {
		got := sumOf(after, "mlsysops_messaging_received_total", `type="`+typ+`"`) - sumOf(before, "mlsysops_messaging_received_total", `type="`+typ+`"`)
		if got < float64(len(names)) {
			t.Errorf("%.0f %s messages reached the cluster agents in 15 s from %d agents, want at least one each", got, typ, len(names)+1)
		}
	}
	detectLoss(t, ta, "far-edge-rpi-1")
	// The loss takes no other agent with it. On a loaded machine one of
	// the fifty may miss a heartbeat deadline for a moment; it must be
	// back at its next heartbeats, so this waits a bounded time for the
	// fifty (and the victim still offline) instead of one sample.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		n, st, err := onlineAt(ctx, ta)
		if err == nil && n == len(names) && !st["far-edge-rpi-1"] {
			return
		}
		select {
		case <-ctx.Done():
			var off []string
			for _, name := range names {
				if !st[name] {
					off = append(off, name)
				}
			}
			t.Fatalf("a minute after the loss: %d online (%v), want the %d of the swarm and not the victim (online %v); offline: %v",
				n, err, len(names), st["far-edge-rpi-1"], off)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
