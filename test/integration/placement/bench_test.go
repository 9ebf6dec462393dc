package placement_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlsysops-go/mlsysops/agents/continuum"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
)

func smallApp(name string) *mlsysopsv1.MLSysOpsApp {
	cpu := resource.MustParse("10m")
	return &mlsysopsv1.MLSysOpsApp{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: mlsysopsv1.Namespace, Labels: map[string]string{"bench": "true"}},
		Spec: mlsysopsv1.MLSysOpsAppSpec{Name: name, Components: []mlsysopsv1.Component{{
			Metadata: mlsysopsv1.ComponentMetadata{Name: "svc"},
			Containers: []mlsysopsv1.Container{{Image: "registry.example/svc:1", PlatformRequirements: &mlsysopsv1.PlatformRequirements{
				CPU: &mlsysopsv1.CPURequirements{Requests: &cpu},
			}}},
		}}},
	}
}

// runningTimes submits apps at once and returns, per app, the time from its
// submission until the Karmada object reports Running.
func runningTimes(b *testing.B, a *agents, n int, prefix string) ([]time.Duration, time.Duration) {
	ctx := context.Background()
	var list mlsysopsv1.MLSysOpsAppList
	w, err := a.watch(ctx, &list)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%04d", prefix, i)
	}
	burst := testbed.StartBurst(names, 16, func(name string) error { return a.karmada.Create(ctx, smallApp(name)) },
		func(_ string, err error) { b.Error(err) })
	defer burst.Wait()
	var lat []time.Duration
	done := map[string]bool{}
	deadline := time.After(15 * time.Minute)
	for len(done) < n {
		select {
		case ev := <-w.ResultChan():
			app, ok := ev.Object.(*mlsysopsv1.MLSysOpsApp)
			if !ok || ev.Type == watch.Deleted || app.Status.Phase != mlsysopsv1.AppRunning || done[app.Name] {
				continue
			}
			since, ok := burst.Since(app.Name)
			if !ok {
				continue
			}
			done[app.Name] = true
			lat = append(lat, since)
		case <-deadline:
			b.Fatalf("%d of %d apps Running after 15 minutes", len(done), n)
		}
	}
	return lat, time.Since(burst.Start)
}

func (a *agents) watch(ctx context.Context, list *mlsysopsv1.MLSysOpsAppList) (watch.Interface, error) {
	wc, ok := a.karmada.(client.WithWatch)
	if !ok {
		return nil, fmt.Errorf("client cannot watch")
	}
	return wc.Watch(ctx, list, client.InNamespace(mlsysopsv1.Namespace))
}

func percentile(d []time.Duration, p float64) time.Duration {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[int(float64(len(d)-1)*p)]
}

// cleanupBench deletes the benchmark's applications one by one (a
// collection delete of hundreds times out on a loaded machine) and waits
// until they are gone, so that no later test finds them.
func cleanupBench(b *testing.B, a *agents) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for ctx.Err() == nil {
		var list mlsysopsv1.MLSysOpsAppList
		if err := a.karmada.List(ctx, &list, client.InNamespace(mlsysopsv1.Namespace), client.MatchingLabels{"bench": "true"}); err != nil {
			b.Logf("list benchmark apps: %v", err)
			time.Sleep(time.Second)
			continue
		}
		if len(list.Items) == 0 {
			return
		}
		for i := range list.Items {
			if list.Items[i].DeletionTimestamp == nil {
				_ = a.karmada.Delete(ctx, &list.Items[i])
			}
		}
		time.Sleep(time.Second)
	}
	b.Errorf("benchmark applications not all deleted: %v", ctx.Err())
}

// startProcessAgents runs the agent processes on the shared testbed.
func startProcessAgents(tb testing.TB) *agents {
	tb.Helper()
	env := testbed.Shared(tb)
	procs := testbed.StartTestAgents(tb, env, testbed.TestAgentsOptions{Nodes: true})
	scheme, err := continuum.Scheme()
	if err != nil {
		tb.Fatal(err)
	}
	kc, err := client.NewWithWatch(env.RESTConfig(tb, testbed.ContextKarmada), client.Options{Scheme: scheme})
	if err != nil {
		tb.Fatal(err)
	}
	return &agents{env: env, karmada: kc, Stop: func() {}, processes: procs}
}

// BenchmarkSubmissionToRunning measures, on the testbed, the time from
// creating an application in the Karmada API to its Running status (cluster
// placement, propagation, node placement, pods Running on KWOK nodes,
// status back), for 20 apps submitted one at a time, and the throughput
// when 500 are submitted at once.
//
// The agents are the real processes (continuum, cluster and node agents),
// as `make up` runs them.
func BenchmarkSubmissionToRunning(b *testing.B) {
	a := startProcessAgents(b)
	b.Run("sequential", func(b *testing.B) {
		defer cleanupBench(b, a)
		// A fixed number of applications one after the other, whatever
		// b.N (the first round of one takes seconds, so b.N stays 1): a
		// percentile needs samples. With 20, the 90th percentile is the
		// second slowest; no 99th is claimed.
		if b.N > 1 {
			b.Skip("runs once (-benchtime 1x)")
		}
		n := 20
		if v, err := strconv.Atoi(os.Getenv("MLSYSOPS_SEQUENTIAL")); err == nil && v > 0 {
			n = v
		}
		var all []time.Duration
		for i := 0; i < n; i++ {
			lat, _ := runningTimes(b, a, 1, "seq-"+rand.String(4))
			all = append(all, lat...)
		}
		b.ReportMetric(float64(len(all)), "apps")
		b.ReportMetric(percentile(all, 0.5).Seconds(), "p50-s")
		b.ReportMetric(percentile(all, 0.9).Seconds(), "p90-s")
		b.ReportMetric(percentile(all, 1).Seconds(), "max-s")
	})
	b.Run("burst-500", func(b *testing.B) {
		defer cleanupBench(b, a)
		// One burst of 500 whatever b.N is: the figure is the burst's.
		if b.N > 1 {
			b.Skip("runs once (-benchtime 1x)")
		}
		n := 500
		if v, err := strconv.Atoi(os.Getenv("MLSYSOPS_BURST")); err == nil && v > 0 {
			n = v // a smaller burst while profiling
		}
		lat, total := runningTimes(b, a, n, "burst-"+rand.String(4))
		b.ReportMetric(float64(len(lat)), "apps")
		b.ReportMetric(float64(len(lat))/total.Seconds(), "apps/s")
		b.ReportMetric(percentile(lat, 0.5).Seconds(), "p50-s")
		b.ReportMetric(percentile(lat, 0.99).Seconds(), "p99-s")
	})
}
