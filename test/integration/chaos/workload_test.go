//go:build chaos

package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/description"
	mlapi "github.com/mlsysops-go/mlsysops/mlconnector/api"
	nbapi "github.com/mlsysops-go/mlsysops/northbound/api"
	nbclient "github.com/mlsysops-go/mlsysops/northbound/client"
)

// kind is a shape of application the workload submits.
type kind string

const (
	// kindAny is one small CPU-only component that any cluster can host.
	kindAny kind = "any"
	// kindEdge is the arm64 edge camera pipeline (edge-1 only).
	kindEdge kind = "edge"
	// kindBig asks for more CPU than any node has: it must end
	// Unschedulable, with a reason.
	kindBig kind = "big"
)

var kinds = []kind{kindAny, kindAny, kindEdge, kindBig}

// markEnv is the environment variable each update of an application
// changes in every container: the Deployments must end with the last
// accepted value.
const markEnv = "CHAOS_MARK"

// app is what the workload expects of one application: present with the
// last accepted description, or removed.
type app struct {
	name    string
	kind    kind
	via     string // "api" or "kubectl": how it was submitted
	mark    string // the last accepted CHAOS_MARK
	removed bool
	spec    *mlsysopsv1.MLSysOpsApp
}

// mlDeployment is what the workload expects of one ML deployment.
type mlDeployment struct {
	id      string
	removed bool
}

// workload runs the operations: submissions, updates and removals of
// applications through the northbound API and kubectl, and ML
// deployments through the ML connector. Every operation is retried with
// the same request until it has a definite answer (2xx or 4xx), so what
// the workload expects is exactly what was accepted.
type workload struct {
	r   *run
	rng *rand.Rand
	// maxLive bounds the applications present at once.
	maxLive int

	mu      sync.Mutex
	apps    map[string]*app
	ml      map[string]*mlDeployment
	ops     map[string]int
	rejects map[string]int
	n       int
	modelID string
	tmp     string
	// kubectlBin is make deps' kubectl (bin/kubectl), else one on PATH.
	kubectlBin string
}

func newWorkload(r *run, seed uint64) *workload {
	kubectl := filepath.Join(r.root, "bin", "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		if kubectl, err = exec.LookPath("kubectl"); err != nil {
			r.t.Fatalf("no kubectl in %s (run make deps) nor on PATH", filepath.Join(r.root, "bin"))
		}
	}
	return &workload{r: r, rng: rand.New(rand.NewPCG(seed, 0x776f726b)), maxLive: 6, kubectlBin: kubectl,
		apps: map[string]*app{}, ml: map[string]*mlDeployment{}, ops: map[string]int{}, rejects: map[string]int{}, tmp: r.t.TempDir()}
}

// loop runs operations until ctx ends, one every 1 to 4 s.
func (w *workload) loop(ctx context.Context) {
	for ctx.Err() == nil {
		w.step(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(1000+w.rng.IntN(3000)) * time.Millisecond):
		}
	}
}

func (w *workload) live() (apps []*app, mls []*mlDeployment) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, a := range w.apps {
		if !a.removed {
			apps = append(apps, a)
		}
	}
	for _, d := range w.ml {
		if !d.removed {
			mls = append(mls, d)
		}
	}
	// Map order is random: sort for a replay with the same seed.
	sortBy(apps, func(a *app) string { return a.name })
	sortBy(mls, func(d *mlDeployment) string { return d.id })
	return apps, mls
}

func (w *workload) count(op string) {
	w.mu.Lock()
	w.ops[op]++
	w.mu.Unlock()
}

func (w *workload) reject(op string, err error) {
	w.mu.Lock()
	w.rejects[fmt.Sprintf("%s %d", op, nbclient.StatusCode(err))]++
	w.mu.Unlock()
	w.r.logf("workload: %s rejected: %v", op, err)
}

// step does one operation chosen by the workload's random source.
func (w *workload) step(ctx context.Context) {
	apps, mls := w.live()
	p := w.rng.IntN(100)
	switch {
	case p < 35 && len(apps) < w.maxLive:
		w.submit(ctx)
	case p < 60 && len(apps) > 0:
		w.update(ctx, apps[w.rng.IntN(len(apps))])
	case p < 80 && len(apps) > 0:
		w.remove(ctx, apps[w.rng.IntN(len(apps))])
	case p < 90 && len(mls) == 0 && w.modelID != "":
		w.deployML(ctx)
	case p < 100 && len(mls) > 0:
		w.removeML(ctx, mls[w.rng.IntN(len(mls))])
	}
}

