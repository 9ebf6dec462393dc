package demo

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Modes of the demo binary.
const (
	ModeServer = "server"
	ModeClient = "client"
)

// Options configure one demo process. Flags win over the environment,
// which wins over the defaults.
type Options struct {
	// Mode is ModeServer or ModeClient.
	Mode string
	// Listen is the server's message port (host:port).
	Listen string
	// MetricsListen serves /metrics, /healthz, /readyz and, with Admin,
	// /degrade.
	MetricsListen string
	// Node is the node the process runs on ($NODE_NAME): degradation
	// settings for this node apply.
	Node string
	// Server is the client's server address (host:port). Empty: found in
	// the environment from Peer (see ServerFromEnv).
	Server string
	// Peer is the component name of the server, for ServerFromEnv.
	Peer string
	// Interval is the time between two messages of the client.
	Interval time.Duration
	// Timeout bounds one exchange (dial, send, reply).
	Timeout time.Duration
	// Window is the span of the sliding-window gauges.
	Window time.Duration
	// Work is the computation the server does for each message: this
	// many rounds of SHA-256 over the message. It is an amount of work,
	// not of time, so a node that gives the server less CPU (contention,
	// a CPU quota on its pods) answers more slowly, as a real service
	// would.
	Work int
	// Degrade are the initial degradation settings, "node=latency[/burn]"
	// (see ParseSettings).
	Degrade string
	// Admin serves PUT /degrade on the metrics port. The endpoint has no
	// authentication: it is a demo device, off unless asked for.
	Admin bool
}

// DefaultWork is the server's work per message: a few milliseconds of
// one CPU; MaxWork bounds it (about a second).
const (
	DefaultWork = 10000
	MaxWork     = 5000000
)

// NewOptions returns the defaults, with the environment applied:
// NODE_NAME, DEMO_SERVER, DEMO_DEGRADE.
func NewOptions(mode string, getenv func(string) string) *Options {
	if getenv == nil {
		getenv = os.Getenv
	}
	return &Options{
		Mode: mode, Listen: ":7070", MetricsListen: ":9090",
		Node: getenv("NODE_NAME"), Server: getenv("DEMO_SERVER"), Peer: "server",
		Interval: 100 * time.Millisecond, Timeout: time.Second, Window: 5 * time.Second,
		Degrade: getenv("DEMO_DEGRADE"), Work: DefaultWork,
	}
}

// AddFlags adds the options' flags for the mode to fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.MetricsListen, "metrics-listen", o.MetricsListen, "address of /metrics, /healthz, /readyz (and /degrade with --admin)")
	fs.StringVar(&o.Node, "node", o.Node, "node this process runs on ($NODE_NAME); degradation settings for it apply")
	fs.DurationVar(&o.Window, "window", o.Window, "span of the sliding-window gauges (latency, error ratio)")
	fs.StringVar(&o.Degrade, "degrade", o.Degrade, "initial degradation by node, node=latency[/burn],... e.g. edge-1=200ms or edge-1=0s/50ms ($DEMO_DEGRADE)")
	fs.BoolVar(&o.Admin, "admin", o.Admin, "serve GET and PUT /degrade on the metrics port (no authentication: for demos and tests)")
	switch o.Mode {
	case ModeServer:
		fs.StringVar(&o.Listen, "listen", o.Listen, "address the server takes messages on")
		fs.IntVar(&o.Work, "work", o.Work, "rounds of SHA-256 the server computes per message (its CPU work; 0: none)")
	case ModeClient:
		fs.StringVar(&o.Server, "server", o.Server, "server address host:port ($DEMO_SERVER); empty: the peer's address from the environment")
		fs.StringVar(&o.Peer, "peer", o.Peer, "component name of the server, to find its address in the environment")
		fs.DurationVar(&o.Interval, "interval", o.Interval, "time between two messages")
		fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "time limit of one exchange")
	}
}

