//go:build chaos

package chaos_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mlsysops-go/mlsysops/internal/testbed"
	"github.com/mlsysops-go/mlsysops/internal/testbed/proc"
)

// Fault kinds, as the report counts them.
const (
	faultAgentKill      = "agent-kill"
	faultAgentPause     = "agent-pause"
	faultComponentKill  = "component-kill"
	faultComponentPause = "component-pause"
	faultNodesNotReady  = "nodes-notready"
	faultNodeRemoved    = "node-removed"
)

// faultKinds with their weights.
var faultKinds = []struct {
	kind   string
	weight int
}{
	{faultAgentKill, 4}, {faultAgentPause, 2}, {faultComponentKill, 4}, {faultComponentPause, 2},
	{faultNodesNotReady, 1}, {faultNodeRemoved, 1},
}

// injector starts faults at random moments, each lasting a random time,
// several at once (up to maxOverlap), never two on one target.
type injector struct {
	r   *run
	rng *rand.Rand
	// targets of the component faults: the testbed's components by the
	// names Testbed.Status reports.
	components []string
	maxOverlap int

	mu     sync.Mutex
	busy   map[string]bool
	counts map[string]int
	wg     sync.WaitGroup
	last   time.Time
}

func newInjector(r *run, seed uint64) *injector {
	var comps []string
	comps = append(comps, "redis", "postgres", "ejabberd", "northbound", "mlconnector",
		"karmada-controller-manager", "karmada-scheduler", "karmada-webhook", "karmada-aggregated-apiserver")
	for _, c := range r.env.Clusters {
		comps = append(comps, c+"-apiserver")
	}
	return &injector{r: r, rng: rand.New(rand.NewPCG(seed, 0x6661756c74)), components: comps, maxOverlap: 3,
		busy: map[string]bool{}, counts: map[string]int{}}
}

// loop starts a fault every 2 to 12 s until ctx ends, then waits for the
// faults under way to end and restores the testbed.
func (in *injector) loop(ctx context.Context) {
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(2000+in.rng.IntN(10000)) * time.Millisecond):
			in.start()
		}
	}
	in.wg.Wait()
	// Whatever a fault left down (a restart that failed) comes back.
	for _, c := range in.components {
		in.restore(c)
	}
	in.restore(testbed.RestartNodes)
}

// lastFault is when the last fault ended.
func (in *injector) lastFault() time.Time {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.last
}

func (in *injector) pick() string {
	total := 0
	for _, k := range faultKinds {
		total += k.weight
	}
	n := in.rng.IntN(total)
	for _, k := range faultKinds {
		if n < k.weight {
			return k.kind
		}
		n -= k.weight
	}
	return faultKinds[0].kind
}

// start picks a fault, its target and its length, all from the
// injector's random source (so a seed replays the same plan), and runs
// it in the background.
func (in *injector) start() {
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.busy) >= in.maxOverlap {
		return
	}
	kind := in.pick()
	var target string
	var candidates []string
	switch kind {
	case faultAgentKill, faultAgentPause:
		for _, a := range in.r.agents.All {
			candidates = append(candidates, a.Layer+"/"+a.Name)
		}
	case faultComponentKill, faultComponentPause:
		candidates = in.components
	case faultNodesNotReady:
		// A real node's kubelet paused stops its heartbeats: the node
		// lifecycle controller marks the node NotReady and its pods not
		// ready, and the kubelet makes them ready again once it runs.
		// (KWOK's simulated nodes cannot be used: KWOK makes a pod ready
		// once, on its start, and never again after the node lifecycle
		// controller marked it not ready.)
		for _, n := range in.r.env.RealNodes {
			if slices.Contains(in.r.env.Clusters, n.Context) {
				candidates = append(candidates, "node-"+n.Name+"-kubelet")
			}
		}
	case faultNodeRemoved:
		for _, n := range in.r.kwokNodes {
			candidates = append(candidates, "node/"+n)
		}
	}
	target = candidates[in.rng.IntN(len(candidates))]
	// Past the agents' grace period and the node monitor's (20 s) for
	// pauses and NotReady nodes; shorter or longer kills. A paused agent's
	// session stays up, so it counts as gone after two liveness timeouts
	// (the second for the ping it does not answer: 3 s at the test agents'
	// 500 ms heartbeats), and its grace runs from then.
	var d time.Duration
	switch kind {
	case faultAgentPause, faultComponentPause:
		d = grace + time.Duration(4+in.rng.IntN(15))*time.Second
	case faultNodesNotReady:
		d = time.Duration(30+in.rng.IntN(30)) * time.Second
	case faultNodeRemoved:
		d = time.Duration(10+in.rng.IntN(40)) * time.Second
	default:
		d = time.Duration(1+in.rng.IntN(25)) * time.Second
	}
	if in.busy[target] {
		return
	}
	in.busy[target] = true
	in.counts[kind]++
	in.wg.Add(1)
	go func() {
		defer in.wg.Done()
		in.r.logf("fault %s %s for %s", kind, target, d)
		in.run(kind, target, d)
		in.mu.Lock()
		delete(in.busy, target)
		in.last = time.Now()
		in.mu.Unlock()
	}()
}

