package handlers

import (
	"net/http"

	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/internal/httpapi"
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

// mediaFormat maps a media type to a description format, or reports it
// unsupported. No Content-Type at all lets the content decide.
func mediaFormat(kind bodyKind, mt httpapi.MediaType) (description.Format, bool) {
	if mt.Type == "" {
		return description.FormatAuto, true
	}
	switch kind {
	case bodyDescription:
		switch {
		case mt.IsJSON():
			return description.FormatJSON, true
		case mt.IsYAML():
			return description.FormatYAML, true
		}
	case bodyJSON:
		if mt.IsJSON() {
			return description.FormatJSON, true
		}
	case bodyPolicy:
		switch {
		case mt.IsJSON():
			return description.FormatJSON, true
		case mt.Type == "text/plain" || mt.Type == "text/x-starlark" || mt.Type == "text/x-python" || mt.Type == "application/x-starlark":
			return description.FormatAuto, true
		}
	}
	return 0, false
}

// readBody checks the media type and size of the request body and reads
// it: 415 for a media type the route does not take, 413 beyond limit.
func (a *API) readBody(r *http.Request, kind bodyKind, limit int64) ([]byte, description.Format, error) {
	data, mt, err := httpapi.ReadBody(r, httpapi.BodyRule{
		Accept:   func(mt httpapi.MediaType) bool { _, ok := mediaFormat(kind, mt); return ok },
		Accepted: acceptedMedia[kind], Limit: limit,
	})
	if err != nil {
		return nil, 0, err
	}
	format, _ := mediaFormat(kind, mt)
	return data, format, nil
}

// decodeJSON decodes a JSON object strictly into v: syntax errors are 400,
// unknown fields and wrong types 422 with their field path.
func decodeJSON(data []byte, v any) error { return httpapi.DecodeJSON(data, v) }
