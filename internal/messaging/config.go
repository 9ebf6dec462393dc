package messaging

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"mellium.im/xmpp/jid"
)

// Config configures a Client. Zero durations and sizes take the defaults
// documented on each field.
type Config struct {
	// JID is the agent's bare JID, e.g. "node-1@mlsysops.local". Required.
	JID string
	// Resource is the fixed resource bound at every connect. A stable resource
	// makes a reconnecting agent replace its own stale session at once.
	// Default "agent".
	Resource string
	// Password of the account. It comes from a Secret, never from a
	// manifest. Password or PasswordFile is required.
	Password string
	// PasswordFile holds the password, usually a Secret mounted as a
	// volume. It is read again before every login, so that a rotated
	// Secret is picked up without a restart; it wins over Password.
	PasswordFile string
	// Layer is the agent's layer, stamped on every envelope. Required.
	Layer Layer

	// Servers are the c2s addresses, "host:port", of the nodes of one
	// ejabberd cluster. The client logs in to one of them (chosen by a hash
	// of its JID and resource, so that agents spread over the nodes) and
	// moves to the next when a connection attempt fails or its server goes
	// away. Default ["<domain>:5222"].
	Servers []string
	// CAFile is a PEM bundle of CAs that may sign the server certificate.
	// Empty uses the system roots.
	CAFile string
	// TLSServerName overrides the name checked in the server certificate.
	// Default: the JID's domain.
	TLSServerName string
	// InsecureSkipVerify disables certificate verification. For throw-away
	// test servers only; it must be set explicitly.
	InsecureSkipVerify bool

	// Parent is the bare JID commands are accepted from and heartbeats are
	// sent to. Empty for the continuum agent.
	Parent string
	// Controllers are further bare JIDs allowed to send commands (for
	// example the northbound API's account).
	Controllers []string
	// Children are the bare JIDs reports are accepted from, known from the
	// system description; more are added with AddChild (for example when a
	// subscribe is accepted).
	Children []string
	// AcceptSubscribe decides whether a subscribe message from a JID that is
	// not yet a child may reach the subscribe handler. Nil refuses every
	// unknown JID.
	AcceptSubscribe func(from string) bool

	// ConnectTimeout bounds dial, TLS, SASL and bind. Default 10s.
	ConnectTimeout time.Duration
	// WriteTimeout bounds one stanza write. Default 10s.
	WriteTimeout time.Duration
	// KeepaliveInterval is how often the client pings the server to detect a
	// dead connection that TCP has not noticed. Default 15s; negative disables.
	KeepaliveInterval time.Duration
	// MinBackoff and MaxBackoff bound the jittered exponential reconnect
	// backoff. Defaults 100ms and 30s.
	MinBackoff, MaxBackoff time.Duration
	// ShutdownBackoff is the wait after the server announced system-shutdown
	// or reset (plus up to a second of jitter): ejabberd keeps accepting
	// logins for about a second after it and then drops them. Default 2s.
	ShutdownBackoff time.Duration
	// ConflictBackoff is the wait after another session took over our
	// resource (stream error conflict). Default 60s.
	ConflictBackoff time.Duration
	// AuthBackoff caps the wait between logins while the server refuses
	// the credentials (or the password file cannot be read): the wait
	// starts at a second and doubles up to it. The account may be missing
	// only until the accounts reconciler restores it. Default 15s.
	AuthBackoff time.Duration
	// OnAuthFailure is called after every refused login, on the goroutine
	// of Run: it must not block. Agents report the failure through it to
	// the accounts reconciler, on a path that does not need XMPP.
	OnAuthFailure func(AuthFailure)

	// DeliveryTimeout is the delivery deadline of reliable messages sent with
	// a context that has none. Default 2m.
	DeliveryTimeout time.Duration
	// RetryInterval is the first re-send delay of an unacknowledged message;
	// it doubles per attempt up to MaxRetryInterval. Defaults 2s and 30s.
	RetryInterval, MaxRetryInterval time.Duration
	// RequestTimeout bounds Request when its context has no deadline.
	// Default 30s.
	RequestTimeout time.Duration
	// QueueSize bounds the messages held by the client (queued, in flight
	// or awaiting acknowledgement); Send blocks when it is reached.
	// Default 10000.
	QueueSize int
	// Window is the number of unacknowledged reliable messages in flight
	// towards one peer. Default 256.
	Window int
	// DedupSize and DedupTTL bound the cache of delivered message ids.
	// Defaults 65536 and 30m.
	DedupSize int
	DedupTTL  time.Duration

	// HeartbeatInterval is how often a child sends heartbeats to its
	// parent. Default 2s; negative disables.
	HeartbeatInterval time.Duration
	// LivenessTimeout is how long a child may stay silent (no heartbeat, no
	// message, no presence) before the parent reports it gone. Default 3 ×
	// HeartbeatInterval.
	LivenessTimeout time.Duration

	// EventBuffer is the capacity of the Events channel; events beyond it
	// are dropped (and counted) while nobody reads. Default 16 plus two per
	// configured child.
	EventBuffer int

	// Logger receives structured logs. Default slog.Default().
	Logger *slog.Logger
	// Registerer receives the client's metrics. Nil keeps them unregistered.
	Registerer prometheus.Registerer
}

