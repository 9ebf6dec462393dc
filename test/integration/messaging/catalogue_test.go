package messaging_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mlsysops-go/mlsysops/internal/messaging"
)

var now = time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)

// fixtures has one non-trivial payload per catalogue type.
var fixtures = map[messaging.Type]messaging.Message{
	messaging.TypeSubscribe:    &messaging.Subscribe{Name: "node-1", Layer: messaging.LayerNode, Cluster: "cluster-1", Version: "v0.1.0"},
	messaging.TypeSubscribeAck: &messaging.SubscribeAck{Accepted: true, HeartbeatIntervalMillis: 500},
	messaging.TypeHeartbeat:    &messaging.Heartbeat{Name: "node-1", UptimeSeconds: 42, Status: "ok"},
	messaging.TypeNodeDescriptionSubmitted: &messaging.NodeDescriptionSubmitted{Node: "node-1",
		Description: json.RawMessage(`{"MLSysOpsNode":{"name":"node-1","cluster_id":"cluster-1","continuum_layer":"edge","hardware":{"gpu":{"model":"a100","memory":40}}}}`)},
	messaging.TypeNodeStateSync: &messaging.NodeStateSync{Node: "node-1"},
	messaging.TypeNodeState: &messaging.NodeState{Node: "node-1", Applications: map[string]messaging.NodeApplication{
		"app-1": {Name: "app-1", Components: map[string]json.RawMessage{"infer": json.RawMessage(`{"containers":[{"image":"x"}]}`)},
			Spec: json.RawMessage(`{"components":[{"metadata":{"name":"infer"}}]}`)}}},
	messaging.TypeComponentPlaced: &messaging.ComponentPlaced{Name: "app-1", ComponentName: "infer", Node: "node-1",
		Spec: json.RawMessage(`{"name":"app-1"}`), PodSpec: json.RawMessage(`{"containers":[{"image":"registry/infer:1"}]}`)},
	messaging.TypeComponentUpdated: &messaging.ComponentUpdated{Name: "app-1", ComponentName: "infer", Node: "node-1",
		Spec: json.RawMessage(`{"name":"app-1","v":2}`)},
	messaging.TypeComponentRemoved: &messaging.ComponentRemoved{Name: "app-1", ComponentName: "infer", Node: "node-1"},
	messaging.TypePlanSubmitted: &messaging.PlanSubmitted{PlanUID: "plan-7", Node: "node-1", Application: "app-1", Mechanism: "fluidity",
		Plan: json.RawMessage(`{"action":"move","component":"infer","target_host":"node-2"}`)},
	messaging.TypePlanExecuted:            &messaging.PlanExecuted{PlanUID: "plan-7", Status: messaging.PlanCompleted, Result: json.RawMessage(`{"moved":true}`)},
	messaging.TypeTelemetryReport:         &messaging.TelemetryReport{Node: "node-1", Time: now, Metrics: map[string]float64{"cpu_util": 0.42, "gpu_mem_used_mib": 1024}},
	messaging.TypeTelemetryIntervalUpdate: &messaging.TelemetryIntervalUpdate{Node: "node-1", IntervalSeconds: 15},
	messaging.TypeTelemetryDeploy:         &messaging.TelemetryDeploy{Node: "node-1", Config: "receivers:\n  otlp: {}\n", IntervalSeconds: 10},
	messaging.TypeTelemetryRemove:         &messaging.TelemetryRemove{Node: "node-1"},
	messaging.TypeNodeExporterDeploy:      &messaging.NodeExporterDeploy{Node: "node-1", Port: 9200, Flags: []string{"os", "cpu"}},
	messaging.TypeNodeExporterRemove:      &messaging.NodeExporterRemove{Node: "node-1"},
	messaging.TypeCapacityReport: &messaging.CapacityReport{Cluster: "cluster-1", Time: now, ReadyNodes: 3,
		CPUMillis: messaging.Quantity{Allocatable: 24000, Free: 12500}, MemoryBytes: messaging.Quantity{Allocatable: 96 << 30, Free: 40 << 30},
		GPUs: map[string]messaging.GPUCapacity{"NVIDIA-A100-SXM4-40GB": {Total: 8, Free: 5, MemoryMiB: 40960}, "Tesla-T4": {Total: 2, Free: 2}},
		Nodes: []messaging.NodeCapacity{{Name: "node-1", Ready: true, Labels: map[string]string{"nvidia.com/gpu.product": "Tesla-T4"},
			Taints: []string{"dedicated=ml:NoSchedule"}, Allocatable: map[string]string{"cpu": "8", "nvidia.com/gpu": "2"}, Requested: map[string]string{"cpu": "500m"}}}},
	messaging.TypeApplicationStatusReport: &messaging.ApplicationStatusReport{Application: "app-1", Cluster: "cluster-1", Phase: "Running", Time: now,
		Components: map[string]messaging.ComponentStatus{"infer": {Node: "node-1", Phase: "Running"}}},
	messaging.TypeManagementMode: &messaging.ManagementMode{Mode: messaging.ModeML, Reason: "operator"},
	messaging.TypeResubscribe:    &messaging.Resubscribe{Reason: "the parent restarted"},
	messaging.TypePing:           &messaging.Ping{Note: "hello"},
	messaging.TypePong:           &messaging.Pong{Note: "hello"},
}

