// Package server runs the MLSysOps northbound API: its options (flags with
// environment fallbacks), the wiring of Redis, Karmada, XMPP, the token
// source and the policy store, and an HTTP server with optional TLS and
// graceful shutdown.
package server

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/mlsysops-go/mlsysops/internal/auth"
	"github.com/mlsysops-go/mlsysops/internal/httpapi"
	"github.com/mlsysops-go/mlsysops/internal/logging"
	"github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/northbound/api"
	"github.com/mlsysops-go/mlsysops/northbound/handlers"
)

// Options configure the northbound server. Flags win over environment
// variables, which win over defaults.
type Options struct {
	// Serving: where it listens (NB_LISTEN), TLS, and its token source, a
	// file (NB_TOKEN_FILE) or a Secret on the host cluster
	// (NB_TOKEN_SECRET).
	httpapi.Serving
	// PublicPaths are served without a token.
	PublicPaths []string

	// Redis: addresses (REDIS_ADDR, or upstream's REDIS_HOST and
	// REDIS_PORT), password (REDIS_PASSWORD), mode, Sentinel master, DB
	// and key prefix.
	RedisAddrs []string
	// RedisUsername is the Redis ACL user (REDIS_USERNAME; empty: the
	// default user); state.ACLRules says what the northbound's may do.
	RedisUsername   string
	RedisPassword   string
	RedisMode       string
	RedisMasterName string
	RedisDB         int
	RedisPrefix     string
	RedisTLS        bool
	RedisCAFile     string
	// RedisPasswordFile is a file holding the Redis password, read at
	// start when REDIS_PASSWORD is not set. There is no flag with the
	// password itself: any local user could read it in the process list.
	RedisPasswordFile string
	// RedisSentinelPassword authenticates with the sentinels when they
	// have a password (REDIS_SENTINEL_PASSWORD, or the content of
	// RedisSentinelPasswordFile).
	RedisSentinelPassword     string
	RedisSentinelPasswordFile string

	// Kubeconfig (KUBECONFIG) and its contexts for the Karmada API and
	// the Karmada host cluster. Without a kubeconfig the in-cluster
	// configuration is used for both, when there is one; with neither,
	// the Karmada-backed routes answer 503.
	Kubeconfig     string
	KarmadaContext string
	HostContext    string
	// AppNamespace holds the MLSysOpsApp and MLSysOpsNode resources in
	// Karmada.
	AppNamespace string

	// PolicyDirs, "layer=dir", keep policies in directories instead of the
	// policy ConfigMaps.
	PolicyDirs []string

	// XMPP account of the API (XMPP_JID, XMPP_PASSWORD or
	// XMPP_PASSWORD_FILE, XMPP_ADDR, XMPP_CA_FILE). Without a JID, ping and
	// mode answer 503.
	XMPPJID          string
	XMPPPassword     string
	XMPPPasswordFile string
	// XMPPServers are the c2s addresses of the ejabberd cluster's nodes
	// (XMPP_ADDR, comma-separated); the client moves to the next when its
	// server fails.
	XMPPServers []string
	XMPPCAFile  string
	// XMPPResource is this replica's XMPP resource (XMPP_RESOURCE, else
	// POD_NAME; default the host name): replicas of the API share the
	// account, each with a session of its own.
	XMPPResource string
	// ContinuumJID is pinged by /manage/ping while no continuum agent is
	// registered; ContinuumID is reported as the continuum's id.
	ContinuumJID string
	ContinuumID  string

	// Limits.
	MaxBodyBytes    int64
	RequestTimeout  time.Duration
	PingTimeout     time.Duration
	ShutdownTimeout time.Duration
	// ShutdownDelay is how long a replica keeps serving after SIGTERM
	// while /readyz answers 503, so that the Service stops sending it
	// requests before it closes its listener (a rolling restart drops
	// none).
	ShutdownDelay time.Duration

	// LogLevel is debug, info, warn or error; LogFormat json or text.
	LogLevel  string
	LogFormat string
}

