// Package fetch downloads a model version's artifacts into a directory and
// verifies their sha256 checksums: the model server's init container
// (`modelserver fetch`), so the server starts only on files that are the
// ones registered.
//
// The manifest (JSON) lists the files:
//
//	{"artifacts": [
//	  {"name": "model.onnx", "uri": "s3://models/iris/3/model.onnx", "sha256": "9f86d0...", "size": 784},
//	  {"name": "train.csv",  "uri": "https://store.example/iris/train.csv", "sha256": "..."},
//	  {"name": "extra.txt",  "uri": "file:///mnt/models/extra.txt", "sha256": "..."}]}
//
// URIs: s3://bucket/key (S3-compatible storage; endpoint and credentials
// from the environment or files, never from flags), https:// and http://,
// file:///path or an absolute path. Names are relative paths that stay in
// the directory (no "..", no absolute paths, no component starting with a
// dot). A file is written under a temporary name and renamed once its
// checksum (and size, when given) match; a file already present with the
// right checksum is kept, so a restarted init container resumes.
//
// Failures are *Error values whose Kind starts the message, for the
// connector to read in the container's termination message:
// "invalid manifest", "artifact missing", "checksum mismatch",
// "download failed".
package fetch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// Kind classifies a failure.
type Kind string

// Kinds of failure; each is the first words of the error message.
const (
	InvalidManifest  Kind = "invalid manifest"
	Missing          Kind = "artifact missing"
	ChecksumMismatch Kind = "checksum mismatch"
	DownloadFailed   Kind = "download failed"
)

// Error is a failure to fetch one artifact (or to read the manifest).
type Error struct {
	Kind     Kind
	Artifact string
	URI      string
	Err      error
}

func (e *Error) Error() string {
	if e.Artifact == "" {
		return fmt.Sprintf("%s: %v", e.Kind, e.Err)
	}
	return fmt.Sprintf("%s: %s (%s): %v", e.Kind, e.Artifact, redactURI(e.URI), e.Err)
}

// redactURI drops what may be secret in a URI: user info and the query
// (presigned URLs carry their signature there).
func redactURI(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URI)"
	}
	return redact(u)
}

func (e *Error) Unwrap() error { return e.Err }

// Artifact is one file to fetch.
type Artifact struct {
	// Name is the file's path in the destination directory.
	Name string `json:"name"`
	// URI is where to read it.
	URI string `json:"uri"`
	// SHA256 is the hex checksum of its content.
	SHA256 string `json:"sha256"`
	// Size in bytes, checked when set.
	Size int64 `json:"size,omitempty"`
}

// Manifest lists a model version's artifacts.
type Manifest struct {
	Artifacts []Artifact `json:"artifacts"`
}

