// Package client is the Go client of the MLSysOps northbound API, used by
// the mls CLI, the ML connector and the tests.
//
//	c, err := client.New(client.FromEnv())
//	acc, err := c.Applications().Submit(ctx, yamlBytes, client.YAML)
//	app, err := c.Applications().Get(ctx, acc.ID)
//
// Errors from the server are *Error, carrying the problem document (with
// every problem of a rejected description); errors reaching the server are
// *ConnectionError. Both say what to do next.
package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/mlsysops-go/mlsysops/northbound/api"
)

// Content types of submitted bodies.
const (
	JSON = api.MediaJSON
	YAML = api.MediaYAML
	Text = api.MediaText
)

// Environment variables FromEnv reads.
const (
	EnvURL   = "MLS_API_URL"
	EnvIP    = "MLS_API_IP"
	EnvPort  = "MLS_API_PORT"
	EnvToken = "MLS_TOKEN"
	EnvCA    = "MLS_CA_FILE"
)

// DefaultURL is where the API listens after `make up`.
const DefaultURL = "http://127.0.0.1:8000"

// Config says how to reach the API.
type Config struct {
	// URL of the API, e.g. http://127.0.0.1:8000.
	URL string
	// Token is the bearer token.
	Token string
	// CAFile (PEM) replaces the system roots for https URLs.
	CAFile string
	// Timeout bounds one request; default 60s.
	Timeout time.Duration
	// HTTPClient replaces the default client (Timeout and CAFile are then
	// ignored).
	HTTPClient *http.Client
	// UserAgent is sent with every request.
	UserAgent string
}

// FromEnv reads MLS_API_URL (or upstream's MLS_API_IP and MLS_API_PORT),
// MLS_TOKEN and MLS_CA_FILE.
func FromEnv() Config {
	cfg := Config{URL: os.Getenv(EnvURL), Token: os.Getenv(EnvToken), CAFile: os.Getenv(EnvCA)}
	if cfg.URL == "" {
		ip, port := os.Getenv(EnvIP), os.Getenv(EnvPort)
		if ip != "" || port != "" {
			if ip == "" {
				ip = "127.0.0.1"
			}
			if port == "" {
				port = "8000"
			}
			cfg.URL = "http://" + net.JoinHostPort(ip, port)
		}
	}
	return cfg
}

// Client calls the API.
type Client struct {
	base  *url.URL
	token string
	hc    *http.Client
	ua    string
}

