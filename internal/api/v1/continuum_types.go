package v1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=mlsysopscontinuums,singular=mlsysopscontinuum,scope=Namespaced,shortName=mlscontinuum,categories=mlsysops
// +kubebuilder:printcolumn:name="Continuum",type=string,JSONPath=`.spec.continuum_id`
// +kubebuilder:printcolumn:name="Clusters",type=string,JSONPath=`.spec.clusters`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// MLSysOpsContinuum describes the continuum: the clusters MLSysOps manages.
// metadata.name is the host name of the node running the continuum agent.
type MLSysOpsContinuum struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the continuum description in the upstream format.
	Spec MLSysOpsContinuumSpec `json:"spec"`
	// Status is written by the continuum agent.
	// +optional
	Status MLSysOpsContinuumStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// MLSysOpsContinuumList is a list of MLSysOpsContinuum.
type MLSysOpsContinuumList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the listed objects.
	Items []MLSysOpsContinuum `json:"items"`
}

// MLSysOpsContinuumSpec is the upstream continuum description.
type MLSysOpsContinuumSpec struct {
	// Name is the host name of the continuum agent's node; accepted for
	// compatibility with upstream's reduced ("mvp") descriptions.
	// +optional
	Name string `json:"name,omitempty"`
	// ContinuumID identifies the continuum.
	// +kubebuilder:validation:MinLength=1
	ContinuumID string `json:"continuum_id"`
	// Clusters lists the cluster_id of every member cluster.
	// +listType=set
	Clusters []string `json:"clusters"`
}

// MLSysOpsContinuumStatus is the observed state of the continuum.
type MLSysOpsContinuumStatus struct {
	// ObservedGeneration is the spec generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase is the state of the continuum agent.
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// Conditions: Ready.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}