// ParseManifest reads and checks a manifest; every problem is reported.
func ParseManifest(b []byte) (*Manifest, error) {
	var m Manifest
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, &Error{Kind: InvalidManifest, Err: fmt.Errorf("not a JSON manifest: %w", err)}
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// Validate checks every artifact: a safe, unique name, a URI of a known
// scheme, a sha256 of 64 hex digits.
func (m *Manifest) Validate() error {
	var errs []error
	if len(m.Artifacts) == 0 {
		errs = append(errs, errors.New("artifacts: none listed"))
	}
	seen := map[string]bool{}
	for i, a := range m.Artifacts {
		p := fmt.Sprintf("artifacts[%d]", i)
		if err := SafeName(a.Name); err != nil {
			errs = append(errs, fmt.Errorf("%s.name: %w", p, err))
		} else if seen[a.Name] {
			errs = append(errs, fmt.Errorf("%s.name: %q appears twice", p, a.Name))
		}
		seen[a.Name] = true
		if _, _, err := parseURI(a.URI); err != nil {
			errs = append(errs, fmt.Errorf("%s.uri: %w", p, err))
		}
		if b, err := hex.DecodeString(a.SHA256); err != nil || len(b) != sha256.Size {
			errs = append(errs, fmt.Errorf("%s.sha256: want 64 hex digits, got %q", p, a.SHA256))
		}
		if a.Size < 0 {
			errs = append(errs, fmt.Errorf("%s.size: %d is negative", p, a.Size))
		}
	}
	if len(errs) > 0 {
		return &Error{Kind: InvalidManifest, Err: errors.Join(errs...)}
	}
	return nil
}

// SafeName accepts a relative path that stays inside the directory it is
// joined to: no absolute path, no "..", no empty, "." or hidden component
// (temporary files start with a dot), no backslash or NUL, at most 255
// bytes a component.
func SafeName(name string) error {
	switch {
	case name == "":
		return errors.New("empty")
	case strings.ContainsAny(name, "\\\x00"):
		return fmt.Errorf("%q: backslashes and NUL are not allowed", name)
	case !filepath.IsLocal(name) || path.Clean(name) != name:
		return fmt.Errorf("%q: want a clean relative path inside the directory", name)
	}
	for _, c := range strings.Split(name, "/") {
		if strings.HasPrefix(c, ".") {
			return fmt.Errorf("%q: no path component may start with a dot", name)
		}
		if len(c) > 255 {
			return fmt.Errorf("%q: a component is longer than 255 bytes", name)
		}
	}
	return nil
}

type scheme int

const (
	schemeS3 scheme = iota
	schemeHTTP
	schemeFile
)

func parseURI(s string) (scheme, *url.URL, error) {
	if strings.HasPrefix(s, "/") {
		return schemeFile, &url.URL{Path: s}, nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return 0, nil, fmt.Errorf("%q: %w", s, err)
	}
	switch u.Scheme {
	case "s3":
		if u.Host == "" || strings.Trim(u.Path, "/") == "" {
			return 0, nil, fmt.Errorf("%q: want s3://bucket/key", s)
		}
		return schemeS3, u, nil
	case "https", "http":
		if u.Host == "" {
			return 0, nil, fmt.Errorf("%q: no host", s)
		}
		return schemeHTTP, u, nil
	case "file":
		if u.Host != "" && u.Host != "localhost" || u.Path == "" {
			return 0, nil, fmt.Errorf("%q: want file:///absolute/path", s)
		}
		return schemeFile, u, nil
	}
	return 0, nil, fmt.Errorf("%q: want an s3://, https://, http:// or file:// URI, or an absolute path", s)
}

// source opens an artifact's content; errors wrap errMissing when the
// object does not exist.
type source interface {
	open(ctx context.Context, u *url.URL) (io.ReadCloser, error)
}

var errMissing = errors.New("does not exist")

// Options of a Fetcher.
type Options struct {
	S3   S3Config
	HTTP HTTPConfig
	// Attempts is how many times a download that failed for another
	// reason than a missing object or a checksum mismatch is tried.
	Attempts int
	// Backoff is the wait after the first failed attempt; it doubles.
	Backoff time.Duration
	// MaxBytes bounds one artifact (0: no bound beyond the manifest's size).
	MaxBytes int64
	Logger   *slog.Logger
}

// Fetcher downloads manifests.
type Fetcher struct {
	opts    Options
	sources map[scheme]func() (source, error)
	log     *slog.Logger
}

// New returns a fetcher; S3 and HTTP clients are made at their first use,
// so a manifest of local files needs no S3 configuration.
func New(opts Options) *Fetcher {
	if opts.Attempts <= 0 {
		opts.Attempts = 3
	}
	if opts.Backoff <= 0 {
		opts.Backoff = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	f := &Fetcher{opts: opts, log: opts.Logger}
	f.sources = map[scheme]func() (source, error){
		schemeS3:   once(func() (source, error) { return newS3Source(opts.S3) }),
		schemeHTTP: once(func() (source, error) { return newHTTPSource(opts.HTTP) }),
		schemeFile: func() (source, error) { return fileSource{}, nil },
	}
	return f
}

func once(mk func() (source, error)) func() (source, error) {
	var s source
	var err error
	done := false
	return func() (source, error) {
		if !done {
			s, err = mk()
			done = true
		}
		return s, err
	}
}

// Fetch downloads every artifact of m into dir, in order, and stops at the
// first failure.
func (f *Fetcher) Fetch(ctx context.Context, m *Manifest, dir string) error {
	if err := m.Validate(); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return &Error{Kind: DownloadFailed, Err: fmt.Errorf("create %s: %w", dir, err)}
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return &Error{Kind: DownloadFailed, Err: err}
	}
	defer root.Close()
	for _, a := range m.Artifacts {
		if err := f.fetchOne(ctx, root, dir, a); err != nil {
			return err
		}
	}
	return nil
}

func (f *Fetcher) fetchOne(ctx context.Context, root *os.Root, dir string, a Artifact) error {
	fail := func(k Kind, err error) error { return &Error{Kind: k, Artifact: a.Name, URI: a.URI, Err: err} }
	if sum, err := fileSum(root, a.Name); err == nil && sum == strings.ToLower(a.SHA256) {
		f.log.Info("artifact already present", "artifact", a.Name, "sha256", sum)
		return nil
	}
	if err := mkdirs(root, path.Dir(a.Name)); err != nil {
		return fail(DownloadFailed, err)
	}
	sch, u, _ := parseURI(a.URI)
	src, err := f.sources[sch]()
	if err != nil {
		return fail(DownloadFailed, err)
	}
	backoff := f.opts.Backoff
	for attempt := 1; ; attempt++ {
		start := time.Now()
		n, err := f.download(ctx, root, src, u, a)
		if err == nil {
			if err := os.Rename(filepath.Join(dir, tempName(a.Name)), filepath.Join(dir, a.Name)); err != nil {
				return fail(DownloadFailed, err)
			}
			f.log.Info("artifact fetched", "artifact", a.Name, "uri", redactURI(a.URI), "bytes", n, "sha256", a.SHA256, "duration", time.Since(start))
			return nil
		}
		_ = root.Remove(tempName(a.Name))
		var fe *Error
		switch {
		case errors.Is(err, errMissing):
			return fail(Missing, err)
		case errors.As(err, &fe):
			fe.Artifact, fe.URI = a.Name, a.URI
			return fe
		case attempt >= f.opts.Attempts || ctx.Err() != nil:
			return fail(DownloadFailed, fmt.Errorf("after %d attempts: %w", attempt, err))
		}
		f.log.Warn("artifact download failed, retrying", "artifact", a.Name, "attempt", attempt, "error", err, "backoff", backoff)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return fail(DownloadFailed, ctx.Err())
		}
		backoff *= 2
	}
}

