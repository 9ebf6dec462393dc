package deploy

import (
	"fmt"
	"sort"
	"strings"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/mlconnector/api"
	nbapi "github.com/mlsysops-go/mlsysops/northbound/api"
)

// observed is what the connector concludes from the application's state.
type observed struct {
	Phase    string
	Reason   string
	Message  string
	Endpoint *api.Endpoint
	Pods     []api.Pod
}

// imageProblems are the kubelet's reasons for a container whose image
// cannot run.
var imageProblems = map[string]bool{
	"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true, "ErrImageNeverPull": true,
	"CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true, "StartError": true,
}

// observe derives a deployment's phase from its application as the
// northbound API shows it (status, pods and endpoints), for the version it
// should serve:
//
//	Pending      the application is queued
//	Placing      clusters and nodes are chosen, or a pod waits for one
//	Downloading  the init container fetches the version's files
//	Loading      the model server runs and loads the model
//	Ready        a replica of the version answers; the endpoint is set
//	Failed       with a reason: Unschedulable (per-cluster reasons),
//	             DownloadFailed, ChecksumMismatch, ArtifactMissing,
//	             ImageCannotRun, ModelLoadFailed
//
// While a new version rolls out, replicas of an older one still serve:
// the phase stays Ready with reason RollingOut (or the new version's
// failure) and a message that says so.
func observe(app *nbapi.Application, version int) observed {
	var comp *nbapi.ComponentPlacement
	for i := range app.Components {
		if app.Components[i].Name == Component {
			comp = &app.Components[i]
		}
	}
	o := observed{Phase: api.PhasePending, Message: app.Message}
	if comp != nil {
		for _, p := range comp.Pods {
			o.Pods = append(o.Pods, podView(p, comp.Cluster))
		}
	}
	var ep *api.Endpoint
	for _, e := range app.Endpoints {
		if e.Component != Component || e.Protocol != "TCP" {
			continue
		}
		ep = &api.Endpoint{Cluster: e.Cluster, Namespace: e.Namespace, Service: e.Service, URL: e.URL,
			ExternalAddress: e.NodeAddress, LocalAddress: e.Address, ModelName: ModelName}
		break
	}
	switch mlsysopsv1.AppPhase(app.Phase) {
	case mlsysopsv1.AppQueued:
		o.Phase = api.PhasePending
		return o
	case mlsysopsv1.AppScheduling:
		o.Phase = api.PhasePlacing
		return o
	case mlsysopsv1.AppUnschedulable:
		o.Phase, o.Reason = api.PhaseFailed, api.ReasonUnschedulable
		o.Message = "no cluster or node can run the model server now (the agents retry as capacity changes): " + app.Message
		return o
	case mlsysopsv1.AppRemoving:
		o.Phase = api.PhaseDeleting
		return o
	}
	// Deploying, Running, Degraded, Failed: the pods tell.
	var current, older []api.Pod
	for _, p := range o.Pods {
		if p.ModelVersion == 0 || p.ModelVersion == version {
			current = append(current, p)
		} else {
			older = append(older, p)
		}
	}
	olderReady := 0
	for _, p := range older {
		if p.Ready {
			olderReady++
		}
	}
	stage, reason, msg := summarize(current)
	switch {
	case stage == api.PhaseReady:
		o.Phase, o.Reason = api.PhaseReady, ""
		o.Message = fmt.Sprintf("version %d serves", version)
		if len(older) > 0 {
			o.Reason, o.Message = api.ReasonRollingOut, fmt.Sprintf("version %d serves; replicas of the older version are leaving", version)
		}
	case olderReady > 0:
		// The old version serves while the new one comes up (or fails).
		o.Phase = api.PhaseReady
		o.Reason = api.ReasonRollingOut
		o.Message = fmt.Sprintf("rolling out version %d (%s", version, strings.ToLower(stage))
		if reason != "" {
			o.Reason = reason
			o.Message = fmt.Sprintf("version %d cannot run (%s", version, reason)
		}
		if msg != "" {
			o.Message += ": " + msg
		}
		o.Message += fmt.Sprintf("); %d replica(s) of version %d still serve", olderReady, older[0].ModelVersion)
	case stage == "":
		o.Phase = api.PhasePlacing
		if comp != nil && comp.Message != "" {
			o.Message = comp.Message
		} else {
			o.Message = "waiting for the cluster agent to create the model server"
		}
		if mlsysopsv1.AppPhase(app.Phase) == mlsysopsv1.AppFailed {
			o.Phase, o.Reason, o.Message = api.PhaseFailed, api.ReasonImageCannotRun, app.Message
		}
	default:
		o.Phase, o.Reason, o.Message = stage, reason, msg
	}
	if o.Phase == api.PhaseReady {
		o.Endpoint = ep
		if ep == nil {
			o.Phase, o.Message = api.PhaseLoading, "the model is loaded; waiting for its Service"
		}
	}
	return o
}

