// Package continuum is the continuum agent's layer: on the Karmada host it
// keeps the MLSysOps API in Karmada, places applications on member
// clusters and follows their status. It registers the cluster agents and
// keeps their capacity reports, and turns the northbound API's submissions
// (Redis streams) into MLSysOpsApps.
//
// Files: layer.go (the layer: construction, run loop), bootstrap.go (the
// MLSysOps API in Karmada), intake.go (submissions), controller.go and
// override.go (the placement controller), mechanism.go (the
// clusterPlacement mechanism), capacity.go and reports.go (what each member
// cluster offers).
package continuum
