package services

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/testbed/proc"
)

// S3HealthPath is the path versitygw answers health checks on.
const S3HealthPath = "/health"

// S3 is an S3-compatible object store: versitygw (built by `make deps`)
// with its POSIX backend, objects under dir/data and their metadata in a
// sidecar folder beside (never inside) the data. The root credentials go
// through the environment, not the command line.
type S3 struct {
	dir       string
	host      string
	port      int
	accessKey string
	secretKey string
	proc      *proc.Process
}

// NewS3 describes a versitygw (the binary at bin) keeping its objects in dir
// and listening on host:port, with the root credentials accessKey and
// secretKey. host is 127.0.0.1 unless pods on the testbed's nodes must
// reach it.
func NewS3(bin, dir, host string, port int, accessKey, secretKey string) *S3 {
	s := &S3{dir: dir, host: host, port: port, accessKey: accessKey, secretKey: secretKey}
	s.proc = &proc.Process{
		Name:    "s3",
		Path:    bin,
		Args:    []string{"--port", s.Endpoint(), "posix", "--sidecar", s.metaDir(), s.DataDir()},
		Env:     []string{"ROOT_ACCESS_KEY_ID=" + accessKey, "ROOT_SECRET_ACCESS_KEY=" + secretKey, "VGW_HEALTH=" + S3HealthPath, "VGW_QUIET=true"},
		Dir:     dir,
		LogFile: filepath.Join(dir, "s3.log"),
		PIDFile: filepath.Join(dir, "s3.pid"),
		Ready:   s.Healthy,
	}
	return s
}

// DataDir holds the buckets and objects.
func (s *S3) DataDir() string { return filepath.Join(s.dir, "data") }

func (s *S3) metaDir() string { return filepath.Join(s.dir, "meta") }

// Endpoint is the host:port clients connect to (plain HTTP).
func (s *S3) Endpoint() string { return net.JoinHostPort(s.host, strconv.Itoa(s.port)) }

// URL is the server's base URL.
func (s *S3) URL() string { return "http://" + s.Endpoint() }

// AccessKey and SecretKey are the root credentials.
func (s *S3) AccessKey() string { return s.accessKey }

// SecretKey is the root secret key.
func (s *S3) SecretKey() string { return s.secretKey }

// LogFile is where the server logs.
func (s *S3) LogFile() string { return s.proc.LogFile }

// Start starts the server unless it is already running and healthy.
func (s *S3) Start(ctx context.Context) error {
	if _, ok := s.proc.Pid(); ok && s.Healthy(ctx) == nil {
		return nil
	}
	_ = s.proc.Stop(5 * time.Second)
	if _, err := os.Stat(s.proc.Path); err != nil {
		return fmt.Errorf("s3: %s missing: build versitygw with make deps: %w", s.proc.Path, err)
	}
	for _, d := range []string{s.DataDir(), s.metaDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return fmt.Errorf("s3: %w", err)
		}
	}
	if err := s.proc.Start(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return s.proc.WaitReady(ctx)
}

// Healthy asks the health endpoint.
func (s *S3) Healthy(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+S3HealthPath, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("s3 health: %s", resp.Status)
	}
	return nil
}

// Stop shuts the server down.
func (s *S3) Stop(ctx context.Context) error { return s.proc.Stop(10 * time.Second) }

// Kill kills the server with SIGKILL, as a crash would.
func (s *S3) Kill() error { return s.proc.Kill() }

// Pid returns the server's process id and whether it is alive.
func (s *S3) Pid() (int, bool) { return s.proc.Pid() }

// Running reports whether the server process is alive.
func (s *S3) Running() bool { _, ok := s.proc.Pid(); return ok }
