package messaging

import (
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// FuzzDecodeEnvelope feeds arbitrary stanza bodies to the decoder every
// agent runs on what arrives over XMPP. Whatever the input it must not
// panic; it accepts a valid envelope or rejects with ErrMalformed; the
// payload of an accepted one decodes to its type or is rejected with
// ErrMalformed; and an accepted envelope survives a round trip. Seeds:
// an envelope of every catalogue type and a few edge cases; crashers
// found by
//
//	go test ./internal/messaging -run '^$' -fuzz FuzzDecodeEnvelope -fuzztime 60s
//
// are kept in testdata/fuzz/FuzzDecodeEnvelope and replayed by every go test.
func FuzzDecodeEnvelope(f *testing.F) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, typ := range Types() {
		for _, payload := range []string{`{}`, `null`} {
			e := Envelope{V: 1, ID: "s-1", Type: typ, From: "a@d", Layer: LayerNode, Time: at, Stream: "s", Seq: 3, Base: 2, Payload: json.RawMessage(payload)}
			b, err := json.Marshal(e)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	for _, s := range []string{
		`{"v":1,"id":"x","type":"ping","from":"a@d","time":"2026-01-01T00:00:00Z","expires":"2026-01-01T00:01:00Z","reply":true,"correlation_id":"c"}`,
		`{"v":1,"id":"x","type":"ping","from":"a@d","time":"2026-01-01T00:00:00Z","stream":"s","seq":1,"base":2}`,
		`{"v":2}`, `[]`, `null`, `{"payload":"\u0000"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := DecodeEnvelope(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("rejected without ErrMalformed: %v", err)
			}
			return
		}
		if err := e.Validate(); err != nil {
			t.Fatalf("accepted an envelope that fails Validate: %v", err)
		}
		if _, err := e.DecodePayload(); err != nil && !errors.Is(err, ErrMalformed) {
			t.Fatalf("payload rejected without ErrMalformed: %v", err)
		}
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatalf("marshal an accepted envelope: %v", err)
		}
		if _, err := DecodeEnvelope(b); err != nil {
			t.Fatalf("re-decoding an accepted envelope fails: %v\n%s", err, b)
		}
	})
}
