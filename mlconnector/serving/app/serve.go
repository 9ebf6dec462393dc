package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mlsysops-go/mlsysops/mlconnector/serving/explain"
	"github.com/mlsysops-go/mlsysops/mlconnector/serving/model"
	"github.com/mlsysops-go/mlsysops/mlconnector/serving/onnx"
	"github.com/mlsysops-go/mlsysops/mlconnector/serving/server"
	"github.com/mlsysops-go/mlsysops/mlconnector/serving/trees"
)

// ServeOptions configure `modelserver serve`.
type ServeOptions struct {
	common
	// Listen is host:port (MODELSERVER_LISTEN).
	Listen string
	// Model is the model file (MODELSERVER_MODEL); Format its format
	// (onnx, lightgbm, lightgbm-json, xgboost-json, xgboost; empty:
	// detected).
	Model  string
	Format string
	// Name and Version of the model in the API paths (default: the file
	// name without extension, no version).
	Name, Version string
	// Background is the training-data CSV explanations sample from;
	// BackgroundSize rows are kept (seeded by BackgroundSeed);
	// BackgroundExclude are columns that are not features.
	Background        string
	BackgroundSize    int
	BackgroundSeed    uint64
	BackgroundExclude []string
	// ONNXRuntimeLib is libonnxruntime.so (ONNXRUNTIME_LIB).
	ONNXRuntimeLib string
	// Threads bounds the threads of one inference.
	Threads            int
	MaxBodyBytes       int64
	RequestTimeout     time.Duration
	ShutdownTimeout    time.Duration
	ExplainConcurrency int
}

// NewServeOptions returns the defaults with the environment applied.
func NewServeOptions() *ServeOptions {
	o := &ServeOptions{
		Listen: ":8080", BackgroundSize: 100, BackgroundExclude: []string{"target"},
		ONNXRuntimeLib: "libonnxruntime.so.1", Threads: 1,
		MaxBodyBytes: server.DefaultMaxBodyBytes, RequestTimeout: server.DefaultRequestTimeout,
		ShutdownTimeout: 20 * time.Second, ExplainConcurrency: 1,
	}
	o.defaults()
	env(&o.Listen, "MODELSERVER_LISTEN")
	env(&o.Model, "MODELSERVER_MODEL")
	env(&o.ONNXRuntimeLib, "ONNXRUNTIME_LIB")
	return o
}

// AddFlags registers the options as flags.
func (o *ServeOptions) AddFlags(fs *pflag.FlagSet) {
	o.common.addFlags(fs)
	fs.StringVar(&o.Listen, "listen", o.Listen, "address to serve on, host:port")
	fs.StringVar(&o.Model, "model", o.Model, "model file (or MODELSERVER_MODEL)")
	fs.StringVar(&o.Format, "format", o.Format, "model format: onnx, lightgbm, lightgbm-json, xgboost-json (XGBoost 1.0+) or xgboost (binary, before 1.0) (default: from the file)")
	fs.StringVar(&o.Name, "name", o.Name, "model name in the API paths (default: the file name without extension)")
	fs.StringVar(&o.Version, "model-version", o.Version, "model version reported and accepted in /versions/{version} paths")
	fs.StringVar(&o.Background, "background", o.Background, "training-data CSV (with a header) that explanations sample their background from")
	fs.IntVar(&o.BackgroundSize, "background-size", o.BackgroundSize, "rows of the background kept")
	fs.Uint64Var(&o.BackgroundSeed, "background-seed", o.BackgroundSeed, "seed of the background sample")
	fs.StringSliceVar(&o.BackgroundExclude, "background-exclude", o.BackgroundExclude, "CSV columns that are not features (when the header does not name the model's features)")
	fs.StringVar(&o.ONNXRuntimeLib, "onnxruntime-lib", o.ONNXRuntimeLib, "ONNX Runtime shared library (a bare name is looked up through LD_LIBRARY_PATH; or ONNXRUNTIME_LIB)")
	fs.IntVar(&o.Threads, "threads", o.Threads, "threads of one inference (0: the runtime's default)")
	fs.Int64Var(&o.MaxBodyBytes, "max-body-bytes", o.MaxBodyBytes, "largest request body accepted (413 beyond)")
	fs.DurationVar(&o.RequestTimeout, "request-timeout", o.RequestTimeout, "time limit of one request")
	fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", o.ShutdownTimeout, "how long in-flight requests may finish after SIGTERM")
	fs.IntVar(&o.ExplainConcurrency, "explain-concurrency", o.ExplainConcurrency, "explanations computed at once (others wait)")
}

