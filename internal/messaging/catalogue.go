package messaging

import (
	"fmt"
	"sort"
)

// Type names a message type. Upstream event names are kept where upstream has
// one, so logs and policies read the same.
type Type string

// Direction says who may send a message type to whom.
type Direction int

const (
	// DirectionDown messages are commands from a parent (or a configured
	// controller) to a child.
	DirectionDown Direction = iota + 1
	// DirectionUp messages are reports and submissions from a child to its
	// parent.
	DirectionUp
	// DirectionAny messages may flow between any two known peers.
	DirectionAny
	// DirectionInternal marks transport messages (acks, errors) that the
	// client produces and consumes itself.
	DirectionInternal
)

// String returns the direction's name as used in logs and metrics.
func (d Direction) String() string {
	switch d {
	case DirectionDown:
		return "down"
	case DirectionUp:
		return "up"
	case DirectionAny:
		return "any"
	case DirectionInternal:
		return "internal"
	}
	return fmt.Sprintf("Direction(%d)", int(d))
}

// DeliveryMode is the delivery guarantee of a message type.
type DeliveryMode int

const (
	// Reliable messages are sequenced, acknowledged, re-sent until
	// acknowledged or their deadline passes, and applied once.
	Reliable DeliveryMode = iota + 1
	// BestEffort messages are sent once and never acknowledged. Use it for
	// data that the next message supersedes (heartbeats, telemetry).
	BestEffort
)

// String returns the delivery's name.
func (d DeliveryMode) String() string {
	switch d {
	case Reliable:
		return "reliable"
	case BestEffort:
		return "best-effort"
	}
	return fmt.Sprintf("DeliveryMode(%d)", int(d))
}

// Message is implemented by every payload type of the catalogue.
type Message interface {
	// MessageType returns the catalogue type of the payload.
	MessageType() Type
}

// Spec describes one catalogue entry.
type Spec struct {
	Type      Type
	Direction Direction
	Delivery  DeliveryMode
	// Upstream names the upstream event or performative this type replaces,
	// when it differs from Type.
	Upstream string
	// Doc is a one-line description, used by docs/protocol.md.
	Doc string
	// Response marks types that answer a request; one arriving after its
	// request gave up is dropped silently.
	Response bool
	// New returns a pointer to a zero payload, ready for json.Unmarshal.
	New func() Message
}

// The catalogue: every message type agents exchange. Keep docs/protocol.md in
// step with it (TestCatalogueDocumented checks the names).
const (
	TypeSubscribe                Type = "subscribe"
	TypeSubscribeAck             Type = "sub_ack"
	TypeHeartbeat                Type = "heartbeat"
	TypeNodeDescriptionSubmitted Type = "node_sys_desc_submitted"
	TypeNodeStateSync            Type = "node_state_sync"
	TypeNodeState                Type = "node_state"
	TypeComponentPlaced          Type = "application_component_placed"
	TypeComponentUpdated         Type = "application_component_updated"
	TypeComponentRemoved         Type = "application_component_removed"
	TypePlanSubmitted            Type = "message_to_fluidity"
	TypePlanExecuted             Type = "message_to_fluidity_proxy"
	TypeTelemetryReport          Type = "telemetry_report"
	TypeTelemetryIntervalUpdate  Type = "otel_node_interval_update"
	TypeTelemetryDeploy          Type = "otel_deploy"
	TypeTelemetryRemove          Type = "otel_remove"
	TypeNodeExporterDeploy       Type = "node_exporter_deploy"
	TypeNodeExporterRemove       Type = "node_exporter_remove"
	TypeCapacityReport           Type = "cluster_capacity_report"
	TypeApplicationStatusReport  Type = "application_status_report"
	TypeManagementMode           Type = "ch_mode"
	TypeResubscribe              Type = "resubscribe"
	TypePing                     Type = "ping"
	TypePong                     Type = "pong"
	TypeAck                      Type = "ack"
	TypeError                    Type = "error"
)

var catalogue = map[Type]Spec{}

func register[T any, PT interface {
	*T
	Message
}](t Type, dir Direction, del DeliveryMode, upstream, doc string) {
	if _, dup := catalogue[t]; dup {
		panic("messaging: type registered twice: " + string(t))
	}
	if got := PT(new(T)).MessageType(); got != t {
		panic(fmt.Sprintf("messaging: %T.MessageType() = %q, registered as %q", *new(T), got, t))
	}
	catalogue[t] = Spec{Type: t, Direction: dir, Delivery: del, Upstream: upstream, Doc: doc,
		New: func() Message { return PT(new(T)) }}
}

