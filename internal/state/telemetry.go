package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sample is the latest telemetry of one node.
type Sample struct {
	Node    string             `json:"node"`
	Time    time.Time          `json:"time"`
	Metrics map[string]float64 `json:"metrics"`
}

// Telemetry keeps the latest sample per node. Samples expire, so a node
// that stops reporting disappears instead of showing stale numbers.
type Telemetry struct{ s *Store }

// Put stores the node's latest sample for ttl.
func (t *Telemetry) Put(ctx context.Context, s Sample, ttl time.Duration) error {
	if err := checkID("node", s.Node); err != nil {
		return err
	}
	if ttl <= 0 {
		return fmt.Errorf("telemetry of %s: ttl must be positive", s.Node)
	}
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode telemetry of %s: %w", s.Node, err)
	}
	if err := t.s.rdb.Set(ctx, t.s.k.telemetry(s.Node), b, ttl).Err(); err != nil {
		return fmt.Errorf("store telemetry of %s: %w", s.Node, err)
	}
	return nil
}

// Get returns the node's latest sample, or ErrNotFound once it expired.
func (t *Telemetry) Get(ctx context.Context, node string) (Sample, error) {
	if err := checkID("node", node); err != nil {
		return Sample{}, err
	}
	b, err := t.s.rdb.Get(ctx, t.s.k.telemetry(node)).Bytes()
	if errors.Is(err, redis.Nil) {
		return Sample{}, fmt.Errorf("telemetry of %s: %w", node, ErrNotFound)
	}
	if err != nil {
		return Sample{}, fmt.Errorf("telemetry of %s: %w", node, err)
	}
	var s Sample
	if err := json.Unmarshal(b, &s); err != nil {
		return Sample{}, fmt.Errorf("decode telemetry of %s: %w", node, err)
	}
	return s, nil
}

// GetMany returns the latest samples of the nodes that have one. The keys
// live on different cluster slots, so this is a pipeline of GETs, not an
// MGET.
func (t *Telemetry) GetMany(ctx context.Context, nodes ...string) (map[string]Sample, error) {
	cmds := make([]*redis.StringCmd, len(nodes))
	_, err := t.s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, n := range nodes {
			cmds[i] = p.Get(ctx, t.s.k.telemetry(n))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("telemetry of %d nodes: %w", len(nodes), err)
	}
	out := make(map[string]Sample, len(nodes))
	for i, c := range cmds {
		b, err := c.Bytes()
		if err != nil {
			continue
		}
		var s Sample
		if json.Unmarshal(b, &s) == nil {
			out[nodes[i]] = s
		}
	}
	return out, nil
}