// download writes the artifact to its temporary name and checks it.
func (f *Fetcher) download(ctx context.Context, root *os.Root, src source, u *url.URL, a Artifact) (int64, error) {
	rc, err := src.open(ctx, u)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	out, err := root.OpenFile(tempName(a.Name), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return 0, err
	}
	defer out.Close()
	limit := f.opts.MaxBytes
	if a.Size > 0 {
		limit = a.Size
	}
	var r io.Reader = rc
	if limit > 0 {
		r = io.LimitReader(rc, limit+1)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), r)
	if err != nil {
		return n, err
	}
	if err := out.Close(); err != nil {
		return n, err
	}
	if limit > 0 && n > limit {
		return n, &Error{Kind: ChecksumMismatch, Err: fmt.Errorf("more than %d bytes", limit)}
	}
	if a.Size > 0 && n != a.Size {
		return n, &Error{Kind: ChecksumMismatch, Err: fmt.Errorf("%d bytes, want %d", n, a.Size)}
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != strings.ToLower(a.SHA256) {
		return n, &Error{Kind: ChecksumMismatch, Err: fmt.Errorf("sha256 %s, want %s", got, strings.ToLower(a.SHA256))}
	}
	return n, nil
}

func tempName(name string) string {
	dir, file := path.Split(name)
	return dir + "." + file + ".partial"
}

func fileSum(root *os.Root, name string) (string, error) {
	f, err := root.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// mkdirs creates dir's components inside root; a symbolic link that leaves
// the root is refused by os.Root.
func mkdirs(root *os.Root, dir string) error {
	if dir == "." || dir == "" {
		return nil
	}
	cur := ""
	for _, c := range strings.Split(dir, "/") {
		cur = path.Join(cur, c)
		if err := root.Mkdir(cur, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	return nil
}

type fileSource struct{}

func (fileSource) open(_ context.Context, u *url.URL) (io.ReadCloser, error) {
	f, err := os.Open(u.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s %w", u.Path, errMissing)
	}
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err == nil && st.IsDir() {
		f.Close()
		return nil, &Error{Kind: InvalidManifest, Err: fmt.Errorf("%s is a directory", u.Path)}
	}
	return f, nil
}
