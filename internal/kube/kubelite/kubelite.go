// Package kubelite is a minimal Kubernetes API client for binaries that
// must stay small and must not link client-go, such as the node-only agent:
// JSON requests to one apiserver, authenticated with the pod's service
// account or with the client certificate or token of one kubeconfig
// context.
package kubelite

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
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// The service account's files in a pod.
const (
	serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"
	tokenFile         = serviceAccountDir + "/token"
	caFile            = serviceAccountDir + "/ca.crt"
	namespaceFile     = serviceAccountDir + "/namespace"
)

// ErrNotConfigured is returned by InCluster outside a pod.
var ErrNotConfigured = errors.New("no kubeconfig given and not running in a pod")

// Client sends requests to one apiserver.
type Client struct {
	server string
	http   *http.Client
	// token returns the bearer token of a request, "" for none; read per
	// request because projected service account tokens rotate.
	token func() (string, error)
	// Namespace is the context's (or the pod's) namespace, "" if unset.
	Namespace string
}

// InCluster returns a client for the pod's own cluster, authenticated as
// its service account.
func InCluster() (*Client, error) {
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, ErrNotConfigured
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("in-cluster CA: %w", err)
	}
	tc, err := tlsConfig(ca, nil, nil, false)
	if err != nil {
		return nil, err
	}
	ns, _ := os.ReadFile(namespaceFile)
	return &Client{
		server: "https://" + net.JoinHostPort(host, port), http: httpClient(tc),
		token: func() (string, error) { return readToken(tokenFile) }, Namespace: strings.TrimSpace(string(ns)),
	}, nil
}

// kubeconfig is the part of a kubeconfig file this client understands.
type kubeconfig struct {
	CurrentContext string `json:"current-context"`
	Clusters       []struct {
		Name    string `json:"name"`
		Cluster struct {
			Server                   string `json:"server"`
			CertificateAuthority     string `json:"certificate-authority"`
			CertificateAuthorityData []byte `json:"certificate-authority-data"`
			InsecureSkipTLSVerify    bool   `json:"insecure-skip-tls-verify"`
		} `json:"cluster"`
	} `json:"clusters"`
	Users []struct {
		Name string `json:"name"`
		User struct {
			ClientCertificate     string `json:"client-certificate"`
			ClientCertificateData []byte `json:"client-certificate-data"`
			ClientKey             string `json:"client-key"`
			ClientKeyData         []byte `json:"client-key-data"`
			Token                 string `json:"token"`
			TokenFile             string `json:"tokenFile"`
		} `json:"user"`
	} `json:"users"`
	Contexts []struct {
		Name    string `json:"name"`
		Context struct {
			Cluster   string `json:"cluster"`
			User      string `json:"user"`
			Namespace string `json:"namespace"`
		} `json:"context"`
	} `json:"contexts"`
}

// FromKubeconfig returns a client for a context of a kubeconfig file (its
// current context when name is empty). It understands client
// certificates, tokens and token files, inline or in files; exec and
// auth-provider plugins are not supported.
func FromKubeconfig(path, name string) (*Client, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read kubeconfig: %w", err)
	}
	var kc kubeconfig
	if err := yaml.Unmarshal(b, &kc); err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	if name == "" {
		name = kc.CurrentContext
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("kubeconfig %s context %q: %s", path, name, fmt.Sprintf(format, args...))
	}
	var clusterName, userName, namespace string
	found := false
	for _, c := range kc.Contexts {
		if c.Name == name {
			clusterName, userName, namespace, found = c.Context.Cluster, c.Context.User, c.Context.Namespace, true
		}
	}
	if !found {
		return nil, fail("no such context")
	}
	dir := filepath.Dir(path)
	rel := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	load := func(data []byte, file string) ([]byte, error) {
		if len(data) > 0 || file == "" {
			return data, nil
		}
		return os.ReadFile(rel(file))
	}
	c := &Client{Namespace: namespace, token: func() (string, error) { return "", nil }}
	var ca []byte
	insecure := false
	found = false
	for _, cl := range kc.Clusters {
		if cl.Name != clusterName {
			continue
		}
		found = true
		c.server = strings.TrimRight(cl.Cluster.Server, "/")
		insecure = cl.Cluster.InsecureSkipTLSVerify
		if ca, err = load(cl.Cluster.CertificateAuthorityData, cl.Cluster.CertificateAuthority); err != nil {
			return nil, fail("CA: %v", err)
		}
	}
	if !found || c.server == "" {
		return nil, fail("cluster %q missing or without a server", clusterName)
	}
	var cert, key []byte
	for _, u := range kc.Users {
		if u.Name != userName {
			continue
		}
		if cert, err = load(u.User.ClientCertificateData, u.User.ClientCertificate); err != nil {
			return nil, fail("client certificate: %v", err)
		}
		if key, err = load(u.User.ClientKeyData, u.User.ClientKey); err != nil {
			return nil, fail("client key: %v", err)
		}
		switch {
		case u.User.Token != "":
			tok := u.User.Token
			c.token = func() (string, error) { return tok, nil }
		case u.User.TokenFile != "":
			f := rel(u.User.TokenFile)
			c.token = func() (string, error) { return readToken(f) }
		}
	}
	tc, err := tlsConfig(ca, cert, key, insecure)
	if err != nil {
		return nil, fail("%v", err)
	}
	c.http = httpClient(tc)
	return c, nil
}

func readToken(file string) (string, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read service account token: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

func tlsConfig(ca, cert, key []byte, insecure bool) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: insecure} //nolint:gosec // only when the kubeconfig says so
	if len(ca) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return nil, errors.New("the CA holds no PEM certificate")
		}
		tc.RootCAs = pool
	}
	if len(cert) > 0 || len(key) > 0 {
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}

func httpClient(tc *tls.Config) *http.Client {
	return &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{
		TLSClientConfig: tc, Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute,
	}}
}

// StatusError is an answer outside 2xx.
type StatusError struct {
	Method, Path string
	Code         int
	// Reason and Message come from the apiserver's Status object.
	Reason, Message string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("%s %s: HTTP %d %s: %s", e.Method, e.Path, e.Code, e.Reason, e.Message)
}

// IsStatus reports whether err is a StatusError with that HTTP code.
func IsStatus(err error, code int) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Code == code
}

// Do sends a request with a JSON body (nil for none) of the given content
// type ("" for application/json) and decodes a JSON answer into out (nil
// to discard it).
func (c *Client) Do(ctx context.Context, method, path, contentType string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("%s %s: encode: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.server+path, rd)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if contentType == "" {
		contentType = "application/json"
	}
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	tok, err := c.token()
	if err != nil {
		return err
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		se := &StatusError{Method: method, Path: path, Code: resp.StatusCode}
		var st struct{ Reason, Message string }
		if json.Unmarshal(data, &st) == nil && st.Message != "" {
			se.Reason, se.Message = st.Reason, st.Message
		} else {
			se.Message = strings.TrimSpace(string(data))
		}
		return se
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
		}
	}
	return nil
}
