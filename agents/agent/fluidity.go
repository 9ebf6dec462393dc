//go:build !nodeagent

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
// Plans may not use nodes whose agents are gone (unavailable, the source
// the fluidity controller uses).
func newFluidity(kc client.Client, a *Agent, env mechanism.Env, unavailable func() map[string]string) *clusteragent.Fluidity {
	return clusteragent.NewFluidity(kc, a.name, env.Logger, clusteragent.FluidityOptions{
		Complete: env.Complete, Timeout: planTimeout(a.opts.PendingTimeout), Unavailable: unavailable,
	})
}

// newClusterPlacement builds the continuum agent's clusterPlacement
// mechanism on the Karmada API (kc reads without a cache).
// It judges plans with what the placement controller uses: the cluster
// agents' capacity reports and the clusters whose agents are gone.
func newClusterPlacement(kcfg *rest.Config, kc client.Client, a *Agent, env mechanism.Env, reports *continuumagent.Reports, unavailable func() map[string]string) (*continuumagent.ClusterPlacement, error) {
	capacity, err := continuumagent.NewProxyCapacity(kcfg)
	if err != nil {
		return nil, err
	}
	capacity.Reports = reports
	return continuumagent.NewClusterPlacement(kc, capacity, env.Logger, continuumagent.ClusterPlacementOptions{
		Complete: env.Complete, Timeout: planTimeout(a.opts.PendingTimeout), Unavailable: unavailable,
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
