package commands

import (
	"bytes"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/mlsysops-go/mlsysops/northbound/api"
)

func TestPrintDetailsEndpoints(t *testing.T) {
	a := api.Application{
		Summary:     api.Summary{ID: "model-7", Phase: "Running"},
		PhaseSource: "resource",
		Components:  []api.ComponentPlacement{{Name: "serve", Cluster: "cloud-1", Nodes: []string{"cloud-gpu-h100-1"}, Replicas: 1, ReadyReplicas: 1}},
		Endpoints: []api.Endpoint{{Component: "serve", Cluster: "cloud-1", Namespace: "mls-model-7", Service: "serve", Type: "NodePort",
			PortName: "http", Protocol: "TCP", Port: 8000, Address: "10.96.0.10:8000", NodeAddress: "10.0.0.7:30800", Ready: true}},
		Events: []api.Event{
			{Time: time.Now().Add(-2 * time.Minute), Cluster: "cloud-1", Type: "Normal", Reason: "PlanAccepted", Object: "MLSysOpsApp/model-7",
				Message: "plan p1 of policy relocateComponents: serve move (latency misses)", Count: 1},
			{Time: time.Now().Add(-time.Minute), Cluster: "cloud-1", Type: "Normal", Reason: "PlanCompleted", Object: "MLSysOpsApp/model-7", Message: "plan p1 completed", Count: 2},
		},
	}
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	printDetails(tw, a)
	tw.Flush()
	for _, want := range []string{
		"ENDPOINT  CLUSTER  SERVICE            PORT           ADDRESS          NODE ADDRESS    READY",
		"serve     cloud-1  mls-model-7/serve  http 8000/TCP  10.96.0.10:8000  10.0.0.7:30800  yes",
		"EVENT               AGE  CLUSTER  OBJECT               MESSAGE",
		"PlanAccepted        2m   cloud-1  MLSysOpsApp/model-7  plan p1 of policy relocateComponents: serve move (latency misses)",
		"PlanCompleted (x2)  1m   cloud-1  MLSysOpsApp/model-7  plan p1 completed",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("details lack %q:\n%s", want, b.String())
		}
	}
}
