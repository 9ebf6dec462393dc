// Package server runs the ML connector: its options (flags with
// environment fallbacks, upstream's variable names included), the wiring
// of PostgreSQL, the artifact store, the northbound API and the token
// source, and an HTTP server with graceful shutdown.
package server

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/mlsysops-go/mlsysops/internal/auth"
	"github.com/mlsysops-go/mlsysops/internal/httpapi"
	"github.com/mlsysops-go/mlsysops/internal/logging"
	"github.com/mlsysops-go/mlsysops/mlconnector/deploy"
	"github.com/mlsysops-go/mlsysops/mlconnector/handlers"
)

// Artifact stores.
const (
	StoreFS = "filesystem"
	StoreS3 = "s3"
)

// Options configure the connector. Flags win over environment variables,
// which win over defaults. Secrets (the database URL with its password,
// the S3 keys, the northbound token) come from the environment or from
// files, never from flags.
type Options struct {
	// Serving: where it listens (MLC_LISTEN), TLS, and its token source:
	// the northbound API's file (MLC_TOKEN_FILE, else NB_TOKEN_FILE) or
	// Secret (MLC_TOKEN_SECRET, else NB_TOKEN_SECRET), read from the
	// cluster of Kubeconfig's HostContext.
	httpapi.Serving
	Kubeconfig  string
	HostContext string

	// DatabaseURL is postgres://user:password@host:port/db (MLC_DATABASE_URL,
	// or upstream's POSTGRES_USER, POSTGRES_PASSWORD, DB_HOST_NAME, DB_PORT
	// and POSTGRES_DB); DatabaseURLFile holds it instead.
	DatabaseURL     string
	DatabaseURLFile string
	DBMaxConns      int32
	// DBWait is how long the start waits for the database.
	DBWait time.Duration

	// Store is filesystem (ArtifactDir) or s3.
	Store       string
	ArtifactDir string
	// S3: endpoint (MLC_S3_ENDPOINT or upstream's AWS_ACCESS_URL), bucket
	// (MLC_S3_BUCKET or AWS_S3_BUCKET_DATA), region, key prefix; keys from
	// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY or S3CredentialsDir
	// (files access-key and secret-key, a mounted Secret).
	S3Endpoint       string
	S3Bucket         string
	S3Region         string
	S3Prefix         string
	S3CredentialsDir string

	// NorthboundURL (MLS_API_URL, or upstream's NORTHBOUND_API_ENDPOINT)
	// with the token (MLC_NORTHBOUND_TOKEN, or NorthboundTokenFile) and
	// CA. Without it deployments answer 503.
	NorthboundURL       string
	NorthboundToken     string
	NorthboundTokenFile string
	NorthboundCAFile    string

	// ModelServerImage serves onnx, lightgbm and xgboost models and
	// fetches artifacts (FetchImage, default the same).
	ModelServerImage string
	FetchImage       string
	ServingPort      int32
	// DownloadURL is the connector's URL as pods reach it (default
	// http://<listen>).
	DownloadURL string
	// Access is how predictions reach model servers: external, service or
	// pod.
	Access            string
	ReconcileInterval time.Duration
	ForwardTimeout    time.Duration

	DriftInterval   time.Duration
	DriftWindow     time.Duration
	DriftMaxSamples int

	SweepInterval time.Duration
	OrphanAge     time.Duration

	MaxBodyBytes    int64
	MaxUploadBytes  int64
	UploadDir       string
	RequestTimeout  time.Duration
	UploadTimeout   time.Duration
	ShutdownTimeout time.Duration
	// ShutdownDelay is how long a replica keeps serving after SIGTERM
	// while /readyz answers 503, so that the Service stops sending it
	// requests before it closes its listener (a rolling restart drops
	// none).
	ShutdownDelay time.Duration

	LogLevel  string
	LogFormat string
}

