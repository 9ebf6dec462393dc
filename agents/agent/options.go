package agent

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/mlsysops-go/mlsysops/internal/agentconfig"
	"github.com/mlsysops-go/mlsysops/internal/logging"
)

// Connection holds what an agent needs to reach the services around it:
// ejabberd, Redis, the Kubernetes and Karmada APIs, its description folder
// and its HTTP listener. The behaviour options (layer, policies, mechanisms,
// intervals) are agentconfig.Options.
type Connection struct {
	// XMPPServers are the c2s addresses, host:port, of the ejabberd
	// cluster's nodes (MLSYSOPS_XMPP_SERVER, comma-separated; default
	// <domain>:5222). The agent moves to the next when its server fails.
	XMPPServers []string
	// XMPPDomain is the XMPP domain of every agent's account
	// (MLSYSOPS_XMPP_DOMAIN, else EJABBERD_DOMAIN).
	XMPPDomain string
	// XMPPCAFile is a PEM bundle that signs ejabberd's certificate
	// (MLSYSOPS_XMPP_CA_FILE); empty uses the system roots.
	XMPPCAFile string
	// XMPPPasswordFile holds the account's password, usually a Secret
	// mount (MLSYSOPS_XMPP_PASSWORD_FILE). Without it the password comes
	// from MLSYSOPS_XMPP_PASSWORD or the upstream NODE_PASSWORD.
	XMPPPasswordFile string
	// XMPPJID overrides the agent's own bare JID (default: see AgentJID).
	XMPPJID string
	// EventsKubeconfig is the kubeconfig of the cluster where the agent
	// reports, as a Kubernetes Event the accounts reconciler watches, that
	// ejabberd refuses its login (MLSYSOPS_EVENTS_KUBECONFIG). Empty: the
	// pod's own cluster; outside a pod no report is made, and the
	// reconciler's periodic pass repairs the account later.
	EventsKubeconfig string
	// EventsContext is the context in EventsKubeconfig (default: current).
	EventsContext string
	// Parent overrides the parent's bare JID (default: the cluster agent
	// named by the node's cluster_id, or the continuum agent).
	Parent string
	// ContinuumName is the continuum agent's name, for cluster agents (their
	// parent) and node agents (which accept its commands). Default: the
	// continuum description in the descriptions folder.
	ContinuumName string
	// Controllers are further JIDs allowed to send commands (the northbound
	// API's account, operators' tools).
	Controllers []string
	// HeartbeatInterval is how often a child signals liveness to its
	// parent; the parent declares it gone after three missed beats.
	HeartbeatInterval time.Duration
	// ChildGracePeriod is how long a child agent (a cluster agent for the
	// continuum, a node agent for a cluster) may be gone before its
	// cluster or node is taken out of placement and its work moved; zero
	// never takes them out.
	ChildGracePeriod time.Duration
	// CapacityReportInterval is the longest a cluster agent waits between
	// two capacity reports to the continuum; changes are reported sooner.
	CapacityReportInterval time.Duration
	// PendingSettle is how long a component's pods may stay unschedulable
	// on the nodes a cluster agent chose before those nodes count as full
	// for the component and it is placed again.
	PendingSettle time.Duration

	// RedisAddr is the Redis server, host:port (MLSYSOPS_REDIS_ADDR, else
	// the upstream REDIS_HOST and REDIS_PORT); with RedisMode sentinel the
	// sentinels and cluster some of the cluster's nodes, comma-separated.
	// Used by the continuum and cluster layers.
	RedisAddr string
	// RedisMode is single (default), sentinel or cluster
	// (MLSYSOPS_REDIS_MODE).
	RedisMode string
	// RedisMasterName is the master group the sentinels watch
	// (MLSYSOPS_REDIS_MASTER_NAME); required in sentinel mode.
	RedisMasterName string
	// RedisUsername is the Redis ACL user (MLSYSOPS_REDIS_USERNAME; empty:
	// Redis's default user, with requirepass). state.ACLRules gives each
	// layer's user only what it needs.
	RedisUsername string
	// RedisPasswordFile holds the Redis password (MLSYSOPS_REDIS_PASSWORD_FILE);
	// else MLSYSOPS_REDIS_PASSWORD or REDIS_PASSWORD.
	RedisPasswordFile string
	// RedisSentinelPasswordFile holds the sentinels' password when they
	// have one (MLSYSOPS_REDIS_SENTINEL_PASSWORD_FILE; else
	// MLSYSOPS_REDIS_SENTINEL_PASSWORD).
	RedisSentinelPasswordFile string
	// RedisPrefix starts every key (tests use their own).
	RedisPrefix string
	// RedisDB selects the database (REDIS_DB_NUMBER).
	RedisDB int

	// Kubeconfig is the member cluster's kubeconfig for the cluster layer
	// (MLSYSOPS_KUBECONFIG, else KUBECONFIG; empty: in-cluster).
	Kubeconfig string
	// KubeContext is the context to use in Kubeconfig (default: current).
	KubeContext string
	// KarmadaKubeconfig is the Karmada API's kubeconfig for the continuum
	// layer (KARMADA_API_KUBECONFIG).
	KarmadaKubeconfig string
	// KarmadaContext is the context in KarmadaKubeconfig.
	KarmadaContext string
	// PlacementControllers runs the placement controllers (continuum:
	// Karmada placement; cluster: fluidity). Tests that share a testbed
	// with other controllers turn them off.
	PlacementControllers bool
	// InstallAPI makes the continuum agent install the MLSysOps API in
	// Karmada at start (CRDs, their propagation, the application
	// namespace and status interpreter). The deployer installs them
	// itself and turns this off, so that the agent only checks them and
	// needs no right to write CRDs or Karmada policies
	// (MLSYSOPS_INSTALL_API).
	InstallAPI bool
	// Propagation is how the continuum agent propagates the applications
	// it places (MLSYSOPS_PROPAGATION): "work" (the default), writing each
	// placed cluster's Work itself (agents/continuum/works.go), or
	// "binding", as Karmada's scheduler of their ResourceBindings.
	Propagation string

	// LeaderElect runs the agent as one replica of several with the same
	// identity, of which only the holder of a Kubernetes Lease acts
	// (MLSYSOPS_LEADER_ELECT): the continuum and cluster layers. See
	// replica.go and docs/operations.md.
	LeaderElect bool
	// LeaderElectLease is the Lease, "namespace/name" (default
	// mlsysops/mlsysops-<layer>-<name>), in the API of LeaderElectKubeconfig
	// and LeaderElectContext; by default the layer's own API: Karmada's
	// for the continuum, the member cluster's for a cluster agent.
	LeaderElectLease                          string
	LeaderElectKubeconfig, LeaderElectContext string
	// LeaderElectIdentity names this replica in the Lease (default
	// $POD_NAME, else the host name and a random suffix).
	LeaderElectIdentity string
	// LeaseDuration is how long followers wait after the last renewal
	// before they take the lease; RenewDeadline how long the leader tries
	// to renew before it stops acting; RetryPeriod how often both try.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration

	// Descriptions is the system description folder (DESCRIPTION_PATH,
	// default <install-path>/descriptions).
	Descriptions string
	// DescriptionPollInterval is how often the agent reads its own
	// description again to apply changes (an edited ConfigMap); zero
	// never does.
	DescriptionPollInterval time.Duration
	// Listen is the address of /metrics, /healthz, /readyz and /status
	// (MLSYSOPS_LISTEN); empty disables the server.
	Listen string
	// Profiling serves Go's profiles under /debug/pprof/ on Listen.
	Profiling bool
	// HTTPTokenFile holds a bearer token that /status, POST /ping and
	// /debug/pprof/ then require (MLSYSOPS_HTTP_TOKEN_FILE): they show the
	// agent's plans, peers and (profiles) command line, and a ping makes
	// traffic. /healthz, /readyz and /metrics stay open for probes and
	// Prometheus. Empty: nothing is required.
	HTTPTokenFile string
	// LogLevel is debug, info, warn or error (LOG_LEVEL).
	LogLevel string
	// LogFormat is json or text (MLSYSOPS_LOG_FORMAT).
	LogFormat string

	// GCPercent is the garbage collector's target (debug.SetGCPercent);
	// -1 turns the collector off. Zero keeps $GOGC when it is set, else
	// the layer's default: 50 on nodes, Go's 100 elsewhere.
	GCPercent int
	// MemoryLimit is a soft limit of the Go runtime's memory, such as
	// 32MiB (debug.SetMemoryLimit); empty keeps $GOMEMLIMIT, else none.
	MemoryLimit string
}

