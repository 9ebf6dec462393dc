// Package backends opens and checks what the continuum and cluster layers
// work on, Redis and a Kubernetes API (the Karmada API for the continuum,
// the member cluster's for a cluster agent). The node layer uses neither.
package backends

import (
	"context"
	"fmt"

	"k8s.io/client-go/rest"

	"github.com/mlsysops-go/mlsysops/agents/agent"
	"github.com/mlsysops-go/mlsysops/internal/agentconfig"
	"github.com/mlsysops-go/mlsysops/internal/kube"
	"github.com/mlsysops-go/mlsysops/internal/state"
)

// Store connects to the agent's Redis (Connection.RedisAddr and
// RedisMode, with the passwords of agent.RedisPassword and
// agent.RedisSentinelPassword) and returns the store on it.
func Store(a *agent.Agent, env agentconfig.LookupEnv) (*state.Store, error) {
	pw, err := agent.RedisPassword(a.Conn, env)
	if err != nil {
		return nil, err
	}
	spw, err := agent.RedisSentinelPassword(a.Conn, env)
	if err != nil {
		return nil, err
	}
	return state.Open(state.Config{
		Mode: state.Mode(a.Conn.RedisMode), Addrs: a.Conn.RedisAddrs(), MasterName: a.Conn.RedisMasterName,
		Username: a.Conn.RedisUsername, Password: pw, SentinelPassword: spw, DB: a.Conn.RedisDB,
	}, state.Options{Prefix: a.Conn.RedisPrefix, Logger: a.Log})
}

// Ready is the readiness of a layer on these backends: Redis answers and so
// does the Kubernetes API at cfg (what names it in the error).
func Ready(ctx context.Context, s *state.Store, cfg *rest.Config, what string) error {
	if err := s.Client().Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	return kube.Readyz(ctx, cfg, what)
}
