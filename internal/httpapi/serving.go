package httpapi

import (
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// Serving are the options every MLSysOps API server shares: where it
// listens, its TLS files and where its bearer tokens come from (a file,
// or a Kubernetes Secret the server reads from its host cluster).
type Serving struct {
	// Listen is the address to serve on, host:port.
	Listen string
	// TLSCertFile and TLSKeyFile enable HTTPS when both are set.
	TLSCertFile, TLSKeyFile string
	// TokenFile holds the bearer tokens, one "token,name,role" per line.
	TokenFile string
	// TokenSecret is a Secret "namespace/name" holding the same list under
	// TokenSecretKey.
	TokenSecret    string
	TokenSecretKey string
	// TokenReload is how often the token source is re-read (0 never).
	TokenReload time.Duration
}

// AddFlags registers the serving flags; tokens says whose token list the
// server reads (for the help text).
func (s *Serving) AddFlags(fs *pflag.FlagSet, tokens string) {
	fs.StringVar(&s.Listen, "listen", s.Listen, "address to serve on, host:port")
	fs.StringVar(&s.TLSCertFile, "tls-cert-file", s.TLSCertFile, "serving certificate (PEM); with --tls-key-file enables HTTPS")
	fs.StringVar(&s.TLSKeyFile, "tls-key-file", s.TLSKeyFile, "serving key (PEM)")
	fs.StringVar(&s.TokenFile, "token-file", s.TokenFile, "file of bearer tokens, one \"token,name,role\" per line (role viewer or operator; "+tokens+")")
	fs.StringVar(&s.TokenSecret, "token-secret", s.TokenSecret, "Secret namespace/name on the host cluster holding the token list")
	fs.StringVar(&s.TokenSecretKey, "token-secret-key", s.TokenSecretKey, "key of the token list in --token-secret")
	fs.DurationVar(&s.TokenReload, "token-reload", s.TokenReload, "how often the token source is re-read (0 never)")
}

// Validate returns every problem with the serving options.
func (s *Serving) Validate() []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if _, _, err := net.SplitHostPort(s.Listen); err != nil {
		add("--listen %q: want host:port", s.Listen)
	}
	if (s.TLSCertFile == "") != (s.TLSKeyFile == "") {
		add("--tls-cert-file and --tls-key-file go together")
	}
	switch {
	case s.TokenFile == "" && s.TokenSecret == "":
		add("no token source: set --token-file or --token-secret (every route but the public ones needs a bearer token)")
	case s.TokenFile != "" && s.TokenSecret != "":
		add("--token-file and --token-secret exclude each other")
	}
	if s.TokenSecret != "" {
		if ns, name, ok := strings.Cut(s.TokenSecret, "/"); !ok || ns == "" || name == "" {
			add("--token-secret %q: want namespace/name", s.TokenSecret)
		}
	}
	if s.TokenReload < 0 {
		add("--token-reload must not be negative")
	}
	return errs
}