// NewConnection returns the defaults.
func NewConnection() *Connection {
	return &Connection{
		XMPPDomain:              "mlsysops.local",
		HeartbeatInterval:       2 * time.Second,
		ChildGracePeriod:        time.Minute,
		CapacityReportInterval:  30 * time.Second,
		PendingSettle:           30 * time.Second,
		DescriptionPollInterval: 5 * time.Second,
		RedisPrefix:             "mlsysops",
		KarmadaContext:          "karmada-apiserver",
		PlacementControllers:    true,
		InstallAPI:              true,
		Propagation:             PropagationWork,
		LeaseDuration:           15 * time.Second,
		RenewDeadline:           10 * time.Second,
		RetryPeriod:             2 * time.Second,
		Listen:                  ":9464",
		LogLevel:                "info",
		LogFormat:               "json",
	}
}

// FromEnv fills the options from the environment; flags parsed later
// override it.
func (c *Connection) FromEnv(env agentconfig.LookupEnv) error {
	get := func(keys ...string) (string, bool) {
		for _, k := range keys {
			if v, ok := env(k); ok && v != "" {
				return v, true
			}
		}
		return "", false
	}
	str := func(p *string, keys ...string) {
		if v, ok := get(keys...); ok {
			*p = v
		}
	}
	if v, ok := get("MLSYSOPS_XMPP_SERVER", "XMPP_ADDR"); ok {
		c.XMPPServers = splitList(v)
	}
	str(&c.XMPPDomain, "MLSYSOPS_XMPP_DOMAIN", "EJABBERD_DOMAIN")
	str(&c.XMPPCAFile, "MLSYSOPS_XMPP_CA_FILE")
	str(&c.XMPPPasswordFile, "MLSYSOPS_XMPP_PASSWORD_FILE")
	str(&c.XMPPJID, "MLSYSOPS_XMPP_JID")
	str(&c.EventsKubeconfig, "MLSYSOPS_EVENTS_KUBECONFIG")
	str(&c.EventsContext, "MLSYSOPS_EVENTS_CONTEXT")
	str(&c.Parent, "MLSYSOPS_PARENT")
	str(&c.ContinuumName, "MLSYSOPS_CONTINUUM_NAME")
	if v, ok := get("MLSYSOPS_XMPP_CONTROLLERS"); ok {
		c.Controllers = splitList(v)
	}
	str(&c.RedisAddr, "MLSYSOPS_REDIS_ADDR")
	if c.RedisAddr == "" {
		if h, ok := get("REDIS_HOST"); ok {
			port, _ := get("REDIS_PORT")
			if port == "" {
				port = "6379"
			}
			c.RedisAddr = h + ":" + port
		}
	}
	str(&c.RedisMode, "MLSYSOPS_REDIS_MODE")
	str(&c.RedisMasterName, "MLSYSOPS_REDIS_MASTER_NAME")
	str(&c.RedisUsername, "MLSYSOPS_REDIS_USERNAME")
	str(&c.RedisPasswordFile, "MLSYSOPS_REDIS_PASSWORD_FILE")
	str(&c.HTTPTokenFile, "MLSYSOPS_HTTP_TOKEN_FILE")
	str(&c.RedisSentinelPasswordFile, "MLSYSOPS_REDIS_SENTINEL_PASSWORD_FILE")
	str(&c.RedisPrefix, "MLSYSOPS_REDIS_PREFIX")
	if v, ok := get("MLSYSOPS_REDIS_DB", "REDIS_DB_NUMBER"); ok {
		if _, err := fmt.Sscan(v, &c.RedisDB); err != nil {
			return fmt.Errorf("env REDIS_DB_NUMBER=%q: want a number", v)
		}
	}
	str(&c.Kubeconfig, "MLSYSOPS_KUBECONFIG", "KUBECONFIG")
	str(&c.KubeContext, "MLSYSOPS_KUBE_CONTEXT")
	str(&c.KarmadaKubeconfig, "MLSYSOPS_KARMADA_KUBECONFIG", "KARMADA_API_KUBECONFIG")
	str(&c.KarmadaContext, "MLSYSOPS_KARMADA_CONTEXT")
	str(&c.Descriptions, "MLSYSOPS_DESCRIPTIONS", "DESCRIPTION_PATH")
	if v, ok := get("MLSYSOPS_LEADER_ELECT"); ok {
		c.LeaderElect = v == "true" || v == "1"
	}
	str(&c.LeaderElectLease, "MLSYSOPS_LEADER_ELECT_LEASE")
	str(&c.LeaderElectIdentity, "MLSYSOPS_LEADER_ELECT_IDENTITY", "POD_NAME")
	str(&c.Propagation, "MLSYSOPS_PROPAGATION")
	if v, ok := get("MLSYSOPS_INSTALL_API"); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("env MLSYSOPS_INSTALL_API=%q: want true or false", v)
		}
		c.InstallAPI = b
	}
	if v, ok := env("MLSYSOPS_LISTEN"); ok {
		c.Listen = v
	}
	str(&c.LogLevel, "MLSYSOPS_LOG_LEVEL", "LOG_LEVEL")
	str(&c.LogFormat, "MLSYSOPS_LOG_FORMAT")
	return nil
}