// Default values of Config.
const (
	DefaultResource          = "agent"
	DefaultConnectTimeout    = 10 * time.Second
	DefaultWriteTimeout      = 10 * time.Second
	DefaultKeepaliveInterval = 15 * time.Second
	DefaultMinBackoff        = 100 * time.Millisecond
	DefaultMaxBackoff        = 30 * time.Second
	DefaultShutdownBackoff   = 2 * time.Second
	DefaultConflictBackoff   = 60 * time.Second
	DefaultAuthBackoff       = 15 * time.Second
	DefaultDeliveryTimeout   = 2 * time.Minute
	DefaultRetryInterval     = 2 * time.Second
	DefaultMaxRetryInterval  = 30 * time.Second
	DefaultRequestTimeout    = 30 * time.Second
	DefaultQueueSize         = 10000
	DefaultWindow            = 256
	DefaultDedupSize         = 65536
	DefaultDedupTTL          = 30 * time.Minute
	DefaultHeartbeatInterval = 2 * time.Second
)

func durationDefault(d *time.Duration, def time.Duration) {
	if *d == 0 {
		*d = def
	}
}

// withDefaults returns a copy of c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if c.Resource == "" {
		c.Resource = DefaultResource
	}
	durationDefault(&c.ConnectTimeout, DefaultConnectTimeout)
	durationDefault(&c.WriteTimeout, DefaultWriteTimeout)
	durationDefault(&c.KeepaliveInterval, DefaultKeepaliveInterval)
	durationDefault(&c.MinBackoff, DefaultMinBackoff)
	durationDefault(&c.MaxBackoff, DefaultMaxBackoff)
	durationDefault(&c.ShutdownBackoff, DefaultShutdownBackoff)
	durationDefault(&c.ConflictBackoff, DefaultConflictBackoff)
	durationDefault(&c.AuthBackoff, DefaultAuthBackoff)
	durationDefault(&c.DeliveryTimeout, DefaultDeliveryTimeout)
	durationDefault(&c.RetryInterval, DefaultRetryInterval)
	durationDefault(&c.MaxRetryInterval, DefaultMaxRetryInterval)
	durationDefault(&c.RequestTimeout, DefaultRequestTimeout)
	durationDefault(&c.DedupTTL, DefaultDedupTTL)
	durationDefault(&c.HeartbeatInterval, DefaultHeartbeatInterval)
	if c.LivenessTimeout == 0 {
		if c.HeartbeatInterval > 0 {
			c.LivenessTimeout = 3 * c.HeartbeatInterval
		} else {
			c.LivenessTimeout = 3 * DefaultHeartbeatInterval
		}
	}
	if c.QueueSize == 0 {
		c.QueueSize = DefaultQueueSize
	}
	if c.Window == 0 {
		c.Window = DefaultWindow
	}
	if c.DedupSize == 0 {
		c.DedupSize = DefaultDedupSize
	}
	if c.EventBuffer == 0 {
		c.EventBuffer = 16 + 2*len(c.Children)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if len(c.Servers) == 0 {
		if j, err := jid.Parse(c.JID); err == nil {
			c.Servers = []string{net.JoinHostPort(j.Domainpart(), "5222")}
		}
	}
	return c
}

