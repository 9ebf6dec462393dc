package deployer

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

func TestDaemonSetState(t *testing.T) {
	cases := map[string]struct {
		current bool
		status  appsv1.DaemonSetStatus
		ready   bool
		problem string
	}{
		"ready":       {true, appsv1.DaemonSetStatus{DesiredNumberScheduled: 2, UpdatedNumberScheduled: 2, NumberAvailable: 2}, true, ""},
		"rolling out": {false, appsv1.DaemonSetStatus{DesiredNumberScheduled: 2, UpdatedNumberScheduled: 2, NumberAvailable: 2}, false, "not caught up"},
		"old pods":    {true, appsv1.DaemonSetStatus{DesiredNumberScheduled: 2, UpdatedNumberScheduled: 1, NumberAvailable: 2}, false, ""},
		"unavailable": {true, appsv1.DaemonSetStatus{DesiredNumberScheduled: 2, UpdatedNumberScheduled: 2, NumberAvailable: 1}, false, ""},
		"no node":     {true, appsv1.DaemonSetStatus{}, false, "no node matches role=x"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st := daemonSetState(tc.current, tc.status, "role=x")
			if st.Ready != tc.ready {
				t.Errorf("ready = %v, want %v (%+v)", st.Ready, tc.ready, st)
			}
			if tc.problem != "" && !strings.Contains(strings.Join(st.Problems, ";"), tc.problem) {
				t.Errorf("problems %q do not say %q", st.Problems, tc.problem)
			}
		})
	}
}

func TestPodWhy(t *testing.T) {
	cases := map[string]struct {
		pod  corev1.Pod
		want []string
	}{
		"unscheduled, no scheduler": {corev1.Pod{}, []string{"not scheduled yet: no scheduler has bound it to a node"}},
		"unschedulable": {
			corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes are available"}}}},
			[]string{"not scheduled: Unschedulable: 0/3 nodes are available"},
		},
		"no kubelet": {
			corev1.Pod{Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodPending}},
			[]string{"no container started yet: is the node's kubelet running?"},
		},
		"crash loop": {
			corev1.Pod{Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
				Name:                 "agent",
				State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s"}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "no XMPP password\n"}},
			}}}},
			[]string{"container agent waiting: CrashLoopBackOff: back-off 40s (last exit 1 Error no XMPP password)"},
		},
		"probe failing": {
			corev1.Pod{Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
				Name: "agent", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
			}}}},
			[]string{"container agent running, not ready (readiness probe)"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, podWhy(&tc.pod)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
