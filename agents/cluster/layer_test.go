package cluster

import (
	"context"
	"encoding/json"
	"slices"
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

// A node whose agent never showed up gets no component messages (none
// would be acknowledged); what it runs is recorded all the same, and its
// agent gets it when it registers and asks (node_state_sync).
func TestComponentMessagesSkipNodesWithoutAgents(t *testing.T) {
	app := &mlsysopsv1.MLSysOpsApp{}
	app.Name = "shop"
	web := &mlsysopsv1.Component{Metadata: mlsysopsv1.ComponentMetadata{Name: "web"}, Containers: []mlsysopsv1.Container{{Image: "web:2"}}}
	newRecord := func(jid string) *nodeRecord {
		return &nodeRecord{jid: jid, apps: map[string]map[string]*mlsysopsv1.MLSysOpsAppSpec{}}
	}
	c := &clusterLayer{nodes: map[string]*nodeRecord{"online": newRecord("online@d"), "never": newRecord("never@d"), "gone": newRecord("gone@d")}}
	c.nodes["online"].online = true
	// Heard from before, offline now: still told (its agent may be back
	// without registering again).
	c.nodes["gone"].desc = &mlsysopsv1.MLSysOpsNode{}

	out := c.componentMessages(app, web, []string{"online", "never", "gone"}, false)
	var to []string
	for _, m := range out {
		to = append(to, m.jid)
	}
	slices.Sort(to)
	if !slices.Equal(to, []string{"gone@d", "online@d"}) {
		t.Errorf("messages to %v, want gone@d and online@d", to)
	}
	resp, err := c.handleStateSync(context.Background(), &messaging.Envelope{From: "never@d"}, &messaging.NodeStateSync{Node: "never"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := resp.(*messaging.NodeState).Applications["shop"].Components["web"]; !ok {
		t.Errorf("state sync of the node without an agent = %+v, want shop/web", resp)
	}
	// Moved off every node: only the reachable ones are told.
	out = c.componentMessages(app, web, nil, false)
	if len(out) != 2 {
		t.Errorf("removal messages = %+v, want 2", out)
	}
	if len(c.nodes["never"].apps) != 0 {
		t.Errorf("never still records %v", c.nodes["never"].apps)
	}
}
