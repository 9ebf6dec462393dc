package messaging_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/messaging"
	"github.com/mlsysops-go/mlsysops/internal/messaging/provision"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
	"github.com/mlsysops-go/mlsysops/internal/testbed/services"
)

// Benchmarks between agents through a private ejabberd on this machine
// (client and server share its cores). Run with e.g.
//
//	go test -run '^$' -bench . -benchtime 20000x ./test/integration/messaging/

func benchLogger(b *testing.B) messaging.Config {
	return messaging.Config{Logger: testLogger(b)}
}

// BenchmarkPair measures one cluster agent and one node agent.
func BenchmarkPair(b *testing.B) {
	e := startEjabberd(b)
	p := provisioner(b, e)
	parentJID, parentPW := account(b, p, "cluster-1")
	childJID, childPW := account(b, p, "node-1")
	link(b, p, parentJID, childJID)
	parent := startAgent(b, e, messaging.Config{JID: parentJID, Password: parentPW, Layer: messaging.LayerCluster,
		Children: []string{childJID}, Logger: benchLogger(b).Logger})
	child := startAgent(b, e, messaging.Config{JID: childJID, Password: childPW, Layer: messaging.LayerNode,
		Parent: parentJID, HeartbeatInterval: -1, Logger: benchLogger(b).Logger})
	var handled atomic.Int64
	messaging.HandleFunc(child.Client, func(ctx context.Context, env *messaging.Envelope, m *messaging.ComponentPlaced) (messaging.Message, error) {
		handled.Add(1)
		return nil, nil
	})
	messaging.HandleFunc(child.Client, func(ctx context.Context, env *messaging.Envelope, m *messaging.TelemetryIntervalUpdate) (messaging.Message, error) {
		handled.Add(1)
		return nil, nil
	})
	messaging.HandleFunc(child.Client, func(ctx context.Context, env *messaging.Envelope, m *messaging.Ping) (messaging.Message, error) {
		return &messaging.Pong{Note: m.Note}, nil
	})
	ctx := context.Background()
	msg := &messaging.ComponentPlaced{Name: "app-1", ComponentName: "infer", Node: "node-1",
		PodSpec: []byte(`{"containers":[{"name":"infer","image":"registry.local/infer:1.0","resources":{"limits":{"nvidia.com/gpu":1}}}]}`)}

	b.Run("reliable-oneway", func(b *testing.B) {
		// The counters live as long as the agents, across every round
		// of this benchmark (b.N grows from 1): per message is this
		// round's increase over this round's b.N.
		acks := child.metric(b, "mlsysops_messaging_sent_total", map[string]string{"type": "ack"})
		resends := parent.metric(b, "mlsysops_messaging_retried_total", nil)
		ds := make([]*messaging.Delivery, b.N)
		b.ResetTimer()
		start := time.Now()
		for i := 0; i < b.N; i++ {
			d, err := parent.SendAsync(ctx, childJID, msg)
			if err != nil {
				b.Fatal(err)
			}
			ds[i] = d
		}
		for _, d := range ds {
			if err := d.Wait(ctx); err != nil {
				b.Fatal(err)
			}
		}
		el := time.Since(start)
		b.ReportMetric(float64(b.N)/el.Seconds(), "msgs/s")
		b.ReportMetric((child.metric(b, "mlsysops_messaging_sent_total", map[string]string{"type": "ack"})-acks)/float64(b.N), "acks/msg")
		b.ReportMetric((parent.metric(b, "mlsysops_messaging_retried_total", nil)-resends)/float64(b.N), "resends/msg")
	})

	b.Run("besteffort-oneway", func(b *testing.B) {
		// Best-effort types are parent-to-child too: telemetry interval
		// updates are reliable, so use node-to-cluster telemetry here and
		// count at the parent.
		var got atomic.Int64
		messaging.HandleFunc(parent.Client, func(ctx context.Context, env *messaging.Envelope, m *messaging.TelemetryReport) (messaging.Message, error) {
			got.Add(1)
			return nil, nil
		})
		report := &messaging.TelemetryReport{Node: "node-1", Time: time.Now(), Metrics: map[string]float64{"cpu": 0.5, "gpu_util": 0.7, "mem": 1 << 30}}
		b.ResetTimer()
		start := time.Now()
		for i := 0; i < b.N; i++ {
			if _, err := child.SendAsync(ctx, parentJID, report); err != nil {
				b.Fatal(err)
			}
		}
		deadline := time.Now().Add(time.Minute)
		for got.Load() < int64(b.N) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		el := time.Since(start)
		b.ReportMetric(float64(got.Load())/el.Seconds(), "msgs/s")
		b.ReportMetric(100*float64(int64(b.N)-got.Load())/float64(b.N), "lost-%")
	})

	b.Run("request-roundtrip", func(b *testing.B) {
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			if _, _, err := parent.Request(ctx, childJID, &messaging.Ping{Note: "x"}); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		b.StopTimer()
		reportPercentiles(b, lat)
	})

	b.Run("send-ack-roundtrip", func(b *testing.B) {
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			t0 := time.Now()
			if err := parent.Send(ctx, childJID, msg); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		b.StopTimer()
		reportPercentiles(b, lat)
	})
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) float64 {
		return float64(lat[int(p*float64(len(lat)-1))].Microseconds())
	}
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
}

