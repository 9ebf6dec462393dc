package agentconfig

// AgentJID returns the bare JID of an agent. Node agents use their host
// name; cluster and continuum agents add their layer, because the node that
// hosts a cluster agent is named like its cluster and runs a node agent too
// (cloud-1@ is the node, cloud-1.cluster@ the cluster agent). The agents,
// the accounts reconciler and the testbed all name accounts with it.
func AgentJID(layer Layer, name, domain string) string {
	switch layer {
	case LayerCluster:
		return name + ".cluster@" + domain
	case LayerContinuum:
		return name + ".continuum@" + domain
	}
	return name + "@" + domain
}
