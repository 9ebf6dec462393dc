package testbed

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/testbed/gen"
)

// Environment variables of the scale testbed of benchmarks.
const (
	// EnvScaleState overrides its state folder (default
	// <repo>/.testbed-scale).
	EnvScaleState = "MLSYSOPS_SCALE_STATE"
	// EnvScalePortBase overrides its port base (default 19000).
	EnvScalePortBase = "MLSYSOPS_SCALE_PORT_BASE"
)

// DefaultScalePortBase is the scale testbed's port base.
const DefaultScalePortBase = 19000

// ScaleSize is the size of a generated continuum.
type ScaleSize struct {
	// Clusters and Nodes per cluster (its control node included).
	Clusters, Nodes int
}

// ScaleEnv is a running testbed of generated descriptions.
type ScaleEnv struct {
	*Env
	// Descriptions is the folder of the generated descriptions.
	Descriptions string
	// StateDir and PortBase locate the testbed (see Down).
	PortBase int
}

var scaleEnvs struct {
	mu   sync.Mutex
	byID map[ScaleSize]*ScaleEnv
}

// ScaleTestbed starts, or reuses, a testbed of the scale profile on
// generated descriptions of the given size (gen, seed 1), beside the
// shared test testbed, for benchmarks and their smoke tests. A testbed of
// another size in the same state folder is reshaped: clusters no longer
// described stop, nodes no longer described go. It stays up after the
// test; `make bench` takes it down.
func ScaleTestbed(t testing.TB, size ScaleSize) *ScaleEnv {
	t.Helper()
	scaleEnvs.mu.Lock()
	defer scaleEnvs.mu.Unlock()
	if e := scaleEnvs.byID[size]; e != nil {
		return e
	}
	e, err := upScale(size)
	if err != nil {
		if os.Getenv(EnvSkipIntegration) == "1" {
			t.Skipf("integration test skipped (%s=1): %v", EnvSkipIntegration, err)
		}
		t.Fatalf("scale testbed %dx%d: %v", size.Clusters, size.Nodes, err)
	}
	if scaleEnvs.byID == nil {
		scaleEnvs.byID = map[ScaleSize]*ScaleEnv{}
	}
	clear(scaleEnvs.byID) // a testbed of one size at a time
	scaleEnvs.byID[size] = e
	return e
}

func upScale(size ScaleSize) (*ScaleEnv, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	state := os.Getenv(EnvScaleState)
	if state == "" {
		state = filepath.Join(root, ".testbed-scale")
	}
	base := DefaultScalePortBase
	if v := os.Getenv(EnvScalePortBase); v != "" {
		if base, err = strconv.Atoi(v); err != nil {
			return nil, fmt.Errorf("%s=%q: %w", EnvScalePortBase, v, err)
		}
	}
	if err := os.MkdirAll(state, 0o755); err != nil {
		return nil, err
	}
	lock, err := os.OpenFile(state+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return nil, err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)

	descs := filepath.Join(state, "descriptions")
	o := gen.Options{Clusters: size.Clusters, Nodes: size.Nodes, Continuum: "mls-continuum", Seed: 1}
	if !generatedAs(descs, o) {
		if err := os.RemoveAll(descs); err != nil {
			return nil, err
		}
		if err := gen.Write(descs, o); err != nil {
			return nil, err
		}
	}
	var out strings.Builder
	tb, err := New(Options{Descriptions: descs, StateDir: state, PortBase: base, BinDir: filepath.Join(root, "bin"), Out: &out, Profile: ProfileScale})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	env, err := tb.Up(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w\nprogress:\n%s", err, out.String())
	}
	return &ScaleEnv{Env: env, Descriptions: descs, PortBase: base}, nil
}

// generatedAs reports whether dir holds the descriptions gen writes for o.
func generatedAs(dir string, o gen.Options) bool {
	clusters, _ := filepath.Glob(filepath.Join(dir, "clusters", "*.yaml"))
	nodes, _ := filepath.Glob(filepath.Join(dir, "nodes", "*.yaml"))
	if len(clusters) != o.Clusters || len(nodes) != o.Clusters*o.Nodes {
		return false
	}
	for _, c := range gen.ClusterNames(o) {
		if _, err := os.Stat(filepath.Join(dir, "clusters", c+".yaml")); err != nil {
			return false
		}
	}
	return true
}
