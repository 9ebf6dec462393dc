package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/benchfig"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
	nbclient "github.com/mlsysops-go/mlsysops/northbound/client"
)

// firstAppResult is what firstApp measured.
type firstAppResult struct {
	// Karmada is from the submission until Karmada's MLSysOpsApp is
	// Running; API until the northbound API says so (its status in
	// Redis, which the continuum agent writes after Karmada's).
	Karmada, API time.Duration
	// Steps are when the application reached each step on its way
	// (testbed.TraceSteps), from the submission.
	Steps testbed.StepTimes
}

// firstApp submits an application description file through the
// northbound API, as `mls apps deploy-app --path file` does, and returns
// the time from submission until Karmada's MLSysOpsApp of that name is
// Running and until the API says so, with the time of each step on the
// way; then it removes the application.
func firstApp(ctx context.Context, env *testbed.Env, file, name string) (firstAppResult, error) {
	var res firstAppResult
	body, err := os.ReadFile(file)
	if err != nil {
		return res, err
	}
	// Its client's errors are returned; it logs nothing worth reading.
	ctrllog.SetLogger(logr.Discard())
	scheme := runtime.NewScheme()
	if err := mlsysopsv1.AddToScheme(scheme); err != nil {
		return res, err
	}
	cfg, err := env.ClientConfig(testbed.ContextKarmada)
	if err != nil {
		return res, err
	}
	kc, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return res, err
	}
	api, err := nbclient.New(nbclient.Config{URL: env.NorthboundURL, Token: env.NorthboundToken})
	if err != nil {
		return res, err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	trace, err := testbed.StartAppTracer(ctx, env, env.Clusters)
	if err != nil {
		return res, err
	}
	trace.Follow(func(app string) bool { return app == name })
	start := time.Now()
	if _, err := api.Applications().Submit(ctx, body, nbclient.YAML); err != nil {
		return res, fmt.Errorf("submit %s: %w", filepath.Base(file), err)
	}
	defer func() { _, _ = api.Applications().Remove(context.Background(), name) }()
	// Both are polled every 20 ms, one after the other.
	for res.Karmada == 0 || res.API == 0 {
		if res.Karmada == 0 {
			app := &mlsysopsv1.MLSysOpsApp{}
			err := kc.Get(ctx, types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: name}, app)
			if err == nil && app.Status.Phase == mlsysopsv1.AppRunning {
				res.Karmada = time.Since(start)
			}
		}
		if res.API == 0 {
			// The list (Redis alone): a Get reads Karmada and the
			// members' events too, too much for every 20 ms.
			list, err := api.Applications().List(ctx, nbclient.ListOptions{Phases: []string{string(mlsysopsv1.AppRunning)}})
			for _, it := range list.Items {
				if err == nil && it.ID == name {
					res.API = time.Since(start)
				}
			}
		}
		select {
		case <-ctx.Done():
			return res, fmt.Errorf("%s not Running in 5 minutes (Karmada after %v, API after %v)", name, res.Karmada, res.API)
		case <-time.After(20 * time.Millisecond):
		}
	}
	// The last watch events may trail the reads.
	time.Sleep(time.Second)
	res.Steps = trace.Times(name, start)
	return res, nil
}

// printFirstApp prints a first application's figures in Go's benchmark
// format (make bench's bench/results.json reads them), and the steps.
func printFirstApp(app string, r firstAppResult) {
	fmt.Printf("BenchmarkFirstApp/app=%s,path=northbound \t1\t%.2f s-to-Running-in-Karmada\t%.2f s-to-Running-in-API\n", app, r.Karmada.Seconds(), r.API.Seconds())
	fmt.Printf("first application %s, steps from its submission:\n%s", app, testbed.FormatSteps(testbed.SummariseSteps([]testbed.StepTimes{r.Steps})))
}

// newFirstAppCommand measures the first application after a cold start,
// several times: each run purges the state folder, starts the testbed
// (make up's), submits examples/apps/gpu-inference.yaml through the API
// at once and stops the testbed again.
func newFirstAppCommand(o *options) *cobra.Command {
	var runs int
	cmd := &cobra.Command{
		Use:   "first-app",
		Short: "Measure the first application after a cold start, --runs times (uses its own state folder; purged first)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			var all []time.Duration
			for i := range runs {
				tb, err := testbed.New(testbed.Options{Descriptions: o.descriptions, StateDir: o.state, PortBase: o.portBase, BinDir: o.binDir})
				if err != nil {
					return err
				}
				if err := tb.Down(ctx, true); err != nil {
					return err
				}
				start := time.Now()
				env, err := tb.Up(ctx)
				if err != nil {
					return err
				}
				cold := time.Since(start)
				first, err := firstApp(ctx, env, filepath.Join(filepath.Dir(o.descriptions), "examples", "apps", "gpu-inference.yaml"), "llm-inference")
				if derr := tb.Down(context.Background(), true); err == nil {
					err = derr
				}
				if err != nil {
					return fmt.Errorf("run %d: %w", i+1, err)
				}
				fmt.Printf("first application, run %d of %d: cold start %.1f s, load %s\n", i+1, runs, cold.Seconds(), loadAverage())
				printFirstApp(fmt.Sprintf("llm-inference,run=%d", i+1), first)
				all = append(all, first.Karmada)
			}
			sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
			fmt.Printf("BenchmarkFirstApp/app=llm-inference,path=northbound,runs=%d \t%d\t%.2f s-to-Running-median\t%.2f s-to-Running-min\t%.2f s-to-Running-max\n",
				runs, runs, all[len(all)/2].Seconds(), all[0].Seconds(), all[len(all)-1].Seconds())
			return nil
		},
	}
	cmd.Flags().IntVar(&runs, "runs", 3, "cold starts to measure")
	return cmd
}

// loadAverage is the machine's load average over 1, 5 and 15 minutes.
func loadAverage() string {
	l := benchfig.ReadLoad()
	return fmt.Sprintf("%.1f %.1f %.1f", l.Load1, l.Load5, l.Load15)
}
