package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
	nbclient "github.com/mlsysops-go/mlsysops/northbound/client"
)

// firstApp submits an application description file through the
// northbound API, as `mls apps deploy-app --path file` does, and returns
// the time from submission until Karmada's MLSysOpsApp of that name is
// Running; then it removes the application.
func firstApp(ctx context.Context, env *testbed.Env, file, name string) (time.Duration, error) {
	body, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	scheme := runtime.NewScheme()
	if err := mlsysopsv1.AddToScheme(scheme); err != nil {
		return 0, err
	}
	cfg, err := env.ClientConfig(testbed.ContextKarmada)
	if err != nil {
		return 0, err
	}
	kc, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return 0, err
	}
	api, err := nbclient.New(nbclient.Config{URL: env.NorthboundURL, Token: env.NorthboundToken})
	if err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	start := time.Now()
	if _, err := api.Applications().Submit(ctx, body, nbclient.YAML); err != nil {
		return 0, fmt.Errorf("submit %s: %w", filepath.Base(file), err)
	}
	defer func() { _, _ = api.Applications().Remove(context.Background(), name) }()
	for {
		app := &mlsysopsv1.MLSysOpsApp{}
		err := kc.Get(ctx, types.NamespacedName{Namespace: mlsysopsv1.Namespace, Name: name}, app)
		if err == nil && app.Status.Phase == mlsysopsv1.AppRunning {
			return time.Since(start), nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%s not Running in 5 minutes (phase %q: %s)", name, app.Status.Phase, app.Status.Message)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
