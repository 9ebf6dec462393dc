package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of every MLSysOps kind.
const GroupName = "mlsysops.eu"

// Version is the only served and stored version.
const Version = "v1"

// SchemeGroupVersion is the group and version of the types in this package.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: Version}

// The kinds of this group, as they appear in the kind field of a custom
// resource and as the root key of an upstream description file.
const (
	KindApp        = "MLSysOpsApp"
	KindNode       = "MLSysOpsNode"
	KindCluster    = "MLSysOpsCluster"
	KindContinuum  = "MLSysOpsContinuum"
	KindDatacenter = "MLSysOpsDatacenter"
)

// The plural resource names, as used in REST paths and CRD names.
const (
	ResourceApps        = "mlsysopsapps"
	ResourceNodes       = "mlsysopsnodes"
	ResourceClusters    = "mlsysopsclusters"
	ResourceContinuums  = "mlsysopscontinuums"
	ResourceDatacenters = "mlsysopsdatacenters"
)

var (
	// SchemeBuilder collects the functions that add this group to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds every kind of this group (and its List) to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Kind returns the group-qualified kind for an unqualified kind name.
func Kind(kind string) schema.GroupKind {
	return SchemeGroupVersion.WithKind(kind).GroupKind()
}

// Resource returns the group-qualified resource for an unqualified resource
// name such as "mlsysopsapps".
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&MLSysOpsApp{}, &MLSysOpsAppList{},
		&MLSysOpsNode{}, &MLSysOpsNodeList{},
		&MLSysOpsCluster{}, &MLSysOpsClusterList{},
		&MLSysOpsContinuum{}, &MLSysOpsContinuumList{},
		&MLSysOpsDatacenter{}, &MLSysOpsDatacenterList{},
	)
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