// NewOptions returns the defaults, with environment variables applied.
func NewOptions() *Options {
	o := &Options{
		Serving:         httpapi.Serving{Listen: "127.0.0.1:8000", TokenSecretKey: auth.DefaultSecretKey, TokenReload: 30 * time.Second},
		PublicPaths:     append([]string(nil), handlers.DefaultPublicPaths...),
		RedisMode:       string(state.ModeSingle),
		RedisPrefix:     state.DefaultPrefix,
		KarmadaContext:  "karmada-apiserver",
		HostContext:     "karmada-host",
		MaxBodyBytes:    handlers.DefaultMaxBodyBytes,
		RequestTimeout:  handlers.DefaultRequestTimeout,
		PingTimeout:     handlers.DefaultPingTimeout,
		ShutdownTimeout: 20 * time.Second,
		ShutdownDelay:   5 * time.Second,
		LogLevel:        "info",
		LogFormat:       "json",
	}
	env := func(dst *string, keys ...string) {
		for _, k := range keys {
			if v := os.Getenv(k); v != "" {
				*dst = v
				return
			}
		}
	}
	env(&o.Listen, "NB_LISTEN")
	env(&o.TokenFile, "NB_TOKEN_FILE")
	env(&o.TokenSecret, "NB_TOKEN_SECRET")
	if a := os.Getenv("REDIS_ADDR"); a != "" {
		o.RedisAddrs = strings.Split(a, ",")
	} else if h := os.Getenv("REDIS_HOST"); h != "" {
		port := os.Getenv("REDIS_PORT")
		if port == "" {
			port = "6379"
		}
		o.RedisAddrs = []string{net.JoinHostPort(h, port)}
	}
	env(&o.RedisUsername, "REDIS_USERNAME")
	env(&o.RedisPassword, "REDIS_PASSWORD")
	env(&o.RedisSentinelPassword, "REDIS_SENTINEL_PASSWORD")
	env(&o.Kubeconfig, "KUBECONFIG")
	env(&o.XMPPJID, "XMPP_JID")
	env(&o.XMPPPassword, "XMPP_PASSWORD")
	env(&o.XMPPPasswordFile, "XMPP_PASSWORD_FILE")
	if a := os.Getenv("XMPP_ADDR"); a != "" {
		o.XMPPServers = strings.Split(a, ",")
	}
	env(&o.XMPPCAFile, "XMPP_CA_FILE")
	env(&o.XMPPResource, "XMPP_RESOURCE", "POD_NAME")
	return o
}

// AddFlags registers every option as a flag.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.Serving.AddFlags(fs, "the ML connector reads the same")
	fs.StringSliceVar(&o.PublicPaths, "public-paths", o.PublicPaths, "paths served without a token (a trailing / covers a subtree)")
	fs.StringSliceVar(&o.RedisAddrs, "redis-addr", o.RedisAddrs, "Redis address(es), host:port: the server, the sentinels or cluster seeds")
	fs.StringVar(&o.RedisUsername, "redis-username", o.RedisUsername, "Redis ACL user (or REDIS_USERNAME); default Redis's default user")
	fs.StringVar(&o.RedisPasswordFile, "redis-password-file", o.RedisPasswordFile, "file holding the Redis password (or REDIS_PASSWORD)")
	fs.StringVar(&o.RedisMode, "redis-mode", o.RedisMode, "single, sentinel or cluster")
	fs.StringVar(&o.RedisMasterName, "redis-master-name", o.RedisMasterName, "Sentinel master group")
	fs.StringVar(&o.RedisSentinelPasswordFile, "redis-sentinel-password-file", o.RedisSentinelPasswordFile, "file holding the sentinels' password, when they have one (or REDIS_SENTINEL_PASSWORD)")
	fs.IntVar(&o.RedisDB, "redis-db", o.RedisDB, "Redis database")
	fs.StringVar(&o.RedisPrefix, "redis-prefix", o.RedisPrefix, "prefix of every Redis key (the agents must use the same)")
	fs.BoolVar(&o.RedisTLS, "redis-tls", o.RedisTLS, "connect to Redis with TLS")
	fs.StringVar(&o.RedisCAFile, "redis-ca-file", o.RedisCAFile, "CA of the Redis server certificate (PEM)")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig with the Karmada API and host contexts (default in-cluster)")
	fs.StringVar(&o.KarmadaContext, "karmada-context", o.KarmadaContext, "kubeconfig context of the Karmada API")
	fs.StringVar(&o.HostContext, "host-context", o.HostContext, "kubeconfig context of the Karmada host cluster (continuum policies, token Secret)")
	fs.StringVar(&o.AppNamespace, "app-namespace", o.AppNamespace, "Karmada namespace of MLSysOpsApp and MLSysOpsNode resources (default the continuum agent's)")
	fs.StringSliceVar(&o.PolicyDirs, "policy-dir", o.PolicyDirs, "keep a layer's policies in directories: layer=dir (continuum, cluster, node); repeat for several agents of a layer")
	fs.StringVar(&o.XMPPJID, "xmpp-jid", o.XMPPJID, "XMPP account of the API, e.g. northbound@mlsysops.local")
	fs.StringVar(&o.XMPPPasswordFile, "xmpp-password-file", o.XMPPPasswordFile, "file holding the XMPP password (or XMPP_PASSWORD)")
	fs.StringSliceVar(&o.XMPPServers, "xmpp-server", o.XMPPServers, "XMPP c2s address, host:port; repeated or comma-separated for the nodes of an ejabberd cluster (default the JID's domain:5222)")
	fs.StringVar(&o.XMPPCAFile, "xmpp-ca-file", o.XMPPCAFile, "CA of the XMPP server certificate (PEM)")
	fs.StringVar(&o.XMPPResource, "xmpp-resource", o.XMPPResource, "this replica's XMPP resource ($XMPP_RESOURCE, $POD_NAME; default the host name): replicas share the account, one session each")
	fs.StringVar(&o.ContinuumJID, "continuum-jid", o.ContinuumJID, "continuum agent pinged by /manage/ping while none is registered")
	fs.StringVar(&o.ContinuumID, "continuum-id", o.ContinuumID, "continuum id reported by /v1/infrastructure")
	fs.Int64Var(&o.MaxBodyBytes, "max-body-bytes", o.MaxBodyBytes, "largest request body accepted")
	fs.DurationVar(&o.RequestTimeout, "request-timeout", o.RequestTimeout, "time limit of one request")
	fs.DurationVar(&o.PingTimeout, "ping-timeout", o.PingTimeout, "time limit of one round trip to an agent")
	fs.DurationVar(&o.ShutdownTimeout, "shutdown-timeout", o.ShutdownTimeout, "how long in-flight requests may finish after SIGTERM")
	fs.DurationVar(&o.ShutdownDelay, "shutdown-delay", o.ShutdownDelay, "how long to keep serving after SIGTERM with /readyz failing, so the Service stops routing here first")
	fs.StringVar(&o.LogLevel, "log-level", o.LogLevel, "debug, info, warn or error")
	fs.StringVar(&o.LogFormat, "log-format", o.LogFormat, "json or text")
}

