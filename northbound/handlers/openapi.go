package handlers

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"

	"sigs.k8s.io/yaml"

	"github.com/mlsysops-go/mlsysops/northbound/api"
)

// openAPIYAML is the OpenAPI document, written by hand next to the routes
// it describes; TestOpenAPIMatchesRoutes keeps the two in step.
//
//go:embed openapi.yaml
var openAPIYAML []byte

// openAPIJSON converts the document to JSON once.
func openAPIJSON() ([]byte, error) {
	b, err := yaml.YAMLToJSON(openAPIYAML)
	if err != nil {
		return nil, fmt.Errorf("openapi.yaml: %w", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("openapi.yaml: %w", err)
	}
	return json.MarshalIndent(doc, "", "  ")
}

func (a *API) serveOpenAPI(w http.ResponseWriter, _ *http.Request) error {
	w.Header().Set("Content-Type", api.MediaJSON)
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(a.openapi)
	return nil
}

func (a *API) serveDocs(w http.ResponseWriter, _ *http.Request) error {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(a.docs)
	return nil
}
