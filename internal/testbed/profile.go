package testbed

import (
	"fmt"
	"strconv"
	"time"
)

// Profile tunes the testbed for a size of continuum. The default profile
// suits the handful of nodes of descriptions/, where tests want failures
// noticed within seconds; the scale profile suits thousands of KWOK nodes
// on one machine, where heartbeats of every node every few seconds would
// be most of the load.
type Profile string

// The profiles.
const (
	ProfileDefault Profile = "default"
	ProfileScale   Profile = "scale"
)

// Validate reports an unknown profile.
func (p Profile) Validate() error {
	switch p {
	case "", ProfileDefault, ProfileScale:
		return nil
	}
	return fmt.Errorf("profile %q: want %s or %s", p, ProfileDefault, ProfileScale)
}

// settings are the flags a profile gives the components.
type settings struct {
	// memberAPIServer are added to each member cluster's kube-apiserver.
	memberAPIServer []string
	// memberKCMControllers are the member controller managers' controllers.
	memberKCMControllers string
	// memberKCM are added to each member's kube-controller-manager.
	memberKCM []string
	// kwokLease is the KWOK nodes' lease duration; they renew it every
	// quarter of it, and KWOK's node heartbeat patches their status every
	// 20 to 45 s besides. Zero: no leases, and KWOK's heartbeat for
	// nodes with leases (every 10 to 20 minutes) keeps them alive.
	kwokLease time.Duration
	// karmadaCM are added to karmada-controller-manager (after the
	// defaults, so they win).
	karmadaCM []string
	// nodeAgents says whether a node agent runs per node.
	nodeAgents bool
	// realNodes says whether the described real nodes run (containerd
	// and a kubelet each; realnode.go), unless Options.KWOKOnly.
	realNodes bool
	// agentArgs are added to every agent's command line.
	agentArgs []string
	// nodesReadyTimeout bounds the wait for each cluster's nodes.
	nodesReadyTimeout time.Duration
}

// settings returns the flags of the profile for a testbed of nodes KWOK
// nodes in all.
func (p Profile) settings(nodes int) settings {
	s := settings{
		memberKCMControllers: kcmMemberControllers,
		memberKCM:            []string{"--node-monitor-grace-period=20s", "--node-monitor-period=2s"},
		kwokLease:            20 * time.Second,
		nodeAgents:           true,
		realNodes:            true,
		nodesReadyTimeout:    time.Minute,
	}
	if p != ProfileScale {
		return s
	}
	s.memberAPIServer = []string{
		// One client per component on loopback: queueing and fairness
		// cost CPU and protect nothing here.
		"--enable-priority-and-fairness=false",
		"--max-requests-inflight=1000", "--max-mutating-requests-inflight=500",
		// Admission that KWOK pods and the agents' objects do not need.
		"--disable-admission-plugins=ServiceAccount,ResourceQuota,LimitRanger,PodSecurity,Priority,DefaultStorageClass," +
			"StorageObjectInUseProtection,PersistentVolumeClaimResize,DefaultIngressClass,CertificateApproval," +
			"CertificateSigning,CertificateSubjectRestriction,ClusterTrustBundleAttest",
		// Events are many (one per pod scheduled) and read by nobody.
		"--event-ttl=5m", "--watch-cache-sizes=events#0",
	}
	// What KWOK workloads need: Deployments and their pods, namespaces
	// and what deleting them takes, node health, service account tokens
	// for the components' own credentials.
	s.memberKCMControllers = "deployment-controller,replicaset-controller,namespace-controller,garbage-collector-controller," +
		"node-lifecycle-controller,pod-garbage-collector-controller,taint-eviction-controller,serviceaccount-controller," +
		"serviceaccount-token-controller,clusterrole-aggregation-controller,root-ca-certificate-publisher-controller"
	// No node leases: with a lease KWOK renews it every quarter of its
	// duration and, beside it, patches every node's status every 20 to
	// 45 s (its default stages). Measured with 4-minute leases, 1,000
	// nodes cost their member about 32 writes a second (16 status
	// patches, 16 lease renewals) and its apiserver 0.3 to 0.4 of a
	// core at rest. Without leases KWOK uses its heartbeat meant for
	// nodes with leases (a status patch every 10 to 20 minutes, about
	// one write a second per 1,000 nodes), so a node is NotReady only
	// after a grace longer than that: a KWOK node of this profile is
	// noticed gone after 30 minutes (the default profile, where failures
	// are tested, keeps 20-second leases).
	s.kwokLease = 0
	s.memberKCM = []string{"--node-monitor-grace-period=30m", "--node-monitor-period=30s"}
	// Karmada summarises every member's nodes and pods for its cluster
	// status: less often, with a longer grace.
	s.karmadaCM = []string{"--cluster-status-update-frequency=20s", "--cluster-monitor-grace-period=60s"}
	// No node agent per KWOK node (part of the load test of node agents
	// runs them on purpose): nodes without agents are not taken out of
	// placement.
	s.nodeAgents = false
	// KWOK nodes only: a kubelet and containerd per member would cost
	// more than the thousand KWOK nodes of the cluster, and the light
	// controller managers above lack what kubelets need.
	s.realNodes = false
	s.agentArgs = []string{"--child-grace-period", "0"}
	s.nodesReadyTimeout = time.Minute + time.Duration(nodes)*50*time.Millisecond
	return s
}

// kcmMemberControllers are the controllers of the default profile's
// member controller managers.
const kcmMemberControllers = "*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-route,-persistentvolume-binder,-persistentvolume-expander,-attachdetach"

func (s settings) kwokLeaseFlag() string {
	return "--node-lease-duration-seconds=" + strconv.Itoa(int(s.kwokLease.Seconds()))
}

// settings are the testbed's profile's settings.
func (tb *Testbed) settings() settings { return tb.opts.Profile.settings(len(tb.set.Nodes)) }
