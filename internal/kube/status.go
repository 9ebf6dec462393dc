package kube

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

// AgentReady is the status of an MLSysOps description object
// (MLSysOpsNode, MLSysOpsCluster, MLSysOpsContinuum) whose agent is online
// or not: its Ready condition for generation gen, and its phase.
func AgentReady(online bool, gen int64) ([]metav1.Condition, mlsysopsv1.Phase) {
	cond := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "AgentOnline", Message: "the agent is registered and alive", ObservedGeneration: gen, LastTransitionTime: metav1.Now()}
	phase := mlsysopsv1.PhaseReady
	if !online {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "AgentOffline", "the agent stopped answering"
		phase = mlsysopsv1.PhaseNotReady
	}
	return []metav1.Condition{cond}, phase
}
