package httpapi

// Media types the APIs read and write.
const (
	MediaJSON    = "application/json"
	MediaYAML    = "application/yaml"
	MediaProblem = "application/problem+json"
	MediaText    = "text/plain"
)

// HeaderRequestID carries the request id: taken from the request when it
// is well formed, generated otherwise, and always echoed.
const HeaderRequestID = "X-Request-Id"

// Problem is the body of every error response (RFC 9457). Detail is also
// what upstream clients print.
type Problem struct {
	// Type is a URI naming the kind of problem; "about:blank" when the
	// status says it all.
	Type string `json:"type"`
	// Title is the HTTP status text.
	Title string `json:"title"`
	// Status is the HTTP status code.
	Status int `json:"status"`
	// Detail says what went wrong and what to do about it.
	Detail string `json:"detail"`
	// Instance is the request path.
	Instance string `json:"instance,omitempty"`
	// RequestID identifies the request in the server's logs.
	RequestID string `json:"request_id,omitempty"`
	// Problems lists every problem of a rejected body, with its field path.
	Problems []FieldProblem `json:"problems,omitempty"`
}

// FieldProblem is one problem of a request body.
type FieldProblem struct {
	// Field is the path of the offending field, e.g.
	// MLSysOpsApp.components[0].containers[0].image; empty when the
	// problem concerns the whole body.
	Field string `json:"field,omitempty"`
	// Type is the kind of problem (FieldValueRequired, FieldValueInvalid,
	// FieldValueNotSupported, ...).
	Type string `json:"type"`
	// Message says what is wrong, with the offending value.
	Message string `json:"message"`
}

// Kinds of field problems (the Type of a FieldProblem), as Kubernetes
// validation names them.
const (
	FieldRequired     = "FieldValueRequired"
	FieldInvalid      = "FieldValueInvalid"
	FieldNotSupported = "FieldValueNotSupported"
	FieldTypeInvalid  = "FieldValueTypeInvalid"
	FieldDuplicate    = "FieldValueDuplicate"
	FieldTooLong      = "FieldValueTooLong"
	FieldTooMany      = "FieldValueTooMany"
)

// Problem types (the Type of a Problem).
const (
	ProblemInvalid      = "urn:mlsysops:problem:invalid"
	ProblemConflict     = "urn:mlsysops:problem:conflict"
	ProblemNotFound     = "urn:mlsysops:problem:not-found"
	ProblemUnauthorized = "urn:mlsysops:problem:unauthorized"
	ProblemForbidden    = "urn:mlsysops:problem:forbidden"
	ProblemTooLarge     = "urn:mlsysops:problem:too-large"
	ProblemMediaType    = "urn:mlsysops:problem:unsupported-media-type"
	ProblemUnavailable  = "urn:mlsysops:problem:unavailable"
	ProblemTimeout      = "urn:mlsysops:problem:timeout"
	ProblemInternal     = "urn:mlsysops:problem:internal"
)

// Health answers /healthz and /readyz.
type Health struct {
	Status string `json:"status"`
	// Checks maps a dependency to "ok" or what is wrong with it.
	Checks map[string]string `json:"checks,omitempty"`
}