// Validate reports every problem with the options.
func (o *Options) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if o.Mode != ModeServer && o.Mode != ModeClient {
		add("mode %q: want %s or %s", o.Mode, ModeServer, ModeClient)
	}
	if _, _, err := net.SplitHostPort(o.MetricsListen); err != nil {
		add("--metrics-listen %q: want host:port", o.MetricsListen)
	}
	if o.Mode == ModeServer {
		if _, _, err := net.SplitHostPort(o.Listen); err != nil {
			add("--listen %q: want host:port", o.Listen)
		}
		if o.Work < 0 || o.Work > MaxWork {
			add("--work %d: want 0 to %d", o.Work, MaxWork)
		}
	}
	if o.Mode == ModeClient {
		if o.Server != "" {
			if _, _, err := net.SplitHostPort(o.Server); err != nil {
				add("--server %q: want host:port", o.Server)
			}
		} else if o.Peer == "" {
			add("--server or --peer is needed to find the server")
		}
		if o.Interval <= 0 {
			add("--interval must be positive")
		}
		if o.Timeout <= 0 {
			add("--timeout must be positive")
		}
	}
	if o.Window <= 0 {
		add("--window must be positive")
	}
	if _, err := ParseSettings(o.Degrade); err != nil {
		add("--degrade: %v", err)
	}
	return errors.Join(errs...)
}

// ServerFromEnv finds the address of the peer component in the
// environment: Kubernetes' service links (<NAME>_SERVICE_HOST and
// <NAME>_SERVICE_PORT, for Services that existed when the pod started),
// else the MLSYSOPS_PEER_<NAME>_HOST and _PORT the cluster agent gives a
// component for each component it talks to. ok is false when neither is
// there.
func ServerFromEnv(peer string, getenv func(string) string) (string, bool) {
	key := envKey(peer)
	for _, pair := range [][2]string{
		{key + "_SERVICE_HOST", key + "_SERVICE_PORT"},
		{"MLSYSOPS_PEER_" + key + "_HOST", "MLSYSOPS_PEER_" + key + "_PORT"},
	} {
		host, port := getenv(pair[0]), getenv(pair[1])
		if host != "" && port != "" {
			return net.JoinHostPort(host, port), true
		}
	}
	return "", false
}

func envKey(s string) string {
	var b strings.Builder
	for _, r := range strings.ToUpper(s) {
		if (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// Setting is the degradation of one node.
type Setting struct {
	// Latency is slept per message.
	Latency time.Duration `json:"latency"`
	// Burn is spent busy per message.
	Burn time.Duration `json:"burn"`
}

// Zero reports whether the setting degrades nothing.
func (s Setting) Zero() bool { return s.Latency <= 0 && s.Burn <= 0 }

// String renders the setting as ParseSettings reads it.
func (s Setting) String() string {
	if s.Burn > 0 {
		return s.Latency.String() + "/" + s.Burn.String()
	}
	return s.Latency.String()
}

// ParseSettings reads "node=latency[/burn],..." (an empty string is no
// setting).
func ParseSettings(s string) (map[string]Setting, error) {
	out := map[string]Setting{}
	var errs []error
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		node, val, ok := strings.Cut(part, "=")
		node = strings.TrimSpace(node)
		if !ok || node == "" {
			errs = append(errs, fmt.Errorf("%q: want node=latency[/burn]", part))
			continue
		}
		st, err := ParseSetting(val)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", node, err))
			continue
		}
		out[node] = st
	}
	return out, errors.Join(errs...)
}

// ParseSetting reads "latency[/burn]", two non-negative durations; a bare
// number is milliseconds.
func ParseSetting(s string) (Setting, error) {
	lat, burn, _ := strings.Cut(strings.TrimSpace(s), "/")
	var st Setting
	var err error
	if st.Latency, err = parseDuration(lat); err != nil {
		return Setting{}, fmt.Errorf("latency: %w", err)
	}
	if burn != "" {
		if st.Burn, err = parseDuration(burn); err != nil {
			return Setting{}, fmt.Errorf("burn: %w", err)
		}
	}
	return st, nil
}

func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		ms, nerr := strconv.ParseFloat(s, 64)
		if nerr != nil {
			return 0, fmt.Errorf("%q: want a duration such as 200ms", s)
		}
		d = time.Duration(ms * float64(time.Millisecond))
	}
	if d < 0 {
		return 0, fmt.Errorf("%q: must not be negative", s)
	}
	if d > time.Minute {
		return 0, fmt.Errorf("%q: at most 1m", s)
	}
	return d, nil
}