// AddFlags adds one flag per connection option.
func (c *Connection) AddFlags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&c.XMPPServers, "xmpp-server", c.XMPPServers, "ejabberd c2s address host:port; repeated or comma-separated for the nodes of a cluster, the agent moves to the next when its server fails ($MLSYSOPS_XMPP_SERVER; default <domain>:5222)")
	fs.StringVar(&c.XMPPDomain, "xmpp-domain", c.XMPPDomain, "XMPP domain of the agents' accounts ($MLSYSOPS_XMPP_DOMAIN, $EJABBERD_DOMAIN)")
	fs.StringVar(&c.XMPPCAFile, "xmpp-ca-file", c.XMPPCAFile, "PEM CA bundle for ejabberd's certificate ($MLSYSOPS_XMPP_CA_FILE; default system roots)")
	fs.StringVar(&c.XMPPPasswordFile, "xmpp-password-file", c.XMPPPasswordFile, "file with the XMPP password, e.g. a Secret mount ($MLSYSOPS_XMPP_PASSWORD_FILE; else $MLSYSOPS_XMPP_PASSWORD or $NODE_PASSWORD)")
	fs.StringVar(&c.XMPPJID, "xmpp-jid", c.XMPPJID, "the agent's own bare JID (default: <name>@<domain> for nodes, <name>.cluster@ and <name>.continuum@ for the other layers)")
	fs.StringVar(&c.EventsKubeconfig, "events-kubeconfig", c.EventsKubeconfig, "kubeconfig of the cluster where refused XMPP logins are reported as Events for the accounts reconciler ($MLSYSOPS_EVENTS_KUBECONFIG; default in-cluster)")
	fs.StringVar(&c.EventsContext, "events-context", c.EventsContext, "context in --events-kubeconfig ($MLSYSOPS_EVENTS_CONTEXT; default: current)")
	fs.StringVar(&c.Parent, "parent", c.Parent, "the parent agent's bare JID (default from the descriptions)")
	fs.StringVar(&c.ContinuumName, "continuum-name", c.ContinuumName, "the continuum agent's name ($MLSYSOPS_CONTINUUM_NAME; default: the continuum description in --descriptions)")
	fs.StringSliceVar(&c.Controllers, "xmpp-controllers", c.Controllers, "further JIDs allowed to send commands, e.g. the northbound API ($MLSYSOPS_XMPP_CONTROLLERS)")
	fs.DurationVar(&c.HeartbeatInterval, "heartbeat-interval", c.HeartbeatInterval, "how often a child signals liveness to its parent")
	fs.DurationVar(&c.ChildGracePeriod, "child-grace-period", c.ChildGracePeriod, "how long a cluster or node agent may be gone before its cluster or node is taken out of placement and its work moved (0: never)")
	fs.DurationVar(&c.PendingSettle, "pending-settle", c.PendingSettle, "how long a component's pods may stay unschedulable on the nodes a cluster agent chose before it places the component elsewhere")
	fs.DurationVar(&c.CapacityReportInterval, "capacity-report-interval", c.CapacityReportInterval, "longest time between a cluster agent's capacity reports (changes are reported within a second)")
	fs.StringVar(&c.RedisAddr, "redis-addr", c.RedisAddr, "Redis host:port for the continuum and cluster layers; the sentinels or some cluster nodes, comma-separated, with --redis-mode ($MLSYSOPS_REDIS_ADDR, $REDIS_HOST:$REDIS_PORT)")
	fs.StringVar(&c.RedisMode, "redis-mode", c.RedisMode, "single, sentinel or cluster ($MLSYSOPS_REDIS_MODE; default single)")
	fs.StringVar(&c.RedisMasterName, "redis-master-name", c.RedisMasterName, "master group the sentinels watch, for --redis-mode sentinel ($MLSYSOPS_REDIS_MASTER_NAME)")
	fs.StringVar(&c.RedisUsername, "redis-username", c.RedisUsername, "Redis ACL user, the layer's own (state.ACLRules); default Redis's default user ($MLSYSOPS_REDIS_USERNAME)")
	fs.StringVar(&c.RedisPasswordFile, "redis-password-file", c.RedisPasswordFile, "file with the Redis password ($MLSYSOPS_REDIS_PASSWORD_FILE; else $MLSYSOPS_REDIS_PASSWORD or $REDIS_PASSWORD)")
	fs.StringVar(&c.RedisSentinelPasswordFile, "redis-sentinel-password-file", c.RedisSentinelPasswordFile, "file with the sentinels' password, when they have one ($MLSYSOPS_REDIS_SENTINEL_PASSWORD_FILE; else $MLSYSOPS_REDIS_SENTINEL_PASSWORD)")
	fs.StringVar(&c.RedisPrefix, "redis-prefix", c.RedisPrefix, "prefix of every Redis key")
	fs.IntVar(&c.RedisDB, "redis-db", c.RedisDB, "Redis database ($REDIS_DB_NUMBER)")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", c.Kubeconfig, "member cluster kubeconfig for the cluster layer ($MLSYSOPS_KUBECONFIG, $KUBECONFIG; default in-cluster)")
	fs.StringVar(&c.KubeContext, "kube-context", c.KubeContext, "context in --kubeconfig (default: current)")
	fs.StringVar(&c.KarmadaKubeconfig, "karmada-kubeconfig", c.KarmadaKubeconfig, "Karmada API kubeconfig for the continuum layer ($KARMADA_API_KUBECONFIG)")
	fs.StringVar(&c.KarmadaContext, "karmada-context", c.KarmadaContext, "context in --karmada-kubeconfig")
	fs.BoolVar(&c.InstallAPI, "install-api", c.InstallAPI, "continuum: install the MLSysOps CRDs, their propagation and the status interpreter in Karmada at start; false only checks them (the deployer installs them) ($MLSYSOPS_INSTALL_API)")
	fs.StringVar(&c.Propagation, "propagation", c.Propagation, "continuum: how placed applications reach their clusters: work (it writes each cluster's Karmada Work itself: half the writes in Karmada, needs rights on Works in every execution namespace) or binding (the continuum schedules each application's Karmada ResourceBinding) ($MLSYSOPS_PROPAGATION)")
	fs.BoolVar(&c.PlacementControllers, "placement-controllers", c.PlacementControllers, "run the placement controllers (continuum: Karmada placement, cluster: fluidity)")
	fs.BoolVar(&c.LeaderElect, "leader-elect", c.LeaderElect, "run as one of several replicas of this agent: only the holder of a Kubernetes Lease acts, the others stand by ($MLSYSOPS_LEADER_ELECT; continuum and cluster layers)")
	fs.StringVar(&c.LeaderElectLease, "leader-elect-lease", c.LeaderElectLease, "the Lease, namespace/name ($MLSYSOPS_LEADER_ELECT_LEASE; default mlsysops/mlsysops-<layer>-<name>)")
	fs.StringVar(&c.LeaderElectKubeconfig, "leader-elect-kubeconfig", c.LeaderElectKubeconfig, "kubeconfig of the API holding the Lease (default: the layer's own API, Karmada's for the continuum, the member cluster's for a cluster agent)")
	fs.StringVar(&c.LeaderElectContext, "leader-elect-context", c.LeaderElectContext, "context in --leader-elect-kubeconfig")
	fs.StringVar(&c.LeaderElectIdentity, "leader-elect-identity", c.LeaderElectIdentity, "this replica's name in the Lease ($MLSYSOPS_LEADER_ELECT_IDENTITY, $POD_NAME; default host name and a random suffix)")
	fs.DurationVar(&c.LeaseDuration, "leader-elect-lease-duration", c.LeaseDuration, "how long followers wait after the leader's last renewal before they take over")
	fs.DurationVar(&c.RenewDeadline, "leader-elect-renew-deadline", c.RenewDeadline, "how long the leader tries to renew before it stops acting (less than the lease duration)")
	fs.DurationVar(&c.RetryPeriod, "leader-elect-retry-period", c.RetryPeriod, "how often the leader renews and followers try to take the lease")
	fs.StringVar(&c.Descriptions, "descriptions", c.Descriptions, "system description folder ($DESCRIPTION_PATH; default <install-path>/descriptions)")
	fs.DurationVar(&c.DescriptionPollInterval, "description-poll-interval", c.DescriptionPollInterval, "how often the agent reads its own description again to apply changes, e.g. an edited ConfigMap (0: never)")
	fs.StringVar(&c.Listen, "listen", c.Listen, "address of /metrics, /healthz, /readyz and /status ($MLSYSOPS_LISTEN; empty disables)")
	fs.BoolVar(&c.Profiling, "profiling", c.Profiling, "serve Go's CPU, heap and goroutine profiles under /debug/pprof/ on --listen")
	fs.StringVar(&c.HTTPTokenFile, "http-token-file", c.HTTPTokenFile, "file with a bearer token that /status, POST /ping and /debug/pprof/ on --listen require ($MLSYSOPS_HTTP_TOKEN_FILE; /healthz, /readyz and /metrics stay open)")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "debug, info, warn or error ($LOG_LEVEL)")
	fs.StringVar(&c.LogFormat, "log-format", c.LogFormat, "json or text ($MLSYSOPS_LOG_FORMAT)")
	fs.IntVar(&c.GCPercent, "gc-percent", c.GCPercent, "garbage collector target, -1 off (default: $GOGC, else 50 on nodes and 100 elsewhere)")
	fs.StringVar(&c.MemoryLimit, "memory-limit", c.MemoryLimit, "soft limit of the Go runtime's memory, e.g. 32MiB (default: $GOMEMLIMIT, else none)")
}

