package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mlsysops-go/mlsysops/internal/agentconfig"
)

func TestSplitArgs(t *testing.T) {
	cases := map[string]struct {
		args       []string
		wantConn   []string
		wantConfig []string
		wantErr    string
	}{
		"both kinds": {
			args:       []string{"--layer", "node", "--xmpp-server", "x:5222", "--node-name=n1", "--placement-controllers=false", "--redis-addr=r:1"},
			wantConn:   []string{"--xmpp-server", "x:5222", "--placement-controllers=false", "--redis-addr=r:1"},
			wantConfig: []string{"--continuum-layer", "node", "--node-name=n1"},
		},
		"bool without value": {
			args:     []string{"--placement-controllers"},
			wantConn: []string{"--placement-controllers"},
		},
		"unknown flag":  {args: []string{"--nope"}, wantErr: "unknown flag"},
		"missing value": {args: []string{"--xmpp-server"}, wantErr: "needs an argument"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfs, ofs := flagSets(NewConnection())
			conn, cfg, err := splitArgs(tc.args, cfs, ofs)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.wantConn, conn); d != "" {
				t.Errorf("connection args (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tc.wantConfig, cfg); d != "" {
				t.Errorf("config args (-want +got):\n%s", d)
			}
		})
	}
}

func TestConnectionValidate(t *testing.T) {
	cases := map[string]struct {
		layer   agentconfig.Layer
		mutate  func(*Connection)
		wantErr []string
	}{
		"node needs no redis": {layer: agentconfig.LayerNode},
		"cluster needs redis": {layer: agentconfig.LayerCluster, wantErr: []string{"--redis-addr"}},
		"continuum needs redis and karmada": {layer: agentconfig.LayerContinuum,
			wantErr: []string{"--redis-addr", "--karmada-kubeconfig"}},
		"bad log format and level": {layer: agentconfig.LayerNode, mutate: func(c *Connection) { c.LogFormat, c.LogLevel = "xml", "loud" },
			wantErr: []string{"--log-format", "--log-level"}},
		"sentinel": {layer: agentconfig.LayerCluster, mutate: func(c *Connection) {
			c.RedisAddr, c.RedisMode, c.RedisMasterName = "s1:26379,s2:26379,s3:26379", "sentinel", "mlsysops"
		}},
		"sentinel without master name": {layer: agentconfig.LayerCluster, mutate: func(c *Connection) {
			c.RedisAddr, c.RedisMode = "s1:26379", "sentinel"
		}, wantErr: []string{"--redis-master-name"}},
		"cluster with a database": {layer: agentconfig.LayerCluster, mutate: func(c *Connection) {
			c.RedisAddr, c.RedisMode, c.RedisDB = "a:1,b:2", "cluster", 1
		}, wantErr: []string{"--redis-db"}},
		"single with two addresses": {layer: agentconfig.LayerCluster, mutate: func(c *Connection) { c.RedisAddr = "a:1,b:2" },
			wantErr: []string{"need --redis-mode"}},
		"leader election": {layer: agentconfig.LayerCluster, mutate: func(c *Connection) {
			c.RedisAddr, c.LeaderElect, c.LeaderElectLease = "a:1", true, "mlsysops/agent-a"
		}},
		"leader election on a node": {layer: agentconfig.LayerNode, mutate: func(c *Connection) { c.LeaderElect = true },
			wantErr: []string{"--leader-elect:"}},
		"leader election lease without namespace": {layer: agentconfig.LayerCluster, mutate: func(c *Connection) {
			c.RedisAddr, c.LeaderElect, c.LeaderElectLease = "a:1", true, "agent-a"
		}, wantErr: []string{"--leader-elect-lease"}},
		"leader election renew deadline past the lease": {layer: agentconfig.LayerCluster, mutate: func(c *Connection) {
			c.RedisAddr, c.LeaderElect, c.LeaseDuration, c.RenewDeadline = "a:1", true, 5*time.Second, 5*time.Second
		}, wantErr: []string{"--leader-elect-lease-duration"}},
		"leader election retry too slow": {layer: agentconfig.LayerCluster, mutate: func(c *Connection) {
			c.RedisAddr, c.LeaderElect, c.RetryPeriod = "a:1", true, 9*time.Second
		}, wantErr: []string{"--leader-elect-renew-deadline"}},
		"unknown mode": {layer: agentconfig.LayerCluster, mutate: func(c *Connection) { c.RedisAddr, c.RedisMode = "a:1", "ring" },
			wantErr: []string{"--redis-mode"}},
		"propagation binding": {layer: agentconfig.LayerContinuum, mutate: func(c *Connection) {
			c.RedisAddr, c.KarmadaKubeconfig, c.Propagation = "a:1", "k", PropagationBinding
		}},
		"unknown propagation": {layer: agentconfig.LayerContinuum, mutate: func(c *Connection) {
			c.RedisAddr, c.KarmadaKubeconfig, c.Propagation = "a:1", "k", "policy"
		}, wantErr: []string{`--propagation: want binding or work, got "policy"`}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := NewConnection()
			if tc.mutate != nil {
				tc.mutate(c)
			}
			err := c.Validate(tc.layer)
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %v", tc.wantErr)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %s", err, w)
				}
			}
		})
	}
}

func TestLoadOptionsEnvAndFlags(t *testing.T) {
	env := map[string]string{"REDIS_HOST": "redis", "REDIS_PORT": "6380", "EJABBERD_DOMAIN": "example.org", "NODE_NAME": "n1"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	opts, conn, _, err := loadOptions([]string{"--layer", "cluster", "--redis-addr", "other:1", "--descriptions", "d"}, lookup)
	if err != nil {
		t.Fatal(err)
	}
	if opts.Layer != agentconfig.LayerCluster || opts.NodeName != "n1" {
		t.Errorf("layer %q name %q", opts.Layer, opts.NodeName)
	}
	if conn.RedisAddr != "other:1" || conn.XMPPDomain != "example.org" || conn.Descriptions != "d" {
		t.Errorf("connection %+v", conn)
	}
	// The Redis ACL user from the environment, and a flag over it.
	env["MLSYSOPS_REDIS_USERNAME"] = "mlsysops-cluster-agent"
	if _, conn, _, err = loadOptions([]string{"--layer", "cluster", "--descriptions", "d"}, lookup); err != nil || conn.RedisUsername != "mlsysops-cluster-agent" {
		t.Errorf("username from the environment: %q, %v", conn.RedisUsername, err)
	}
	if _, conn, _, err = loadOptions([]string{"--layer", "cluster", "--descriptions", "d", "--redis-username", "u2"}, lookup); err != nil || conn.RedisUsername != "u2" {
		t.Errorf("username from the flag: %q, %v", conn.RedisUsername, err)
	}
}

func TestAgentJID(t *testing.T) {
	got := []string{
		AgentJID(agentconfig.LayerNode, "cloud-1", "d"),
		AgentJID(agentconfig.LayerCluster, "cloud-1", "d"),
		AgentJID(agentconfig.LayerContinuum, "c", "d"),
	}
	want := []string{"cloud-1@d", "cloud-1.cluster@d", "c.continuum@d"}
	if d := cmp.Diff(want, got); d != "" {
		t.Error(d)
	}
}