// newApp builds an application of a kind with a fresh name.
func (w *workload) newApp(k kind) (*mlsysopsv1.MLSysOpsApp, error) {
	w.mu.Lock()
	w.n++
	name := fmt.Sprintf("%s-%s-%d", w.r.prefix, k, w.n)
	w.mu.Unlock()
	file := "gpu-inference.yaml"
	if k == kindEdge {
		file = "edge-camera-arm64.yaml"
	}
	data, err := os.ReadFile(filepath.Join(w.r.root, "examples", "apps", file))
	if err != nil {
		return nil, err
	}
	a, errs := description.ParseApp(data, description.FormatYAML)
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	a.Name, a.Spec.Name, a.Namespace = name, name, mlsysopsv1.Namespace
	if k == kindAny || k == kindBig {
		// The gateway alone, anywhere.
		a.Spec.ClusterPlacement = nil
		a.Spec.Components = a.Spec.Components[1:]
		a.Spec.Components[0].DependsOn = nil
		a.Spec.ComponentInteractions = nil
		a.Spec.GlobalSatisfaction = nil
	}
	if k == kindBig {
		q := resource.MustParse("4096")
		cpu := a.Spec.Components[0].Containers[0].PlatformRequirements.CPU
		cpu.Requests, cpu.Limits = &q, &q
	}
	return a, nil
}

// setMark sets CHAOS_MARK in every container.
func setMark(a *mlsysopsv1.MLSysOpsApp, mark string) {
	for i := range a.Spec.Components {
		for j := range a.Spec.Components[i].Containers {
			c := &a.Spec.Components[i].Containers[j]
			set := false
			for k := range c.Env {
				if c.Env[k].Name == markEnv {
					c.Env[k].Value, set = mark, true
				}
			}
			if !set {
				c.Env = append(c.Env, mlsysopsv1.EnvVar{Name: markEnv, Value: mark})
			}
		}
	}
}

func (w *workload) submit(ctx context.Context) {
	k := kinds[w.rng.IntN(len(kinds))]
	spec, err := w.newApp(k)
	if err != nil {
		w.r.violate("workload: build a %s application: %v", k, err)
		return
	}
	a := &app{name: spec.Name, kind: k, mark: "1", spec: spec}
	setMark(spec, a.mark)
	ok := false
	if w.rng.IntN(2) == 0 {
		a.via = "api"
		ok = w.apiSubmit(ctx, "submit", spec, func(ctx context.Context, body []byte, key string) error {
			_, err := w.r.nb.Applications().Submit(ctx, body, "application/yaml", nbclient.WithIdempotencyKey(key))
			return err
		})
	} else {
		a.via = "kubectl"
		ok = w.kubectl(ctx, "submit", spec, "apply", "-f")
	}
	if ok {
		w.mu.Lock()
		w.apps[a.name] = a
		w.mu.Unlock()
		w.r.logf("workload: submitted %s via %s", a.name, a.via)
	}
}

func (w *workload) update(ctx context.Context, a *app) {
	w.mu.Lock()
	next := *a.spec
	next.Spec = *a.spec.Spec.DeepCopy()
	mark := fmt.Sprintf("%d", w.n+1000*w.rng.IntN(1000))
	w.n++
	w.mu.Unlock()
	setMark(&next, mark)
	var ok bool
	if a.via == "api" {
		ok = w.apiSubmit(ctx, "update", &next, func(ctx context.Context, body []byte, key string) error {
			_, err := w.r.nb.Applications().Update(ctx, a.name, body, "application/yaml", nbclient.WithIdempotencyKey(key))
			return err
		})
	} else {
		ok = w.kubectl(ctx, "update", &next, "apply", "-f")
	}
	if ok {
		w.mu.Lock()
		a.mark, a.spec = mark, &next
		w.mu.Unlock()
		w.r.logf("workload: updated %s via %s, mark %s", a.name, a.via, mark)
	}
}

func (w *workload) remove(ctx context.Context, a *app) {
	var ok bool
	how := "kubectl"
	if w.rng.IntN(2) == 0 {
		how = "api"
		sent := false
		ok = w.retry(ctx, "remove via api", func(ctx context.Context) error {
			_, err := w.r.nb.Applications().Remove(ctx, a.name, nbclient.WithIdempotencyKey("rm-"+a.name))
			first := !sent
			// A request refused at the dial never reached the API; any
			// other may have been handled.
			var op *net.OpError
			sent = sent || !(errors.As(err, &op) && op.Op == "dial")
			if nbclient.IsNotFound(err) {
				if first {
					// The application was accepted and not removed: the
					// API must know it (applied with kubectl, it may not
					// be mirrored into Redis yet; the API looks in
					// Karmada then).
					w.r.violate("workload: remove via api: %s, accepted earlier, not found: %v", a.name, err)
					return err
				}
				// A retry after a removal that was accepted and done.
				return nil
			}
			return err
		})
	} else {
		// Without --ignore-not-found: an application submitted through
		// the API may not be in Karmada yet (the continuum writes it
		// there), and kubectl deleting nothing is no removal. A retry's
		// NotFound, after an attempt whose answer was lost, is one.
		ok = w.kubectl(ctx, "remove", a.spec, "delete", "--wait=false", "-f")
	}
	if ok {
		w.mu.Lock()
		a.removed = true
		w.mu.Unlock()
		w.r.logf("workload: removed %s via %s", a.name, how)
	}
}

