// Package generic reads MLSysOps descriptions as generic data (maps, lists
// and scalars) and checks them: the YAML and JSON decoding, the form and
// kind of a document, the check against the OpenAPI schema of the
// generated CRDs (crds/), the tolerated upstream spellings and units, the
// naming rules and the semantic rules of the system descriptions (node,
// cluster, continuum, datacenter), and the problem reports.
//
// It is the half of package description that needs no Kubernetes API
// types: package description builds on it and decodes into the typed
// objects of internal/api/v1, adding the rules of applications and of
// description sets. The node agent loads its own description with LoadOwn
// alone, which keeps apimachinery's runtime, the core/v1 and
// apiextensions types and their protobuf registrations out of the
// node-only build.
package generic