// run injects one fault and undoes it after d.
func (in *injector) run(kind, target string, d time.Duration) {
	switch kind {
	case faultAgentKill:
		ag := in.r.agent(target)
		// Expected down before the kill: the liveness check may see the
		// process gone before Kill returns (seed 28001 on a testbed the
		// state tests had used: "died without a fault" at the kill).
		in.r.expectDown(target, true)
		if err := ag.Kill(); err != nil {
			in.r.expectDown(target, false)
			in.r.violate("fault %s %s: %v", kind, target, err)
			return
		}
		time.Sleep(d)
		in.startAgent(target)
	case faultAgentPause:
		ag := in.r.agent(target)
		pid, ok := ag.Pid()
		if !ok {
			in.r.violate("fault %s %s: not running", kind, target)
			return
		}
		proc.SignalTree(pid, syscall.SIGSTOP)
		time.Sleep(d)
		proc.SignalTree(pid, syscall.SIGCONT)
	case faultComponentKill:
		if _, err := testbed.SignalShared(target, syscall.SIGKILL); err != nil {
			in.r.logf("fault %s %s: %v", kind, target, err)
		}
		time.Sleep(d)
		in.restore(target)
	case faultComponentPause, faultNodesNotReady:
		pid, err := testbed.SignalShared(target, syscall.SIGSTOP)
		if err != nil {
			in.r.logf("fault %s %s: %v", kind, target, err)
			return
		}
		time.Sleep(d)
		proc.SignalTree(pid, syscall.SIGCONT)
	case faultNodeRemoved:
		node := target[len("node/"):]
		cs := in.r.members[in.r.nodeCluster[node]]
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := cs.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{})
		cancel()
		if err != nil {
			in.r.logf("fault %s %s: %v", kind, target, err)
		}
		time.Sleep(d)
		in.restore(testbed.RestartNodes)
	}
}

// startAgent starts a killed agent again, retrying while the testbed it
// needs is down.
func (in *injector) startAgent(target string) {
	ag := in.r.agent(target)
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		err := testbed.StartAgents(ctx, []*testbed.AgentProcess{ag}, nil)
		cancel()
		if err == nil {
			break
		}
		if attempt == 3 {
			in.r.violate("restart agent %s: %v\n%s", target, err, proc.Tail(ag.LogFile, 20))
			break
		}
		in.r.logf("restart agent %s (attempt %d): %v", target, attempt, err)
		_ = ag.Kill()
	}
	in.r.expectDown(target, false)
}

// restoreWithin bounds how long restore retries: longer than any fault
// keeps a component down, since a restart may need one that an
// overlapping fault holds down (KWOK's nodes are created through their
// member's API server; seed 28001 gave up on three refused connections
// within 11 s while that API server was killed for 17 s).
const restoreWithin = 3 * time.Minute

// restore starts a component of the testbed again (testbed.Restart),
// retrying while what it needs is down.
func (in *injector) restore(name string) {
	deadline := time.Now().Add(restoreWithin)
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		err := testbed.RestartShared(ctx, name)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			in.r.violate("restart %s: %d attempts in %s: %v", name, attempt, restoreWithin, err)
			return
		}
		in.r.logf("restart %s (attempt %d): %v", name, attempt, err)
		time.Sleep(5 * time.Second)
	}
}

// report returns the faults injected by kind.
func (in *injector) report() map[string]int {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := map[string]int{}
	for k, v := range in.counts {
		out[k] = v
	}
	return out
}

func sortBy[T any](s []T, key func(T) string) {
	slices.SortFunc(s, func(a, b T) int {
		ka, kb := key(a), key(b)
		switch {
		case ka < kb:
			return -1
		case ka > kb:
			return 1
		}
		return 0
	})
}
