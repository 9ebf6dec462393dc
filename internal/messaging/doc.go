// Package messaging is the agent-to-agent transport of MLSysOps: typed JSON
// envelopes carried in XMPP message stanzas through ejabberd.
//
// A Client owns one XMPP account and keeps one connection to the server open:
// it dials with STARTTLS, authenticates with SCRAM, binds a fixed resource,
// announces presence and reconnects on its own with jittered exponential
// backoff when the server or the network goes away. mellium.im/xmpp has no
// stream management, and even XEP-0198 would not survive a server restart, so
// delivery guarantees are built at the application level:
//
//   - Reliable messages (commands, submissions, most reports) carry a
//     per-destination sequence number in a sender stream. The receiver hands
//     them to handlers in sequence order, one at a time per sender, and
//     acknowledges them cumulatively once the handler has returned. The
//     sender keeps every unacknowledged message, re-sends it after a timeout
//     or a reconnect, and reports failure to the caller when the delivery
//     deadline passes. The receiver drops duplicates by sequence number and by
//     message id, so a handler runs once per message even across reconnects.
//   - Best-effort messages (heartbeats, telemetry) are sent once, never stored
//     offline by the server, and never acknowledged.
//   - Request sends a reliable message and waits for the correlated response.
//
// Every incoming message is authorized before it reaches a handler: commands
// (DirectionDown) are accepted only from the parent or a configured
// controller, reports (DirectionUp) only from known children, and the
// envelope's sender must match the address the server stamped on the stanza.
// Anything else is dropped with a log line and a metric.
//
// The message catalogue (one Go type per message type) lives in
// catalogue.go and messages.go and is documented in docs/protocol.md.
// Account provisioning lives in the provision sub-package.
package messaging
