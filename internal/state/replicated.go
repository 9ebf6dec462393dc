package state

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Replicated writes.
//
// Redis replicates asynchronously: a master answers a write before its
// replicas have it, and when the master dies a replica that never saw the
// write is promoted (by Sentinel or by the Cluster), so an acknowledged
// submission would be gone. Writes a user is told about (a submission
// accepted, an id forgotten) therefore run on one connection to the master
// of their keys' slot, followed by WAIT on that connection: the write is
// reported only once the master's connected replicas (up to
// Options.ReplicaAcks of them) hold it. Sentinel and the Cluster promote the
// replica with the most recent data, so an acknowledged write survives the
// master's loss.
//
// A replica that left its master a moment ago (restarted, or its link
// broke) is still one that Sentinel or the Cluster may promote: the
// master's count of connected replicas leaves it out, so a write the
// master took meanwhile would be acknowledged without any copy, and lost
// if the master then died. The store therefore remembers, per master (its
// replication id), every replica it saw connected, and counts one seen
// within Options.ReplicaGrace as expected: the write waits for it to come
// back (WAIT), and is reported unconfirmed (ErrNotReplicated; retried with
// the same request id) while it does not. ReplicaGrace should cover how
// long the failover still promotes a replica whose link is down (Sentinel:
// about ten times down-after-milliseconds; Cluster:
// cluster-replica-validity-factor times cluster-node-timeout). A master
// with other replicas connected goes on as long as ReplicaAcks of them
// confirm.
//
// A master without a replica, connected or seen within the grace (a single
// server, or a new master whose old one has not come back), acknowledges
// at once: no replica could be promoted over it with older data. Across
// its own crash, only its append-only file keeps the write: a single
// server should run with appendfsync always, as the testbed's does (with
// everysec, Redis answers before it writes the file while a background
// fsync is slow). A store started after a replica left has not seen it:
// the grace protects writes from processes that were running.

// ErrNotReplicated: the write was applied on the master, but not as many
// replicas as asked confirmed it within the timeout. The caller does not
// know whether it will survive a failover; retried with the same request
// id, a submission is applied once.
var ErrNotReplicated = errors.New("write not confirmed by the replicas")

// Defaults of Options.
const (
	DefaultReplicaAcks    = 1
	DefaultReplicaTimeout = 2 * time.Second
	DefaultReplicaGrace   = time.Minute
)

// connAttempts bounds the tries of a replicated write on errors that say
// the command did not run (a slot moved, the master is failing over).
const connAttempts = 3

// runReplicated runs script on the master of keys[0] and waits for its
// replicas when write says the script changed something.
func (s *Store) runReplicated(ctx context.Context, script *redis.Script, keys []string, write func(any) bool, args ...any) (any, error) {
	if s.replicaAcks <= 0 {
		return script.Run(ctx, s.rdb, keys, args...).Result()
	}
	var last error
	for attempt := 0; attempt < connAttempts; attempt++ {
		if attempt > 0 {
			sleepCtx(ctx, time.Duration(attempt)*200*time.Millisecond)
		}
		res, notRun, err := s.tryReplicated(ctx, script, keys, write, args)
		if err == nil || !notRun || ctx.Err() != nil {
			return res, err
		}
		last = err
		if cc, ok := s.rdb.(*redis.ClusterClient); ok {
			cc.ReloadState(ctx)
		}
	}
	return nil, last
}

// tryReplicated is one attempt; notRun reports an error after which the
// script certainly did not run.
func (s *Store) tryReplicated(ctx context.Context, script *redis.Script, keys []string, write func(any) bool, args []any) (res any, notRun bool, err error) {
	node, err := s.masterFor(ctx, keys[0])
	if err != nil {
		return nil, true, err
	}
	conn := node.Conn()
	defer conn.Close()
	rs, err := s.replicasOf(ctx, conn)
	if err != nil {
		return nil, true, err
	}
	res, err = script.Run(ctx, conn, keys, args...).Result()
	if err != nil {
		return nil, notExecuted(err), err
	}
	if rs.expected == 0 || !write(res) {
		return res, false, nil
	}
	want := min(rs.expected, s.replicaAcks)
	wait := redis.NewIntCmd(ctx, "WAIT", want, s.replicaTimeout.Milliseconds())
	_ = conn.Process(ctx, wait)
	got64, err := wait.Result()
	got := int(got64)
	if err != nil {
		return res, false, fmt.Errorf("%w: WAIT: %w", ErrNotReplicated, err)
	}
	if got < want {
		s.log.Warn("write not confirmed by the replicas", "key", keys[0], "replicas", got, "want", want,
			"connected", rs.connected, "away", rs.away, "timeout", s.replicaTimeout)
		return res, false, fmt.Errorf("%w: %d of %d replicas within %s (%d connected, %d left within %s and not back)",
			ErrNotReplicated, got, want, s.replicaTimeout, rs.connected, len(rs.away), s.replicaGrace)
	}
	return res, false, nil
}