// NewOptions returns the defaults with the environment applied.
func NewOptions() *Options {
	o := &Options{
		Serving:     httpapi.Serving{Listen: "127.0.0.1:8090", TokenSecretKey: auth.DefaultSecretKey, TokenReload: 30 * time.Second},
		HostContext: "karmada-host",
		DBMaxConns:  20, DBWait: 2 * time.Minute,
		Store: StoreFS, ArtifactDir: "mlconnector-artifacts", S3Bucket: "mlsysops-models", S3Region: "us-east-1",
		ServingPort: 8080, Access: deploy.AccessExternal, ReconcileInterval: 2 * time.Second, ForwardTimeout: 30 * time.Second,
		DriftInterval: 24 * time.Hour, DriftWindow: 24 * time.Hour, DriftMaxSamples: 100_000,
		SweepInterval: 5 * time.Minute, OrphanAge: time.Hour,
		MaxBodyBytes: handlers.DefaultMaxBodyBytes, MaxUploadBytes: handlers.DefaultMaxUploadBytes,
		RequestTimeout: httpapi.DefaultRequestTimeout, UploadTimeout: handlers.DefaultUploadTimeout, ShutdownTimeout: 20 * time.Second, ShutdownDelay: 5 * time.Second,
		LogLevel: "info", LogFormat: "json",
	}
	env := func(dst *string, keys ...string) {
		for _, k := range keys {
			if v := os.Getenv(k); v != "" {
				*dst = v
				return
			}
		}
	}
	env(&o.Listen, "MLC_LISTEN")
	env(&o.TokenFile, "MLC_TOKEN_FILE", "NB_TOKEN_FILE")
	env(&o.TokenSecret, "MLC_TOKEN_SECRET", "NB_TOKEN_SECRET")
	env(&o.Kubeconfig, "KUBECONFIG")
	env(&o.DatabaseURL, "MLC_DATABASE_URL")
	if o.DatabaseURL == "" && os.Getenv("POSTGRES_USER") != "" {
		host, port := os.Getenv("DB_HOST_NAME"), os.Getenv("DB_PORT")
		if host == "" {
			host = "127.0.0.1"
		}
		if port == "" {
			port = "5432"
		}
		u := url.URL{Scheme: "postgres", User: url.UserPassword(os.Getenv("POSTGRES_USER"), os.Getenv("POSTGRES_PASSWORD")),
			Host: net.JoinHostPort(host, port), Path: "/" + os.Getenv("POSTGRES_DB"), RawQuery: "sslmode=disable"}
		o.DatabaseURL = u.String()
	}
	env(&o.Store, "MLC_ARTIFACT_STORE")
	env(&o.ArtifactDir, "MLC_ARTIFACT_DIR")
	env(&o.S3Endpoint, "MLC_S3_ENDPOINT", "AWS_ACCESS_URL")
	env(&o.S3Bucket, "MLC_S3_BUCKET", "AWS_S3_BUCKET_DATA")
	env(&o.S3Region, "AWS_REGION")
	env(&o.S3CredentialsDir, "MLC_S3_CREDENTIALS_DIR")
	if o.S3Endpoint != "" && os.Getenv("MLC_ARTIFACT_STORE") == "" {
		o.Store = StoreS3
	}
	env(&o.NorthboundURL, "MLC_NORTHBOUND_URL", "MLS_API_URL", "NORTHBOUND_API_ENDPOINT", "NOTHBOUND_API_ENDPOINT")
	env(&o.NorthboundToken, "MLC_NORTHBOUND_TOKEN")
	env(&o.NorthboundCAFile, "MLS_CA_FILE")
	env(&o.ModelServerImage, "MLC_MODEL_SERVER_IMAGE")
	env(&o.DownloadURL, "MLC_DOWNLOAD_URL", "SIDE_API_ENDPOINT")
	return o
}