// BenchmarkFanIn has 1,000 node agents, each with its own account and
// connection, report to one cluster agent.
func BenchmarkFanIn(b *testing.B) {
	const nodes = 1000
	e := startEjabberd(b)
	// Each connection takes a descriptor; the server needs ~150 more for
	// its own files and ports. The testbed raises its limit
	// (services.EjabberdOpenFiles); a server that cannot take them all
	// would make this benchmark measure fewer agents than its name says.
	if lim := serverFileLimit(e); lim < nodes+150 {
		b.Fatalf("ejabberd may open %d files, fewer than the %d that %d agents need", lim, nodes+150, nodes)
	}
	p := provisioner(b, e)
	parentJID, parentPW := account(b, p, "cluster-1")

	type acct struct{ jid, pw string }
	accts := make([]acct, nodes)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	began := time.Now()
	for i := range accts {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			j, pw := account(b, p, fmt.Sprintf("node-%04d", i))
			accts[i] = acct{j, pw}
		}(i)
	}
	wg.Wait()
	b.Logf("provisioned %d accounts in %v", nodes, time.Since(began).Round(time.Millisecond))
	children := make([]string, nodes)
	for i, a := range accts {
		children[i] = a.jid
	}
	var received atomic.Int64
	parent := startAgent(b, e, messaging.Config{JID: parentJID, Password: parentPW, Layer: messaging.LayerCluster,
		Children: children, QueueSize: 20000, Logger: benchLogger(b).Logger})
	messaging.HandleFunc(parent.Client, func(ctx context.Context, env *messaging.Envelope, m *messaging.ApplicationStatusReport) (messaging.Message, error) {
		received.Add(1)
		return nil, nil
	})

	beamBefore := beamRSS(e)
	heapBefore, goBefore := heapInUse(), runtime.NumGoroutine()
	agents := make([]*agent, nodes)
	errs := make([]error, nodes)
	began = time.Now()
	for i := range accts {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			agents[i], errs[i] = startAgentErr(b, e, messaging.Config{JID: accts[i].jid, Password: accts[i].pw, Layer: messaging.LayerNode,
				Parent: parentJID, HeartbeatInterval: -1, Logger: benchLogger(b).Logger,
				// A loaded machine makes some logins time out; retry soon.
				ConnectTimeout: 30 * time.Second, MaxBackoff: 2 * time.Second})
		}(i)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.Fatalf("connect the node agents: %v", err)
	}
	connectTime := time.Since(began)

	heapPerConn := float64(heapInUse()-heapBefore) / float64(nodes)
	goPerConn := float64(runtime.NumGoroutine()-goBefore) / float64(nodes)
	beamPerConn := float64(beamRSS(e)-beamBefore) / float64(nodes)
	b.Logf("connected %d agents in %v; per connection: client heap %.0f B, %.1f goroutines; ejabberd RSS %.0f B",
		nodes, connectTime.Round(time.Millisecond), heapPerConn, goPerConn, beamPerConn)

	report := func(k int) *messaging.ApplicationStatusReport {
		return &messaging.ApplicationStatusReport{Application: "app-" + strconv.Itoa(k), Cluster: "cluster-1", Phase: "Running", Time: time.Now()}
	}
	resends := func() float64 {
		var n float64
		for _, a := range agents {
			n += a.metric(b, "mlsysops_messaging_retried_total", nil)
		}
		return n
	}
	// run spreads b.N reports over the agents; send delivers one agent's
	// share.
	run := func(b *testing.B, send func(a *agent, first, count int) error) {
		received.Store(0)
		resent := resends()
		per := (b.N + nodes - 1) / nodes
		b.ResetTimer()
		start := time.Now()
		var swg sync.WaitGroup
		errs := make([]error, nodes)
		for a := 0; a < nodes; a++ {
			first := a * per
			count := min(per, b.N-first)
			if count <= 0 {
				break
			}
			swg.Add(1)
			go func(a int) {
				defer swg.Done()
				errs[a] = send(agents[a], first, count)
			}(a)
		}
		swg.Wait()
		el := time.Since(start)
		if err := errors.Join(errs...); err != nil {
			b.Fatal(err)
		}
		if got := received.Load(); got != int64(b.N) {
			b.Fatalf("parent handled %d of %d reports", got, b.N)
		}
		b.ReportMetric(float64(b.N)/el.Seconds(), "msgs/s")
		b.ReportMetric((resends()-resent)/float64(b.N), "resends/msg")
		b.ReportMetric(float64(nodes), "agents")
		b.ReportMetric(heapPerConn, "client-heap-B/conn")
		b.ReportMetric(beamPerConn, "ejabberd-RSS-B/conn")
		b.ReportMetric(connectTime.Seconds(), "connect-all-s")
	}
	ctx := context.Background()

	// Every agent sends its next report when the previous one was
	// acknowledged, as agents reporting state do.
	b.Run("reliable-reports", func(b *testing.B) {
		run(b, func(a *agent, first, count int) error {
			for k := 0; k < count; k++ {
				if err := a.Send(ctx, parentJID, report(first+k)); err != nil {
					return err
				}
			}
			return nil
		})
	})

	// Every agent queues all its reports at once: the server's queues fill
	// and latency grows with the backlog.
	b.Run("reliable-reports-burst", func(b *testing.B) {
		run(b, func(a *agent, first, count int) error {
			ds := make([]*messaging.Delivery, 0, count)
			for k := 0; k < count; k++ {
				d, err := a.SendAsync(ctx, parentJID, report(first+k))
				if err != nil {
					return err
				}
				ds = append(ds, d)
			}
			for _, d := range ds {
				if err := d.Wait(ctx); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

// serverFileLimit returns the soft open-files limit of the test's ejabberd
// (its Erlang VM), 0 when it cannot be read.
func serverFileLimit(e *services.Ejabberd) int {
	dir := filepath.Dir(filepath.Dir(e.LogFile()))
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		cmd, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(cmd), "beam.smp") || !strings.Contains(string(cmd), dir) {
			continue
		}
		limits, err := os.ReadFile(filepath.Join(filepath.Dir(p), "limits"))
		if err != nil {
			return 0
		}
		for _, line := range strings.Split(string(limits), "\n") {
			if strings.HasPrefix(line, "Max open files") {
				if f := strings.Fields(line); len(f) > 3 {
					n, _ := strconv.Atoi(f[3])
					return n
				}
			}
		}
	}
	return 0
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}

// beamRSS returns the resident memory of the test's ejabberd (the beam.smp
// processes whose command line names its folder), or 0.
func beamRSS(e *services.Ejabberd) int64 {
	dir := filepath.Dir(filepath.Dir(e.LogFile()))
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var total int64
	for _, p := range procs {
		cmd, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(cmd), "beam.smp") || !strings.Contains(string(cmd), dir) {
			continue
		}
		status, err := os.ReadFile(filepath.Join(filepath.Dir(p), "status"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(status), "\n") {
			if strings.HasPrefix(line, "VmRSS:") {
				f := strings.Fields(line)
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				total += kb * 1024
			}
		}
	}
	return total
}

// BenchmarkCrashLoss measures what a SIGKILL of ejabberd loses of what it
// had just acknowledged: each iteration provisions 50 accounts with their
// roster links one after the other through the admin API (as a one-shot
// installer would), kills ejabberd at once and starts it again, then
// counts the accounts that no longer accept their password and the roster
// items gone. Mnesia is ejabberd's default storage; postgres is its SQL
// storage, as the testbed runs it.
//
//	go test -run '^$' -bench CrashLoss -benchtime 5x ./test/integration/messaging/
func BenchmarkCrashLoss(b *testing.B) {
	for _, storage := range []string{"mnesia", "postgres"} {
		b.Run(storage, func(b *testing.B) {
			var lostAccounts, lostItems float64
			for i := 0; i < b.N; i++ {
				a, items := crashLoss(b, storage == "postgres")
				lostAccounts += float64(a)
				lostItems += float64(items)
			}
			b.ReportMetric(lostAccounts/float64(b.N), "lost-accounts/50")
			b.ReportMetric(lostItems/float64(b.N), "lost-roster-items/98")
		})
	}
}

// crashLoss runs one provision-kill-restart cycle; its time is the
// benchmark's ns/op.
func crashLoss(b *testing.B, sql bool) (lostAccounts, lostItems int) {
	var e *services.Ejabberd
	if sql {
		e = testbed.EjabberdOnPostgres(b)
	} else {
		e = testbed.Ejabberd(b)
	}
	// Down at the end of the iteration, not of the benchmark.
	defer func() { _ = e.Stop(context.Background()) }()
	p := provisioner(b, e)
	ctx := context.Background()
	d := fleet(50)
	pws := map[string]string{}
	for i, j := range d.Accounts {
		pw, err := provision.Agent(ctx, p, j)
		if err != nil {
			b.Fatal(err)
		}
		pws[j] = pw
		if i > 0 {
			if err := p.Link(ctx, d.Accounts[0], j); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := e.Kill(); err != nil {
		b.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		b.Fatal(err)
	}
	items := 0
	for _, j := range d.Accounts {
		if ok, err := p.CheckPassword(ctx, j, pws[j]); err != nil {
			b.Fatal(err)
		} else if !ok {
			lostAccounts++
		}
		r, err := p.Roster(ctx, j)
		if err != nil {
			b.Fatal(err)
		}
		items += len(r)
	}
	return lostAccounts, 2*len(d.Links) - items
}
