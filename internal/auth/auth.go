// Package auth authenticates the bearer tokens of the MLSysOps HTTP APIs
// (the northbound API and the ML connector share one token source).
//
// Tokens come from a token file or from a key of a Kubernetes Secret, in
// one format: one token per line as "token,name,role", where role is viewer
// or operator; blank lines and lines starting with # are ignored. The token
// field may be the token itself or its SHA-256 digest written as
// "sha256:<64 hex digits>" (HashToken), so that a server's token list need
// not hold any token in clear. The
// source is re-read periodically, so tokens can be rotated without a
// restart; a source that turns unreadable or invalid keeps the last good
// set and says so in the log.
//
// Tokens are kept only as SHA-256 digests and compared in constant time
// against every known digest, so neither a match nor its position leaks
// through timing. Nothing the authenticator keeps holds a token in clear:
// not the entries, not the last list read (only its digest).
package auth

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// MinTokenLength is the shortest token accepted, so that a token cannot be
// guessed.
const MinTokenLength = 16

// Role is what a bearer token may do.
type Role string

// Roles. A viewer may read (every GET, and pinging an agent); an operator
// may do everything.
const (
	RoleViewer   Role = "viewer"
	RoleOperator Role = "operator"
)

// Allows reports whether a token of role r may call a route that needs
// role need.
func (r Role) Allows(need Role) bool {
	switch r {
	case RoleOperator:
		return true
	case RoleViewer:
		return need == RoleViewer
	}
	return false
}

// Valid reports whether r is a known role.
func (r Role) Valid() bool { return r == RoleViewer || r == RoleOperator }

// Identity is who a token belongs to.
type Identity struct {
	// Name identifies the token's holder in logs.
	Name string
	Role Role
}

// Entry is one token of a token list.
type Entry struct {
	// Token is the token, or its digest as HashToken writes it.
	Token string
	Identity
}

// DigestPrefix starts a token field that holds the token's SHA-256 digest
// (64 lowercase or uppercase hex digits) instead of the token.
const DigestPrefix = "sha256:"

// HashToken returns the form of token a token list may hold instead of
// the token: "sha256:" and the hex SHA-256 digest.
func HashToken(token string) string {
	d := sha256.Sum256([]byte(token))
	return DigestPrefix + hex.EncodeToString(d[:])
}

// digest returns the SHA-256 digest of the entry's token, decoding a
// hashed entry.
func (e Entry) digest() ([sha256.Size]byte, error) {
	var d [sha256.Size]byte
	h, ok := strings.CutPrefix(e.Token, DigestPrefix)
	if !ok {
		return sha256.Sum256([]byte(e.Token)), nil
	}
	if len(h) != hex.EncodedLen(sha256.Size) {
		return d, fmt.Errorf("digest has %d hex digits, want %d", len(h), hex.EncodedLen(sha256.Size))
	}
	if _, err := hex.Decode(d[:], []byte(h)); err != nil {
		return d, fmt.Errorf("digest is not hex: %w", err)
	}
	return d, nil
}

// Parse reads a token list, reporting every bad line with its number.
func Parse(data []byte) ([]Entry, error) {
	var (
		out  []Entry
		errs []error
		seen = map[[sha256.Size]byte]int{}
	)
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, ",")
		if len(f) != 3 {
			errs = append(errs, fmt.Errorf("line %d: want token,name,role, got %d field(s)", n, len(f)))
			continue
		}
		tok, name, role := strings.TrimSpace(f[0]), strings.TrimSpace(f[1]), Role(strings.TrimSpace(f[2]))
		e := Entry{Token: tok, Identity: Identity{Name: name, Role: role}}
		d, derr := e.digest()
		switch {
		case derr != nil:
			errs = append(errs, fmt.Errorf("line %d: token of %s: %w", n, name, derr))
		case !strings.HasPrefix(tok, DigestPrefix) && len(tok) < MinTokenLength:
			errs = append(errs, fmt.Errorf("line %d: token of %s is %d characters; use at least %d", n, name, len(tok), MinTokenLength))
		case strings.ContainsAny(tok, " \t"):
			errs = append(errs, fmt.Errorf("line %d: token of %s contains blanks", n, name))
		case name == "":
			errs = append(errs, fmt.Errorf("line %d: name is empty", n))
		case !role.Valid():
			errs = append(errs, fmt.Errorf("line %d: role %q of %s: want %s or %s", n, role, name, RoleViewer, RoleOperator))
		default:
			if prev, dup := seen[d]; dup {
				errs = append(errs, fmt.Errorf("line %d: same token as line %d", n, prev))
				continue
			}
			seen[d] = n
			out = append(out, e)
		}
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// Format writes entries in the token list format.
func Format(entries []Entry) []byte {
	var b bytes.Buffer
	b.WriteString("# token,name,role (viewer or operator)\n")
	for _, e := range entries {
		fmt.Fprintf(&b, "%s,%s,%s\n", e.Token, e.Name, e.Role)
	}
	return b.Bytes()
}

// GenerateToken returns a random token (256 bits, base64url).
func GenerateToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// Source is where the token list comes from.
type Source interface {
	// Load returns the token list.
	Load(ctx context.Context) ([]byte, error)
	// String names the source in logs and errors.
	String() string
}

