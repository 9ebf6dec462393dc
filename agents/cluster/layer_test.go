package cluster

import (
	"context"
	"encoding/json"
	"testing"

	nodeagent "github.com/mlsysops-go/mlsysops/agents/node"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/messaging"
)

// A node agent that (re)registers gets, with each application it runs,
// the spec of every one of its components as they were last sent: the
// same description its policies had from the placed and updated messages.
func TestStateSyncCarriesTheSpecs(t *testing.T) {
	app := &mlsysopsv1.MLSysOpsApp{}
	app.Name = "shop"
	web := &mlsysopsv1.Component{Metadata: mlsysopsv1.ComponentMetadata{Name: "web"}, Containers: []mlsysopsv1.Container{{Image: "web:2"}}}
	db := &mlsysopsv1.Component{Metadata: mlsysopsv1.ComponentMetadata{Name: "db"}, Containers: []mlsysopsv1.Container{{Image: "db:1"}}}
	c := &clusterLayer{nodes: map[string]*nodeRecord{
		"n1": {jid: "n1@d", apps: map[string]map[string]*mlsysopsv1.MLSysOpsAppSpec{
			"shop": {"web": componentSpec(app, web), "db": componentSpec(app, db)},
		}},
	}}
	resp, err := c.handleStateSync(context.Background(), &messaging.Envelope{From: "n1@d"}, &messaging.NodeStateSync{Node: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	na := resp.(*messaging.NodeState).Applications["shop"]
	placed := map[string]messaging.ComponentPlaced{}
	for comp := range na.Components {
		placed[comp] = messaging.ComponentPlaced{Name: "shop", ComponentName: comp, Spec: na.Spec}
	}
	desc := nodeagent.AppDescription("shop", placed)
	spec, _ := desc["spec"].(map[string]any)
	comps, _ := spec["components"].([]any)
	var images []string
	for _, x := range comps {
		images = append(images, x.(map[string]any)["containers"].([]any)[0].(map[string]any)["image"].(string))
	}
	if len(images) != 2 || images[0] != "db:1" || images[1] != "web:2" {
		b, _ := json.Marshal(desc)
		t.Errorf("description after the sync: %s", b)
	}
	if _, err := c.handleStateSync(context.Background(), &messaging.Envelope{From: "intruder@d"}, &messaging.NodeStateSync{Node: "n1"}); err == nil {
		t.Error("a sync from another JID was answered")
	}
}