// AddFlags registers every option as a flag.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.Serving.AddFlags(fs, "the northbound API's")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig for --token-secret (default in-cluster)")
	fs.StringVar(&o.HostContext, "host-context", o.HostContext, "kubeconfig context of the cluster holding --token-secret")
	fs.StringVar(&o.DatabaseURLFile, "database-url-file", o.DatabaseURLFile, "file holding the PostgreSQL URL (or MLC_DATABASE_URL)")
	fs.Int32Var(&o.DBMaxConns, "db-max-conns", o.DBMaxConns, "largest number of database connections")
	fs.DurationVar(&o.DBWait, "db-wait", o.DBWait, "how long the start waits for the database")
	fs.StringVar(&o.Store, "artifact-store", o.Store, "where files go: filesystem or s3")
	fs.StringVar(&o.ArtifactDir, "artifact-dir", o.ArtifactDir, "folder of the filesystem store")
	fs.StringVar(&o.S3Endpoint, "s3-endpoint", o.S3Endpoint, "S3 endpoint, http(s)://host:port")
	fs.StringVar(&o.S3Bucket, "s3-bucket", o.S3Bucket, "S3 bucket (created when missing)")
	fs.StringVar(&o.S3Region, "s3-region", o.S3Region, "S3 region")
	fs.StringVar(&o.S3Prefix, "s3-prefix", o.S3Prefix, "prefix of every object key")
	fs.StringVar(&o.S3CredentialsDir, "s3-credentials-dir", o.S3CredentialsDir, "folder with files access-key and secret-key (default AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)")
	fs.StringVar(&o.NorthboundURL, "northbound-url", o.NorthboundURL, "northbound API URL (deployments need it)")
	fs.StringVar(&o.NorthboundTokenFile, "northbound-token-file", o.NorthboundTokenFile, "file holding the operator token the connector calls the northbound API with (or MLC_NORTHBOUND_TOKEN)")
	fs.StringVar(&o.NorthboundCAFile, "northbound-ca-file", o.NorthboundCAFile, "CA of an https northbound API")
	fs.StringVar(&o.ModelServerImage, "model-server-image", o.ModelServerImage, "image of the built-in model server (onnx, lightgbm, xgboost)")
	fs.StringVar(&o.FetchImage, "fetch-image", o.FetchImage, "image of the init container that fetches artifacts (default --model-server-image)")
	fs.Int32Var(&o.ServingPort, "serving-port", o.ServingPort, "port of the built-in model server")
	fs.StringVar(&o.DownloadURL, "download-url", o.DownloadURL, "the connector's URL as pods reach it, for artifact downloads (default http://<listen>)")
	fs.StringVar(&o.Access, "access", o.Access, "how predictions reach model servers: external (NodePort), service (in-cluster URL) or pod (pod IP)")
	fs.DurationVar(&o.ReconcileInterval, "reconcile-interval", o.ReconcileInterval, "how often deployments are submitted or observed")
	fs.DurationVar(&o.ForwardTimeout, "forward-timeout", o.ForwardTimeout, "time limit of a request forwarded to a model server")
	fs.DurationVar(&o.DriftInterval, "drift-interval", o.DriftInterval, "how often models with drift detection on are checked (0 never)")
	fs.DurationVar(&o.DriftWindow, "drift-window", o.DriftWindow, "how far back inputs count as recent")
	fs.IntVar(&o.DriftMaxSamples, "drift-max-samples", o.DriftMaxSamples, "most recent inputs one check reads")
	fs.DurationVar(&o.SweepInterval, "sweep-interval", o.SweepInterval, "how often queued artifact deletions and orphans are swept")
	fs.DurationVar(&o.OrphanAge, "orphan-age", o.OrphanAge, "age after which an object no row knows is deleted")
	fs.Int64Var(&o.MaxBodyBytes, "max-body-bytes", o.MaxBodyBytes, "largest JSON body accepted")
	fs.Int64Var(&o.MaxUploadBytes, "max-upload-bytes", o.MaxUploadBytes, "largest uploaded file accepted")
	fs.StringVar(&o.UploadDir, "upload-dir", o.UploadDir, "folder uploads are spooled to (default the system's temporary folder)")
	fs.DurationVar(&o.RequestTimeout, "request-timeout", o.RequestTimeout, "time limit of one request")
	fs.DurationVar(&o.UploadTimeout, "upload-timeout", o.UploadTimeout, "time limit of uploads, downloads, drift checks and explanations")
	fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", o.ShutdownTimeout, "how long in-flight requests may finish after SIGTERM")
	fs.DurationVar(&o.ShutdownDelay, "shutdown-delay", o.ShutdownDelay, "how long to keep serving after SIGTERM with /readyz failing, so the Service stops routing here first")
	fs.StringVar(&o.LogLevel, "log-level", o.LogLevel, "debug, info, warn or error")
	fs.StringVar(&o.LogFormat, "log-format", o.LogFormat, "json or text")
}

