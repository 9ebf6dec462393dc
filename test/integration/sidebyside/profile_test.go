package sidebyside_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/mlsysops-go/mlsysops/internal/testbed"
)

// profiler takes Go CPU profiles of the processes a burst keeps busy
// (the agents, Karmada's controller manager and scheduler) while a run
// goes on, into $MLSYSOPS_SIDE_BY_SIDE_PROFILES/<run>-<process>.pprof:
// `go tool pprof -top file` says where their CPU went.
type profiler struct {
	dir     string
	seconds int
	// targets are /debug/pprof/ URLs by process name.
	targets map[string]string
	// apiservers serve /debug/pprof/ behind their authentication.
	apiservers map[string]kubernetes.Interface
}

func newProfiler(tb testing.TB, env *testbed.Env, agents *testbed.TestAgents) *profiler {
	dir := os.Getenv("MLSYSOPS_SIDE_BY_SIDE_PROFILES")
	if dir == "" {
		return nil
	}
	p := &profiler{dir: dir, seconds: 20, targets: map[string]string{
		"karmada-controller-manager": env.KarmadaControllers.PprofURL,
		"karmada-scheduler":          env.KarmadaScheduler.PprofURL,
	}}
	p.apiservers = map[string]kubernetes.Interface{}
	for _, c := range append([]string{testbed.ContextKarmada}, env.Clusters...) {
		cs, err := kubernetes.NewForConfig(env.RESTConfig(tb, c))
		if err != nil {
			tb.Fatal(err)
		}
		p.apiservers[c+"-apiserver"] = cs
	}
	if agents != nil {
		for _, a := range agents.All {
			if u := a.URL(); u != "" {
				p.targets[a.Layer+"-"+a.Name] = strings.TrimSuffix(u, "/") + "/debug/pprof/"
			}
		}
	}
	return p
}

// start takes a profile of every target, beginning now, in the
// background; wait waits for them.
func (p *profiler) start(tb testing.TB, run string) (wait func()) {
	if p == nil {
		return func() {}
	}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	var wg sync.WaitGroup
	for name, cs := range p.apiservers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(p.seconds+30)*time.Second)
			defer cancel()
			raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", fmt.Sprint(p.seconds)).DoRaw(ctx)
			if err != nil {
				tb.Logf("profile of %s: %v", name, err)
				return
			}
			if err := os.WriteFile(filepath.Join(p.dir, run+"-"+name+".pprof"), raw, 0o644); err != nil {
				tb.Logf("profile of %s: %v", name, err)
			}
		}()
	}
	for name, u := range p.targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(p.seconds+30)*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%sprofile?seconds=%d", u, p.seconds), nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				tb.Logf("profile of %s: %v", name, err)
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				tb.Logf("profile of %s: %s", name, resp.Status)
				return
			}
			f, err := os.Create(filepath.Join(p.dir, run+"-"+name+".pprof"))
			if err != nil {
				tb.Logf("profile of %s: %v", name, err)
				return
			}
			defer f.Close()
			if _, err := io.Copy(f, resp.Body); err != nil {
				tb.Logf("profile of %s: %v", name, err)
			}
		}()
	}
	return wg.Wait
}
