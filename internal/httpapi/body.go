package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"
)

// MediaType is a parsed Content-Type.
type MediaType struct {
	// Type is the media type in lower case, without parameters; empty
	// when the request has no Content-Type.
	Type   string
	Params map[string]string
}

// IsJSON reports whether m is application/json or application/*+json.
func (m MediaType) IsJSON() bool {
	return m.Type == MediaJSON || (strings.HasPrefix(m.Type, "application/") && strings.HasSuffix(m.Type, "+json"))
}

// IsYAML reports whether m is one of the YAML media types.
func (m MediaType) IsYAML() bool {
	switch m.Type {
	case "application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml":
		return true
	}
	return strings.HasPrefix(m.Type, "application/") && strings.HasSuffix(m.Type, "+yaml")
}

// BodyRule says which bodies a route takes.
type BodyRule struct {
	// Accept reports whether the media type is taken; an absent
	// Content-Type has an empty Type.
	Accept func(MediaType) bool
	// Accepted names the accepted media types in the 415's detail.
	Accepted string
	// Limit is the largest body in bytes.
	Limit int64
}

// JSONBody takes JSON bodies (or no Content-Type) up to limit bytes.
func JSONBody(limit int64) BodyRule {
	return BodyRule{Accept: func(m MediaType) bool { return m.Type == "" || m.IsJSON() }, Accepted: MediaJSON, Limit: limit}
}

// ReadBody checks the encoding, media type and size of the request body
// and reads it: 415 for a media type the rule does not take, 413 beyond
// its limit, 400 for an empty body. Text media types must be UTF-8.
func ReadBody(r *http.Request, rule BodyRule) ([]byte, MediaType, error) {
	if enc := r.Header.Get("Content-Encoding"); enc != "" && !strings.EqualFold(enc, "identity") {
		return nil, MediaType{}, NewError(http.StatusUnsupportedMediaType, ProblemMediaType,
			"Content-Encoding %q is not supported; send the body uncompressed", enc)
	}
	ct := r.Header.Get("Content-Type")
	mt, ok := ParseMediaType(ct)
	if !ok || !rule.Accept(mt) {
		return nil, mt, NewError(http.StatusUnsupportedMediaType, ProblemMediaType,
			"Content-Type %q is not accepted here; send %s", ct, rule.Accepted)
	}
	if r.ContentLength > rule.Limit {
		return nil, mt, TooLarge(rule.Limit)
	}
	data, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, rule.Limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, mt, TooLarge(rule.Limit)
		}
		return nil, mt, BadRequest("could not read the request body: %v", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, mt, BadRequest("the request body is empty; send %s", rule.Accepted)
	}
	return data, mt, nil
}

// ParseMediaType parses a Content-Type; an empty one is the zero
// MediaType. It fails on a malformed header or a charset other than UTF-8
// (or its subset US-ASCII).
func ParseMediaType(contentType string) (MediaType, bool) {
	if strings.TrimSpace(contentType) == "" {
		return MediaType{}, true
	}
	t, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return MediaType{}, false
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "us-ascii") {
		return MediaType{}, false
	}
	return MediaType{Type: strings.ToLower(t), Params: params}, true
}

// DecodeJSON decodes a JSON object strictly into v: syntax errors are 400,
// unknown fields and wrong types 422 with their field path.
func DecodeJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if dec.More() {
		return BadRequest("the body holds more than one JSON value")
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return BadRequest("the body holds more than one JSON value")
	}
	return nil
}

// jsonError classifies an error of encoding/json.
func jsonError(err error) error {
	var (
		se  *json.SyntaxError
		te  *json.UnmarshalTypeError
		fpe *FieldError
	)
	switch {
	case errors.As(err, &fpe):
		return Invalid("the body has a field of the wrong type", []FieldProblem{{Field: fpe.Field, Type: FieldTypeInvalid, Message: fpe.Message}})
	case errors.As(err, &se):
		return BadRequest("the body is not valid JSON: %v (at byte %d)", se, se.Offset)
	case errors.As(err, &te):
		want := te.Type.String()
		if n, ok := reflect.Zero(te.Type).Interface().(TypeNamer); ok {
			want = n.JSONTypeName()
		}
		return Invalid("the body has a field of the wrong type", []FieldProblem{{
			Field: te.Field, Type: FieldTypeInvalid,
			Message: fmt.Sprintf("Invalid value: want %s, got JSON %s", want, te.Value),
		}})
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return Invalid("the body has an unknown field", []FieldProblem{{
			Field: name, Type: FieldNotSupported, Message: "Unsupported value: unknown field",
		}})
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return BadRequest("the body is not valid JSON: it ends too early")
	}
	return BadRequest("the body is not valid JSON: %v", err)
}

// TypeNamer lets a type name itself in "wrong type" problems.
type TypeNamer interface{ JSONTypeName() string }

// FieldError is returned by a custom UnmarshalJSON to report a value of
// the wrong shape with its own message; DecodeJSON turns it into a 422.
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }
