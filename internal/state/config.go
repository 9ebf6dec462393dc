package state

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
)

// Mode selects the Redis deployment the client talks to.
type Mode string

// Redis deployments.
const (
	ModeSingle   Mode = "single"
	ModeSentinel Mode = "sentinel"
	ModeCluster  Mode = "cluster"
)

// Config says how to reach Redis. Agents and services fill it from flags or
// environment; the password comes from a Secret.
type Config struct {
	// Mode is single (default), sentinel or cluster.
	Mode Mode
	// Addrs is the server (single), the sentinels (sentinel) or cluster seed
	// nodes (cluster), as host:port.
	Addrs []string
	// MasterName is the Sentinel master group; required in sentinel mode.
	MasterName string
	// Username and Password authenticate with the server (ACL user or
	// requirepass).
	Username, Password string
	// SentinelUsername and SentinelPassword authenticate with the sentinels
	// when they differ from the server's.
	SentinelUsername, SentinelPassword string
	// DB selects the database; single and sentinel only.
	DB int
	// TLS enables TLS; CAFile (PEM) replaces the system roots, ServerName
	// overrides the verified name, InsecureSkipVerify disables verification
	// and must be set explicitly.
	TLS                bool
	CAFile             string
	ServerName         string
	InsecureSkipVerify bool
	// Timeouts; defaults 5s dial, 3s read and write. Blocking stream reads
	// extend the read timeout by their block time.
	DialTimeout, ReadTimeout, WriteTimeout time.Duration
	// PoolSize per node; default go-redis's (10 per CPU).
	PoolSize int
}

// Validate reports every problem at once.
func (c Config) Validate() error {
	var errs []error
	mode := c.mode()
	switch mode {
	case ModeSingle:
		if len(c.Addrs) != 1 {
			errs = append(errs, fmt.Errorf("single mode takes exactly one address, got %d", len(c.Addrs)))
		}
	case ModeSentinel:
		if c.MasterName == "" {
			errs = append(errs, errors.New("sentinel mode needs the master name"))
		}
		if len(c.Addrs) == 0 {
			errs = append(errs, errors.New("sentinel mode needs at least one sentinel address"))
		}
	case ModeCluster:
		if len(c.Addrs) == 0 {
			errs = append(errs, errors.New("cluster mode needs at least one seed address"))
		}
		if c.DB != 0 {
			errs = append(errs, errors.New("cluster mode has only database 0"))
		}
	default:
		errs = append(errs, fmt.Errorf("mode %q: want single, sentinel or cluster", c.Mode))
	}
	for _, a := range c.Addrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			errs = append(errs, fmt.Errorf("address %q: want host:port", a))
		}
	}
	if c.DB < 0 {
		errs = append(errs, fmt.Errorf("db %d must not be negative", c.DB))
	}
	if !c.TLS && (c.CAFile != "" || c.ServerName != "" || c.InsecureSkipVerify) {
		errs = append(errs, errors.New("TLS options are set but TLS is off"))
	}
	for name, d := range map[string]time.Duration{"dial": c.DialTimeout, "read": c.ReadTimeout, "write": c.WriteTimeout} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s timeout %v must not be negative", name, d))
		}
	}
	return errors.Join(errs...)
}

func (c Config) mode() Mode {
	if c.Mode == "" {
		if c.MasterName != "" {
			return ModeSentinel
		}
		return ModeSingle
	}
	return c.Mode
}

func (c Config) tlsConfig() (*tls.Config, error) {
	if !c.TLS {
		return nil, nil
	}
	t := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName,
		InsecureSkipVerify: c.InsecureSkipVerify} //nolint:gosec // explicit opt-in
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read Redis CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("Redis CA file %s holds no PEM certificate", c.CAFile)
		}
		t.RootCAs = pool
	}
	return t, nil
}

// NewClient returns a client for the configured deployment: a plain client,
// a Sentinel-backed failover client or a cluster client, all behind
// redis.UniversalClient.
func NewClient(c Config) (redis.UniversalClient, error) {
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("redis config: %w", err)
	}
	tlsCfg, err := c.tlsConfig()
	if err != nil {
		return nil, err
	}
	dial, read, write := c.DialTimeout, c.ReadTimeout, c.WriteTimeout
	if dial == 0 {
		dial = 5 * time.Second
	}
	if read == 0 {
		read = 3 * time.Second
	}
	if write == 0 {
		write = 3 * time.Second
	}
	switch c.mode() {
	case ModeSentinel:
		return redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: c.MasterName, SentinelAddrs: c.Addrs,
			SentinelUsername: c.SentinelUsername, SentinelPassword: c.SentinelPassword,
			Username: c.Username, Password: c.Password, DB: c.DB, TLSConfig: tlsCfg,
			DialTimeout: dial, ReadTimeout: read, WriteTimeout: write, PoolSize: c.PoolSize,
		}), nil
	case ModeCluster:
		return redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: c.Addrs, Username: c.Username, Password: c.Password, TLSConfig: tlsCfg,
			DialTimeout: dial, ReadTimeout: read, WriteTimeout: write, PoolSize: c.PoolSize,
		}), nil
	}
	return redis.NewClient(&redis.Options{
		Addr: c.Addrs[0], Username: c.Username, Password: c.Password, DB: c.DB, TLSConfig: tlsCfg,
		DialTimeout: dial, ReadTimeout: read, WriteTimeout: write, PoolSize: c.PoolSize,
	}), nil
}
