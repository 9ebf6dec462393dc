// Package testbed runs a local MLSysOps continuum from real components: one
// etcd, a Karmada host cluster, the Karmada control plane, one member cluster
// per cluster description (each with kube-apiserver, kube-controller-manager,
// kube-scheduler and a KWOK controller), one KWOK node per node description,
// ejabberd, Redis and PostgreSQL.
//
// The same code serves three users: `go run ./cmd/testbed up|down|status`
// (and `make up`), integration tests through Shared, and benchmarks.
// Every component runs as a detached process with its pid file and log file
// under the state directory, so a later `up` can reuse what is already
// running and `down` can stop everything that an earlier run started.
package testbed