// Validate reports every problem with the options.
func (o *Options) Validate() error {
	errs := o.Serving.Validate()
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if o.DatabaseURL == "" && o.DatabaseURLFile == "" {
		add("no database: set MLC_DATABASE_URL (postgres://user:password@host:port/db) or --database-url-file")
	}
	if o.DatabaseURL != "" && o.DatabaseURLFile != "" && os.Getenv("MLC_DATABASE_URL") != "" {
		add("MLC_DATABASE_URL and --database-url-file exclude each other")
	}
	if o.DBMaxConns < 1 {
		add("--db-max-conns %d: at least 1", o.DBMaxConns)
	}
	switch o.Store {
	case StoreFS:
		if o.ArtifactDir == "" {
			add("--artifact-dir is required with --artifact-store filesystem")
		}
	case StoreS3:
		if u, err := url.Parse(o.S3Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add("--s3-endpoint %q: want http(s)://host:port", o.S3Endpoint)
		}
		if o.S3Bucket == "" {
			add("--s3-bucket is required with --artifact-store s3")
		}
		if o.S3CredentialsDir == "" && (os.Getenv("AWS_ACCESS_KEY_ID") == "" || os.Getenv("AWS_SECRET_ACCESS_KEY") == "") {
			add("no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or --s3-credentials-dir")
		}
	default:
		add("--artifact-store %q: want filesystem or s3", o.Store)
	}
	if o.NorthboundURL != "" {
		if u, err := url.Parse(o.NorthboundURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add("--northbound-url %q: want http(s)://host:port", o.NorthboundURL)
		}
		if o.NorthboundToken == "" && o.NorthboundTokenFile == "" {
			add("--northbound-url needs an operator token: MLC_NORTHBOUND_TOKEN or --northbound-token-file")
		}
		if o.ModelServerImage == "" {
			add("--model-server-image is required to deploy models (or MLC_MODEL_SERVER_IMAGE)")
		}
	}
	if o.DownloadURL != "" {
		if u, err := url.Parse(o.DownloadURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add("--download-url %q: want http(s)://host:port", o.DownloadURL)
		}
	}
	switch o.Access {
	case deploy.AccessExternal, deploy.AccessService, deploy.AccessPod:
	default:
		add("--access %q: want external, service or pod", o.Access)
	}
	if o.ServingPort < 1 || o.ServingPort > 65535 {
		add("--serving-port %d: from 1 to 65535", o.ServingPort)
	}
	if o.DriftInterval < 0 || o.SweepInterval < 0 {
		add("--drift-interval and --sweep-interval must not be negative")
	}
	if o.ShutdownDelay < 0 {
		add("--shutdown-delay must not be negative")
	}
	for _, d := range []struct {
		name string
		d    time.Duration
	}{{"--request-timeout", o.RequestTimeout}, {"--upload-timeout", o.UploadTimeout}, {"--shutdown-timeout", o.ShutdownTimeout},
		{"--reconcile-interval", o.ReconcileInterval}, {"--forward-timeout", o.ForwardTimeout}, {"--drift-window", o.DriftWindow},
		{"--db-wait", o.DBWait}, {"--orphan-age", o.OrphanAge}} {
		if d.d <= 0 {
			add("%s must be positive", d.name)
		}
	}
	if o.DriftMaxSamples < 10 {
		add("--drift-max-samples %d: at least 10", o.DriftMaxSamples)
	}
	if o.MaxBodyBytes < 1024 {
		add("--max-body-bytes %d: at least 1024", o.MaxBodyBytes)
	}
	if o.MaxUploadBytes < 1024 {
		add("--max-upload-bytes %d: at least 1024", o.MaxUploadBytes)
	}
	errs = append(errs, logging.CheckFlags(o.LogFormat, o.LogLevel)...)
	return errors.Join(errs...)
}
