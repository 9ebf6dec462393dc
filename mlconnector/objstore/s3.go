package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Config says how to reach an S3-compatible store.
type S3Config struct {
	// Endpoint is http(s)://host:port.
	Endpoint string
	// Region of the bucket; default us-east-1.
	Region string
	// Bucket holding the artifacts; created when missing.
	Bucket string
	// AccessKey and SecretKey authenticate the connector.
	AccessKey, SecretKey string
	// Prefix is prepended to every key ("" for none).
	Prefix string
}

// S3 keeps objects in a bucket of an S3-compatible store.
type S3 struct {
	cfg    S3Config
	client *minio.Client
}

var _ Store = (*S3)(nil)

// NewS3 returns a store on cfg's bucket. It does not contact the store;
// EnsureBucket does.
func NewS3(cfg S3Config) (*S3, error) {
	u, err := url.Parse(cfg.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" && u.Path != "/" {
		return nil, fmt.Errorf("S3 endpoint %q: want http://host:port or https://host:port", cfg.Endpoint)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = 30 * time.Second
	c, err := minio.New(u.Host, &minio.Options{
		Creds:     credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure:    u.Scheme == "https",
		Region:    cfg.Region,
		Transport: tr,
		// Requests are retried by the callers, which know whether that
		// is safe.
		MaxRetries: 1,
	})
	if err != nil {
		return nil, fmt.Errorf("S3 client: %w", err)
	}
	return &S3{cfg: cfg, client: c}, nil
}

func (s *S3) String() string { return fmt.Sprintf("S3 bucket %s at %s", s.cfg.Bucket, s.cfg.Endpoint) }

// EnsureBucket creates the bucket when it does not exist.
func (s *S3) EnsureBucket(ctx context.Context) error {
	ok, err := s.client.BucketExists(ctx, s.cfg.Bucket)
	if err != nil {
		return s.wrap("look up the bucket", err)
	}
	if ok {
		return nil
	}
	if err := s.client.MakeBucket(ctx, s.cfg.Bucket, minio.MakeBucketOptions{Region: s.cfg.Region}); err != nil {
		if r := minio.ToErrorResponse(err); r.Code == "BucketAlreadyOwnedByYou" || r.Code == "BucketAlreadyExists" {
			return nil
		}
		return s.wrap("create the bucket", err)
	}
	return nil
}

func (s *S3) key(key string) (string, error) {
	if err := checkKey(key); err != nil {
		return "", err
	}
	return s.cfg.Prefix + key, nil
}

// wrap classifies an error: missing objects are ErrNotFound, network
// failures and server errors ErrUnavailable.
func (s *S3) wrap(what string, err error) error {
	if err == nil {
		return nil
	}
	r := minio.ToErrorResponse(err)
	switch {
	case r.Code == "NoSuchKey" || r.StatusCode == http.StatusNotFound && r.Code != "NoSuchBucket":
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	case r.StatusCode >= 500 || r.StatusCode == 0 && isNetwork(err):
		return fmt.Errorf("%s: %w: %v", what, ErrUnavailable, err)
	}
	return fmt.Errorf("%s in %s: %w", what, s, err)
}

func isNetwork(err error) bool {
	var ne net.Error
	var oe *net.OpError
	var ue *url.Error
	return errors.As(err, &ne) || errors.As(err, &oe) || errors.As(err, &ue) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// Put implements Store.
func (s *S3) Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error {
	k, err := s.key(key)
	if err != nil {
		return err
	}
	_, err = s.client.PutObject(ctx, s.cfg.Bucket, k, r, size, minio.PutObjectOptions{ContentType: contentType})
	return s.wrap("store "+key, err)
}

// Get implements Store.
func (s *S3) Get(ctx context.Context, key string) (io.ReadCloser, Info, error) {
	k, err := s.key(key)
	if err != nil {
		return nil, Info{}, err
	}
	obj, err := s.client.GetObject(ctx, s.cfg.Bucket, k, minio.GetObjectOptions{})
	if err != nil {
		return nil, Info{}, s.wrap("read "+key, err)
	}
	st, err := obj.Stat()
	if err != nil {
		obj.Close()
		return nil, Info{}, s.wrap("read "+key, err)
	}
	return obj, Info{Key: key, Size: st.Size, Modified: st.LastModified}, nil
}

// Stat implements Store.
func (s *S3) Stat(ctx context.Context, key string) (Info, error) {
	k, err := s.key(key)
	if err != nil {
		return Info{}, err
	}
	st, err := s.client.StatObject(ctx, s.cfg.Bucket, k, minio.StatObjectOptions{})
	if err != nil {
		return Info{}, s.wrap("stat "+key, err)
	}
	return Info{Key: key, Size: st.Size, Modified: st.LastModified}, nil
}

// Delete implements Store.
func (s *S3) Delete(ctx context.Context, key string) error {
	k, err := s.key(key)
	if err != nil {
		return err
	}
	err = s.client.RemoveObject(ctx, s.cfg.Bucket, k, minio.RemoveObjectOptions{})
	if err := s.wrap("delete "+key, err); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	return nil
}

// List implements Store.
func (s *S3) List(ctx context.Context, prefix string, fn func(Info) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for obj := range s.client.ListObjects(ctx, s.cfg.Bucket, minio.ListObjectsOptions{Prefix: s.cfg.Prefix + prefix, Recursive: true}) {
		if obj.Err != nil {
			return s.wrap("list "+prefix, obj.Err)
		}
		if err := fn(Info{Key: obj.Key[len(s.cfg.Prefix):], Size: obj.Size, Modified: obj.LastModified}); err != nil {
			return err
		}
	}
	return nil
}

// Check implements Store: the bucket answers.
func (s *S3) Check(ctx context.Context) error {
	_, err := s.client.BucketExists(ctx, s.cfg.Bucket)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return nil
}
