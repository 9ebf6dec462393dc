package continuum_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlsysops-go/mlsysops/agents/continuum"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
)

// startControllers runs the continuum agent's Karmada controllers for the
// test and returns a client on the Karmada API.
func startControllers(t *testing.T) client.Client {
	t.Helper()
	return startControllersWith(t, continuum.ControllersOptions{})
}

// startControllersWith is startControllers with options.
func startControllersWith(t *testing.T, opts continuum.ControllersOptions) client.Client {
	t.Helper()
	env := testbed.Shared(t)
	cfg := env.RESTConfig(t, testbed.ContextKarmada)
	runControllers(t, opts)
	scheme, _ := continuum.Scheme()
	kc, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	// Clusters must expose the app API to Karmada before placement can
	// use them (see TestEnsureAPIPropagatesAndReflectsStatus).
	waitAppAPI(t, env)
	return kc
}

// runControllers starts the continuum agent's Karmada controllers; stop
// (also at the test's end) stops them and waits until they have.
func runControllers(t *testing.T, opts continuum.ControllersOptions) (stop func()) {
	t.Helper()
	cfg := testbed.Shared(t).RESTConfig(t, testbed.ContextKarmada)
	ctx, cancel := context.WithCancel(context.Background())
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	}
	c, err := continuum.NewControllersWith(ctx, cfg, log, opts)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("controllers: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func waitAppAPI(t *testing.T, env *testbed.Env) {
	t.Helper()
	cap, err := continuum.NewProxyCapacity(env.RESTConfig(t, testbed.ContextKarmada))
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		cs, err := cap.Clusters(ctx)
		if err != nil {
			return false, nil
		}
		for _, c := range cs {
			if !c.Ready {
				return false, nil
			}
		}
		return len(cs) > 0, nil
	})
	if err != nil {
		t.Fatalf("clusters never ready with the app API: %v", err)
	}
}

func gpuApp(name, model string, gpus int32) *mlsysopsv1.MLSysOpsApp {
	cpu := resource.MustParse("2")
	return &mlsysopsv1.MLSysOpsApp{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: mlsysopsv1.Namespace},
		Spec: mlsysopsv1.MLSysOpsAppSpec{Name: name, Components: []mlsysopsv1.Component{{
			Metadata: mlsysopsv1.ComponentMetadata{Name: "infer"},
			Containers: []mlsysopsv1.Container{{Image: "registry.example/infer:1", PlatformRequirements: &mlsysopsv1.PlatformRequirements{
				CPU: &mlsysopsv1.CPURequirements{Requests: &cpu},
				GPU: &mlsysopsv1.GPURequirements{Model: model, Requests: gpus, Limits: gpus},
			}}},
		}}},
	}
}

func waitApp(t *testing.T, c client.Client, name string, ok func(*mlsysopsv1.MLSysOpsApp) bool) *mlsysopsv1.MLSysOpsApp {
	t.Helper()
	app := &mlsysopsv1.MLSysOpsApp{}
	err := wait.PollUntilContextTimeout(context.Background(), 300*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: name}, app); err != nil {
			return false, nil
		}
		return ok(app), nil
	})
	if err != nil {
		t.Fatalf("app %s: %v; last status %+v", name, err, app.Status)
	}
	return app
}

func TestPlacesOnTheClusterWithTheGPU(t *testing.T) {
	c := startControllers(t)
	ctx := context.Background()
	cases := map[string]struct {
		app         *mlsysopsv1.MLSysOpsApp
		wantCluster string
	}{
		"H100 only in cloud-1": {gpuApp("h100-"+rand.String(4), "NVIDIA-H100-80GB-HBM3", 2), "cloud-1"},
		"T4 only in edge-1":    {gpuApp("t4-"+rand.String(4), "Tesla-T4", 1), "edge-1"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if err := c.Create(ctx, tc.app); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Delete(context.Background(), tc.app) })
			got := waitApp(t, c, tc.app.Name, func(a *mlsysopsv1.MLSysOpsApp) bool { return a.Status.Phase == mlsysopsv1.AppDeploying })
			rb := binding(t, c, tc.app.Name)
			if names, _ := continuum.PlacedClusters(rb); len(names) != 1 || names[0] != tc.wantCluster {
				t.Errorf("clusters %v, want [%s] (status: %s)", names, tc.wantCluster, got.Status.Message)
			}
			if bound := rb.Spec.Clusters; len(bound) != 1 || bound[0].Name != tc.wantCluster {
				t.Errorf("bound to %v, want [%s]", bound, tc.wantCluster)
			}
			if owner := metav1.GetControllerOf(rb); owner == nil || owner.Name != tc.app.Name {
				t.Errorf("binding not owned by the app (it would outlive it): %v", rb.OwnerReferences)
			}
		})
	}
}

func TestUnschedulableSaysWhyPerCluster(t *testing.T) {
	c := startControllers(t)
	app := gpuApp("b200-"+rand.String(4), "NVIDIA-B200", 1)
	if err := c.Create(context.Background(), app); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), app) })
	got := waitApp(t, c, app.Name, func(a *mlsysopsv1.MLSysOpsApp) bool { return a.Status.Phase == mlsysopsv1.AppUnschedulable })
	for _, cluster := range []string{"cloud-1", "edge-1"} {
		if !strings.Contains(got.Status.Message, cluster+": component infer") {
			t.Errorf("message does not explain %s: %s", cluster, got.Status.Message)
		}
	}
	if !strings.Contains(got.Status.Message, "nvidia.com/gpu.product") {
		t.Errorf("message does not name the GPU product: %s", got.Status.Message)
	}
	if rb := binding(t, c, app.Name); len(rb.Spec.Clusters) > 0 || rb.Annotations[mlsysopsv1.AnnotationPlacement] != "" {
		t.Errorf("an unschedulable app was placed: %v, bound to %v", rb.Annotations[mlsysopsv1.AnnotationPlacement], rb.Spec.Clusters)
	}
}

func TestUserClusterIDHonoured(t *testing.T) {
	c := startControllers(t)
	app := gpuApp("pin-"+rand.String(4), "", 0)
	app.Spec.Components[0].Containers[0].PlatformRequirements.GPU = nil
	app.Spec.ClusterPlacement = &mlsysopsv1.ClusterPlacement{ClusterID: []string{"edge-1"}}
	if err := c.Create(context.Background(), app); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), app) })
	waitApp(t, c, app.Name, func(a *mlsysopsv1.MLSysOpsApp) bool { return a.Status.Phase == mlsysopsv1.AppDeploying })
	if names, _ := continuum.PlacedClusters(binding(t, c, app.Name)); len(names) != 1 || names[0] != "edge-1" {
		t.Errorf("clusters %v, want the user's [edge-1]", names)
	}
}

// binding reads the application's ResourceBinding, live.
func binding(t *testing.T, c client.Client, app string) *workv1alpha2.ResourceBinding {
	t.Helper()
	rb := &workv1alpha2.ResourceBinding{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: continuum.BindingName(app)}, rb); err != nil {
		t.Fatal(err)
	}
	return rb
}
