// Package placement decides where application components run: which member
// clusters host an application (PlaceApp) and which nodes of a cluster host
// a component (PlaceComponent).
//
// Both are pure, deterministic functions of their inputs: filter, then
// score, ties broken by name. Every node or cluster that is filtered out
// gets the reason, so an application that fits nowhere can say why. Node
// filtering uses the very node selector requirements the component's pods
// will carry (internal/resources), so what placement promises the
// Kubernetes scheduler can keep.
package placement