// Validate checks the connection options for a layer and lists every
// problem.
func (c *Connection) Validate(layer agentconfig.Layer) error {
	var errs []error
	if c.XMPPDomain == "" {
		errs = append(errs, errors.New("--xmpp-domain: required"))
	}
	if c.HeartbeatInterval <= 0 {
		errs = append(errs, fmt.Errorf("--heartbeat-interval: must be positive, got %s", c.HeartbeatInterval))
	}
	if c.ChildGracePeriod < 0 {
		errs = append(errs, fmt.Errorf("--child-grace-period: must not be negative, got %s", c.ChildGracePeriod))
	}
	if c.PendingSettle <= 0 {
		errs = append(errs, fmt.Errorf("--pending-settle: must be positive, got %s", c.PendingSettle))
	}
	if c.DescriptionPollInterval < 0 {
		errs = append(errs, fmt.Errorf("--description-poll-interval: must not be negative, got %s", c.DescriptionPollInterval))
	}
	if c.CapacityReportInterval <= 0 {
		errs = append(errs, fmt.Errorf("--capacity-report-interval: must be positive, got %s", c.CapacityReportInterval))
	}
	if c.HTTPTokenFile != "" {
		if tok, err := ReadSecret(c.HTTPTokenFile, nil); err != nil || len(tok) < 16 {
			errs = append(errs, fmt.Errorf("--http-token-file %s: want a token of at least 16 characters (%v)", c.HTTPTokenFile, err))
		}
	}
	if layer != agentconfig.LayerNode && c.RedisAddr == "" {
		errs = append(errs, fmt.Errorf("--redis-addr: required for the %s layer (or $REDIS_HOST)", layer))
	}
	switch c.RedisMode {
	case "", "single":
		if len(splitList(c.RedisAddr)) > 1 {
			errs = append(errs, fmt.Errorf("--redis-addr: %d addresses need --redis-mode sentinel or cluster", len(splitList(c.RedisAddr))))
		}
	case "sentinel":
		if c.RedisMasterName == "" {
			errs = append(errs, errors.New("--redis-master-name: required with --redis-mode sentinel"))
		}
	case "cluster":
		if c.RedisDB != 0 {
			errs = append(errs, errors.New("--redis-db: a Redis Cluster has only database 0"))
		}
	default:
		errs = append(errs, fmt.Errorf("--redis-mode: want single, sentinel or cluster, got %q", c.RedisMode))
	}
	if c.Propagation != PropagationBinding && c.Propagation != PropagationWork {
		errs = append(errs, fmt.Errorf("--propagation: want %s or %s, got %q", PropagationBinding, PropagationWork, c.Propagation))
	}
	if layer == agentconfig.LayerContinuum && c.KarmadaKubeconfig == "" {
		errs = append(errs, errors.New("--karmada-kubeconfig: required for the continuum layer (or $KARMADA_API_KUBECONFIG)"))
	}
	if c.LeaderElect {
		errs = append(errs, c.validateElection(layer)...)
	}
	switch c.LogFormat {
	case "json", "text":
	default:
		errs = append(errs, fmt.Errorf("--log-format: want json or text, got %q", c.LogFormat))
	}
	if _, err := logging.ParseLevel(c.LogLevel); err != nil {
		errs = append(errs, fmt.Errorf("--log-level: %w", err))
	}
	if c.GCPercent < -1 {
		errs = append(errs, fmt.Errorf("--gc-percent: want a positive percentage, or -1 to turn the collector off, got %d", c.GCPercent))
	}
	if c.MemoryLimit != "" {
		if _, err := parseBytes(c.MemoryLimit); err != nil {
			errs = append(errs, fmt.Errorf("--memory-limit: %w", err))
		}
	}
	return errors.Join(errs...)
}

