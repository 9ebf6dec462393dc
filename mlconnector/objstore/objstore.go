// Package objstore keeps the ML connector's artifacts (model, data, code
// and environment files): in an S3-compatible object store (minio-go), or
// in a local folder, the embedded default. Keys are chosen by the
// connector (models/<model id>/<artifact id>), never by users.
package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"time"
)

// ErrNotFound is returned for a key that holds no object.
var ErrNotFound = errors.New("object not found")

// ErrUnavailable wraps errors of a store that cannot be reached now.
var ErrUnavailable = errors.New("the artifact store is unavailable")

// Info describes a stored object.
type Info struct {
	Key      string
	Size     int64
	Modified time.Time
}

// Store keeps objects by key.
type Store interface {
	// Put stores size bytes from r under key, replacing any object there.
	// The object is visible only once Put returns nil.
	Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error
	// Get opens the object under key.
	Get(ctx context.Context, key string) (io.ReadCloser, Info, error)
	// Stat describes the object under key.
	Stat(ctx context.Context, key string) (Info, error)
	// Delete removes the object under key; a missing object is not an
	// error.
	Delete(ctx context.Context, key string) error
	// List calls fn for every object whose key starts with prefix.
	List(ctx context.Context, prefix string, fn func(Info) error) error
	// Check reports whether the store can be used now.
	Check(ctx context.Context) error
	// String names the store in logs.
	String() string
}

// keyRE is what keys look like: path segments of safe characters, no
// "..", no leading slash.
var keyRE = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9._-]*(/[A-Za-z0-9_-][A-Za-z0-9._-]*)*$`)

// ValidKey reports whether key is a key the stores accept.
func ValidKey(key string) bool { return len(key) <= 512 && keyRE.MatchString(key) }

func checkKey(key string) error {
	if !ValidKey(key) {
		return fmt.Errorf("object key %q: keys are path segments of letters, digits, '.', '_' and '-'", key)
	}
	return nil
}
