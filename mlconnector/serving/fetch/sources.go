package fetch

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Config reaches S3-compatible storage.
type S3Config struct {
	// Endpoint is a URL (https://host:port, or http:// for plain HTTP) or
	// host:port (HTTPS).
	Endpoint string
	// AccessKey, SecretKey and SessionToken are the credentials; empty
	// keys make anonymous requests.
	AccessKey, SecretKey, SessionToken string
	Region                             string
	// CAFile is a PEM bundle trusted besides the system's roots.
	CAFile string
}

// HTTPConfig reaches https:// (and http://) artifacts.
type HTTPConfig struct {
	// CAFile is a PEM bundle trusted besides the system's roots.
	CAFile  string
	Timeout time.Duration
}

func transport(caFile string) (*http.Transport, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if caFile == "" {
		return t, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("CA file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA file %s: no PEM certificate", caFile)
	}
	t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return t, nil
}

type s3Source struct{ client *minio.Client }

func newS3Source(c S3Config) (source, error) {
	if c.Endpoint == "" {
		return nil, errors.New("an s3:// artifact needs the S3 endpoint: set MLS_S3_ENDPOINT (or --s3-endpoint)")
	}
	host, secure := c.Endpoint, true
	if strings.Contains(c.Endpoint, "://") {
		u, err := url.Parse(c.Endpoint)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("S3 endpoint %q: want http(s)://host:port or host:port", c.Endpoint)
		}
		host, secure = u.Host, u.Scheme == "https"
	}
	t, err := transport(c.CAFile)
	if err != nil {
		return nil, err
	}
	var creds *credentials.Credentials
	if c.AccessKey != "" || c.SecretKey != "" {
		creds = credentials.NewStaticV4(c.AccessKey, c.SecretKey, c.SessionToken)
	} else {
		creds = credentials.New(&credentials.Static{}) // anonymous
	}
	client, err := minio.New(host, &minio.Options{
		Creds: creds, Secure: secure, Region: c.Region, Transport: t, BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		return nil, fmt.Errorf("S3 client: %w", err)
	}
	return &s3Source{client: client}, nil
}

func (s *s3Source) open(ctx context.Context, u *url.URL) (io.ReadCloser, error) {
	bucket, key := u.Host, strings.TrimPrefix(u.Path, "/")
	obj, err := s.client.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
	if err == nil {
		_, err = obj.Stat()
	}
	if err != nil {
		if obj != nil {
			obj.Close()
		}
		switch minio.ToErrorResponse(err).Code {
		case "NoSuchKey", "NoSuchBucket":
			return nil, fmt.Errorf("s3://%s/%s %w (%s)", bucket, key, errMissing, minio.ToErrorResponse(err).Code)
		case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch":
			return nil, &Error{Kind: DownloadFailed, Err: fmt.Errorf("S3 refused the credentials: %w", err)}
		}
		return nil, err
	}
	return obj, nil
}

type httpSource struct{ client *http.Client }

func newHTTPSource(c HTTPConfig) (source, error) {
	t, err := transport(c.CAFile)
	if err != nil {
		return nil, err
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Minute
	}
	return &httpSource{client: &http.Client{Transport: t, Timeout: timeout}}, nil
}

func (s *httpSource) open(ctx context.Context, u *url.URL) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		resp.Body.Close()
		return nil, fmt.Errorf("%s %w (HTTP %d)", redact(u), errMissing, resp.StatusCode)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		resp.Body.Close()
		return nil, &Error{Kind: DownloadFailed, Err: fmt.Errorf("%s: HTTP %d", redact(u), resp.StatusCode)}
	case resp.StatusCode != http.StatusOK:
		resp.Body.Close()
		return nil, fmt.Errorf("%s: HTTP %d", redact(u), resp.StatusCode)
	}
	return resp.Body, nil
}

// redact drops a URL's query (presigned URLs carry signatures there) and
// user info.
func redact(u *url.URL) string {
	c := *u
	c.RawQuery, c.User = "", nil
	return c.String()
}