func init() {
	register[Subscribe](TypeSubscribe, DirectionUp, Reliable, "performative subscribe",
		"a child registers with its parent (request; answered by sub_ack)")
	register[SubscribeAck](TypeSubscribeAck, DirectionDown, Reliable, "performative sub_ack",
		"the parent's answer to subscribe")
	register[Resubscribe](TypeResubscribe, DirectionDown, BestEffort, "",
		"a parent that does not know a child (it restarted) asks it to subscribe again")
	register[Heartbeat](TypeHeartbeat, DirectionUp, BestEffort, "clus_hb / inform (broken upstream)",
		"periodic liveness signal from a child")
	register[NodeDescriptionSubmitted](TypeNodeDescriptionSubmitted, DirectionUp, Reliable, "",
		"a node agent submits its system description to its cluster")
	register[NodeStateSync](TypeNodeStateSync, DirectionUp, Reliable, "",
		"a node asks its cluster for the applications placed on it (request; answered by node_state)")
	register[NodeState](TypeNodeState, DirectionDown, Reliable, "node_state_sync (cluster to node)",
		"the cluster's answer to node_state_sync")
	register[ComponentPlaced](TypeComponentPlaced, DirectionDown, Reliable, "",
		"a component of an application was placed on the node")
	register[ComponentUpdated](TypeComponentUpdated, DirectionDown, Reliable, "",
		"a placed component's spec changed")
	register[ComponentRemoved](TypeComponentRemoved, DirectionDown, Reliable, "",
		"a component was removed from the node")
	register[PlanSubmitted](TypePlanSubmitted, DirectionUp, Reliable, "",
		"a node submits a plan for the cluster's fluidity mechanism")
	register[PlanExecuted](TypePlanExecuted, DirectionDown, Reliable, "",
		"the cluster reports the outcome of a submitted plan to the node")
	register[TelemetryReport](TypeTelemetryReport, DirectionUp, BestEffort, "",
		"latest telemetry samples of a node or cluster")
	register[TelemetryIntervalUpdate](TypeTelemetryIntervalUpdate, DirectionDown, Reliable, "",
		"the parent changes a child's telemetry interval")
	register[TelemetryDeploy](TypeTelemetryDeploy, DirectionUp, Reliable, "",
		"a node asks its cluster to (re)deploy its OpenTelemetry collector")
	register[TelemetryRemove](TypeTelemetryRemove, DirectionUp, Reliable, "",
		"a node asks its cluster to remove its collector")
	register[NodeExporterDeploy](TypeNodeExporterDeploy, DirectionUp, Reliable, "",
		"a node asks its cluster to deploy its node exporter")
	register[NodeExporterRemove](TypeNodeExporterRemove, DirectionUp, Reliable, "",
		"a node asks its cluster to remove its node exporter")
	register[CapacityReport](TypeCapacityReport, DirectionUp, Reliable, "",
		"a cluster reports free capacity (CPU, memory, GPUs by model) to the continuum")
	register[ApplicationStatusReport](TypeApplicationStatusReport, DirectionUp, Reliable, "",
		"a cluster reports an application's status and placement to the continuum")
	register[ManagementMode](TypeManagementMode, DirectionDown, Reliable, "",
		"switch an agent's management mode")
	register[Ping](TypePing, DirectionAny, Reliable, "performative ping",
		"application-level round trip (request; answered by pong)")
	register[Pong](TypePong, DirectionAny, Reliable, "", "the answer to ping")
	register[Ack](TypeAck, DirectionInternal, BestEffort, "",
		"transport: cumulative acknowledgement of a sender stream")
	register[ErrorReply](TypeError, DirectionInternal, Reliable, "",
		"transport: a request's handler failed")
	for _, t := range []Type{TypeSubscribeAck, TypeNodeState, TypePong, TypeError} {
		s := catalogue[t]
		s.Response = true
		catalogue[t] = s
	}
}

// Lookup returns the catalogue entry of t.
func Lookup(t Type) (Spec, bool) {
	s, ok := catalogue[t]
	return s, ok
}

// Types returns every catalogue type, sorted.
func Types() []Type {
	out := make([]Type, 0, len(catalogue))
	for t := range catalogue {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
