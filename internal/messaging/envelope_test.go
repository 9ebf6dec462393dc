package messaging

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func validEnvelope() Envelope {
	return Envelope{V: 1, ID: "s-1", Type: TypePing, From: "a@d", Layer: LayerNode,
		Time: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Stream: "s", Seq: 3, Base: 2, Payload: json.RawMessage(`{"note":"x"}`)}
}

func TestEnvelopeValidate(t *testing.T) {
	cases := map[string]struct {
		mutate  func(*Envelope)
		wantErr string
	}{
		"valid":                 {mutate: func(*Envelope) {}},
		"best effort":           {mutate: func(e *Envelope) { e.Seq, e.Base, e.Stream = 0, 0, "" }},
		"future version":        {mutate: func(e *Envelope) { e.V = 2 }, wantErr: "unsupported version"},
		"no version":            {mutate: func(e *Envelope) { e.V = 0 }, wantErr: "unsupported version"},
		"no id":                 {mutate: func(e *Envelope) { e.ID = "" }, wantErr: "id must have"},
		"long id":               {mutate: func(e *Envelope) { e.ID = strings.Repeat("x", 129) }, wantErr: "id must have"},
		"no type":               {mutate: func(e *Envelope) { e.Type = "" }, wantErr: "missing type"},
		"unknown type":          {mutate: func(e *Envelope) { e.Type = "nope" }, wantErr: "unknown type"},
		"no from":               {mutate: func(e *Envelope) { e.From = "" }, wantErr: "missing from"},
		"no time":               {mutate: func(e *Envelope) { e.Time = time.Time{} }, wantErr: "missing timestamp"},
		"seq without stream":    {mutate: func(e *Envelope) { e.Stream = "" }, wantErr: "without a valid stream"},
		"base above seq":        {mutate: func(e *Envelope) { e.Base = 4 }, wantErr: "base 4 out of range"},
		"zero base":             {mutate: func(e *Envelope) { e.Base = 0 }, wantErr: "base 0 out of range"},
		"huge payload":          {mutate: func(e *Envelope) { e.Payload = make(json.RawMessage, MaxPayloadSize+1) }, wantErr: "exceeds"},
		"long correlation id":   {mutate: func(e *Envelope) { e.CorrelationID = strings.Repeat("c", 200) }, wantErr: "correlation id"},
		"long stream":           {mutate: func(e *Envelope) { e.Stream = strings.Repeat("s", 200) }, wantErr: "without a valid stream"},
		"ack is a valid type":   {mutate: func(e *Envelope) { e.Type = TypeAck; e.Seq, e.Base, e.Stream = 0, 0, "" }},
		"error is a valid type": {mutate: func(e *Envelope) { e.Type = TypeError }},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := validEnvelope()
			tc.mutate(&e)
			err := e.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, ErrMalformed)):
				t.Fatalf("Validate() = %v, want ErrMalformed containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestDecodeEnvelopeRoundTrip(t *testing.T) {
	want := validEnvelope()
	want.Expires = want.Time.Add(time.Minute)
	want.Reply = true
	want.CorrelationID = "c-1"
	b, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeEnvelope(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&want, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	for _, bad := range []string{``, `nope`, `[]`, `{"v":1}`, strings.Repeat(" ", MaxPayloadSize+5000)} {
		if _, err := DecodeEnvelope([]byte(bad)); !errors.Is(err, ErrMalformed) {
			t.Errorf("DecodeEnvelope(%.20q) = %v, want ErrMalformed", bad, err)
		}
	}
}

func TestDecodePayload(t *testing.T) {
	cases := map[string]struct {
		typ     Type
		payload string
		want    Message
		wantErr string
	}{
		"placed":            {typ: TypeComponentPlaced, payload: `{"name":"a","component_name":"c","pod_spec":{"x":1}}`, want: &ComponentPlaced{Name: "a", ComponentName: "c", PodSpec: json.RawMessage(`{"x":1}`)}},
		"missing field":     {typ: TypeComponentPlaced, payload: `{"name":"a"}`, wantErr: `"component_name"`},
		"wrong json type":   {typ: TypeNodeExporterDeploy, payload: `{"node":"n","port":"80"}`, wantErr: "cannot unmarshal"},
		"port out of range": {typ: TypeNodeExporterDeploy, payload: `{"node":"n","port":70000}`, wantErr: "out of range"},
		"bad mode":          {typ: TypeManagementMode, payload: `{"mode":3}`, wantErr: "mode must be"},
		"null payload ping": {typ: TypePing, payload: `null`, want: &Ping{}},
		"gpus inconsistent": {typ: TypeCapacityReport, payload: `{"cluster":"c","gpus":{"a100":{"total":1,"free":2}}}`, wantErr: "inconsistent"},
		"plan status":       {typ: TypePlanExecuted, payload: `{"plan_uid":"p","status":"Maybe"}`, wantErr: "status must be"},
		"interval":          {typ: TypeTelemetryIntervalUpdate, payload: `{"node":"n","interval_seconds":0}`, wantErr: "must be positive"},
		"subscribe layer":   {typ: TypeSubscribe, payload: `{"name":"n","layer":"moon"}`, wantErr: "invalid layer"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := validEnvelope()
			e.Type = tc.typ
			e.Payload = json.RawMessage(tc.payload)
			got, err := e.DecodePayload()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.Is(err, ErrMalformed) {
					t.Fatalf("DecodePayload() = %v, want ErrMalformed containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("payload (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCatalogue(t *testing.T) {
	types := Types()
	if len(types) != len(catalogue) {
		t.Fatalf("Types() has %d entries, catalogue %d", len(types), len(catalogue))
	}
	for i, typ := range types {
		if i > 0 && types[i-1] >= typ {
			t.Errorf("Types() not sorted at %s", typ)
		}
		spec, _ := Lookup(typ)
		if got := spec.New().MessageType(); got != typ {
			t.Errorf("%s: New().MessageType() = %s", typ, got)
		}
		if spec.Doc == "" || spec.Direction == 0 || spec.Delivery == 0 {
			t.Errorf("%s: incomplete spec %+v", typ, spec)
		}
	}
	for _, typ := range []Type{TypeSubscribeAck, TypeNodeState, TypePong, TypeError} {
		if s, _ := Lookup(typ); !s.Response {
			t.Errorf("%s should be a response type", typ)
		}
	}
}

// TestCatalogueDocumented keeps docs/protocol.md in step with the catalogue.
func TestCatalogueDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/protocol.md")
	if err != nil {
		t.Fatalf("read docs/protocol.md: %v", err)
	}
	for _, typ := range Types() {
		if !strings.Contains(string(doc), "`"+string(typ)+"`") {
			t.Errorf("docs/protocol.md does not document `%s`", typ)
		}
	}
}
