package state

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/state/record"

	"github.com/redis/go-redis/v9"
)

// Agent is one registered agent (see package record).
type Agent = record.Agent

// Registry is the set of agents known to the continuum.
type Registry struct{ s *Store }

// Register records an agent, or updates its description; RegisteredAt is
// kept from the first registration.
func (r *Registry) Register(ctx context.Context, a Agent) error {
	if err := checkID("agent", a.JID); err != nil {
		return err
	}
	now := r.s.now()
	if a.LastSeen.IsZero() {
		a.LastSeen = now
	}
	key := r.s.k.agent(a.JID)
	_, err := r.s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSetNX(ctx, key, "registered_at", formatTime(now))
		p.HSet(ctx, key, "jid", a.JID, "layer", a.Layer, "cluster", a.Cluster, "node", a.Node,
			"version", a.Version, "last_seen", formatTime(a.LastSeen), "online", boolField(a.Online))
		p.SAdd(ctx, r.s.k.agentIndex(), a.JID)
		return nil
	})
	if err != nil {
		return fmt.Errorf("register agent %s: %w", a.JID, err)
	}
	return nil
}

// seenScript updates liveness only for a registered agent, so a stray
// heartbeat cannot create a half-empty record.
var seenScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'online', ARGV[1])
if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'last_seen', ARGV[2]) end
return 1
`)

// SetLiveness records that the agent is online or gone; at, when not zero,
// becomes LastSeen. It returns ErrNotFound for an unregistered agent.
func (r *Registry) SetLiveness(ctx context.Context, jid string, online bool, at time.Time) error {
	if err := checkID("agent", jid); err != nil {
		return err
	}
	seen := ""
	if !at.IsZero() {
		seen = formatTime(at)
	}
	n, err := seenScript.Run(ctx, r.s.rdb, []string{r.s.k.agent(jid)}, boolField(online), seen).Int()
	if err != nil {
		return fmt.Errorf("liveness of agent %s: %w", jid, err)
	}
	if n == 0 {
		return fmt.Errorf("liveness of agent %s: %w", jid, ErrNotFound)
	}
	return nil
}

// Get returns one agent.
func (r *Registry) Get(ctx context.Context, jid string) (Agent, error) {
	if err := checkID("agent", jid); err != nil {
		return Agent{}, err
	}
	m, err := r.s.rdb.HGetAll(ctx, r.s.k.agent(jid)).Result()
	if err != nil {
		return Agent{}, fmt.Errorf("agent %s: %w", jid, err)
	}
	if len(m) == 0 {
		return Agent{}, fmt.Errorf("agent %s: %w", jid, ErrNotFound)
	}
	return parseAgent(m), nil
}

// List returns every registered agent, sorted by JID.
func (r *Registry) List(ctx context.Context) ([]Agent, error) {
	jids, err := r.s.rdb.SMembers(ctx, r.s.k.agentIndex()).Result()
	if err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	sort.Strings(jids)
	cmds := make([]*redis.MapStringStringCmd, len(jids))
	_, err = r.s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, j := range jids {
			cmds[i] = p.HGetAll(ctx, r.s.k.agent(j))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	out := make([]Agent, 0, len(jids))
	for _, c := range cmds {
		if m := c.Val(); len(m) > 0 {
			out = append(out, parseAgent(m))
		}
	}
	return out, nil
}

// Remove forgets an agent.
func (r *Registry) Remove(ctx context.Context, jid string) error {
	if err := checkID("agent", jid); err != nil {
		return err
	}
	_, err := r.s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, r.s.k.agent(jid))
		p.SRem(ctx, r.s.k.agentIndex(), jid)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("remove agent %s: %w", jid, err)
	}
	return nil
}

func parseAgent(m map[string]string) Agent {
	return Agent{
		JID: m["jid"], Layer: m["layer"], Cluster: m["cluster"], Node: m["node"], Version: m["version"],
		RegisteredAt: parseTime(m["registered_at"]), LastSeen: parseTime(m["last_seen"]), Online: m["online"] == "1",
	}
}

func boolField(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
