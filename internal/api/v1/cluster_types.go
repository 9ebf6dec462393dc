package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=mlsysopsclusters,singular=mlsysopscluster,scope=Namespaced,shortName=mlscluster,categories=mlsysops
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.cluster_id`
// +kubebuilder:printcolumn:name="Datacenter",type=string,JSONPath=`.spec.datacenter_id`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// MLSysOpsCluster describes a member cluster and the nodes MLSysOps manages
// in it. metadata.name is the cluster_id.
type MLSysOpsCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the cluster description in the upstream format.
	Spec MLSysOpsClusterSpec `json:"spec"`
	// Status is written by the cluster agent.
	// +optional
	Status MLSysOpsClusterStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// MLSysOpsClusterList is a list of MLSysOpsCluster.
type MLSysOpsClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the listed objects.
	Items []MLSysOpsCluster `json:"items"`
}

// MLSysOpsClusterSpec is the upstream cluster description.
type MLSysOpsClusterSpec struct {
	// Name is accepted for compatibility with upstream's reduced ("mvp")
	// descriptions; cluster_id names the cluster.
	// +optional
	Name string `json:"name,omitempty"`
	// ClusterID is the Karmada member cluster name, which is also the host
	// name of the node running the cluster agent.
	// +kubebuilder:validation:MinLength=1
	ClusterID string `json:"cluster_id"`
	// DatacenterID of the cluster, if any.
	// +optional
	DatacenterID string `json:"datacenter_id,omitempty"`
	// Nodes lists the host names of the nodes MLSysOps may manage.
	// +listType=set
	Nodes []string `json:"nodes"`
}

// MLSysOpsClusterStatus is the observed state of a cluster.
type MLSysOpsClusterStatus struct {
	// ObservedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase is the state of the cluster's agent.
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// Conditions: Ready.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}
