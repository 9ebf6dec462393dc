package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/mlsysops-go/mlsysops/internal/agentconfig"
	"github.com/mlsysops-go/mlsysops/internal/kube/kubelite"
	"github.com/mlsysops-go/mlsysops/internal/messaging"
	"github.com/mlsysops-go/mlsysops/internal/messaging/authreport"
)

// loginReporter tells the accounts reconciler, through a Kubernetes Event
// in the agent's cluster, that ejabberd refuses the agent's login: the one
// path that needs no XMPP. Every layer reports the same way; the Kubernetes
// client is kubelite, so that the node-only build stays small.
type loginReporter struct{ r *authreport.Reporter }

// newLoginReporter returns a reporter for the agent, or nil (which
// reports nothing) outside a pod without --events-kubeconfig.
func newLoginReporter(conn *Connection, layer agentconfig.Layer, name string, log *slog.Logger) (*loginReporter, error) {
	var kube *kubelite.Client
	var err error
	if conn.EventsKubeconfig != "" {
		kube, err = kubelite.FromKubeconfig(conn.EventsKubeconfig, conn.EventsContext)
	} else {
		kube, err = kubelite.InCluster()
	}
	if errors.Is(err, kubelite.ErrNotConfigured) {
		log.Info("refused XMPP logins are not reported to the accounts reconciler: no --events-kubeconfig and not in a pod")
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("login failure reports: %w", err)
	}
	// A node agent's Event is about its Node, where `kubectl describe
	// node` shows it; the others' about their MLSysOps resource.
	obj := authreport.Object{APIVersion: "v1", Kind: "Node", Name: name}
	switch layer {
	case agentconfig.LayerCluster:
		obj = authreport.Object{APIVersion: "mlsysops.eu/v1", Kind: "MLSysOpsCluster", Name: name}
	case agentconfig.LayerContinuum:
		obj = authreport.Object{APIVersion: "mlsysops.eu/v1", Kind: "MLSysOpsContinuum", Name: name}
	}
	return &loginReporter{r: authreport.New(kube, obj, name, log)}, nil
}

// report queues a failure; safe on a nil reporter.
func (l *loginReporter) report(f messaging.AuthFailure) {
	if l != nil {
		l.r.Report(f)
	}
}

// run writes the reports until ctx ends; safe on a nil reporter.
func (l *loginReporter) run(ctx context.Context) error {
	if l != nil {
		l.r.Run(ctx)
	}
	return nil
}
