package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Run runs the demo in the options' mode until ctx ends. The ports are
// taken before Run serves, so a taken port fails at once.
func Run(ctx context.Context, o *Options, log *slog.Logger) error {
	if err := o.Validate(); err != nil {
		return err
	}
	settings, _ := ParseSettings(o.Degrade)
	d := NewDegrader(o.Node, settings)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	log = log.With("mode", o.Mode, "node", o.Node)

	var work func(context.Context) error
	switch o.Mode {
	case ModeServer:
		srv, err := NewServer(log, d, o.Work, o.Window, reg)
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", o.Listen)
		if err != nil {
			return fmt.Errorf("listen %s: %w", o.Listen, err)
		}
		log.Info("server listening", "addr", ln.Addr().String())
		work = func(ctx context.Context) error { return srv.Serve(ctx, ln) }
	case ModeClient:
		server := o.Server
		if server == "" {
			var ok bool
			if server, ok = ServerFromEnv(o.Peer, os.Getenv); !ok {
				return fmt.Errorf("no server address: set --server or $DEMO_SERVER, or run as a component that talks to %q (its address is then in the environment)", o.Peer)
			}
		}
		c, err := NewClient(log, server, o.Interval, o.Timeout, o.Window, reg)
		if err != nil {
			return err
		}
		log.Info("client sending", "server", server, "interval", o.Interval.String())
		work = c.Run
	}

	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	ok := func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) }
	mux.HandleFunc("GET /healthz", ok)
	mux.HandleFunc("GET /readyz", ok)
	if o.Admin {
		mux.Handle("/degrade", d)
	}
	mln, err := net.Listen("tcp", o.MetricsListen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", o.MetricsListen, err)
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	log.Info("metrics served", "addr", mln.Addr().String(), "admin", o.Admin, "degrade", fmt.Sprint(d.Settings()))

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := hs.Serve(mln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs <- fmt.Errorf("metrics server: %w", err)
			cancel()
		}
	}()
	go func() {
		defer wg.Done()
		if err := work(ctx); err != nil {
			errs <- err
			cancel()
		}
	}()
	<-ctx.Done()
	sctx, scancel := context.WithTimeout(context.Background(), 3*time.Second)
	_ = hs.Shutdown(sctx)
	scancel()
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	log.Info("stopped")
	return errors.Join(all...)
}
