package agent

import (
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusteragent "github.com/mlsysops-go/mlsysops/agents/cluster"
	continuumagent "github.com/mlsysops-go/mlsysops/agents/continuum"
	"github.com/mlsysops-go/mlsysops/internal/mechanism"
)

// The placement mechanisms live with the controllers that carry out their
// plans (agents/cluster, agents/continuum); the agent registers them.
const (
	// FluidityName is the cluster mechanism's name in plans (upstream).
	FluidityName = clusteragent.FluidityName
	// ClusterPlacementName is the continuum mechanism's name in plans.
	ClusterPlacementName = continuumagent.ClusterPlacementName
)

// newFluidity builds the cluster agent's fluidity mechanism on the member
// cluster's API (kc reads without a cache).
func newFluidity(kc client.Client, a *Agent, env mechanism.Env) *clusteragent.Fluidity {
	return clusteragent.NewFluidity(kc, a.name, env.Logger, clusteragent.FluidityOptions{
		Complete: env.Complete, Timeout: planTimeout(a.opts.PendingTimeout),
	})
}

// newClusterPlacement builds the continuum agent's clusterPlacement
// mechanism on the Karmada API (kc reads without a cache).
func newClusterPlacement(kcfg *rest.Config, kc client.Client, a *Agent, env mechanism.Env) (*continuumagent.ClusterPlacement, error) {
	capacity, err := continuumagent.NewProxyCapacity(kcfg)
	if err != nil {
		return nil, err
	}
	return continuumagent.NewClusterPlacement(kc, capacity, env.Logger, continuumagent.ClusterPlacementOptions{
		Complete: env.Complete, Timeout: planTimeout(a.opts.PendingTimeout),
	}), nil
}

// planTimeout is how long a placement mechanism follows a plan: a little
// less than the engine waits for pending plans, so that the mechanism's
// reason is the one recorded.
func planTimeout(pending time.Duration) time.Duration {
	if pending <= 0 {
		return 0 // the mechanism's default
	}
	return pending - pending/10
}
