package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	karmadaclientset "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mlsysops-go/mlsysops/internal/auth"
	"github.com/mlsysops-go/mlsysops/internal/httpapi"
	"github.com/mlsysops-go/mlsysops/internal/logging"
	"github.com/mlsysops-go/mlsysops/internal/messaging"
	"github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/northbound/api"
	"github.com/mlsysops-go/mlsysops/northbound/handlers"
	"github.com/mlsysops-go/mlsysops/northbound/infra"
	"github.com/mlsysops-go/mlsysops/northbound/policystore"
)

// Version is the server's version, set at build time with
// -ldflags "-X github.com/mlsysops-go/mlsysops/northbound/server.Version=...".
var Version = "dev"

// NewCommand returns the northbound command.
func NewCommand() *cobra.Command {
	o := NewOptions()
	cmd := &cobra.Command{
		Use:   "mlsysops-northbound",
		Short: "Serve the MLSysOps northbound REST API",
		Long: `Serve the MLSysOps northbound REST API: applications, ML deployments,
infrastructure, agents and policies under /v1, the upstream paths (/apps,
/ml, /infra, /manage), the OpenAPI document at /openapi.json and its page
at /docs, health at /healthz and /readyz, and Prometheus metrics at
/metrics.

Every route but the public paths needs a bearer token from --token-file or
--token-secret.`,
		Example: `  mlsysops-northbound --listen 127.0.0.1:8000 --token-file tokens.csv \
    --redis-addr 127.0.0.1:6379 --kubeconfig ~/.kube/karmada.config \
    --xmpp-jid northbound@mlsysops.local --xmpp-password-file xmpp.password`,
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

// NewLogger returns the server's logger as the options say.
func NewLogger(o *Options, w *os.File) *slog.Logger {
	return logging.New(w, o.LogFormat, o.LogLevel)
}

// kubeConfigs returns the Karmada API and host configurations: from the
// kubeconfig contexts, or in-cluster for both; nil when there is neither.
func kubeConfigs(o *Options) (karmada, host *rest.Config, err error) {
	if o.Kubeconfig == "" {
		cfg, err := rest.InClusterConfig()
		if errors.Is(err, rest.ErrNotInCluster) {
			return nil, nil, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("in-cluster configuration: %w", err)
		}
		return cfg, cfg, nil
	}
	load := func(ctxName string) (*rest.Config, error) {
		rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: o.Kubeconfig}
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: ctxName}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s context %s: %w", o.Kubeconfig, ctxName, err)
		}
		cfg.QPS, cfg.Burst = 50, 100
		return cfg, nil
	}
	if karmada, err = load(o.KarmadaContext); err != nil {
		return nil, nil, err
	}
	if host, err = load(o.HostContext); err != nil {
		// In a pod of the host cluster, the kubeconfig (a Secret) only
		// reaches the Karmada API: the host is the in-cluster API.
		// Without either, continuum policies and a token Secret are
		// unavailable; the rest works.
		host, err = rest.InClusterConfig()
		if err != nil {
			host = nil
		}
	}
	return karmada, host, nil
}