// FileSource reads the token list from a file.
type FileSource struct{ Path string }

// Load implements Source.
func (f FileSource) Load(context.Context) ([]byte, error) {
	b, err := os.ReadFile(f.Path)
	if err != nil {
		return nil, fmt.Errorf("read token file: %w", err)
	}
	return b, nil
}

func (f FileSource) String() string { return "token file " + f.Path }

// SecretSource reads the token list from one key of a Secret.
type SecretSource struct {
	Client    kubernetes.Interface
	Namespace string
	Name      string
	// Key is the data key holding the list; default DefaultSecretKey.
	Key string
}

// DefaultSecretKey is the Secret key SecretSource reads by default.
const DefaultSecretKey = "tokens"

// Load implements Source.
func (s SecretSource) Load(ctx context.Context) ([]byte, error) {
	sec, err := s.Client.CoreV1().Secrets(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", s, err)
	}
	return secretData(sec, s.key())
}

func (s SecretSource) key() string {
	if s.Key == "" {
		return DefaultSecretKey
	}
	return s.Key
}

func secretData(sec *corev1.Secret, key string) ([]byte, error) {
	if b, ok := sec.Data[key]; ok {
		return b, nil
	}
	if v, ok := sec.StringData[key]; ok {
		return []byte(v), nil
	}
	return nil, fmt.Errorf("secret %s/%s has no key %q", sec.Namespace, sec.Name, key)
}

func (s SecretSource) String() string {
	return fmt.Sprintf("secret %s/%s key %s", s.Namespace, s.Name, s.key())
}

type digestEntry struct {
	digest [sha256.Size]byte
	id     Identity
}

// Authenticator checks bearer tokens against the current token list.
type Authenticator struct {
	src Source
	log *slog.Logger

	mu      sync.RWMutex
	entries []digestEntry
	// last is the digest of the list last read, to tell a change; the list
	// itself is not kept, since it may hold tokens in clear.
	last [sha256.Size]byte
}

// New loads the token list from src; it fails when the list cannot be read,
// is invalid or is empty, since a server without tokens would refuse
// everything.
func New(ctx context.Context, src Source, log *slog.Logger) (*Authenticator, error) {
	if log == nil {
		log = slog.Default()
	}
	a := &Authenticator{src: src, log: log.With("component", "auth")}
	if _, err := a.Reload(ctx); err != nil {
		return nil, err
	}
	return a, nil
}

// Static returns an authenticator over a fixed list, for tests and
// embedding.
func Static(entries []Entry) *Authenticator {
	a := &Authenticator{log: slog.Default()}
	a.set(entries)
	return a
}

func (a *Authenticator) set(entries []Entry) {
	ds := make([]digestEntry, 0, len(entries))
	for _, e := range entries {
		d, err := e.digest()
		if err != nil {
			// Parse refuses such an entry; one built by hand that
			// does not decode matches nothing.
			a.log.Warn("token entry ignored", "name", e.Name, "err", err)
			continue
		}
		ds = append(ds, digestEntry{digest: d, id: e.Identity})
	}
	a.mu.Lock()
	a.entries = ds
	a.mu.Unlock()
}

// Reload re-reads the source. It reports whether the list changed; on
// error the current list stays.
func (a *Authenticator) Reload(ctx context.Context) (bool, error) {
	if a.src == nil {
		return false, nil
	}
	data, err := a.src.Load(ctx)
	if err != nil {
		return false, err
	}
	sum := sha256.Sum256(data)
	a.mu.RLock()
	same := len(a.entries) > 0 && a.last == sum
	a.mu.RUnlock()
	if same {
		return false, nil
	}
	entries, err := Parse(data)
	if err != nil {
		return false, fmt.Errorf("%s: %w", a.src, err)
	}
	if len(entries) == 0 {
		return false, fmt.Errorf("%s holds no token; add lines token,name,role", a.src)
	}
	a.set(entries)
	a.mu.Lock()
	a.last = sum
	a.mu.Unlock()
	return true, nil
}

// Run reloads the source every interval until ctx ends.
func (a *Authenticator) Run(ctx context.Context, interval time.Duration) {
	if a.src == nil || interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		changed, err := a.Reload(ctx)
		switch {
		case err != nil:
			a.log.Warn("token list not reloaded; keeping the previous one", "source", a.src.String(), "err", err)
		case changed:
			a.log.Info("token list reloaded", "source", a.src.String(), "tokens", a.Len())
		}
	}
}

// Len returns the number of known tokens.
func (a *Authenticator) Len() int {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return len(a.entries)
}

// Authenticate returns the identity of token. Every known digest is
// compared, whatever matches, in constant time.
func (a *Authenticator) Authenticate(token string) (Identity, bool) {
	d := sha256.Sum256([]byte(token))
	a.mu.RLock()
	defer a.mu.RUnlock()
	var (
		found Identity
		match int
	)
	for i := range a.entries {
		eq := subtle.ConstantTimeCompare(d[:], a.entries[i].digest[:])
		if eq == 1 {
			found = a.entries[i].id
		}
		match |= eq
	}
	return found, match == 1 && token != ""
}
