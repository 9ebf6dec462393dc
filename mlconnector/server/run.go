package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mlsysops-go/mlsysops/internal/auth"
	"github.com/mlsysops-go/mlsysops/internal/httpapi"
	"github.com/mlsysops-go/mlsysops/internal/logging"
	"github.com/mlsysops-go/mlsysops/mlconnector/db"
	"github.com/mlsysops-go/mlsysops/mlconnector/deploy"
	"github.com/mlsysops-go/mlsysops/mlconnector/drift"
	"github.com/mlsysops-go/mlsysops/mlconnector/handlers"
	"github.com/mlsysops-go/mlsysops/mlconnector/objstore"
	"github.com/mlsysops-go/mlsysops/mlconnector/ops"
	"github.com/mlsysops-go/mlsysops/mlconnector/registry"
	"github.com/mlsysops-go/mlsysops/mlconnector/runtimes"
	"github.com/mlsysops-go/mlsysops/northbound/client"
)

// Version is the connector's version, set at build time with
// -ldflags "-X github.com/mlsysops-go/mlsysops/mlconnector/server.Version=...".
var Version = "dev"

// NewCommand returns the connector's command.
func NewCommand() *cobra.Command {
	o := NewOptions()
	cmd := &cobra.Command{
		Use:   "mlsysops-mlconnector",
		Short: "Serve the MLSysOps ML connector",
		Long: `Serve the MLSysOps ML connector: the model registry (models, versions,
aliases and files, metadata in PostgreSQL and files in an S3-compatible
store or a folder), model deployments submitted through the northbound API,
predictions, explanations, the operations log and drift detection, under
/v1 and upstream's paths (/model, /deployment); the OpenAPI document at
/openapi.json and its page at /docs, health at /healthz and /readyz, and
Prometheus metrics at /metrics.

Every route but the public ones needs a bearer token from the northbound
API's token source (--token-file or --token-secret).`,
		Example: `  MLC_DATABASE_URL=postgres://mlc:secret@127.0.0.1:5432/mlconnector?sslmode=disable \
  MLC_NORTHBOUND_TOKEN=$MLS_TOKEN \
  mlsysops-mlconnector --listen 127.0.0.1:8090 --token-file tokens.csv \
    --northbound-url http://127.0.0.1:8000 --model-server-image docker.io/mlsysops/modelserver:v1`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return Run(cmd.Context(), o, NewLogger(o, os.Stderr))
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// NewLogger returns the connector's logger as the options say.
func NewLogger(o *Options, w *os.File) *slog.Logger {
	return logging.New(w, o.LogFormat, o.LogLevel)
}

func readSecretFile(path, what string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// tokenSource is the northbound API's token source.
func tokenSource(o *Options) (auth.Source, error) {
	if o.TokenFile != "" {
		return auth.FileSource{Path: o.TokenFile}, nil
	}
	var cfg *rest.Config
	var err error
	if o.Kubeconfig != "" {
		rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: o.Kubeconfig}
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.HostContext}).ClientConfig()
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("--token-secret needs a cluster (--kubeconfig with --host-context, or in-cluster): %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ns, name, _ := strings.Cut(o.TokenSecret, "/")
	return auth.SecretSource{Client: cs, Namespace: ns, Name: name, Key: o.TokenSecretKey}, nil
}

// openStore opens the artifact store, creating the bucket of an S3 store
// (retrying while the store comes up).
func openStore(ctx context.Context, o *Options, log *slog.Logger) (objstore.Store, error) {
	if o.Store == StoreFS {
		return objstore.NewFS(o.ArtifactDir)
	}
	cfg := objstore.S3Config{Endpoint: o.S3Endpoint, Region: o.S3Region, Bucket: o.S3Bucket, Prefix: o.S3Prefix,
		AccessKey: os.Getenv("AWS_ACCESS_KEY_ID"), SecretKey: os.Getenv("AWS_SECRET_ACCESS_KEY")}
	if o.S3CredentialsDir != "" {
		var err error
		if cfg.AccessKey, err = readSecretFile(filepath.Join(o.S3CredentialsDir, "access-key"), "S3 access key"); err != nil {
			return nil, err
		}
		if cfg.SecretKey, err = readSecretFile(filepath.Join(o.S3CredentialsDir, "secret-key"), "S3 secret key"); err != nil {
			return nil, err
		}
	}
	s, err := objstore.NewS3(cfg)
	if err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		err := s.EnsureBucket(ctx)
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, objstore.ErrUnavailable) || ctx.Err() != nil {
			return nil, err
		}
		log.Warn("artifact store not reachable yet; retrying", "store", s.String(), "attempt", attempt, "err", err)
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(min(time.Duration(attempt)*time.Second, 5*time.Second)):
		}
	}
}

// Run serves until ctx ends, then shuts down gracefully.
func Run(ctx context.Context, o *Options, base *slog.Logger) error {
	log := base.With("component", "mlconnector")
	log.Info("starting", "version", Version)
	src, err := tokenSource(o)
	if err != nil {
		return err
	}
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	authn, err := auth.New(actx, src, base)
	cancel()
	if err != nil {
		return fmt.Errorf("bearer tokens: %w", err)
	}
	go authn.Run(ctx, o.TokenReload)

	dsn := o.DatabaseURL
	if o.DatabaseURLFile != "" {
		if dsn, err = readSecretFile(o.DatabaseURLFile, "database URL"); err != nil {
			return err
		}
	}
	dctx, cancel := context.WithTimeout(ctx, o.DBWait)
	pool, err := db.Open(dctx, dsn, o.DBMaxConns, base)
	cancel()
	if err != nil {
		return err
	}
	defer pool.Close()
	sctx, cancel := context.WithTimeout(ctx, o.DBWait)
	store, err := openStore(sctx, o, base)
	cancel()
	if err != nil {
		return fmt.Errorf("artifact store: %w", err)
	}
	log.Info("artifact store", "store", store.String())

	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	models := registry.New(pool, store, registry.Options{Logger: base})
	rts := runtimes.New(pool, runtimes.BuiltIn(o.ModelServerImage, o.ServingPort))
	opsLog := ops.New(pool)
	detector, err := drift.New(models, drift.Options{Window: o.DriftWindow, MaxSamples: o.DriftMaxSamples, Logger: base, Registerer: reg})
	if err != nil {
		return err
	}
	cfg := handlers.Config{
		Registry: models, Operations: opsLog, Drift: detector, Runtimes: rts, Auth: authn,
		MaxBodyBytes: o.MaxBodyBytes, MaxUploadBytes: o.MaxUploadBytes, UploadDir: o.UploadDir,
		RequestTimeout: o.RequestTimeout, UploadTimeout: o.UploadTimeout,
		Logger: base, Registerer: reg, Gatherer: reg, Version: Version,
	}
	var manager *deploy.Manager
	if o.NorthboundURL != "" {
		token := o.NorthboundToken
		if o.NorthboundTokenFile != "" {
			if token, err = readSecretFile(o.NorthboundTokenFile, "northbound token"); err != nil {
				return err
			}
		}
		nbc, err := client.New(client.Config{URL: o.NorthboundURL, Token: token, CAFile: o.NorthboundCAFile, Timeout: 30 * time.Second, UserAgent: "mlconnector/" + Version})
		if err != nil {
			return err
		}
		key, err := deploy.Key(ctx, pool)
		if err != nil {
			return fmt.Errorf("download key: %w", err)
		}
		downloadURL := o.DownloadURL
		if downloadURL == "" {
			downloadURL = "http://" + o.Listen
		}
		nb := deploy.NB{C: nbc}
		manager, err = deploy.New(pool, models, rts, nb, opsLog, key, deploy.Options{
			ModelServerImage: o.ModelServerImage, FetchImage: o.FetchImage, DownloadURL: downloadURL, Access: o.Access,
			ReconcileInterval: o.ReconcileInterval, ForwardTimeout: o.ForwardTimeout, Logger: base, Registerer: reg,
		})
		if err != nil {
			return err
		}
		cfg.Deployments = manager
		cfg.Ready = func(ctx context.Context) map[string]error { return map[string]error{"northbound": nb.Ready(ctx)} }
		go manager.Run(ctx)
	} else {
		log.Warn("no northbound API (--northbound-url): the registry works, deployments answer 503")
	}
	if o.DriftInterval > 0 {
		go detector.Schedule(ctx, o.DriftInterval)
	}
	if o.SweepInterval > 0 {
		go models.Sweep(ctx, o.SweepInterval, o.OrphanAge)
	}
	h, err := handlers.New(cfg)
	if err != nil {
		return err
	}
	return httpapi.Serve(ctx, o.serveOptions(), h, log)
}

// serveOptions are how the API is served: HTTPS when the TLS files are
// set.
func (o *Options) serveOptions() httpapi.ServeOptions {
	return httpapi.ServeOptions{
		Listen: o.Listen, TLSCertFile: o.TLSCertFile, TLSKeyFile: o.TLSKeyFile,
		RequestTimeout: max(o.RequestTimeout, o.UploadTimeout), ShutdownTimeout: o.ShutdownTimeout,
		ShutdownDelay: o.ShutdownDelay, ReadyzPath: httpapi.PathReadyz,
	}
}
