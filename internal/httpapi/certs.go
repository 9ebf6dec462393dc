package httpapi

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// DefaultCertCheckInterval is how often a serving certificate's files are
// checked for a new pair.
const DefaultCertCheckInterval = 10 * time.Second

// certFiles is a serving certificate read from a PEM certificate and key
// file and read again when either file changes, so that a rotated
// certificate (a renewed Secret mount, a replaced file) is served without
// a restart. A pair that does not load keeps the previous one, with a
// warning.
type certFiles struct {
	certFile, keyFile string
	// every is the least time between two checks of the files (0: at
	// every handshake).
	every time.Duration
	log   *slog.Logger

	mu      sync.Mutex
	cur     *tls.Certificate
	stamp   string
	checked time.Time
}

// loadCertFiles loads the pair; it fails when the pair does not load.
func loadCertFiles(certFile, keyFile string, every time.Duration, log *slog.Logger) (*certFiles, error) {
	c := &certFiles{certFile: certFile, keyFile: keyFile, every: every, log: log}
	stamp, err := c.fileStamp()
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("serving certificate %s, key %s: %w", certFile, keyFile, err)
	}
	c.cur, c.stamp, c.checked = &cert, stamp, time.Now()
	return c, nil
}

// fileStamp identifies the files' current content by size and time of
// change.
func (c *certFiles) fileStamp() (string, error) {
	var stamp string
	for _, f := range []string{c.certFile, c.keyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return "", fmt.Errorf("serving certificate: %w", err)
		}
		stamp += fmt.Sprintf("%d/%d;", fi.Size(), fi.ModTime().UnixNano())
	}
	return stamp, nil
}

// get is tls.Config.GetCertificate.
func (c *certFiles) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.checked) < c.every {
		return c.cur, nil
	}
	c.checked = time.Now()
	stamp, err := c.fileStamp()
	if err != nil || stamp == c.stamp {
		if err != nil {
			c.log.Warn("serving certificate not checked; keeping the current one", "err", err)
		}
		return c.cur, nil
	}
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		// A renewal written file by file passes through a pair that does
		// not match; the next check after both are written loads it.
		c.log.Warn("serving certificate changed but does not load; keeping the current one", "cert", c.certFile, "err", err)
		return c.cur, nil
	}
	c.cur, c.stamp = &cert, stamp
	c.log.Info("serving certificate reloaded", "cert", c.certFile)
	return c.cur, nil
}
