package state

// Redis ACL users, one per component, each allowed only the commands and
// the keys that component's operations use (Redis 7 ACL syntax: "%R~"
// read-only keys, "%W~" write-only keys, "~" both). A component logs in
// with Config.Username; without one it is Redis's default user with
// requirepass, as before.
//
// The commands a Lua script calls are checked against the user that runs
// the script, so a user allowed EVAL still cannot touch a key or call a
// command outside its rules from inside a script.

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// Component is a Redis client of MLSysOps with its own ACL user.
type Component string

// Components with Redis access. The node agents and the ML connector do
// not use Redis (the connector goes through the northbound API).
const (
	ComponentContinuum  Component = "continuum-agent"
	ComponentCluster    Component = "cluster-agent"
	ComponentNorthbound Component = "northbound"
)

// Components lists every component with an ACL user, in a fixed order.
func Components() []Component {
	return []Component{ComponentContinuum, ComponentCluster, ComponentNorthbound}
}

// ACL command groups by what they serve.
var (
	// aclConnection: a client's handshake and health checks. go-redis
	// also sends CLIENT SETINFO on Redis 7.2 and newer and ignores a
	// refusal, so it is not granted (Redis 7.0 does not know it).
	aclConnection = []string{"ping", "hello", "echo", "client|setname", "client|getname", "client|id"}
	// aclTopology: what a Cluster client asks to route commands, and
	// what the replicated writes ask a master (INFO replication, WAIT).
	aclTopology = []string{"cluster|slots", "cluster|shards", "cluster|nodes", "info", "wait", "readonly", "readwrite"}
	// aclScripts run the store's Lua scripts and MULTI/EXEC blocks.
	aclScripts = []string{"eval", "evalsha", "multi", "exec", "discard"}
	// aclQueue consumes a submissions stream.
	aclQueue = []string{"xgroup|create", "xreadgroup", "xpending", "xclaim", "xautoclaim", "xack", "xdel", "xadd", "xrange", "xlen"}
	// aclStatus reads and writes the status hashes, specs and indexes
	// (also from the scripts: HSET, HDEL, HINCRBY, ZADD, ZREM, SET, DEL,
	// EXISTS).
	aclStatusRead  = []string{"hget", "hgetall", "get", "zrange", "zrangebylex", "zlexcount", "zcard", "exists", "xlen"}
	aclStatusWrite = []string{"hset", "hdel", "hincrby", "zadd", "zrem", "set", "del", "xadd"}
	// aclRegistry reads and writes the agent registry.
	aclRegistryRead  = []string{"hgetall", "smembers", "exists"}
	aclRegistryWrite = []string{"hset", "hsetnx", "sadd", "srem", "del"}
	// aclTelemetry reads or writes the latest samples.
	aclTelemetryRead  = []string{"get", "mget"}
	aclTelemetryWrite = []string{"set"}
)

// ACLRules returns the ACL rules of c for the keys under prefix (default
// DefaultPrefix): every command and key it may use, after a reset to
// nothing ("resetkeys resetchannels -@all"), so the rules alone define the
// user's rights. The user's status and password are not part of them
// (ACLUserLine adds both).
func ACLRules(c Component, prefix string) ([]string, error) {
	k := newKeys(prefix)
	coll := func(tag string) string { return k.join(tag, "*") }
	var cmds, keys []string
	cmds = append(cmds, aclConnection...)
	cmds = append(cmds, aclTopology...)
	cmds = append(cmds, aclScripts...)
	switch c {
	case ComponentContinuum:
		// Consumes both submission streams, writes statuses, forgets
		// ids, keeps the registry.
		cmds = append(cmds, aclQueue...)
		cmds = append(cmds, aclStatusRead...)
		cmds = append(cmds, aclStatusWrite...)
		cmds = append(cmds, aclRegistryRead...)
		cmds = append(cmds, aclRegistryWrite...)
		keys = []string{"~" + coll(tagApps), "~" + coll(tagML), "~" + coll(tagAgents)}
	case ComponentCluster:
		// Registers its node agents and writes their telemetry.
		cmds = append(cmds, aclRegistryRead...)
		cmds = append(cmds, aclRegistryWrite...)
		cmds = append(cmds, aclTelemetryWrite...)
		keys = []string{"~" + coll(tagAgents), "%W~" + k.telemetry("*")}
	case ComponentNorthbound:
		// Submits (the submit script appends to the stream and writes
		// the status, spec and indexes), reads statuses, the registry
		// and telemetry.
		cmds = append(cmds, aclStatusRead...)
		cmds = append(cmds, aclStatusWrite...)
		cmds = append(cmds, aclRegistryRead...)
		cmds = append(cmds, aclTelemetryRead...)
		keys = []string{"~" + coll(tagApps), "~" + coll(tagML), "%R~" + coll(tagAgents), "%R~" + k.telemetry("*")}
	default:
		return nil, fmt.Errorf("redis ACL: unknown component %q (want one of %v)", c, Components())
	}
	slices.Sort(cmds)
	cmds = slices.Compact(cmds)
	rules := []string{"resetkeys", "resetchannels", "-@all"}
	for _, cmd := range cmds {
		rules = append(rules, "+"+cmd)
	}
	return append(rules, keys...), nil
}

// ACLUserLine returns the line that defines user for component c in a
// Redis ACL file (aclfile) or redis.conf: "user <name> reset on
// #<sha256 of password> <rules>". The password is written only as its
// SHA-256 digest, so the file holds no password.
func ACLUserLine(user string, c Component, prefix, password string) (string, error) {
	if user == "" || strings.ContainsAny(user, " \t\r\n") || user == "default" {
		return "", fmt.Errorf("redis ACL user %q: want a name without blanks, not default", user)
	}
	if password == "" {
		return "", fmt.Errorf("redis ACL user %s: empty password", user)
	}
	rules, err := ACLRules(c, prefix)
	if err != nil {
		return "", err
	}
	d := sha256.Sum256([]byte(password))
	return "user " + user + " reset on #" + hex.EncodeToString(d[:]) + " " + strings.Join(rules, " "), nil
}

// ACLUserName is the conventional user name of component c:
// "mlsysops-<component>".
func ACLUserName(c Component) string { return "mlsysops-" + string(c) }
