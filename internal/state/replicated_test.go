package state

import (
	"strings"
	"testing"
	"time"
)

func TestParseReplication(t *testing.T) {
	info := strings.Join([]string{
		"# Replication", "role:master", "connected_slaves:2",
		"slave0:ip=127.0.0.1,port=6380,state=online,offset=123,lag=0",
		"slave1:ip=10.0.0.7,port=6381,state=wait_bgsave,offset=0,lag=1",
		"master_failover_state:no-failover", "master_replid:abc123", "master_replid2:0000", "",
	}, "\r\n")
	id, rs, err := parseReplication(info)
	if err != nil {
		t.Fatal(err)
	}
	if id != "abc123" || strings.Join(rs, ",") != "127.0.0.1:6380,10.0.0.7:6381" {
		t.Errorf("got %q %v", id, rs)
	}
	for name, bad := range map[string]string{
		"replica":       "role:slave\r\nconnected_slaves:0\r\n",
		"no count":      "role:master\r\n",
		"count differs": "role:master\r\nconnected_slaves:1\r\nmaster_replid:x\r\n",
	} {
		if _, _, err := parseReplication(bad); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestReplicaMemory(t *testing.T) {
	var m replicaMemory
	t0 := time.Unix(1000, 0)
	grace := time.Minute
	if away := m.observe("m1", []string{"a:1", "b:2"}, t0, grace); len(away) != 0 {
		t.Fatalf("away %v at first sight", away)
	}
	// b left: expected for the grace.
	if away := m.observe("m1", []string{"a:1"}, t0.Add(10*time.Second), grace); strings.Join(away, ",") != "b:2" {
		t.Errorf("away %v; want [b:2]", away)
	}
	// Another master (a failover's new one) has its own replicas.
	if away := m.observe("m2", nil, t0.Add(10*time.Second), grace); len(away) != 0 {
		t.Errorf("new master: away %v", away)
	}
	// Past the grace since b was last seen: gone, and forgotten.
	if away := m.observe("m1", []string{"a:1"}, t0.Add(61*time.Second), grace); len(away) != 0 {
		t.Errorf("after the grace: away %v", away)
	}
	// Back and gone again: the grace starts over.
	m.observe("m1", []string{"a:1", "b:2"}, t0.Add(70*time.Second), grace)
	if away := m.observe("m1", nil, t0.Add(80*time.Second), grace); strings.Join(away, ",") != "a:1,b:2" {
		t.Errorf("away %v; want [a:1 b:2]", away)
	}
	// No grace: nobody is waited for.
	var none replicaMemory
	none.observe("m", []string{"a:1"}, t0, -1)
	if away := none.observe("m", nil, t0.Add(time.Millisecond), -1); len(away) != 0 {
		t.Errorf("grace off: away %v", away)
	}
}
