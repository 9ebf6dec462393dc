package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/agentconfig"
	"github.com/mlsysops-go/mlsysops/internal/description/generic"
)

// ErrRestart asks for the agent to be restarted: a change it cannot apply
// while running (its cluster, its permitted actions, its children) is
// applied by starting again with it. Under a DaemonSet the kubelet restarts
// the container; the agents are level-triggered, so nothing is lost.
var ErrRestart = errors.New("restart to apply")

// ownKind is the description kind of each layer.
var ownKind = map[agentconfig.Layer]string{
	agentconfig.LayerContinuum: generic.KindContinuum,
	agentconfig.LayerCluster:   generic.KindCluster,
	agentconfig.LayerNode:      generic.KindNode,
}

// watchDescription notices when the agent's own description file changes
// and hands the change to the layer. Descriptions usually come from a
// mounted ConfigMap, which the kubelet updates by swapping the mount's
// ..data link: the file is read again (following the links) at every poll
// and compared by digest, which sees that swap as well as an edit in place.
// A layer that returns ErrRestart ends the agent.
func (a *Agent) watchDescription(ctx context.Context) error {
	every := a.Conn.DescriptionPollInterval
	if every <= 0 {
		return nil
	}
	last, _ := a.ownDescriptionDigest()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		sum, err := a.ownDescriptionDigest()
		if err != nil {
			// A ConfigMap edit that dropped this agent's key: keep the
			// description already loaded, and say so once.
			if last != nil {
				a.Log.Warn("own description unreadable; keeping the one loaded", "err", err)
			}
			last = nil
			continue
		}
		if bytes.Equal(sum, last) {
			continue
		}
		first := last == nil
		last = sum
		if first {
			// It came back unchanged or appeared after a failed read:
			// handled like a change, the layer compares.
			a.Log.Info("own description readable again")
		}
		if err := a.layer.DescriptionChanged(ctx); err != nil {
			return err
		}
	}
}

// ownDescriptionDigest is the SHA-256 of the agent's own description file.
func (a *Agent) ownDescriptionDigest() ([]byte, error) {
	path, err := generic.FindOwn(a.Conn.Descriptions, a.Name, ownKind[a.Opts.Layer])
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	return sum[:], nil
}

// RestartFor is the error a layer returns for a description change it
// applies by restarting.
func RestartFor(what string) error {
	return fmt.Errorf("own description changed %s: %w", what, ErrRestart)
}
