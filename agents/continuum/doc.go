// Package continuum is the continuum agent's layer: on the Karmada host it
// keeps the MLSysOps API in Karmada, places applications on member
// clusters and follows their status.
package continuum
