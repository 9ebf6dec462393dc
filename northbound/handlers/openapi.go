package handlers

import (
	_ "embed"
)

// openAPIYAML is the OpenAPI document, written by hand next to the routes
// it describes; TestOpenAPIMatchesRoutes keeps the two in step.
//
//go:embed openapi.yaml
var openAPIYAML []byte
