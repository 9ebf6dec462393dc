// Package record holds the agent registry's record type without the Redis
// store around it, so that the node-only agent can build one without
// linking the store (and the API types it uses).
package record

import "time"

// Agent is one registered agent.
type Agent struct {
	// JID is the agent's bare JID.
	JID     string
	Layer   string
	Cluster string
	Node    string
	Version string
	// RegisteredAt is when the agent registered first.
	RegisteredAt time.Time
	// LastSeen is the last sign of life recorded.
	LastSeen time.Time
	// Online is the last liveness verdict recorded by its parent.
	Online bool
}
