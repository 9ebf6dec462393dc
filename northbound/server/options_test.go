package server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func validOptions() *Options {
	o := NewOptions()
	o.TokenFile = "/etc/mlsysops/tokens"
	o.RedisAddrs = []string{"127.0.0.1:6379"}
	return o
}

func TestOptionsValidate(t *testing.T) {
	cases := map[string]struct {
		mutate func(*Options)
		want   []string
	}{
		"defaults with a token file and Redis": {mutate: func(*Options) {}},
		"token secret instead of a file": {mutate: func(o *Options) {
			o.TokenFile, o.TokenSecret = "", "mlsysops-framework/northbound-tokens"
		}},
		"policy directories and XMPP": {mutate: func(o *Options) {
			o.PolicyDirs = []string{"continuum=/tmp/c", "node=/tmp/n"}
			o.XMPPJID, o.XMPPPasswordFile = "northbound@mlsysops.local", "/run/xmpp"
		}},
		"every problem at once": {
			mutate: func(o *Options) {
				o.Listen = "8000"
				o.TLSCertFile = "cert.pem"
				o.TokenFile = ""
				o.PublicPaths = []string{"healthz"}
				o.RedisAddrs = nil
				o.PolicyDirs = []string{"edge=/tmp/x", "cluster"}
				o.XMPPJID = "nb@x"
				o.MaxBodyBytes = 10
				o.PingTimeout = 0
				o.LogLevel = "loud"
				o.LogFormat = "xml"
			},
			want: []string{
				`--listen "8000": want host:port`,
				"--tls-cert-file and --tls-key-file go together",
				"no token source: set --token-file or --token-secret",
				`--public-paths "healthz": paths start with /`,
				"no Redis address",
				`--policy-dir "edge=/tmp/x": want layer=dir`,
				`--policy-dir "cluster": want layer=dir`,
				"--xmpp-jid needs a password",
				"--max-body-bytes 10: at least 1024",
				"--ping-timeout must be positive",
				`--log-level "loud"`,
				`--log-format "xml"`,
			},
		},
		"both token sources, a bad secret name and a bad Redis address": {
			mutate: func(o *Options) {
				o.TokenSecret = "just-a-name"
				o.RedisAddrs = []string{"redis"}
			},
			want: []string{"exclude each other", `--token-secret "just-a-name": want namespace/name`, `address "redis": want host:port`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := validOptions()
			tc.mutate(o)
			err := o.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate() = nil")
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tc.want) {
				t.Errorf("%d problems, want %d:\n%s", len(lines), len(tc.want), err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("missing %q in:\n%s", w, err)
				}
			}
		})
	}
}

func TestOptionsFromEnvironment(t *testing.T) {
	t.Setenv("REDIS_ADDR", "")
	t.Setenv("REDIS_HOST", "10.0.0.5")
	t.Setenv("REDIS_PORT", "")
	t.Setenv("REDIS_PASSWORD", "pw")
	t.Setenv("NB_LISTEN", "0.0.0.0:8000")
	o := NewOptions()
	if len(o.RedisAddrs) != 1 || o.RedisAddrs[0] != "10.0.0.5:6379" || o.RedisPassword != "pw" || o.Listen != "0.0.0.0:8000" {
		t.Errorf("options from upstream variables: %+v", o)
	}
	t.Setenv("REDIS_ADDR", "127.0.0.1:16030")
	if o := NewOptions(); o.RedisAddrs[0] != "127.0.0.1:16030" {
		t.Errorf("REDIS_ADDR ignored: %v", o.RedisAddrs)
	}
	t.Setenv("REDIS_USERNAME", "mlsysops-northbound")
	if c := NewOptions().redisConfig(); c.Username != "mlsysops-northbound" || c.Password != "pw" {
		t.Errorf("REDIS_USERNAME: config %+v", c)
	}
}

// TestGracefulShutdown: a request in flight when the server is told to
// stop still gets its answer; the listener then refuses new connections.
func TestGracefulShutdown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started, release := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release
		_, _ = io.WriteString(w, "done")
	})
	o := validOptions()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- ServeListener(ctx, o, ln, h, slog.New(slog.NewTextHandler(io.Discard, nil))) }()

	url := "http://" + ln.Addr().String() + "/"
	answer := make(chan string, 1)
	go func() {
		resp, err := http.Get(url)
		if err != nil {
			answer <- "error: " + err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		answer <- string(b)
	}()
	<-started
	cancel()
	// Shutdown closes the listener first: wait until a new connection is
	// refused, then let the in-flight request finish.
	for {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second)
		if err != nil {
			break
		}
		c.Close()
		time.Sleep(10 * time.Millisecond)
	}
	close(release)
	if got := <-answer; got != "done" {
		t.Errorf("in-flight request got %q", got)
	}
	if err := <-served; err != nil {
		t.Errorf("ServeListener = %v", err)
	}
}
