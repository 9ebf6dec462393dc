// Package description loads and validates MLSysOps descriptions: the system
// descriptions (continuum, clusters, nodes, datacenters) and application
// descriptions.
//
// Two file forms are accepted for every kind:
//
//   - the upstream form, one root key naming the kind with the snake_case
//     fields under it (MLSysOpsNode: {name: ..., hardware: ...});
//   - the custom resource form (apiVersion mlsysops.eu/v1, kind, metadata,
//     spec), as stored by the apiserver; upstream's own resources, with the
//     fields at the root next to metadata and no spec, load too.
//
// Validation is one implementation shared by every caller (the agents, the
// northbound API, the testbed and the mls CLI). It checks a file against the
// OpenAPI schema of the generated CRDs (crds/), so a description that loads
// is one the apiserver accepts, and then applies the semantic rules the
// schema cannot express (unique names, references, dependency cycles, GPU
// requests and limits, ports...). Every problem is reported at once, with
// its field path; nothing panics on bad input.
//
// The half of the work that needs no Kubernetes API types (decoding, the
// schema check, normalisation, naming, the rules of the system
// descriptions and the problem reports) is package generic; the node agent
// loads its own description with generic.LoadOwn alone. This package
// decodes into the typed objects of internal/api/v1 and adds the rules of
// applications and of description sets.
//
// The loader tolerates what real upstream files contain: numbers written
// as strings (memory: "4"), CPU and MCU frequencies in GHz, MHz or Hz
// (normalised to Hz), the misspelt keys suported_frameworks and reduncancy,
// mobility for mobile, measurement_unit for unit, the misspelt enum value
// lower_or_qqual, and YAML 1.1 booleans where on/off strings are meant.
package description