// New returns a client.
func New(cfg Config) (*Client, error) {
	raw := cfg.URL
	if raw == "" {
		raw = DefaultURL
	}
	u, err := url.Parse(strings.TrimRight(raw, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("API URL %q: want http://host:port or https://host:port (set %s)", raw, EnvURL)
	}
	hc := cfg.HTTPClient
	if hc == nil {
		timeout := cfg.Timeout
		if timeout == 0 {
			timeout = 60 * time.Second
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		if cfg.CAFile != "" {
			pem, err := os.ReadFile(cfg.CAFile)
			if err != nil {
				return nil, fmt.Errorf("API CA file: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("API CA file %s holds no PEM certificate", cfg.CAFile)
			}
			tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		}
		hc = &http.Client{Timeout: timeout, Transport: tr}
	}
	ua := cfg.UserAgent
	if ua == "" {
		ua = "mlsysops-client"
	}
	return &Client{base: u, token: cfg.Token, hc: hc, ua: ua}, nil
}

// URL is the API's base URL.
func (c *Client) URL() string { return c.base.String() }

// Error is an answer of the API other than 2xx.
type Error struct {
	Method, URL string
	StatusCode  int
	// Problem is the problem document; Detail is filled from the body
	// when the server sent none.
	Problem api.Problem
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Problem.Detail)
	if b.Len() == 0 {
		b.WriteString(http.StatusText(e.StatusCode))
	}
	fmt.Fprintf(&b, " (HTTP %d from %s %s)", e.StatusCode, e.Method, e.URL)
	for _, p := range e.Problem.Problems {
		b.WriteString("\n  ")
		if p.Field != "" {
			b.WriteString(p.Field + ": ")
		}
		b.WriteString(p.Message)
	}
	switch e.StatusCode {
	case http.StatusUnauthorized:
		fmt.Fprintf(&b, "\nSet %s to a token of the API (after `make up`: . .testbed/env).", EnvToken)
	case http.StatusForbidden:
		b.WriteString("\nUse a token with the operator role.")
	}
	return b.String()
}

// StatusCode returns the HTTP status of err when it is an *Error, else 0.
func StatusCode(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.StatusCode
	}
	return 0
}

// IsNotFound reports a 404.
func IsNotFound(err error) bool { return StatusCode(err) == http.StatusNotFound }

// IsConflict reports a 409.
func IsConflict(err error) bool { return StatusCode(err) == http.StatusConflict }

// ConnectionError means the API could not be reached.
type ConnectionError struct {
	URL string
	Err error
}

func (e *ConnectionError) Error() string {
	return fmt.Sprintf("cannot reach the MLSysOps API at %s: %v\nIs it running? `make up` starts it on %s; point %s at another one.",
		e.URL, e.Err, DefaultURL, EnvURL)
}

func (e *ConnectionError) Unwrap() error { return e.Err }

// Response is a raw answer, for callers of Do.
type Response struct {
	StatusCode int
	Header     http.Header
	Body       []byte
}

// Do sends a request to path (with its query) and returns the raw answer
// whatever its status, or a *ConnectionError.
func (c *Client) Do(ctx context.Context, method, path string, body []byte, contentType string, header http.Header) (*Response, error) {
	u := c.base.String() + path
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", api.MediaJSON)
	req.Header.Set("User-Agent", c.ua)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s %s: %w", method, path, ctx.Err())
		}
		return nil, &ConnectionError{URL: c.base.String(), Err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, &ConnectionError{URL: c.base.String(), Err: fmt.Errorf("read the answer to %s %s: %w", method, path, err)}
	}
	return &Response{StatusCode: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// call sends a request and decodes a 2xx JSON answer into out (if not nil);
// any other status is an *Error.
func (c *Client) call(ctx context.Context, method, path string, body []byte, contentType string, header http.Header, out any) (*Response, error) {
	resp, err := c.Do(ctx, method, path, body, contentType, header)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		e := &Error{Method: method, URL: path, StatusCode: resp.StatusCode}
		if json.Unmarshal(resp.Body, &e.Problem) != nil || e.Problem.Detail == "" {
			e.Problem.Detail = strings.TrimSpace(string(resp.Body))
			if len(e.Problem.Detail) > 500 {
				e.Problem.Detail = e.Problem.Detail[:500] + "..."
			}
		}
		return resp, e
	}
	if out != nil && resp.StatusCode != http.StatusNoContent {
		if err := json.Unmarshal(resp.Body, out); err != nil {
			return resp, fmt.Errorf("%s %s: decode the answer: %w", method, path, err)
		}
	}
	return resp, nil
}

func (c *Client) get(ctx context.Context, path string, out any) error {
	_, err := c.call(ctx, http.MethodGet, path, nil, "", nil, out)
	return err
}

// Healthz checks that the API serves.
func (c *Client) Healthz(ctx context.Context) (api.Health, error) {
	var h api.Health
	return h, c.get(ctx, api.PathHealthz, &h)
}

// Readyz checks that the API can work.
func (c *Client) Readyz(ctx context.Context) (api.Health, error) {
	var h api.Health
	return h, c.get(ctx, api.PathReadyz, &h)
}

// OpenAPI returns the OpenAPI document.
func (c *Client) OpenAPI(ctx context.Context) (map[string]any, error) {
	var doc map[string]any
	return doc, c.get(ctx, api.PathOpenAPI, &doc)
}
