package generic

// The kinds of the mlsysops.eu API, as the kind field of a custom resource
// and the root key of an upstream description name them. They equal the
// Kind constants of internal/api/v1, which this package does not import.
const (
	KindApp        = "MLSysOpsApp"
	KindNode       = "MLSysOpsNode"
	KindCluster    = "MLSysOpsCluster"
	KindContinuum  = "MLSysOpsContinuum"
	KindDatacenter = "MLSysOpsDatacenter"
)

// The API group and version of every MLSysOps custom resource.
const (
	group      = "mlsysops.eu"
	version    = "v1"
	APIVersion = group + "/" + version
)

// knownKinds lists every kind in a fixed order, for messages.
var knownKinds = []string{KindContinuum, KindCluster, KindNode, KindDatacenter, KindApp}

// kindFolders are the sub-folders of a description folder and the kind
// each holds. Files at the top of the folder may hold any system
// description kind, which is how a mounted ConfigMap looks.
var kindFolders = map[string]string{
	"continuum":   KindContinuum,
	"clusters":    KindCluster,
	"nodes":       KindNode,
	"datacenters": KindDatacenter,
}

// FolderKind returns the kind the sub-folder name of a description folder
// holds (continuum/, clusters/, nodes/, datacenters/).
func FolderKind(name string) (kind string, ok bool) {
	kind, ok = kindFolders[name]
	return kind, ok
}

func isKnownKind(kind string) bool {
	for _, k := range knownKinds {
		if k == kind {
			return true
		}
	}
	return false
}