// awaitReplicas waits until the master on conn has sent everything conn
// read or wrote to min(expected, ReplicaAcks) replicas. It waits as long
// as ctx lets it while replicas are expected (a replica that lags, or left
// within the grace, is waited for, not skipped); it gives up when the
// master has none left, or fails when the master is gone.
func (s *Store) awaitReplicas(ctx context.Context, conn *redis.Conn, key string, rs replicaSet) error {
	for {
		want := min(rs.expected, s.replicaAcks)
		wait := redis.NewIntCmd(ctx, "WAIT", want, s.replicaTimeout.Milliseconds())
		_ = conn.Process(ctx, wait)
		got, err := wait.Result()
		if err != nil {
			return fmt.Errorf("%w: WAIT: %w", ErrNotReplicated, err)
		}
		if int(got) >= want {
			return nil
		}
		s.log.Warn("entries read but not yet held by the replicas; waiting before handling them", "key", key,
			"replicas", got, "want", want, "connected", rs.connected, "away", rs.away)
		if rs, err = s.replicasOf(ctx, conn); err != nil {
			return err
		}
		if rs.expected == 0 {
			return nil
		}
	}
}

// masterFor returns a client of the master serving key: the client itself
// for a single server or a Sentinel-backed client, the slot's master for a
// cluster.
func (s *Store) masterFor(ctx context.Context, key string) (*redis.Client, error) {
	switch c := s.rdb.(type) {
	case *redis.Client:
		return c, nil
	case *redis.ClusterClient:
		node, err := c.MasterForKey(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("master of %s: %w", key, err)
		}
		return node, nil
	}
	return nil, fmt.Errorf("replicated write on a %T: want a *redis.Client or *redis.ClusterClient", s.rdb)
}

// replicaSet is what a write expects of a master's replicas.
type replicaSet struct {
	// connected replicas, in any state: one still loading its first copy
	// counts, since the WAIT then lasts until it has the write, and
	// Sentinel or the Cluster could promote it.
	connected int
	// away are the replicas seen connected within the grace that are not
	// now (ip:port).
	away []string
	// expected is connected + len(away).
	expected int
}

// replicasOf asks the server on conn for its replicas (INFO replication)
// and adds those that left it within the grace. A server that is not a
// master refuses the write.
func (s *Store) replicasOf(ctx context.Context, conn *redis.Conn) (replicaSet, error) {
	cmd := redis.NewStringCmd(ctx, "INFO", "replication")
	_ = conn.Process(ctx, cmd)
	info, err := cmd.Result()
	if err != nil {
		return replicaSet{}, fmt.Errorf("INFO replication: %w", err)
	}
	replid, connected, err := parseReplication(info)
	if err != nil {
		return replicaSet{}, err
	}
	away := s.seen.observe(replid, connected, s.now(), s.replicaGrace)
	return replicaSet{connected: len(connected), away: away, expected: len(connected) + len(away)}, nil
}

// parseReplication reads a master's INFO replication: its replication id
// and the addresses of its connected replicas.
func parseReplication(info string) (replid string, replicas []string, err error) {
	role, count := "", -1
	for _, l := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(l), ":")
		switch {
		case k == "role":
			role = v
		case k == "connected_slaves":
			count, _ = strconv.Atoi(v)
		case k == "master_replid":
			replid = v
		case strings.HasPrefix(k, "slave") && strings.Contains(v, "ip="):
			var ip, port string
			for _, f := range strings.Split(v, ",") {
				fk, fv, _ := strings.Cut(f, "=")
				switch fk {
				case "ip":
					ip = fv
				case "port":
					port = fv
				}
			}
			replicas = append(replicas, net.JoinHostPort(ip, port))
		}
	}
	if role != "master" || count < 0 {
		return "", nil, fmt.Errorf("INFO replication: the server is %q, not a master (failing over?)", role)
	}
	if count != len(replicas) {
		return "", nil, fmt.Errorf("INFO replication: %d connected replicas but %d listed", count, len(replicas))
	}
	return replid, replicas, nil
}

// replicaMemory remembers, per master replication id, when each replica
// was last seen connected.
type replicaMemory struct {
	mu   sync.Mutex
	seen map[string]map[string]time.Time
}

// observe records the replicas connected to master now and returns those
// seen within grace that are not connected now.
func (m *replicaMemory) observe(master string, connected []string, now time.Time, grace time.Duration) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seen == nil {
		m.seen = map[string]map[string]time.Time{}
	}
	last := m.seen[master]
	if last == nil {
		last = map[string]time.Time{}
		m.seen[master] = last
	}
	here := map[string]bool{}
	for _, r := range connected {
		last[r], here[r] = now, true
	}
	var away []string
	for r, t := range last {
		switch {
		case here[r]:
		case grace > 0 && now.Sub(t) < grace:
			away = append(away, r)
		default:
			delete(last, r)
		}
	}
	sort.Strings(away)
	return away
}

// notExecuted recognises errors after which a command certainly did not
// run: a refused or failed dial, and the redirections and refusals of a
// Cluster or a demoted master.
func notExecuted(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	msg := err.Error()
	for _, p := range []string{"MOVED ", "ASK ", "TRYAGAIN", "CLUSTERDOWN", "READONLY", "LOADING", "MASTERDOWN"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}
