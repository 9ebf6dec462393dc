package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=mlsysopsdatacenters,singular=mlsysopsdatacenter,scope=Namespaced,shortName=mlsdatacenter,categories=mlsysops
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.cluster_id`
// +kubebuilder:printcolumn:name="Layer",type=string,JSONPath=`.spec.continuum`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// MLSysOpsDatacenter describes a datacenter: a group of nodes of one cluster
// at one place. metadata.name is the datacenter_id.
type MLSysOpsDatacenter struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the datacenter description in the upstream format.
	Spec MLSysOpsDatacenterSpec `json:"spec"`
	// Status is written by the agents.
	// +optional
	Status MLSysOpsDatacenterStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// MLSysOpsDatacenterList is a list of MLSysOpsDatacenter.
type MLSysOpsDatacenterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the listed objects.
	Items []MLSysOpsDatacenter `json:"items"`
}

// MLSysOpsDatacenterSpec is the upstream datacenter description.
type MLSysOpsDatacenterSpec struct {
	// DatacenterID identifies the datacenter.
	// +kubebuilder:validation:MinLength=1
	DatacenterID string `json:"datacenter_id"`
	// ClusterID is the cluster the datacenter belongs to.
	// +kubebuilder:validation:MinLength=1
	ClusterID string `json:"cluster_id"`
	// Continuum is the continuum layer of the datacenter.
	// +kubebuilder:validation:Enum=cloud;edge_infrastructure;edge;far_edge
	Continuum ContinuumLayer `json:"continuum"`
	// Nodes lists the host names of the datacenter's nodes.
	// +listType=set
	Nodes []string `json:"nodes"`
	// +kubebuilder:validation:Enum=europe;asia;africa;australia;north_america;south_america;antarctica
	// +optional
	Continent string `json:"continent,omitempty"`
	// Country code.
	// +kubebuilder:validation:Enum=el;it;fr;nl;ie;pt;dk;il
	// +optional
	Country string `json:"country,omitempty"`
	// +kubebuilder:validation:Enum=volos;athens;rende;milan;lille;delft;dublin;aveiro;porto;aarhus;jerusalem
	// +optional
	City string `json:"city,omitempty"`
	// Location is [longitude, latitude].
	// +kubebuilder:validation:MinItems=2
	// +kubebuilder:validation:MaxItems=2
	// +optional
	Location []float64 `json:"location,omitempty"`
	// +kubebuilder:validation:Enum=private;aws;microsoft_azure;gcp
	// +optional
	CloudProvider string `json:"cloud_provider,omitempty"`
}

// MLSysOpsDatacenterStatus is the observed state of a datacenter.
type MLSysOpsDatacenterStatus struct {
	// ObservedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase of the datacenter.
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// Conditions: Ready.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}