// validateElection checks the leader election options.
func (c *Connection) validateElection(layer agentconfig.Layer) []error {
	var errs []error
	if layer == agentconfig.LayerNode {
		errs = append(errs, errors.New("--leader-elect: node agents run one per node, without replicas; it is for the continuum and cluster layers"))
	}
	if c.LeaderElectLease != "" {
		if ns, name, ok := strings.Cut(c.LeaderElectLease, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			errs = append(errs, fmt.Errorf("--leader-elect-lease: want namespace/name, got %q", c.LeaderElectLease))
		}
	}
	// client-go's rules: the leader must give up before a follower may
	// take over, and renew several times within the deadline.
	switch {
	case c.RetryPeriod <= 0:
		errs = append(errs, fmt.Errorf("--leader-elect-retry-period: must be positive, got %s", c.RetryPeriod))
	case c.RenewDeadline <= time.Duration(1.2*float64(c.RetryPeriod)):
		errs = append(errs, fmt.Errorf("--leader-elect-renew-deadline %s: must exceed 1.2 × the retry period %s", c.RenewDeadline, c.RetryPeriod))
	case c.LeaseDuration <= c.RenewDeadline:
		errs = append(errs, fmt.Errorf("--leader-elect-lease-duration %s: must exceed the renew deadline %s", c.LeaseDuration, c.RenewDeadline))
	}
	return errs
}

