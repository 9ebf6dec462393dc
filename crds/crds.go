// Package crds embeds the CustomResourceDefinitions of the mlsysops.eu API,
// generated from internal/api/v1 by hack/generate.sh. The description
// loader validates files against these same schemas, so a description that
// loads is one the apiserver accepts.
package crds

import "embed"

// FS holds every CRD manifest (one *.yaml file per kind).
//
//go:embed *.yaml
var FS embed.FS