// stageOrder ranks pod stages from the most advanced.
var stageOrder = map[string]int{api.PhaseReady: 0, api.PhaseLoading: 1, api.PhaseDownloading: 2, api.PhasePlacing: 3, api.PhaseFailed: 4}

// summarize is the stage of the most advanced pod: Ready when one is;
// Failed only when every pod failed (with the first failure's reason).
func summarize(pods []api.Pod) (stage, reason, message string) {
	if len(pods) == 0 {
		return "", "", ""
	}
	sorted := append([]api.Pod(nil), pods...)
	sort.SliceStable(sorted, func(i, j int) bool { return stageOrder[sorted[i].Stage] < stageOrder[sorted[j].Stage] })
	best := sorted[0]
	if best.Stage == api.PhaseFailed {
		return api.PhaseFailed, failureReason(best.Message), best.Message
	}
	return best.Stage, "", best.Message
}

// failureReason classifies a failed pod's message, which starts with the
// model server's own words (fetch's termination messages) or the
// kubelet's reason.
func failureReason(msg string) string {
	switch {
	case strings.Contains(msg, "checksum mismatch"):
		return api.ReasonChecksumMismatch
	case strings.Contains(msg, "artifact missing"):
		return api.ReasonArtifactMissing
	case strings.Contains(msg, "download failed"), strings.Contains(msg, "invalid manifest"), strings.HasPrefix(msg, "fetch: "):
		return api.ReasonDownloadFailed
	case strings.HasPrefix(msg, "image: "):
		return api.ReasonImageCannotRun
	}
	return api.ReasonModelLoadFailed
}

// podView is the connector's view of one pod: its stage and the message
// that explains it.
func podView(p nbapi.Pod, cluster string) api.Pod {
	out := api.Pod{Name: p.Name, Cluster: cluster, Node: p.Node, IP: p.IP, Phase: p.Phase, Ready: p.Ready}
	for _, c := range p.Containers {
		if c.Name == Component || len(p.Containers) == 1 {
			out.ModelVersion = servedVersion(c.Args)
		}
	}
	out.Stage, out.Message = podStage(p)
	return out
}

func podStage(p nbapi.Pod) (string, string) {
	if p.Ready {
		return api.PhaseReady, ""
	}
	if p.Phase == "Pending" && p.Node == "" {
		msg := p.Message
		if msg == "" {
			msg = "waiting for a node"
		}
		return api.PhasePlacing, msg
	}
	// The init container: running is downloading; failed says why.
	for _, c := range p.InitContainers {
		if imageProblems[c.Reason] {
			return api.PhaseFailed, "image: the fetch image cannot run: " + c.Reason + " " + c.Message
		}
		switch c.State {
		case "terminated":
			if c.ExitCode != nil && *c.ExitCode == 0 {
				continue
			}
			return api.PhaseFailed, "fetch: " + firstNonEmpty(c.Message, c.Reason)
		case "waiting":
			if c.LastTermination != "" {
				// Restarting after a failure: the last one says why.
				return api.PhaseFailed, "fetch: " + c.LastTermination
			}
			return api.PhaseDownloading, "the init container is starting"
		case "running":
			return api.PhaseDownloading, "the init container fetches the version's files and checks their SHA-256"
		}
	}
	if p.Phase == "Pending" && len(p.InitContainers) == 0 && len(p.Containers) == 0 {
		return api.PhaseDownloading, "the pod is starting on " + p.Node
	}
	for _, c := range p.Containers {
		if imageProblems[c.Reason] {
			return api.PhaseFailed, "image: the serving image cannot run: " + c.Reason + " " + c.Message
		}
		switch c.State {
		case "running":
			if c.RestartCount > 0 && c.LastTermination != "" {
				return api.PhaseLoading, "the model server restarted (" + c.LastTermination + ") and loads the model again"
			}
			return api.PhaseLoading, "the model server loads the model"
		case "terminated":
			return api.PhaseFailed, "the model server stopped: " + firstNonEmpty(c.Message, c.Reason)
		case "waiting":
			if c.LastTermination != "" {
				return api.PhaseFailed, "the model server cannot load the model: " + c.LastTermination
			}
			if c.Reason == "PodInitializing" || c.Reason == "ContainerCreating" || c.Reason == "" {
				if len(p.InitContainers) == 0 {
					return api.PhaseDownloading, "the pod is starting"
				}
				return api.PhaseLoading, "the model server is starting"
			}
			return api.PhaseLoading, c.Reason + " " + c.Message
		}
	}
	if p.Phase == "Terminating" {
		return api.PhasePlacing, "the pod is being removed"
	}
	return api.PhaseDownloading, "the pod is starting on " + p.Node
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v = strings.TrimSpace(v); v != "" {
			return v
		}
	}
	return ""
}