// responses maps each request type to the response the handler returns.
var requests = map[messaging.Type]messaging.Type{
	messaging.TypeSubscribe:     messaging.TypeSubscribeAck,
	messaging.TypeNodeStateSync: messaging.TypeNodeState,
	messaging.TypePing:          messaging.TypePong,
}

type received struct {
	env *messaging.Envelope
	msg messaging.Message
}

// recorder registers a handler for every type and records what arrives.
type recorder struct {
	mu  sync.Mutex
	got map[messaging.Type][]received
	ch  chan messaging.Type
}

func newRecorder(c *messaging.Client) *recorder {
	r := &recorder{got: map[messaging.Type][]received{}, ch: make(chan messaging.Type, 100)}
	for _, typ := range messaging.Types() {
		spec, _ := messaging.Lookup(typ)
		if spec.Direction == messaging.DirectionInternal {
			continue
		}
		c.Handle(typ, func(ctx context.Context, env *messaging.Envelope, msg messaging.Message) (messaging.Message, error) {
			r.mu.Lock()
			r.got[env.Type] = append(r.got[env.Type], received{env, msg})
			r.mu.Unlock()
			r.ch <- env.Type
			if resp, ok := requests[env.Type]; ok {
				return fixtures[resp], nil
			}
			return nil, nil
		})
	}
	return r
}

func (r *recorder) wait(t *testing.T, typ messaging.Type) received {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		r.mu.Lock()
		if got := r.got[typ]; len(got) > 0 {
			r.mu.Unlock()
			return got[0]
		}
		r.mu.Unlock()
		select {
		case <-r.ch:
		case <-timeout:
			t.Fatalf("no %s received", typ)
		}
	}
}

