package handlers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/northbound/api"
)

// bodyKind is what a route accepts.
type bodyKind int

const (
	// bodyDescription is a description: JSON or YAML.
	bodyDescription bodyKind = iota
	// bodyJSON is a JSON object.
	bodyJSON
	// bodyPolicy is a policy's source text (or JSON {"source": ...}).
	bodyPolicy
)

var acceptedMedia = map[bodyKind]string{
	bodyDescription: "application/json, application/yaml (also application/x-yaml, text/yaml)",
	bodyJSON:        "application/json",
	bodyPolicy:      "text/plain (the Starlark source) or application/json ({\"source\": ...})",
}

// mediaFormat maps a Content-Type to a description format, or reports it
// unsupported. No Content-Type at all lets the content decide.
func mediaFormat(kind bodyKind, contentType string) (description.Format, bool) {
	if strings.TrimSpace(contentType) == "" {
		return description.FormatAuto, true
	}
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return 0, false
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "us-ascii") {
		return 0, false
	}
	isJSON := mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
	isYAML := mt == "application/yaml" || mt == "application/x-yaml" || mt == "text/yaml" || mt == "text/x-yaml" ||
		(strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+yaml"))
	switch kind {
	case bodyDescription:
		switch {
		case isJSON:
			return description.FormatJSON, true
		case isYAML:
			return description.FormatYAML, true
		}
	case bodyJSON:
		if isJSON {
			return description.FormatJSON, true
		}
	case bodyPolicy:
		switch {
		case isJSON:
			return description.FormatJSON, true
		case mt == "text/plain" || mt == "text/x-starlark" || mt == "text/x-python" || mt == "application/x-starlark":
			return description.FormatAuto, true
		}
	}
	return 0, false
}

// readBody checks the media type and size of the request body and reads
// it: 415 for a media type the route does not take, 413 beyond limit.
func (a *API) readBody(r *http.Request, kind bodyKind, limit int64) ([]byte, description.Format, error) {
	if enc := r.Header.Get("Content-Encoding"); enc != "" && !strings.EqualFold(enc, "identity") {
		return nil, 0, newError(http.StatusUnsupportedMediaType, api.ProblemMediaType,
			"Content-Encoding %q is not supported; send the body uncompressed", enc)
	}
	ct := r.Header.Get("Content-Type")
	format, ok := mediaFormat(kind, ct)
	if !ok {
		return nil, 0, newError(http.StatusUnsupportedMediaType, api.ProblemMediaType,
			"Content-Type %q is not accepted here; send %s", ct, acceptedMedia[kind])
	}
	if r.ContentLength > limit {
		return nil, 0, tooLarge(limit)
	}
	body := http.MaxBytesReader(nil, r.Body, limit)
	data, err := io.ReadAll(body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, 0, tooLarge(limit)
		}
		return nil, 0, badRequest("could not read the request body: %v", err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, 0, badRequest("the request body is empty; send %s", acceptedMedia[kind])
	}
	return data, format, nil
}

func tooLarge(limit int64) *Error {
	return newError(http.StatusRequestEntityTooLarge, api.ProblemTooLarge,
		"the request body is larger than %d bytes", limit)
}

// decodeJSON decodes a JSON object strictly into v: syntax errors are 400,
// unknown fields and wrong types 422 with their field path.
func decodeJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var (
			se *json.SyntaxError
			te *json.UnmarshalTypeError
		)
		switch {
		case errors.As(err, &se):
			return badRequest("the body is not valid JSON: %v (at byte %d)", se, se.Offset)
		case errors.As(err, &te):
			return invalid("the body has a field of the wrong type", []api.FieldProblem{{
				Field: te.Field, Type: "FieldValueTypeInvalid",
				Message: fmt.Sprintf("Invalid value: want %s, got JSON %s", te.Type, te.Value),
			}})
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			return invalid("the body has an unknown field", []api.FieldProblem{{
				Field: name, Type: "FieldValueNotSupported", Message: "Unsupported value: unknown field",
			}})
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return badRequest("the body is not valid JSON: it ends too early")
		}
		return badRequest("the body is not valid JSON: %v", err)
	}
	if dec.More() {
		return badRequest("the body holds more than one JSON value")
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return badRequest("the body holds more than one JSON value")
	}
	return nil
}