// Run serves until ctx ends, then shuts down gracefully.
func Run(ctx context.Context, o *Options, base *slog.Logger) error {
	// The packages below add their own component key.
	log := base.With("component", "northbound")
	karmadaCfg, hostCfg, err := kubeConfigs(o)
	if err != nil {
		return err
	}

	// Tokens.
	var src auth.Source
	if o.TokenFile != "" {
		src = auth.FileSource{Path: o.TokenFile}
	} else {
		if hostCfg == nil {
			return errors.New("--token-secret needs the host cluster: set --kubeconfig with the --host-context context, or run in-cluster")
		}
		cs, err := kubernetes.NewForConfig(hostCfg)
		if err != nil {
			return err
		}
		ns, name, _ := strings.Cut(o.TokenSecret, "/")
		src = auth.SecretSource{Client: cs, Namespace: ns, Name: name, Key: o.TokenSecretKey}
	}
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	authn, err := auth.New(actx, src, base)
	cancel()
	if err != nil {
		return fmt.Errorf("bearer tokens: %w", err)
	}
	go authn.Run(ctx, o.TokenReload)

	// Redis.
	for _, secret := range []struct {
		what  string
		value *string
		file  string
	}{
		{"Redis password", &o.RedisPassword, o.RedisPasswordFile},
		{"Redis Sentinel password", &o.RedisSentinelPassword, o.RedisSentinelPasswordFile},
	} {
		if *secret.value != "" || secret.file == "" {
			continue
		}
		b, err := os.ReadFile(secret.file)
		if err != nil {
			return fmt.Errorf("%s: %w", secret.what, err)
		}
		*secret.value = strings.TrimSpace(string(b))
	}
	rdb, err := state.NewClient(o.redisConfig())
	if err != nil {
		return err
	}
	defer rdb.Close()
	store := state.New(rdb, state.Options{Prefix: o.RedisPrefix, Logger: base})

	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	cfg := handlers.Config{
		Store: store, Auth: authn, PublicPaths: o.PublicPaths,
		ContinuumJID: o.ContinuumJID, ContinuumID: o.ContinuumID,
		MaxBodyBytes: o.MaxBodyBytes, RequestTimeout: o.RequestTimeout, PingTimeout: o.PingTimeout,
		Logger: base, Registerer: reg, Gatherer: reg, Version: Version,
	}

	// Karmada and the policy store.
	if karmadaCfg != nil {
		k, err := infra.New(karmadaCfg, infra.Options{Namespace: o.AppNamespace})
		if err != nil {
			return err
		}
		cfg.Infra = k
	} else {
		log.Warn("no kubeconfig and not in a cluster: infrastructure, placement and policy routes answer 503")
	}
	if len(o.PolicyDirs) > 0 {
		dirs := map[string][]string{}
		for _, d := range o.PolicyDirs {
			layer, dir, _ := strings.Cut(d, "=")
			dirs[layer] = append(dirs[layer], dir)
		}
		cfg.Policies = policystore.NewDirStore(dirs)
	} else if karmadaCfg != nil {
		kcs, err := kubernetes.NewForConfig(karmadaCfg)
		if err != nil {
			return err
		}
		kpc, err := karmadaclientset.NewForConfig(karmadaCfg)
		if err != nil {
			return err
		}
		var hcs kubernetes.Interface
		if hostCfg != nil {
			if hcs, err = kubernetes.NewForConfig(hostCfg); err != nil {
				return err
			}
		}
		targets := policystore.DefaultTargets(hcs, kcs, kpc)
		if hcs == nil {
			delete(targets, "continuum")
		}
		cfg.Policies = policystore.NewConfigMapStore(targets)
	}

	// XMPP.
	if o.XMPPJID != "" {
		pw := o.XMPPPassword
		if o.XMPPPasswordFile != "" {
			b, err := os.ReadFile(o.XMPPPasswordFile)
			if err != nil {
				return fmt.Errorf("XMPP password: %w", err)
			}
			pw = strings.TrimSpace(string(b))
		}
		resource := o.XMPPResource
		if resource == "" {
			if resource, err = os.Hostname(); err != nil || resource == "" {
				resource = "northbound"
			}
		}
		mc, err := messaging.New(messaging.Config{
			JID: o.XMPPJID, Password: pw, Layer: messaging.LayerService, Servers: o.XMPPServers, CAFile: o.XMPPCAFile, Resource: resource,
			HeartbeatInterval: -1, Logger: base, Registerer: reg,
		})
		if err != nil {
			return fmt.Errorf("XMPP client: %w", err)
		}
		go func() {
			if err := mc.Run(ctx); err != nil && ctx.Err() == nil {
				log.Error("XMPP client stopped", "err", err)
			}
		}()
		cfg.Messenger = mc
	} else {
		log.Warn("no XMPP account (--xmpp-jid): ping and management mode answer 503")
	}

	h, err := handlers.New(cfg)
	if err != nil {
		return err
	}
	return Serve(ctx, o, h, log)
}

// Serve serves h on o.Listen (with TLS when configured) until ctx ends,
// then lets in-flight requests finish for up to o.ShutdownTimeout.
func Serve(ctx context.Context, o *Options, h http.Handler, log *slog.Logger) error {
	log.Info("starting", "version", Version)
	return httpapi.Serve(ctx, o.serveOptions(), h, log)
}

// ServeListener is Serve on an existing listener.
func ServeListener(ctx context.Context, o *Options, ln net.Listener, h http.Handler, log *slog.Logger) error {
	return httpapi.ServeListener(ctx, o.serveOptions(), ln, h, log)
}

func (o *Options) serveOptions() httpapi.ServeOptions {
	return httpapi.ServeOptions{
		Listen: o.Listen, TLSCertFile: o.TLSCertFile, TLSKeyFile: o.TLSKeyFile,
		RequestTimeout: o.RequestTimeout, ShutdownTimeout: o.ShutdownTimeout,
		ShutdownDelay: o.ShutdownDelay, ReadyzPath: api.PathReadyz,
	}
}
