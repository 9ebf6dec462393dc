// Package api holds the wire types of the MLSysOps northbound REST API: the
// request and response bodies of the versioned resources under /v1, those of
// the upstream-compatible paths (/apps, /ml, /infra, /manage), the error
// body, the roles and the media types. The server (northbound/handlers) and
// the Go client (northbound/client) share them, so the two cannot drift.
//
// Every error is an RFC 9457 problem document (application/problem+json)
// whose detail field doubles as the upstream API's detail, and which lists
// every problem of a rejected description with its field path.
package api
