package state_test

import (
	"context"
	"testing"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
)

// BenchmarkMasterFailover measures, for a Sentinel group and a Cluster of
// Debian's redis-server, the time from SIGKILL of the master holding the
// submissions to the moment a replica is master of that key and a
// submission is accepted there (written and confirmed by a replica).
func BenchmarkMasterFailover(b *testing.B) {
	for _, mode := range []state.Mode{state.ModeSentinel, state.ModeCluster} {
		b.Run(string(mode), func(b *testing.B) {
			d := testbed.StartRedisDeployment(b, mode)
			rdb, err := state.NewClient(d.Config())
			if err != nil {
				b.Fatal(err)
			}
			defer rdb.Close()
			apps := state.New(rdb, state.Options{Prefix: "bench"}).Applications()
			const key = "{apps}"
			var failover, accepted time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				if err := d.WaitHealthy(ctx); err != nil {
					b.Fatal(err)
				}
				victim, err := d.MasterFor(ctx, key)
				if err != nil {
					b.Fatal(err)
				}
				if err := victim.Kill(); err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				if _, err := d.WaitFailover(ctx, key, victim); err != nil {
					b.Fatal(err)
				}
				failover += time.Since(start)
				for j := 0; ; j++ {
					sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
					_, err := apps.Submit(sctx, state.Submission{ID: "bench-" + time.Now().Format("150405.000000000"), Kind: state.KindDeploy, Spec: appSpec(j)})
					scancel()
					if err == nil {
						break
					}
					if ctx.Err() != nil {
						b.Fatalf("no submission accepted after the failover: %v", err)
					}
					time.Sleep(50 * time.Millisecond)
				}
				accepted += time.Since(start)
				if err := victim.Start(ctx); err != nil {
					b.Fatal(err)
				}
				cancel()
			}
			b.ReportMetric(failover.Seconds()/float64(b.N), "s/failover")
			b.ReportMetric(accepted.Seconds()/float64(b.N), "s/first-accepted")
		})
	}
}