// TestEveryMessageType sends every catalogue type in its permitted
// direction between a cluster agent and its node agent and checks that the
// handler receives exactly the payload that was sent, with a well-formed
// envelope; request types are exchanged with Request.
func TestEveryMessageType(t *testing.T) {
	e := startEjabberd(t)
	p := provisioner(t, e)
	parentJID, parentPW := account(t, p, "cluster-1")
	childJID, childPW := account(t, p, "node-1")
	link(t, p, parentJID, childJID)

	parent := startAgent(t, e, messaging.Config{JID: parentJID, Password: parentPW, Layer: messaging.LayerCluster, Children: []string{childJID}})
	child := startAgent(t, e, messaging.Config{JID: childJID, Password: childPW, Layer: messaging.LayerNode, Parent: parentJID, HeartbeatInterval: -1})
	parentRec := newRecorder(parent.Client)
	childRec := newRecorder(child.Client)

	isResponse := map[messaging.Type]bool{}
	for _, resp := range requests {
		isResponse[resp] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, typ := range messaging.Types() {
		spec, _ := messaging.Lookup(typ)
		if spec.Direction == messaging.DirectionInternal || isResponse[typ] {
			continue
		}
		msg, ok := fixtures[typ]
		if !ok {
			t.Errorf("no fixture for %s: add one", typ)
			continue
		}
		type leg struct {
			from      *agent
			to        string
			rec       *recorder
			fromJID   string
			fromLayer messaging.Layer
			legName   string
		}
		var legs []leg
		if spec.Direction == messaging.DirectionDown || spec.Direction == messaging.DirectionAny {
			legs = append(legs, leg{parent, childJID, childRec, parentJID, messaging.LayerCluster, "down"})
		}
		if spec.Direction == messaging.DirectionUp || spec.Direction == messaging.DirectionAny {
			legs = append(legs, leg{child, parentJID, parentRec, childJID, messaging.LayerNode, "up"})
		}
		for _, l := range legs {
			t.Run(string(typ)+"/"+l.legName, func(t *testing.T) {
				if respType, ok := requests[typ]; ok {
					resp, env, err := l.from.Request(ctx, l.to, msg)
					if err != nil {
						t.Fatalf("Request: %v", err)
					}
					if env.Type != respType || env.CorrelationID == "" {
						t.Errorf("response envelope type %s corr %q, want %s with a correlation id", env.Type, env.CorrelationID, respType)
					}
					if diff := cmp.Diff(fixtures[respType], resp); diff != "" {
						t.Errorf("response payload (-want +got):\n%s", diff)
					}
				} else if err := l.from.Send(ctx, l.to, msg); err != nil {
					t.Fatalf("Send: %v", err)
				}
				got := l.rec.wait(t, typ)
				if diff := cmp.Diff(msg, got.msg); diff != "" {
					t.Errorf("payload (-sent +received):\n%s", diff)
				}
				env := got.env
				if env.V != messaging.Version || env.ID == "" || env.From != l.fromJID || env.Layer != l.fromLayer || env.Time.IsZero() {
					t.Errorf("envelope %+v: want version %d, an id, from %s, layer %s, a time", env, messaging.Version, l.fromJID, l.fromLayer)
				}
				if spec.Delivery == messaging.Reliable && (env.Seq == 0 || env.Stream == "") {
					t.Errorf("reliable %s arrived without sequence (seq %d stream %q)", typ, env.Seq, env.Stream)
				}
				l.rec.mu.Lock()
				delete(l.rec.got, typ)
				l.rec.mu.Unlock()
			})
		}
	}

	t.Run("handler error becomes RemoteError", func(t *testing.T) {
		messaging.HandleFunc(child.Client, func(ctx context.Context, env *messaging.Envelope, m *messaging.Ping) (messaging.Message, error) {
			return nil, errors.New("cannot pong right now")
		})
		_, _, err := parent.Request(ctx, childJID, &messaging.Ping{})
		var re *messaging.RemoteError
		if !errors.As(err, &re) || re.Message != "cannot pong right now" {
			t.Fatalf("Request error = %v, want RemoteError with the handler's message", err)
		}
	})

	t.Run("request times out when no answer comes", func(t *testing.T) {
		release := make(chan struct{})
		messaging.HandleFunc(child.Client, func(ctx context.Context, env *messaging.Envelope, m *messaging.Ping) (messaging.Message, error) {
			<-release
			return &messaging.Pong{}, nil
		})
		rctx, rcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		defer rcancel()
		_, _, err := parent.Request(rctx, childJID, &messaging.Ping{})
		close(release)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Request error = %v, want a deadline error", err)
		}
	})

	if n := parent.metric(t, "mlsysops_messaging_dropped_unauthorized_total", nil) + child.metric(t, "mlsysops_messaging_dropped_unauthorized_total", nil); n != 0 {
		t.Errorf("%v messages were refused as unauthorized between parent and child", n)
	}
}
