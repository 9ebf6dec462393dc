package failover_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/members"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
	"github.com/mlsysops-go/mlsysops/internal/testbed/proc"
)

// Lease timings of the replicated agents in these tests: a SIGKILLed
// leader's Lease expires after leaseDuration; followers try every
// retryPeriod. The defaults (15 s, 10 s, 2 s) hand over in about 17 s.
var leaseArgs = []string{
	"--leader-elect-lease-duration", "6s", "--leader-elect-renew-deadline", "4s", "--leader-elect-retry-period", "1s",
}

// startReplicated runs the agents with two replicas of the continuum agent
// and of every cluster agent, each pair electing its leader.
func startReplicated(t testing.TB) *world {
	t.Helper()
	return startWith(t, 2, leaseArgs)
}

// election is the part of a replica's /status the tests read.
type election struct {
	Election struct {
		Role     string `json:"role"`
		Identity string `json:"identity"`
		Leader   string `json:"leader"`
	} `json:"election"`
	Connected *bool `json:"connected"`
}

// roles finds the leader among the running replicas: exactly one says it
// leads and is ready, every other running one says it follows that leader
// and is ready too (it could take over).
func roles(ctx context.Context, rs []*testbed.AgentProcess) (leader *testbed.AgentProcess, followers []*testbed.AgentProcess, err error) {
	for _, r := range rs {
		if _, ok := r.Pid(); !ok {
			continue
		}
		var st election
		if err := testbed.GetJSON(ctx, r.URL()+"/status", &st); err != nil {
			return nil, nil, err
		}
		if err := testbed.GetOK(ctx, r.URL()+"/readyz"); err != nil {
			return nil, nil, fmt.Errorf("%s (%s) not ready: %w", r.Identity, st.Election.Role, err)
		}
		switch st.Election.Role {
		case "leader":
			if leader != nil {
				return nil, nil, fmt.Errorf("two leaders: %s and %s", leader.Identity, r.Identity)
			}
			if st.Connected == nil || !*st.Connected {
				return nil, nil, fmt.Errorf("leader %s not connected to XMPP", r.Identity)
			}
			leader = r
		case "follower":
			if st.Connected != nil {
				return nil, nil, fmt.Errorf("follower %s runs an agent (connected %v)", r.Identity, *st.Connected)
			}
			followers = append(followers, r)
		default:
			return nil, nil, fmt.Errorf("%s: role %q", r.Identity, st.Election.Role)
		}
	}
	if leader == nil {
		return nil, nil, errors.New("no leader")
	}
	for _, f := range followers {
		var st election
		if err := testbed.GetJSON(ctx, f.URL()+"/status", &st); err != nil {
			return nil, nil, err
		}
		if st.Election.Leader != leader.Identity {
			return nil, nil, fmt.Errorf("follower %s follows %q, the leader is %s", f.Identity, st.Election.Leader, leader.Identity)
		}
	}
	return leader, followers, nil
}

// waitRoles polls until the replicas agree on one leader.
func waitRoles(t testing.TB, rs []*testbed.AgentProcess, within time.Duration) (*testbed.AgentProcess, []*testbed.AgentProcess) {
	t.Helper()
	var leader *testbed.AgentProcess
	var followers []*testbed.AgentProcess
	poll(t, "one leader, the others following", 100*time.Millisecond, within, func(ctx context.Context) error {
		var err error
		leader, followers, err = roles(ctx, rs)
		return err
	})
	return leader, followers
}

// killAndWait SIGKILLs a replica and waits until it is gone.
func killAndWait(t testing.TB, r *testbed.AgentProcess) {
	t.Helper()
	if err := r.Kill(); err != nil {
		t.Fatal(err)
	}
	poll(t, r.Process.Name+" gone", 20*time.Millisecond, 10*time.Second, func(context.Context) error {
		if _, ok := r.Pid(); ok {
			return errors.New("still running")
		}
		return nil
	})
}

