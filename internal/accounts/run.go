package accounts

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/internal/logging"
	"github.com/mlsysops-go/mlsysops/internal/messaging"
	"github.com/mlsysops-go/mlsysops/internal/messaging/provision"
)

// NewCommand returns the mlsysops-accounts command.
func NewCommand() *cobra.Command {
	o := NewOptions()
	cmd := &cobra.Command{
		Use:   "mlsysops-accounts",
		Short: "Keep the MLSysOps agents' XMPP accounts and roster links in place",
		Long: `Keep every described agent's XMPP account in place on ejabberd, with the
password of its Secret, and the roster links between parents and children:
at start, every --interval (a light pass: the account list and rotated
Secrets), every --full-interval (every password and roster), whenever
ejabberd restarts, and as soon as an agent reports through a Kubernetes
Event that ejabberd refuses its login.

It holds ejabberd's admin credential; the agents never do. It never deletes
an account. Metrics at /metrics, state at /status, /healthz and /readyz
(ready after the first full pass).`,
		Example: `  mlsysops-accounts --descriptions /etc/mlsysops/descriptions \
    --password-dir /var/run/secrets/mlsysops/xmpp \
    --admin-url https://ejabberd:5443/api --admin-jid admin@mlsysops.local \
    --admin-password-file /var/run/secrets/mlsysops/ejabberd-admin/password \
    --kubeconfig /etc/mlsysops/karmada.kubeconfig --event-contexts in-cluster \
    --karmada-clusters '*'`,
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

// NewLogger returns the logger the options ask for.
func NewLogger(o *Options, w *os.File) *slog.Logger {
	return logging.New(w, o.LogFormat, o.LogLevel)
}

// describe reads the description folder.
func describe(o *Options) (provision.Desired, map[string]string, error) {
	set, err := description.LoadDir(o.Descriptions)
	if err != nil {
		return provision.Desired{}, nil, fmt.Errorf("descriptions in %s: %w", o.Descriptions, err)
	}
	d, files, err := Described(set, o.XMPPDomain, o.PasswordDir, o.Accounts, o.layers())
	if err != nil {
		return provision.Desired{}, nil, fmt.Errorf("descriptions in %s: %w", o.Descriptions, err)
	}
	return d, files, nil
}

func adminServer(o *Options) (*provision.HTTPAPI, error) {
	pw, err := messaging.ReadPasswordFile(o.AdminPasswordFile)
	if err != nil {
		return nil, fmt.Errorf("ejabberd admin password: %w", err)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.AdminCAFile != "" {
		b, err := os.ReadFile(o.AdminCAFile)
		if err != nil {
			return nil, fmt.Errorf("read the admin API's CA: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("%s holds no PEM certificate", o.AdminCAFile)
		}
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: tc, MaxIdleConnsPerHost: max(o.Workers, 2), IdleConnTimeout: time.Minute,
	}}
	return provision.NewHTTPAPI(o.AdminURLs[0], o.AdminJID, pw, hc).AlsoAt(o.AdminURLs[1:]...), nil
}

// restConfig loads a context of the kubeconfig, or the pod's own
// cluster for InCluster.
func restConfig(o *Options, name string) (*rest.Config, error) {
	if name == InCluster {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster configuration: %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: o.Kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: name}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s context %s: %w", o.Kubeconfig, name, err)
	}
	return cfg, nil
}

// Run reconciles until ctx ends.
func Run(ctx context.Context, o *Options, base *slog.Logger) error {
	log := base.With("component", "accounts")
	desired, files, err := describe(o)
	if err != nil {
		return err
	}
	server, err := adminServer(o)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	secrets := &provision.SecretFiles{Files: files, Generate: o.GeneratePasswords}
	rec, err := provision.NewReconciler(provision.ReconcilerConfig{
		Server: server, Secrets: secrets, Desired: desired,
		Interval: o.Interval, FullInterval: o.FullInterval, ProbeInterval: o.ProbeInterval, Workers: o.Workers,
		Logger: base, Registerer: reg,
	})
	if err != nil {
		return err
	}
	w := newWatcher(log, o.EventsNamespace, o.ReportMaxAge, rec.Report)
	reg.MustRegister(w.collectors()...)
	var direct []source
	for _, name := range o.EventContexts {
		cfg, err := restConfig(o, name)
		if err != nil {
			return err
		}
		direct = append(direct, source{name: name, cfg: cfg})
	}
	var karmada *rest.Config
	if len(o.KarmadaClusters) > 0 {
		if karmada, err = restConfig(o, o.KarmadaContext); err != nil {
			return err
		}
	}

	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", o.Listen, err)
	}
	srv := &http.Server{Handler: handler(reg, rec, w), ReadHeaderTimeout: 5 * time.Second}
	log.Info("accounts reconciler starting", "accounts", len(desired.Accounts), "links", len(desired.Links),
		"admin_api", o.AdminURLs, "listen", ln.Addr().String())

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 2)
	wg.Add(3)
	go func() {
		defer wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errc <- err
			cancel()
		}
	}()
	go func() {
		defer wg.Done()
		<-ctx.Done()
		sctx, scancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer scancel()
		_ = srv.Shutdown(sctx)
	}()
	go func() {
		defer wg.Done()
		if err := rec.Run(ctx); err != nil {
			errc <- err
			cancel()
		}
	}()
	// The event sources are looked at again every SourcesInterval (new
	// member clusters), and the description folder every interval (new
	// agents).
	refresh := func() {
		sources := append([]source(nil), direct...)
		if karmada != nil {
			names := o.KarmadaClusters
			if slices.Contains(names, "*") {
				lctx, lcancel := context.WithTimeout(ctx, 30*time.Second)
				names, err = memberNames(lctx, karmada)
				lcancel()
				if err != nil {
					log.Warn("cannot list the member clusters; keeping the watched ones", "err", err)
					return
				}
			}
			for _, n := range names {
				sources = append(sources, source{name: "karmada/" + n, cfg: proxyConfig(karmada, n)})
			}
		}
		w.set(ctx, sources)
	}
	refresh()
	t := time.NewTicker(o.Interval)
	defer t.Stop()
	// A member cluster that joins is watched within SourcesInterval,
	// however long the interval of the passes.
	st := time.NewTicker(min(o.Interval, SourcesInterval))
	defer st.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-st.C:
			refresh()
			continue
		case <-t.C:
		}
		refresh()
		if d, f, err := describe(o); err != nil {
			log.Error("cannot read the descriptions again; keeping the previous ones", "err", err)
		} else {
			secrets.SetFiles(f)
			if err := rec.SetDesired(d); err != nil {
				log.Error("new descriptions refused; keeping the previous ones", "err", err)
			}
		}
	}
	wg.Wait()
	select {
	case err := <-errc:
		return err
	default:
		return nil
	}
}

// handler serves /metrics, /healthz, /readyz and /status.
func handler(reg *prometheus.Registry, rec *provision.Reconciler, w *watcher) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, _ *http.Request) { _, _ = rw.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(rw http.ResponseWriter, _ *http.Request) {
		if err := rec.Ready(); err != nil {
			http.Error(rw, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = rw.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /status", func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(rw)
		enc.SetIndent("", "  ")
		_ = enc.Encode(struct {
			provision.ReconcilerStatus
			// EventSources maps each watched cluster to whether its
			// Events have been listed once.
			EventSources map[string]bool `json:"eventSources"`
		}{rec.Status(), w.status()})
	})
	return mux
}