// RedisPassword is the Redis password of the continuum and cluster layers:
// the content of RedisPasswordFile, else $MLSYSOPS_REDIS_PASSWORD or
// $REDIS_PASSWORD.
// It is a function, not a method, so that the node-only build leaves it out.
func RedisPassword(c *Connection, env agentconfig.LookupEnv) (string, error) {
	return ReadSecret(c.RedisPasswordFile, env, "MLSYSOPS_REDIS_PASSWORD", "REDIS_PASSWORD")
}

// RedisSentinelPassword is the sentinels' password: the content of
// RedisSentinelPasswordFile, else $MLSYSOPS_REDIS_SENTINEL_PASSWORD.
func RedisSentinelPassword(c *Connection, env agentconfig.LookupEnv) (string, error) {
	return ReadSecret(c.RedisSentinelPasswordFile, env, "MLSYSOPS_REDIS_SENTINEL_PASSWORD")
}

// RedisAddrs are the addresses of RedisAddr.
func (c *Connection) RedisAddrs() []string { return splitList(c.RedisAddr) }

// ReadSecret reads a secret from file, else from the first environment
// variable set.
func ReadSecret(file string, env agentconfig.LookupEnv, keys ...string) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("read password file: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	for _, k := range keys {
		if v, ok := env(k); ok && v != "" {
			return v, nil
		}
	}
	return "", nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// splitArgs separates the connection flags, which conn knows, from the