// Validate reports every problem with the options.
func (o *Options) Validate() error {
	errs := o.Serving.Validate()
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for _, p := range o.PublicPaths {
		if !strings.HasPrefix(p, "/") {
			add("--public-paths %q: paths start with /", p)
		}
	}
	if len(o.RedisAddrs) == 0 {
		add("no Redis address: set --redis-addr or REDIS_ADDR")
	} else if err := o.redisConfig().Validate(); err != nil {
		add("redis: %v", err)
	}
	for _, d := range o.PolicyDirs {
		layer, dir, ok := strings.Cut(d, "=")
		if !ok || dir == "" || !api.ValidLayer(layer) {
			add("--policy-dir %q: want layer=dir with layer continuum, cluster or node", d)
		}
	}
	if o.XMPPJID != "" && o.XMPPPassword == "" && o.XMPPPasswordFile == "" {
		add("--xmpp-jid needs a password: XMPP_PASSWORD or --xmpp-password-file")
	}
	if o.ShutdownDelay < 0 {
		add("--shutdown-delay must not be negative")
	}
	if o.MaxBodyBytes < 1024 {
		add("--max-body-bytes %d: at least 1024", o.MaxBodyBytes)
	}
	for _, d := range []struct {
		name string
		d    time.Duration
	}{{"--request-timeout", o.RequestTimeout}, {"--ping-timeout", o.PingTimeout}, {"--shutdown-timeout", o.ShutdownTimeout}} {
		if d.d <= 0 {
			add("%s must be positive", d.name)
		}
	}
	errs = append(errs, logging.CheckFlags(o.LogFormat, o.LogLevel)...)
	return errors.Join(errs...)
}

func (o *Options) redisConfig() state.Config {
	return state.Config{
		Mode: state.Mode(o.RedisMode), Addrs: o.RedisAddrs, MasterName: o.RedisMasterName,
		Username: o.RedisUsername, Password: o.RedisPassword, SentinelPassword: o.RedisSentinelPassword, DB: o.RedisDB, TLS: o.RedisTLS, CAFile: o.RedisCAFile,
	}
}