// Validate reports every problem with the options.
func (o *ServeOptions) Validate() error {
	errs := o.common.validate()
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if _, _, err := net.SplitHostPort(o.Listen); err != nil {
		add("--listen %q: want host:port", o.Listen)
	}
	if o.Model == "" {
		add("--model is required (or MODELSERVER_MODEL)")
	}
	switch o.Format {
	case "", onnx.Format, trees.LightGBM, trees.LightGBMJSON, trees.XGBoost, trees.XGBoostJSON:
	default:
		add("--format %q: want onnx, lightgbm, lightgbm-json, xgboost-json or xgboost", o.Format)
	}
	if o.Name == "" && o.Model != "" && modelName(o.Model) == "" {
		add("--name is required: the model file's name gives none")
	}
	if o.Name != "" && strings.ContainsAny(o.Name, "/?#% ") {
		add("--name %q: no /, ?, #, %% or spaces", o.Name)
	}
	if o.BackgroundSize < 1 {
		add("--background-size %d: at least 1", o.BackgroundSize)
	}
	if o.Threads < 0 {
		add("--threads must not be negative")
	}
	if o.MaxBodyBytes < 1024 {
		add("--max-body-bytes %d: at least 1024", o.MaxBodyBytes)
	}
	if o.RequestTimeout <= 0 || o.ShutdownTimeout <= 0 {
		add("--request-timeout and --shutdown-timeout must be positive")
	}
	if o.ExplainConcurrency < 1 {
		add("--explain-concurrency %d: at least 1", o.ExplainConcurrency)
	}
	return joined(errs)
}

func modelName(path string) string {
	base := filepath.Base(path)
	return strings.TrimSuffix(base, filepath.Ext(base))
}

func newServeCommand() *cobra.Command {
	o := NewServeOptions()
	cmd := &cobra.Command{
		Use:   "serve --model FILE",
		Short: "Serve one model over the Open Inference Protocol v2 (REST)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := o.logger(os.Stderr)
			if err := o.Validate(); err != nil {
				return o.terminate(log, err)
			}
			return o.terminate(log, o.Run(cmd.Context(), log, nil))
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

// Formats is the registry of the model formats this build serves.
func (o *ServeOptions) Formats() *model.Registry {
	r := model.NewRegistry()
	trees.Register(r)
	onnx.Register(r, o.ONNXRuntimeLib)
	return r
}

// Run serves until ctx ends. The server listens at once and is ready once
// the model is loaded; a model that fails to load ends Run with the
// reason. ready, when not nil, receives the listener's address once
// listening.
func (o *ServeOptions) Run(ctx context.Context, log *slog.Logger, ready chan<- string) error {
	name := o.Name
	if name == "" {
		name = modelName(o.Model)
	}
	log = log.With("model", name)
	srv := server.New(server.Config{
		Name: name, Version: o.Version, ServerVersion: Version, Logger: log,
		MaxBodyBytes: o.MaxBodyBytes, RequestTimeout: o.RequestTimeout, ExplainConcurrency: o.ExplainConcurrency,
	})
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.Listen, err)
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	log.Info("listening", "addr", ln.Addr().String(), "version", Version, "onnx", onnx.Available)
	if ready != nil {
		ready <- ln.Addr().String()
	}

	loaded := make(chan error, 1)
	go func() {
		start := time.Now()
		m, bg, err := o.load(log)
		if err == nil {
			srv.SetModel(m, bg)
			md := m.Metadata()
			log.Info("model ready", "platform", md.Platform, "kind", md.Kind, "inputs", len(md.Inputs), "outputs", len(md.Outputs),
				"load_seconds", time.Since(start).Seconds())
		}
		loaded <- err
	}()

	var runErr error
	select {
	case <-ctx.Done():
	case err := <-served:
		runErr = fmt.Errorf("serve: %w", err)
	case err := <-loaded:
		if err != nil {
			runErr = fmt.Errorf("model load failed: %w", err)
			break
		}
		select {
		case <-ctx.Done():
		case err := <-served:
			runErr = fmt.Errorf("serve: %w", err)
		}
	}
	// Readiness fails first, so that endpoints stop sending new requests
	// while the ones in flight finish.
	m := srv.Unready()
	sctx, cancel := context.WithTimeout(context.Background(), o.ShutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("shutdown", "error", err)
	}
	if m != nil {
		_ = m.Close()
	}
	log.Info("stopped")
	return runErr
}

func (o *ServeOptions) load(log *slog.Logger) (model.Model, *explain.Background, error) {
	m, err := o.Formats().Load(o.Format, o.Model, model.Options{Threads: o.Threads})
	if err != nil {
		return nil, nil, err
	}
	if o.Background == "" {
		return m, nil, nil
	}
	layout, err := explain.NewLayout(m.Metadata())
	if err != nil {
		log.Warn("the model cannot be explained; --background ignored", "reason", err)
		return m, nil, nil
	}
	bg, err := explain.LoadBackground(o.Background, layout, o.BackgroundExclude, o.BackgroundSize, o.BackgroundSeed)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	log.Info("background loaded", "rows", len(bg.Rows), "of", bg.Total, "features", len(bg.Names))
	return m, bg, nil
}