// restart starts a stopped replica again and waits until it is ready.
func restart(t testing.TB, r *testbed.AgentProcess) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := testbed.StartAgents(ctx, []*testbed.AgentProcess{r}, nil); err != nil {
		t.Fatal(err)
	}
}

// handover waits until one of the others leads and is ready and returns
// how long that took from since.
func handover(t testing.TB, rs []*testbed.AgentProcess, old *testbed.AgentProcess, since time.Time) (*testbed.AgentProcess, time.Duration) {
	t.Helper()
	var took time.Duration
	var leader *testbed.AgentProcess
	poll(t, "a follower takes over from "+old.Identity, 50*time.Millisecond, time.Minute, func(ctx context.Context) error {
		l, _, err := roles(ctx, rs)
		if err != nil {
			return err
		}
		if l == old {
			return errors.New("the old leader still leads")
		}
		took, leader = time.Since(since), l
		return nil
	})
	return leader, took
}

// The continuum agent and a cluster agent run as two replicas each: one
// leads (logged in to XMPP, runs the controllers), the other follows
// (ready, says whom it follows, connected to nothing). The leader
// SIGKILLed in the middle of a deployment hands over to the follower
// within the lease duration and its start; the application then runs
// exactly as desired, nothing placed twice, and an application submitted
// after the handover is placed once too. The killed replica comes back as
// a follower; a leader stopped with SIGTERM releases the Lease and hands
// over within a retry period or so.
func TestLeaderKilledMidDeployment(t *testing.T) {
	w := startReplicated(t)
	cases := []struct {
		layer, name string
		example     string
		cluster     string
		midway      func(ctx context.Context, a *mlsysopsv1.MLSysOpsApp) bool
	}{
		{
			layer: testbed.LayerContinuum, name: "mls-continuum", example: "gpu-inference.yaml", cluster: "cloud-1",
			midway: func(ctx context.Context, a *mlsysopsv1.MLSysOpsApp) bool {
				placed, err := w.placed(ctx, a.Name)
				return err == nil && len(placed) > 0
			},
		},
		{
			layer: testbed.LayerCluster, name: "cloud-1", example: "gpu-inference.yaml", cluster: "cloud-1",
			midway: func(ctx context.Context, a *mlsysopsv1.MLSysOpsApp) bool {
				deps, err := w.members["cloud-1"].AppsV1().Deployments(members.Namespace(a.Name)).List(ctx, metav1.ListOptions{})
				return err == nil && len(deps.Items) > 0
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.layer+"-"+tc.name, func(t *testing.T) {
			rs := w.agents.Replicas(tc.layer, tc.name)
			if len(rs) != 2 {
				t.Fatalf("%d replicas, want 2", len(rs))
			}
			const attempts = 3
			var a *mlsysopsv1.MLSysOpsApp
			var old, leader *testbed.AgentProcess
			for attempt := 1; ; attempt++ {
				old, _ = waitRoles(t, rs, time.Minute)
				lease := w.lease(t, tc.layer, tc.name)
				if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != old.Identity {
					t.Fatalf("Lease held by %v, the leader says it is %s", lease.Spec.HolderIdentity, old.Identity)
				}
				a = app(t, tc.example, "lead-"+tc.layer)
				w.create(t, a)
				poll(t, "deployment under way", 20*time.Millisecond, 2*time.Minute, func(ctx context.Context) error {
					if tc.midway(ctx, a) {
						return nil
					}
					return errors.New("not yet")
				})
				killed := time.Now()
				killAndWait(t, old)
				// Checked before the follower can take over (the Lease
				// has not expired yet): what the dead leader had not
				// finished is left to its successor.
				done, why := w.finished(context.Background(), a, tc.cluster)
				var took time.Duration
				leader, took = handover(t, rs, old, killed)
				t.Logf("%s/%s: leader %s SIGKILLed, %s leads and is ready after %s", tc.layer, tc.name, old.Identity, leader.Identity, took.Round(time.Millisecond))
				if !done {
					break
				}
				restart(t, old)
				w.remove(t, a)
				if attempt == attempts {
					t.Fatalf("the kill of %s landed after the deployment had finished (%s) in %d attempts: no kill mid-deployment to test", old.Identity, why, attempts)
				}
				t.Logf("attempt %d: the kill landed after the deployment had finished (%s); again with a new application", attempt, why)
			}

			w.waitPhase(t, a.Name, mlsysopsv1.AppRunning, 3*time.Minute)
			poll(t, "exactly the desired set", time.Second, 2*time.Minute, func(ctx context.Context) error { return w.desired(ctx, a, tc.cluster) })
			after := app(t, tc.example, "after-"+tc.layer)
			w.create(t, after)
			w.waitPhase(t, after.Name, mlsysopsv1.AppRunning, 3*time.Minute)
			poll(t, "the later app exactly as desired", time.Second, 2*time.Minute, func(ctx context.Context) error { return w.desired(ctx, after, tc.cluster) })
			w.remove(t, after)

			// The killed replica comes back and follows.
			restart(t, old)
			if l, _ := waitRoles(t, rs, time.Minute); l != leader {
				t.Fatalf("after the restart %s leads, want %s", l.Identity, leader.Identity)
			}
			// A leader stopped with SIGTERM stops its agent, then releases
			// the Lease: the follower takes it at its next try.
			stopped := time.Now()
			if err := leader.Stop(30 * time.Second); err != nil {
				t.Fatal(err)
			}
			back, took := handover(t, rs, leader, stopped)
			t.Logf("%s/%s: leader %s stopped (SIGTERM), %s leads and is ready after %s", tc.layer, tc.name, leader.Identity, back.Identity, took.Round(time.Millisecond))
			if tail := proc.Tail(leader.LogFile, 30); !containsAll(tail, "lease released") {
				t.Errorf("the stopped leader did not release the Lease; its log ends:\n%s", tail)
			}
			restart(t, leader)
			waitRoles(t, rs, time.Minute)
			if err := w.desired(context.Background(), a, tc.cluster); err != nil {
				t.Fatalf("after both handovers: %v", err)
			}
			w.remove(t, a)
		})
	}
}

// lease reads an elected agent's Lease from the layer's own API.
func (w *world) lease(t testing.TB, layer, name string) *coordinationv1.Lease {
	t.Helper()
	ctxName := testbed.ContextKarmada
	if layer == testbed.LayerCluster {
		ctxName = name
	}
	cs := kubernetes.NewForConfigOrDie(w.env.RESTConfig(t, ctxName))
	l, err := cs.CoordinationV1().Leases(mlsysopsv1.Namespace).Get(context.Background(), "mlsysops-"+layer+"-"+name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// BenchmarkLeaderHandover measures how long the continuum agent is
// without a ready leader when its leader is SIGKILLed (the Lease expires
// first) and when it is stopped with SIGTERM (it releases the Lease), with
// the lease timings of leaseArgs.
func BenchmarkLeaderHandover(b *testing.B) {
	w := startReplicated(b)
	rs := w.agents.Replicas(testbed.LayerContinuum, "mls-continuum")
	var killed, stopped time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		old, _ := waitRoles(b, rs, time.Minute)
		at := time.Now()
		killAndWait(b, old)
		leader, took := handover(b, rs, old, at)
		killed += took
		restart(b, old)
		waitRoles(b, rs, time.Minute)
		at = time.Now()
		if err := leader.Stop(30 * time.Second); err != nil {
			b.Fatal(err)
		}
		_, took = handover(b, rs, leader, at)
		stopped += took
		restart(b, leader)
	}
	b.ReportMetric(killed.Seconds()/float64(b.N), "s/handover-sigkill")
	b.ReportMetric(stopped.Seconds()/float64(b.N), "s/handover-sigterm")
}