// ReadPasswordFile returns the trimmed content of a password file. A
// missing or empty file is an error that names the file, never what it
// holds.
func ReadPasswordFile(file string) (string, error) {
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("password file %s: %w: the file does not exist", file, ErrNoPassword)
	}
	if err != nil {
		return "", fmt.Errorf("read password file: %w", err)
	}
	pw := strings.TrimSpace(string(b))
	if pw == "" {
		return "", fmt.Errorf("password file %s: %w: the file is empty", file, ErrNoPassword)
	}
	return pw, nil
}

// ErrNoPassword marks a password file that is missing or empty.
var ErrNoPassword = errors.New("no password")

// password returns the password for the next login.
func (c Config) password() (string, error) {
	if c.PasswordFile == "" {
		return c.Password, nil
	}
	return ReadPasswordFile(c.PasswordFile)
}

// Validate reports every problem of the configuration at once.
func (c Config) Validate() error {
	var errs []error
	bare := func(field, s string) {
		j, err := jid.Parse(s)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s %q: %w", field, s, err))
		case j.Localpart() == "" || j.Resourcepart() != "":
			errs = append(errs, fmt.Errorf("%s %q: want a bare JID such as agent@domain", field, s))
		}
	}
	if c.JID == "" {
		errs = append(errs, errors.New("JID is required"))
	} else {
		bare("JID", c.JID)
	}
	if c.Password == "" && c.PasswordFile == "" {
		errs = append(errs, errors.New("password or password file is required"))
	}
	if !c.Layer.Valid() {
		errs = append(errs, fmt.Errorf("layer %q: want continuum, cluster, node or service", c.Layer))
	}
	if c.Parent != "" {
		bare("parent", c.Parent)
	}
	for _, s := range c.Controllers {
		bare("controller", s)
	}
	for _, s := range c.Children {
		bare("child", s)
	}
	for i, s := range c.Servers {
		if _, _, err := net.SplitHostPort(s); err != nil {
			errs = append(errs, fmt.Errorf("servers[%d] %q: want host:port: %w", i, s, err))
		}
	}
	for name, d := range map[string]time.Duration{
		"connect timeout": c.ConnectTimeout, "write timeout": c.WriteTimeout,
		"min backoff": c.MinBackoff, "max backoff": c.MaxBackoff,
		"shutdown backoff": c.ShutdownBackoff, "conflict backoff": c.ConflictBackoff, "auth backoff": c.AuthBackoff,
		"delivery timeout": c.DeliveryTimeout, "retry interval": c.RetryInterval,
		"max retry interval": c.MaxRetryInterval, "request timeout": c.RequestTimeout,
		"dedup TTL": c.DedupTTL, "liveness timeout": c.LivenessTimeout,
	} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s %v must not be negative", name, d))
		}
	}
	if c.MinBackoff > 0 && c.MaxBackoff > 0 && c.MinBackoff > c.MaxBackoff {
		errs = append(errs, fmt.Errorf("min backoff %v exceeds max backoff %v", c.MinBackoff, c.MaxBackoff))
	}
	if c.QueueSize < 0 || c.Window < 0 || c.DedupSize < 0 || c.EventBuffer < 0 {
		errs = append(errs, errors.New("queue size, window, dedup size and event buffer must not be negative"))
	}
	if c.Window > 0 && c.QueueSize > 0 && c.Window > c.QueueSize {
		errs = append(errs, fmt.Errorf("window %d exceeds queue size %d", c.Window, c.QueueSize))
	}
	if c.HeartbeatInterval > 0 && c.LivenessTimeout > 0 && c.LivenessTimeout <= c.HeartbeatInterval {
		errs = append(errs, fmt.Errorf("liveness timeout %v must exceed the heartbeat interval %v", c.LivenessTimeout, c.HeartbeatInterval))
	}
	return errors.Join(errs...)
}
