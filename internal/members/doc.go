// Package members is what MLSysOps leaves in the member clusters and how
// to read it from the Karmada host, for every component that needs it:
//
//   - names.go: the names of the namespace, Deployments and Services the
//     cluster agent creates for an application's components (the cluster
//     agent names its objects with them; readers find them with them);
//   - reader.go: a member cluster's nodes with what their pods request, and
//     an application's pods and Services, read through Karmada's cluster
//     proxy (the continuum agent's capacity, the northbound API's cluster
//     and application views, the ML connector's endpoints);
//   - endpoints.go: the endpoints of those Services.
//
// The labels on those objects are in internal/api/v1 (labels.go).
package members
