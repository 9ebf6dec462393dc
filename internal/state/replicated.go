package state

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
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
// A master without a connected replica (a single server, or a new master
// whose old one has not come back yet) acknowledges at once: no replica
// could be promoted over it with older data. Across its own crash, only
// its append-only file keeps the write: a single server should run with
// appendfsync always, as the testbed's does (with everysec, Redis answers
// before it writes the file while a background fsync is slow).

// ErrNotReplicated: the write was applied on the master, but not as many
// replicas as asked confirmed it within the timeout. The caller does not
// know whether it will survive a failover; retried with the same request
// id, a submission is applied once.
var ErrNotReplicated = errors.New("write not confirmed by the replicas")

// Defaults of Options.
const (
	DefaultReplicaAcks    = 1
	DefaultReplicaTimeout = 2 * time.Second
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
	replicas, err := connectedReplicas(ctx, conn)
	if err != nil {
		return nil, true, err
	}
	res, err = script.Run(ctx, conn, keys, args...).Result()
	if err != nil {
		return nil, notExecuted(err), err
	}
	if replicas == 0 || !write(res) {
		return res, false, nil
	}
	want := min(replicas, s.replicaAcks)
	wait := redis.NewIntCmd(ctx, "WAIT", want, s.replicaTimeout.Milliseconds())
	_ = conn.Process(ctx, wait)
	got64, err := wait.Result()
	got := int(got64)
	if err != nil {
		return res, false, fmt.Errorf("%w: WAIT: %w", ErrNotReplicated, err)
	}
	if got < want {
		s.log.Warn("write not confirmed by the replicas", "key", keys[0], "replicas", got, "want", want, "timeout", s.replicaTimeout)
		return res, false, fmt.Errorf("%w: %d of %d replicas within %s", ErrNotReplicated, got, want, s.replicaTimeout)
	}
	return res, false, nil
}

// awaitReplicas waits until the master on conn has sent everything conn
// read or wrote to min(replicas, ReplicaAcks) replicas. It waits as long
// as ctx lets it while replicas stay connected (a replica that lags is
// waited for, not skipped); it gives up when the master has no replica
// left, or fails when the master is gone.
func (s *Store) awaitReplicas(ctx context.Context, conn *redis.Conn, key string, replicas int) error {
	for {
		want := min(replicas, s.replicaAcks)
		wait := redis.NewIntCmd(ctx, "WAIT", want, s.replicaTimeout.Milliseconds())
		_ = conn.Process(ctx, wait)
		got, err := wait.Result()
		if err != nil {
			return fmt.Errorf("%w: WAIT: %w", ErrNotReplicated, err)
		}
		if int(got) >= want {
			return nil
		}
		s.log.Warn("entries read but not yet held by the replicas; waiting before handling them", "key", key, "replicas", got, "want", want)
		if replicas, err = connectedReplicas(ctx, conn); err != nil {
			return err
		}
		if replicas == 0 {
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

// connectedReplicas asks the server on conn how many replicas are attached
// to it (INFO replication), in any state: one still loading its first copy
// counts, since the WAIT then lasts until it has the write, and Sentinel
// or the Cluster could promote it. A server that is not a master refuses
// the write.
func connectedReplicas(ctx context.Context, conn *redis.Conn) (int, error) {
	cmd := redis.NewStringCmd(ctx, "INFO", "replication")
	_ = conn.Process(ctx, cmd)
	info, err := cmd.Result()
	if err != nil {
		return 0, fmt.Errorf("INFO replication: %w", err)
	}
	role, replicas := "", -1
	for _, l := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(l), ":")
		switch k {
		case "role":
			role = v
		case "connected_slaves":
			replicas, _ = strconv.Atoi(v)
		}
	}
	if role != "master" || replicas < 0 {
		return 0, fmt.Errorf("INFO replication: the server is %q, not a master (failing over?)", role)
	}
	return replicas, nil
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