// configuration flags, which agentconfig.Load parses itself.
func splitArgs(args []string, conn, config *pflag.FlagSet) (connArgs, configArgs []string, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			configArgs = append(configArgs, args[i:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			configArgs = append(configArgs, a)
			continue
		}
		name := strings.TrimLeft(a, "-")
		hasValue := false
		if k := strings.IndexByte(name, '='); k >= 0 {
			name, hasValue = name[:k], true
		}
		if name == "layer" {
			// --layer is short for the upstream key's flag.
			a = strings.Replace(a, "layer", "continuum-layer", 1)
			name = "continuum-layer"
		}
		var fs *pflag.FlagSet
		var f *pflag.Flag
		if f = conn.Lookup(name); f != nil {
			fs = conn
		} else if f = config.Lookup(name); f != nil {
			fs = config
		} else if name == "help" || name == "h" {
			return nil, nil, pflag.ErrHelp
		} else {
			return nil, nil, fmt.Errorf("unknown flag: %s", a)
		}
		take := []string{a}
		if !hasValue && f.NoOptDefVal == "" {
			if i+1 >= len(args) {
				return nil, nil, fmt.Errorf("flag needs an argument: %s", a)
			}
			i++
			take = append(take, args[i])
		}
		if fs == conn {
			connArgs = append(connArgs, take...)
		} else {
			configArgs = append(configArgs, take...)
		}
	}
	return connArgs, configArgs, nil
}

// The continuum's ways of propagating applications (Connection.Propagation).
const (
	PropagationBinding = "binding"
	PropagationWork    = "work"
)
