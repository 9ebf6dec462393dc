// Package state keeps the shared state of MLSysOps in Redis: application and
// ML-deployment submissions (Redis Streams with a consumer group, so a
// submission survives the crash of its consumer and a restart of Redis),
// their status, the agent registry and the latest telemetry per node.
//
// It works with a single server, Sentinel or Cluster through
// redis.UniversalClient; every key is defined in keys.go.
package state

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode"

	"github.com/redis/go-redis/v9"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

// Errors.
var (
	// ErrNotFound: no such application, model, agent or sample.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the submission contradicts the current state (deploying
	// an application that exists, removing one that is being removed).
	ErrConflict = errors.New("conflict")
	// ErrStale: a status update named a generation that is no longer the
	// current one.
	ErrStale = errors.New("stale generation")
)

// ConflictError says why a submission conflicts. It matches ErrConflict.
type ConflictError struct {
	ID    string
	Kind  Kind
	Phase mlsysopsv1.AppPhase
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("cannot %s %s: it is %s", e.Kind, e.ID, e.Phase)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// Store is the entry point to the shared state.
type Store struct {
	rdb redis.UniversalClient
	k   keys
	log *slog.Logger
	now func() time.Time
	// replicaAcks, replicaTimeout, replicaGrace and seen: see replicated.go.
	replicaAcks    int
	replicaTimeout time.Duration
	replicaGrace   time.Duration
	seen           *replicaMemory
}

// Options tune a Store.
type Options struct {
	// Prefix starts every key; default "mlsysops". Tests use their own.
	Prefix string
	// Logger; default slog.Default().
	Logger *slog.Logger
	// ReplicaAcks is how many of a master's connected replicas must hold
	// a submission (or a forgotten id) before it is acknowledged, so that
	// it survives a failover (see replicated.go). Zero takes
	// DefaultReplicaAcks; negative does not wait.
	ReplicaAcks int
	// ReplicaTimeout bounds that wait; default DefaultReplicaTimeout.
	ReplicaTimeout time.Duration
	// ReplicaGrace is how long a replica that left its master is still
	// waited for, as one the failover could promote (see replicated.go);
	// default DefaultReplicaGrace, negative: not at all.
	ReplicaGrace time.Duration
}

// New returns a store on an existing client (see NewClient).
func New(rdb redis.UniversalClient, opts Options) *Store {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	acks, timeout := opts.ReplicaAcks, opts.ReplicaTimeout
	if acks == 0 {
		acks = DefaultReplicaAcks
	}
	if timeout <= 0 {
		timeout = DefaultReplicaTimeout
	}
	grace := opts.ReplicaGrace
	if grace == 0 {
		grace = DefaultReplicaGrace
	}
	return &Store{rdb: rdb, k: newKeys(opts.Prefix), log: log.With("component", "state"), now: time.Now,
		replicaAcks: acks, replicaTimeout: timeout, replicaGrace: grace, seen: &replicaMemory{}}
}

// Client returns the underlying client.
func (s *Store) Client() redis.UniversalClient { return s.rdb }

// Applications is the collection of application submissions.
func (s *Store) Applications() *Collection {
	return &Collection{s: s, k: s.k.apps(), name: "application"}
}

// MLDeployments is the collection of ML model deployments.
func (s *Store) MLDeployments() *Collection {
	return &Collection{s: s, k: s.k.ml(), name: "ML deployment"}
}

// Agents is the agent registry.
func (s *Store) Agents() *Registry { return &Registry{s: s} }

// Telemetry is the latest telemetry per node.
func (s *Store) Telemetry() *Telemetry { return &Telemetry{s: s} }

// checkID rejects ids that cannot be part of a key: empty, too long, or
// with whitespace or control characters.
func checkID(what, id string) error {
	if id == "" || len(id) > 253 {
		return fmt.Errorf("%s id must have 1 to 253 characters, got %d", what, len(id))
	}
	if strings.IndexFunc(id, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return fmt.Errorf("%s id %q contains whitespace or control characters", what, id)
	}
	return nil
}

func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func parseTime(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

// Open connects to Redis as cfg says and returns the store on it.
func Open(cfg Config, opts Options) (*Store, error) {
	rdb, err := NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	return New(rdb, opts), nil
}
