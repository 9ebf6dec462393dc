package messaging

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Version is the envelope version this package writes. Receivers reject
// envelopes with a higher version, so a newer agent talking to an older one
// fails loudly instead of being misread.
const Version = 1

// Maximum sizes accepted on the wire. ejabberd's max_stanza_size is 256 KiB;
// keeping payloads under MaxPayloadSize leaves room for the XML framing.
const (
	MaxPayloadSize = 200 << 10
	maxIDLength    = 128
)

// Layer is the continuum layer of an agent.
type Layer string

// The layers an agent or a service can belong to.
const (
	LayerContinuum Layer = "continuum"
	LayerCluster   Layer = "cluster"
	LayerNode      Layer = "node"
	// LayerService is used by non-agent participants such as the northbound
	// API, the ML connector or test drivers.
	LayerService Layer = "service"
)

// Valid reports whether l is one of the known layers.
func (l Layer) Valid() bool {
	switch l {
	case LayerContinuum, LayerCluster, LayerNode, LayerService:
		return true
	}
	return false
}

// Envelope is the JSON document carried in every message stanza. Transport
// fields (Stream, Seq, Base) are filled by the client; applications normally
// only read ID, Type, CorrelationID, From, Layer, Time and Payload.
type Envelope struct {
	// V is the envelope version (Version).
	V int `json:"v"`
	// ID identifies the message; unique per sender for ever.
	ID string `json:"id"`
	// Type selects the payload schema (see the catalogue).
	Type Type `json:"type"`
	// CorrelationID is the ID of the request this message answers, or of the
	// message an ack refers to.
	CorrelationID string `json:"corr,omitempty"`
	// From is the sender's bare JID. It must match the stanza's from address.
	From string `json:"from"`
	// Layer is the sender's continuum layer.
	Layer Layer `json:"layer"`
	// Time is when the message was created.
	Time time.Time `json:"ts"`
	// Expires, when set, is when the sender stops caring about the message;
	// receivers drop it after that instead of applying a stale command.
	Expires time.Time `json:"exp,omitzero"`
	// Reply is set on requests: the sender waits for a correlated response.
	Reply bool `json:"reply,omitempty"`
	// Stream identifies one sender incarnation; sequence numbers are scoped to
	// (sender, Stream). Empty for best-effort messages.
	Stream string `json:"stream,omitempty"`
	// Seq is the message's sequence number towards this receiver in Stream,
	// starting at 1. Zero for best-effort messages.
	Seq uint64 `json:"seq,omitempty"`
	// Base is the lowest sequence number the sender still wants delivered
	// when it sent this copy: everything below was acknowledged or abandoned.
	Base uint64 `json:"base,omitempty"`
	// Payload is the JSON encoding of the message type's Go struct.
	Payload json.RawMessage `json:"payload,omitempty"`
}

// Reliable reports whether the envelope takes part in acknowledged delivery.
func (e *Envelope) Reliable() bool { return e.Seq != 0 }

// ErrMalformed wraps every validation failure of an incoming envelope.
var ErrMalformed = errors.New("malformed envelope")

// DecodeEnvelope parses and validates one envelope.
func DecodeEnvelope(data []byte) (*Envelope, error) {
	if len(data) > MaxPayloadSize+4096 {
		return nil, fmt.Errorf("%w: %d bytes exceeds the limit", ErrMalformed, len(data))
	}
	var e Envelope
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if err := e.Validate(); err != nil {
		return nil, err
	}
	return &e, nil
}

// Validate checks the fields every envelope must have. It does not check
// that the payload matches the type's schema; DecodePayload does.
func (e *Envelope) Validate() error {
	switch {
	case e.V < 1 || e.V > Version:
		return fmt.Errorf("%w: unsupported version %d (this agent speaks %d)", ErrMalformed, e.V, Version)
	case e.ID == "" || len(e.ID) > maxIDLength:
		return fmt.Errorf("%w: id must have 1 to %d characters", ErrMalformed, maxIDLength)
	case e.Type == "":
		return fmt.Errorf("%w: missing type", ErrMalformed)
	case e.From == "":
		return fmt.Errorf("%w: missing from", ErrMalformed)
	case e.Time.IsZero():
		return fmt.Errorf("%w: missing timestamp", ErrMalformed)
	case len(e.CorrelationID) > maxIDLength:
		return fmt.Errorf("%w: correlation id longer than %d characters", ErrMalformed, maxIDLength)
	case e.Seq != 0 && (e.Stream == "" || len(e.Stream) > maxIDLength):
		return fmt.Errorf("%w: sequenced message without a valid stream", ErrMalformed)
	case e.Seq != 0 && (e.Base == 0 || e.Base > e.Seq):
		return fmt.Errorf("%w: base %d out of range for seq %d", ErrMalformed, e.Base, e.Seq)
	case len(e.Payload) > MaxPayloadSize:
		return fmt.Errorf("%w: payload of %d bytes exceeds %d", ErrMalformed, len(e.Payload), MaxPayloadSize)
	}
	if _, ok := Lookup(e.Type); !ok {
		return fmt.Errorf("%w: unknown type %q", ErrMalformed, e.Type)
	}
	return nil
}

// DecodePayload decodes the payload into the catalogue's Go type for the
// envelope's type.
func (e *Envelope) DecodePayload() (Message, error) {
	spec, ok := Lookup(e.Type)
	if !ok {
		return nil, fmt.Errorf("%w: unknown type %q", ErrMalformed, e.Type)
	}
	msg := spec.New()
	if len(e.Payload) > 0 && string(e.Payload) != "null" {
		if err := json.Unmarshal(e.Payload, msg); err != nil {
			return nil, fmt.Errorf("%w: payload of %s: %v", ErrMalformed, e.Type, err)
		}
	}
	if v, ok := msg.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return nil, fmt.Errorf("%w: payload of %s: %v", ErrMalformed, e.Type, err)
		}
	}
	return msg, nil
}

// randomID returns n random bytes, hex encoded.
func randomID(n int) string {
	b := make([]byte, n)
	// crypto/rand.Read never returns an error on supported platforms.
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
