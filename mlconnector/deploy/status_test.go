package deploy

import (
	"strings"
	"testing"

	"github.com/mlsysops-go/mlsysops/mlconnector/api"
	nbapi "github.com/mlsysops-go/mlsysops/northbound/api"
)

// appWith is an application whose model component has the pods given.
func appWith(phase string, pods ...nbapi.Pod) *nbapi.Application {
	a := &nbapi.Application{Summary: nbapi.Summary{ID: "d", Phase: phase, Message: "cluster cloud-1: component model: no node fits"}}
	a.Components = []nbapi.ComponentPlacement{{Name: Component, Cluster: "cloud-1", Pods: pods}}
	a.Endpoints = []nbapi.Endpoint{{Component: Component, Cluster: "cloud-1", Namespace: "mls-d", Service: "model", Protocol: "TCP",
		Port: 8080, URL: "http://model.mls-d.svc:8080", NodeAddress: "10.0.0.5:31000", Address: "10.96.0.9:8080"}}
	return a
}

func pod(name string, version int, init, ctr nbapi.ContainerState, ready bool) nbapi.Pod {
	ctr.Name = Component
	ctr.Args = []string{"serve", versionFlag, itoa(version)}
	return nbapi.Pod{Name: name, Node: "gpu-1", Phase: "Pending", Ready: ready, InitContainers: []nbapi.ContainerState{init}, Containers: []nbapi.ContainerState{ctr}}
}

func itoa(v int) string { return string(rune('0' + v)) }

func TestObserve(t *testing.T) {
	one, zero := int32(1), int32(0)
	fetching := nbapi.ContainerState{Name: "fetch", State: "running"}
	fetched := nbapi.ContainerState{Name: "fetch", State: "terminated", Reason: "Completed", ExitCode: &zero}
	mismatch := nbapi.ContainerState{Name: "fetch", State: "terminated", Reason: "Error", ExitCode: &one,
		Message: "checksum mismatch: model.onnx (http://connector/v1/downloads/d/a1): got 00ff, want abab"}
	crashing := nbapi.ContainerState{Name: "fetch", State: "waiting", Reason: "CrashLoopBackOff", RestartCount: 3,
		LastTermination: "Error (exit code 1) artifact missing: model.onnx: 404"}
	waitingInit := nbapi.ContainerState{State: "waiting", Reason: "PodInitializing"}
	loading := nbapi.ContainerState{State: "running"}
	serving := nbapi.ContainerState{State: "running", Ready: true}
	pullFail := nbapi.ContainerState{State: "waiting", Reason: "ImagePullBackOff", Message: "not found"}
	unscheduled := nbapi.Pod{Name: "p", Phase: "Pending", Reason: "Unschedulable", Message: "0/4 nodes are available: 1 Insufficient nvidia.com/gpu."}

	cases := map[string]struct {
		app             *nbapi.Application
		phase, reason   string
		endpoint        bool
		messageContains string
	}{
		"queued":                 {app: appWith("Queued"), phase: api.PhasePending},
		"scheduling":             {app: appWith("Scheduling"), phase: api.PhasePlacing},
		"unschedulable":          {app: appWith("Unschedulable"), phase: api.PhaseFailed, reason: api.ReasonUnschedulable, messageContains: "no node fits"},
		"no pods yet":            {app: appWith("Deploying"), phase: api.PhasePlacing},
		"pod waits for a node":   {app: appWith("Deploying", unscheduled), phase: api.PhasePlacing, messageContains: "Insufficient nvidia.com/gpu"},
		"downloading":            {app: appWith("Deploying", pod("p", 1, fetching, waitingInit, false)), phase: api.PhaseDownloading},
		"checksum mismatch":      {app: appWith("Deploying", pod("p", 1, mismatch, waitingInit, false)), phase: api.PhaseFailed, reason: api.ReasonChecksumMismatch},
		"artifact missing":       {app: appWith("Deploying", pod("p", 1, crashing, waitingInit, false)), phase: api.PhaseFailed, reason: api.ReasonArtifactMissing},
		"image cannot be pulled": {app: appWith("Deploying", pod("p", 1, fetched, pullFail, false)), phase: api.PhaseFailed, reason: api.ReasonImageCannotRun},
		"loading":                {app: appWith("Deploying", pod("p", 1, fetched, loading, false)), phase: api.PhaseLoading},
		"ready":                  {app: appWith("Running", pod("p", 1, fetched, serving, true)), phase: api.PhaseReady, endpoint: true},
		"rolling out":            {app: appWith("Running", pod("old", 1, fetched, serving, true), pod("new", 2, fetching, waitingInit, false)), phase: api.PhaseReady, reason: api.ReasonRollingOut, endpoint: true, messageContains: "still serve"},
		"new version broken":     {app: appWith("Running", pod("old", 1, fetched, serving, true), pod("new", 2, mismatch, waitingInit, false)), phase: api.PhaseReady, reason: api.ReasonChecksumMismatch, endpoint: true, messageContains: "version 2 cannot run"},
		"removing":               {app: appWith("Removing"), phase: api.PhaseDeleting},
	}
	for name, c := range cases {
		version := 1
		if name == "rolling out" || name == "new version broken" {
			version = 2
		}
		o := observe(c.app, version)
		if o.Phase != c.phase || o.Reason != c.reason || (o.Endpoint != nil) != c.endpoint {
			t.Errorf("%s: %s %s endpoint %v (%s); want %s %s endpoint %v", name, o.Phase, o.Reason, o.Endpoint != nil, o.Message, c.phase, c.reason, c.endpoint)
		}
		if c.messageContains != "" && !contains(o.Message, c.messageContains) {
			t.Errorf("%s: message %q lacks %q", name, o.Message, c.messageContains)
		}
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
