package httpapi

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// ServeOptions say how to serve an API.
type ServeOptions struct {
	// Listen is host:port.
	Listen string
	// TLSCertFile and TLSKeyFile enable HTTPS when both are set; plain
	// HTTP on that listener is then answered 400 and served nothing. The
	// files are read again when they change (checked at most every
	// CertCheckInterval, default DefaultCertCheckInterval), so a renewed
	// certificate is served without a restart.
	TLSCertFile, TLSKeyFile string
	CertCheckInterval       time.Duration
	// RequestTimeout is the longest request handled (the server's read and
	// write timeouts leave it 30 s more).
	RequestTimeout time.Duration
	// ShutdownTimeout is how long in-flight requests may finish once ctx
	// ends.
	ShutdownTimeout time.Duration
	// ShutdownDelay, when above 0, is how long ReadyzPath fails after ctx
	// ended while everything else is still served: a Service takes the
	// replica out before its listener closes.
	ShutdownDelay time.Duration
	ReadyzPath    string
}

// Serve serves h on o.Listen until ctx ends, then lets in-flight requests
// finish for up to o.ShutdownTimeout.
func Serve(ctx context.Context, o ServeOptions, h http.Handler, log *slog.Logger) error {
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.Listen, err)
	}
	return ServeListener(ctx, o, ln, h, log)
}

// ServeListener is Serve on an existing listener.
func ServeListener(ctx context.Context, o ServeOptions, ln net.Listener, h http.Handler, log *slog.Logger) error {
	var draining atomic.Bool
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if draining.Load() && r.URL.Path == o.ReadyzPath {
				http.Error(w, "shutting down", http.StatusServiceUnavailable)
				return
			}
			h.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       o.RequestTimeout + 30*time.Second,
		WriteTimeout:      o.RequestTimeout + 30*time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	scheme := "http"
	if o.TLSCertFile != "" {
		scheme = "https"
		every := o.CertCheckInterval
		if every == 0 {
			every = DefaultCertCheckInterval
		}
		certs, err := loadCertFiles(o.TLSCertFile, o.TLSKeyFile, every, log)
		if err != nil {
			_ = ln.Close()
			return err
		}
		srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: certs.get}
	}
	errc := make(chan error, 1)
	go func() {
		if scheme == "https" {
			errc <- srv.ServeTLS(ln, "", "")
		} else {
			errc <- srv.Serve(ln)
		}
	}()
	log.Info("serving", "url", scheme+"://"+ln.Addr().String())
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	if o.ShutdownDelay > 0 {
		draining.Store(true)
		log.Info("draining: readiness fails, requests are still served", "path", o.ReadyzPath, "delay", o.ShutdownDelay)
		select {
		case err := <-errc:
			return fmt.Errorf("serve: %w", err)
		case <-time.After(o.ShutdownDelay):
		}
	}
	log.Info("shutting down; letting requests finish", "timeout", o.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), o.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	log.Info("stopped")
	return nil
}