// apiSubmit sends a description through the northbound API with one
// idempotency key for every retry.
func (w *workload) apiSubmit(ctx context.Context, op string, a *mlsysopsv1.MLSysOpsApp, send func(ctx context.Context, body []byte, key string) error) bool {
	body, err := yaml.Marshal(a)
	if err != nil {
		w.r.violate("workload: marshal %s: %v", a.Name, err)
		return false
	}
	key := fmt.Sprintf("%s-%s-%d", op, a.Name, time.Now().UnixNano())
	return w.retry(ctx, op+" via api", func(ctx context.Context) error { return send(ctx, body, key) })
}

// kubectl runs kubectl against Karmada with a's manifest.
func (w *workload) kubectl(ctx context.Context, op string, a *mlsysopsv1.MLSysOpsApp, args ...string) bool {
	a = a.DeepCopy()
	a.APIVersion, a.Kind = mlsysopsv1.SchemeGroupVersion.String(), "MLSysOpsApp"
	a.ResourceVersion = ""
	body, err := yaml.Marshal(a)
	if err != nil {
		w.r.violate("workload: marshal %s: %v", a.Name, err)
		return false
	}
	file := filepath.Join(w.tmp, a.Name+".yaml")
	if err := os.WriteFile(file, body, 0o644); err != nil {
		w.r.violate("workload: %v", err)
		return false
	}
	full := append([]string{"--kubeconfig", w.r.env.Kubeconfig, "--context", "karmada-apiserver", "--request-timeout", "20s"}, append(args, file)...)
	attempts := 0
	return w.retry(ctx, op+" via kubectl", func(ctx context.Context) error {
		attempts++
		out, err := exec.CommandContext(ctx, w.kubectlBin, full...).CombinedOutput()
		if err != nil {
			msg := strings.TrimSpace(string(out))
			// kubectl's answers that are definite: the request was
			// refused as invalid.
			if strings.Contains(msg, "is invalid") || strings.Contains(msg, "denied the request") {
				return &nbclient.Error{StatusCode: 422, Problem: nbapi.Problem{Detail: msg}}
			}
			if args[0] == "delete" && strings.Contains(msg, "NotFound") {
				if attempts == 1 {
					// Not in Karmada (yet): nothing was removed.
					return &nbclient.Error{StatusCode: 404, Problem: nbapi.Problem{Detail: msg}}
				}
				return nil
			}
			return fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, msg)
		}
		return nil
	})
}

func (w *workload) deployML(ctx context.Context) {
	w.mu.Lock()
	w.n++
	id := fmt.Sprintf("%s-ml-%d", w.r.prefix, w.n)
	w.mu.Unlock()
	ok := w.retry(ctx, "ml deploy", func(ctx context.Context) error {
		_, err := w.r.ml.CreateDeployment(ctx, mlapi.DeploymentSpec{DeploymentID: id, ModelID: w.modelID, OwnerID: "chaos",
			Placement: mlapi.Placement{ClusterID: "cloud-1"}, Resources: mlapi.Resources{CPU: "100m"}})
		if nbclient.IsConflict(err) {
			// A retry after a creation that was accepted.
			return nil
		}
		return err
	})
	if ok {
		w.mu.Lock()
		w.ml[id] = &mlDeployment{id: id}
		w.mu.Unlock()
		w.r.logf("workload: ML deployment %s created", id)
	}
}

func (w *workload) removeML(ctx context.Context, d *mlDeployment) {
	if w.retry(ctx, "ml remove", func(ctx context.Context) error {
		err := w.r.ml.DeleteDeployment(ctx, d.id)
		if nbclient.IsNotFound(err) {
			return nil
		}
		return err
	}) {
		w.mu.Lock()
		d.removed = true
		w.mu.Unlock()
		w.r.logf("workload: ML deployment %s removed", d.id)
	}
}

// retryFor bounds how long an operation may go without a definite
// answer: longer than any fault lasts and a restore of the testbed.
const retryFor = 6 * time.Minute

// retry runs fn until it succeeds (true), is refused with a 4xx (false,
// counted as a rejection) or ctx ends (false). An API that gives no
// definite answer for retryFor is a violation.
func (w *workload) retry(ctx context.Context, op string, fn func(ctx context.Context) error) bool {
	deadline := time.Now().Add(retryFor)
	var last error
	for attempt := 0; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := fn(cctx)
		cancel()
		if err == nil {
			w.count(op)
			return true
		}
		if c := nbclient.StatusCode(err); c >= 400 && c < 500 && c != 408 && c != 429 {
			w.reject(op, err)
			return false
		}
		if last == nil || attempt%30 == 0 {
			w.r.logf("workload: %s: retrying (attempt %d): %v", op, attempt+1, err)
		}
		last = err
		if time.Now().After(deadline) {
			w.r.violate("workload: %s: no definite answer in %s: %v", op, retryFor, last)
			return false
		}
		select {
		case <-ctx.Done():
			// The run's end (its deadline, or its cancellation) interrupts
			// a retry: what it asked is unknown (an earlier attempt may
			// have been carried out), so it waits for its answer without
			// the run's deadline, still bounded by retryFor. Taking it as
			// not done left an ML deployment removed by the connector
			// counted as present (seed 5).
			ctx = context.Background()
			continue
		case <-time.After(time.Second):
		}
	}
}
