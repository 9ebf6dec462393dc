package members

import (
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/mlsysops-go/mlsysops/internal/placement"
)

// Endpoint is one port of a Service the cluster agent created for a
// component in a member cluster: a component gets one when another
// component talks to it (ClusterIP) or when it has external_access
// (NodePort, also reachable on its nodes' addresses). The northbound API
// serves it as api.Endpoint, field for field.
type Endpoint struct {
	Component string
	Cluster   string
	Namespace string
	Service   string
	// Type is the Service type: ClusterIP or NodePort.
	Type     string
	PortName string
	// Protocol is TCP, UDP or SCTP.
	Protocol  string
	Port      int32
	ClusterIP string
	// Address is cluster_ip:port, reachable inside the cluster.
	Address string
	// URL is http://<service>.<namespace>.svc:<port>, inside the cluster;
	// TCP ports only.
	URL string
	// NodePort is the port on every node of the cluster; NodePort only.
	NodePort int32
	// NodeAddress is <node ip>:<node port> on a node that runs the
	// component; NodePort only, when the node's address is known.
	NodeAddress string
	// ExternalURL is http://<node address>; NodePort TCP ports only.
	ExternalURL string
	// Ready is true while at least one replica of the component is ready
	// in this cluster.
	Ready bool
}

// ServiceEndpoint is the endpoint of port p of svc, the Service of
// component in cluster. ready says whether a replica of the component is
// ready there; node is the address of a node that runs it (NodeAddress),
// used for NodePort Services, empty when unknown.
func ServiceEndpoint(cluster, component string, ready bool, svc *corev1.Service, p corev1.ServicePort, node string) Endpoint {
	proto := p.Protocol
	if proto == "" {
		proto = corev1.ProtocolTCP
	}
	port := strconv.Itoa(int(p.Port))
	e := Endpoint{
		Component: component, Cluster: cluster, Namespace: svc.Namespace, Service: svc.Name, Type: string(svc.Spec.Type),
		PortName: p.Name, Protocol: string(proto), Port: p.Port, Ready: ready,
	}
	if ip := svc.Spec.ClusterIP; ip != "" && ip != corev1.ClusterIPNone {
		e.ClusterIP, e.Address = ip, net.JoinHostPort(ip, port)
	}
	http := proto == corev1.ProtocolTCP
	if http {
		e.URL = "http://" + net.JoinHostPort(svc.Name+"."+svc.Namespace+".svc", port)
	}
	if svc.Spec.Type == corev1.ServiceTypeNodePort && p.NodePort != 0 {
		e.NodePort = p.NodePort
		if node != "" {
			e.NodeAddress = net.JoinHostPort(node, strconv.Itoa(int(p.NodePort)))
			if http {
				e.ExternalURL = "http://" + e.NodeAddress
			}
		}
	}
	return e
}

// NodeAddress is the address of the first of names that has one: its
// external IP, else its internal IP.
func NodeAddress(nodes []placement.Node, names []string) string {
	for _, name := range names {
		for _, n := range nodes {
			if n.Name() != name {
				continue
			}
			var internal string
			for _, addr := range n.Node.Status.Addresses {
				switch addr.Type {
				case corev1.NodeExternalIP:
					return addr.Address
				case corev1.NodeInternalIP:
					if internal == "" {
						internal = addr.Address
					}
				}
			}
			if internal != "" {
				return internal
			}
		}
	}
	return ""
}
