package state

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
)

func TestConfigValidate(t *testing.T) {
	cases := map[string]struct {
		cfg  Config
		want []string
	}{
		"single":             {cfg: Config{Addrs: []string{"127.0.0.1:6379"}, Password: "x"}},
		"sentinel by master": {cfg: Config{Addrs: []string{"s1:26379", "s2:26379"}, MasterName: "mymaster"}},
		"cluster":            {cfg: Config{Mode: ModeCluster, Addrs: []string{"a:7000", "b:7000"}}},
		"single two addrs":   {cfg: Config{Addrs: []string{"a:1", "b:2"}}, want: []string{"exactly one address"}},
		"no address":         {cfg: Config{}, want: []string{"exactly one address"}},
		"sentinel no master": {cfg: Config{Mode: ModeSentinel, Addrs: []string{"s:1"}}, want: []string{"master name"}},
		"cluster db":         {cfg: Config{Mode: ModeCluster, Addrs: []string{"a:1"}, DB: 2}, want: []string{"only database 0"}},
		"bad mode":           {cfg: Config{Mode: "ring", Addrs: []string{"a:1"}}, want: []string{"want single, sentinel or cluster"}},
		"bad addr":           {cfg: Config{Addrs: []string{"nohost"}}, want: []string{"want host:port"}},
		"tls off":            {cfg: Config{Addrs: []string{"a:1"}, CAFile: "ca.pem"}, want: []string{"TLS is off"}},
		"negative timeout":   {cfg: Config{Addrs: []string{"a:1"}, ReadTimeout: -time.Second}, want: []string{"read timeout"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate() = nil")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %v, want it to mention %q", err, w)
				}
			}
		})
	}
}

func TestNewClientKinds(t *testing.T) {
	cases := map[string]struct {
		cfg  Config
		want string
	}{
		"single":   {Config{Addrs: []string{"127.0.0.1:1"}}, "*redis.Client"},
		"sentinel": {Config{Addrs: []string{"127.0.0.1:1"}, MasterName: "m"}, "*redis.Client"},
		"cluster":  {Config{Mode: ModeCluster, Addrs: []string{"127.0.0.1:1"}}, "*redis.ClusterClient"},
	}
	for name, tc := range cases {
		c, err := NewClient(tc.cfg)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := ""
		switch c.(type) {
		case *redis.Client:
			got = "*redis.Client"
		case *redis.ClusterClient:
			got = "*redis.ClusterClient"
		}
		if got != tc.want {
			t.Errorf("%s: client %T, want %s", name, c, tc.want)
		}
		c.Close()
	}
	if _, err := NewClient(Config{Addrs: []string{"a:1"}, TLS: true, CAFile: "/does/not/exist"}); err == nil {
		t.Error("a missing CA file was accepted")
	}
}

// slot computes the Redis Cluster hash slot of a key (CRC16/XMODEM of the
// hash tag, or of the key, mod 16384).
func slot(key string) uint16 {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for _, b := range []byte(key) {
		crc ^= uint16(b) << 8
		for k := 0; k < 8; k++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}

// TestKeysShareSlots checks that the keys written together by one script
// or transaction hash to one cluster slot.
func TestKeysShareSlots(t *testing.T) {
	if got := slot("123456789"); got != 0x31C3%16384 {
		t.Fatalf("crc16 self-check: %x", got)
	}
	k := newKeys("")
	for _, c := range []collectionKeys{k.apps(), k.ml()} {
		want := slot(c.stream())
		for _, key := range []string{c.dead(), c.status("app-1"), c.spec("my{weird}app"), c.ids(), c.phases()} {
			if slot(key) != want {
				t.Errorf("%s is in slot %d, %s in %d", key, slot(key), c.stream(), want)
			}
		}
	}
	if slot(k.agent("node-1@d")) != slot(k.agentIndex()) {
		t.Error("agent hash and agent index in different slots")
	}
	if k.apps().stream() != "mlsysops:{apps}:submissions" || k.telemetry("n") != "mlsysops:telemetry:n" {
		t.Errorf("key layout changed: %s %s (update keys.go's documentation and docs/protocol.md)", k.apps().stream(), k.telemetry("n"))
	}
	if newKeys("test").agent("a@d") != "test:{agents}:agent:a@d" {
		t.Error("prefix not applied")
	}
}

func TestCheckID(t *testing.T) {
	for id, ok := range map[string]bool{"app-1": true, "": false, "has space": false, "tab\there": false,
		strings.Repeat("x", 253): true, strings.Repeat("x", 254): false, "node-1@mlsysops.local": true} {
		if err := checkID("app", id); (err == nil) != ok {
			t.Errorf("checkID(%q) = %v, want ok %v", id, err, ok)
		}
	}
}

func TestNotExecuted(t *testing.T) {
	cases := map[string]struct {
		err  error
		want bool
	}{
		"moved":       {errors.New("MOVED 3999 127.0.0.1:6381"), true},
		"ask":         {errors.New("ASK 3999 127.0.0.1:6381"), true},
		"clusterdown": {errors.New("CLUSTERDOWN The cluster is down"), true},
		"readonly":    {errors.New("READONLY You can't write against a read only replica."), true},
		"dial":        {&net.OpError{Op: "dial", Err: errors.New("connection refused")}, true},
		"read":        {&net.OpError{Op: "read", Err: errors.New("connection reset")}, false},
		"eof":         {io.EOF, false},
		"script":      {errors.New("ERR Error running script"), false},
	}
	for name, tc := range cases {
		if got := notExecuted(tc.err); got != tc.want {
			t.Errorf("%s: notExecuted(%v) = %v, want %v", name, tc.err, got, tc.want)
		}
	}
}

func TestACLRules(t *testing.T) {
	got, err := ACLRules(ComponentCluster, "mls")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"resetkeys", "resetchannels", "-@all",
		"+client|getname", "+client|id", "+client|setname", "+cluster|nodes", "+cluster|shards", "+cluster|slots",
		"+del", "+discard", "+echo", "+eval", "+evalsha", "+exec", "+exists", "+hello", "+hgetall", "+hset", "+hsetnx",
		"+info", "+multi", "+ping", "+readonly", "+readwrite", "+sadd", "+set", "+smembers", "+srem", "+wait",
		"~mls:{agents}:*", "%W~mls:telemetry:*"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cluster agent's rules (-want +got):\n%s", diff)
	}
	if _, err := ACLRules("node-agent", ""); err == nil || !strings.Contains(err.Error(), `unknown component "node-agent"`) {
		t.Errorf("unknown component: %v", err)
	}
	line, err := ACLUserLine("mlsysops-northbound", ComponentNorthbound, "", "s3cret-password")
	if err != nil {
		t.Fatal(err)
	}
	d := sha256.Sum256([]byte("s3cret-password"))
	if !strings.HasPrefix(line, "user mlsysops-northbound reset on #"+hex.EncodeToString(d[:])+" resetkeys ") || strings.Contains(line, "s3cret-password") ||
		!strings.HasSuffix(line, "~mlsysops:{apps}:* ~mlsysops:{ml}:* %R~mlsysops:{agents}:* %R~mlsysops:telemetry:*") {
		t.Errorf("northbound's line: %s", line)
	}
	for _, bad := range []struct{ user, pw string }{{"", "pw"}, {"a b", "pw"}, {"default", "pw"}, {"u", ""}} {
		if _, err := ACLUserLine(bad.user, ComponentNorthbound, "", bad.pw); err == nil {
			t.Errorf("ACLUserLine(%q, %q) accepted", bad.user, bad.pw)
		}
	}
}
