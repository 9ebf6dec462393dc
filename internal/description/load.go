package description

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/description/generic"
)

// Set is a consistent set of system descriptions, as loaded by LoadDir.
type Set struct {
	// Continuum is nil when the folder has no continuum description.
	Continuum *mlsysopsv1.MLSysOpsContinuum
	// Clusters are sorted by metadata.name (= cluster_id).
	Clusters []*mlsysopsv1.MLSysOpsCluster
	// Nodes are sorted by metadata.name (= host name = file name).
	Nodes []*mlsysopsv1.MLSysOpsNode
	// Datacenters are sorted by metadata.name (= datacenter_id).
	Datacenters []*mlsysopsv1.MLSysOpsDatacenter

	files map[Object]string
}

// FileOf returns the file a description of the set was loaded from.
func (s *Set) FileOf(obj Object) string { return s.files[obj] }

// Cluster returns the cluster with the given cluster_id, or nil.
func (s *Set) Cluster(id string) *mlsysopsv1.MLSysOpsCluster {
	for _, c := range s.Clusters {
		if c.Name == id {
			return c
		}
	}
	return nil
}

// Node returns the node with the given host name, or nil.
func (s *Set) Node(hostname string) *mlsysopsv1.MLSysOpsNode {
	for _, n := range s.Nodes {
		if n.Name == hostname {
			return n
		}
	}
	return nil
}

// NodesOf returns the nodes whose cluster_id is id, sorted by name.
func (s *Set) NodesOf(id string) []*mlsysopsv1.MLSysOpsNode {
	var out []*mlsysopsv1.MLSysOpsNode
	for _, n := range s.Nodes {
		if n.Spec.ClusterID == id {
			out = append(out, n)
		}
	}
	return out
}

// Objects returns every description of the set: continuum, clusters,
// datacenters, then nodes.
func (s *Set) Objects() []Object {
	var out []Object
	if s.Continuum != nil {
		out = append(out, s.Continuum)
	}
	for _, c := range s.Clusters {
		out = append(out, c)
	}
	for _, d := range s.Datacenters {
		out = append(out, d)
	}
	for _, n := range s.Nodes {
		out = append(out, n)
	}
	return out
}

// LoadFile reads and validates one description or application file of any
// kind. The error, if any, is an *Error listing every problem.
func LoadFile(path string) (Object, error) {
	data, err := generic.ReadFile(path)
	if err != nil {
		return nil, err
	}
	obj, errs := Parse(path, data)
	if len(errs) > 0 {
		return nil, NewError(path, errs)
	}
	return obj, nil
}

// loaded is an object with where it came from, for reporting.
type loaded struct {
	obj  Object
	file string
	spec *field.Path
}

// LoadDir loads every system description in dir and checks them as a set.
// dir is either laid out as continuum/, clusters/, nodes/ (and optionally
// datacenters/) or is flat, as a mounted ConfigMap is (one key per file);
// entries whose name starts with a dot, such as a ConfigMap mount's ..data,
// are skipped, and symbolic links are followed. Files end in .yaml, .yml or
// .json; other files are ignored.
//
// The set checks: one continuum; every cluster the continuum lists has a
// description; every node a cluster lists has a description; a node's
// cluster_id names the cluster that lists it; host names and cluster ids
// are unique; a node's file is named after its host name. Checks that need
// descriptions of another kind run only when the folder has that kind, so
// a ConfigMap holding only node descriptions loads.
//
// The error, if any, is an *Error listing every problem with its file and
// field path.
func LoadDir(dir string) (*Set, error) {
	files, hasFolder, err := listDescriptionFiles(dir)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("load descriptions from %s: no .yaml, .yml or .json files in it or in its continuum/, clusters/, nodes/ or datacenters/ folders", dir)
	}
	var (
		problems []Problem
		items    []loaded
	)
	for _, f := range files {
		data, err := generic.ReadFile(f.path)
		if err != nil {
			problems = append(problems, Problem{File: f.path, Type: string(field.ErrorTypeInternal), Message: err.Error()})
			continue
		}
		obj, spec, errs := parseDocument(f.path, data, generic.FormatFromFileName(f.path), "")
		if len(errs) > 0 {
			problems = append(problems, ProblemsFrom(f.path, errs)...)
			continue
		}
		kind := KindOf(obj)
		switch {
		case kind == mlsysopsv1.KindApp:
			problems = append(problems, Problem{File: f.path, Type: string(field.ErrorTypeNotSupported),
				Message: "is an application description (MLSysOpsApp); a system description folder holds continuum, cluster, node and datacenter descriptions only"})
			continue
		case f.want != "" && kind != f.want:
			problems = append(problems, Problem{File: f.path, Type: string(field.ErrorTypeInvalid),
				Message: fmt.Sprintf("is a %s, but the %s/ folder holds %s descriptions", kind, filepath.Base(filepath.Dir(f.path)), f.want)})
			continue
		}
		items = append(items, loaded{obj: obj, file: f.path, spec: spec})
	}
	set, errs := assemble(items, hasFolder)
	problems = append(problems, errs...)
	if len(problems) > 0 {
		return nil, &Error{Problems: problems}
	}
	return set, nil
}

type descriptionFile struct {
	path string
	want string // the kind its folder holds, or "" at the top
}

// listDescriptionFiles lists the files LoadDir reads, in a stable order,
// and which kind folders exist.
func listDescriptionFiles(dir string) ([]descriptionFile, map[string]bool, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("load descriptions: %w", err)
	}
	var files []descriptionFile
	hasFolder := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		path := filepath.Join(dir, name)
		info, err := os.Stat(path) // follows the symbolic links of a ConfigMap mount
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // a dangling link while a ConfigMap mount is being updated
			}
			return nil, nil, fmt.Errorf("load descriptions: %w", err)
		}
		if info.IsDir() {
			kind, ok := generic.FolderKind(name)
			if !ok {
				continue
			}
			hasFolder[kind] = true
			sub, err := os.ReadDir(path)
			if err != nil {
				return nil, nil, fmt.Errorf("load descriptions: %w", err)
			}
			for _, s := range sub {
				subPath := filepath.Join(path, s.Name())
				if strings.HasPrefix(s.Name(), ".") || !isDescriptionFile(s.Name()) {
					continue
				}
				if st, err := os.Stat(subPath); err != nil || st.IsDir() {
					continue
				}
				files = append(files, descriptionFile{path: subPath, want: kind})
			}
			continue
		}
		if isDescriptionFile(name) {
			files = append(files, descriptionFile{path: path})
		}
	}
	sort.Slice(files, func(i, j int) bool { return files[i].path < files[j].path })
	return files, hasFolder, nil
}

func isDescriptionFile(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// assemble groups loaded descriptions into a Set and cross-checks them.
func assemble(items []loaded, hasFolder map[string]bool) (*Set, []Problem) {
	var (
		set       = &Set{files: map[Object]string{}}
		problems  []Problem
		origin    = map[Object]loaded{}
		continuum []loaded
		byName    = map[string]map[string]loaded{}
	)
	report := func(l loaded, errs ...*field.Error) {
		problems = append(problems, ProblemsFrom(l.file, errs)...)
	}
	for _, l := range items {
		kind := KindOf(l.obj)
		origin[l.obj] = l
		if byName[kind] == nil {
			byName[kind] = map[string]loaded{}
		}
		if prev, dup := byName[kind][l.obj.GetName()]; dup {
			report(l, generic.DocumentError(fmt.Sprintf("describes %s %q, as %s does", kind, l.obj.GetName(), prev.file)))
			continue
		}
		byName[kind][l.obj.GetName()] = l
		set.files[l.obj] = l.file
		switch o := l.obj.(type) {
		case *mlsysopsv1.MLSysOpsContinuum:
			continuum = append(continuum, l)
			set.Continuum = o
		case *mlsysopsv1.MLSysOpsCluster:
			set.Clusters = append(set.Clusters, o)
		case *mlsysopsv1.MLSysOpsNode:
			if stem := generic.FileStem(l.file); stem != o.Name {
				report(l, generic.DocumentError(fmt.Sprintf("describes node %q; name the file %s.yaml, after the node's host name, so its agent finds it", o.Name, o.Name)))
			}
			set.Nodes = append(set.Nodes, o)
		case *mlsysopsv1.MLSysOpsDatacenter:
			set.Datacenters = append(set.Datacenters, o)
		}
	}
	if len(continuum) > 1 {
		for _, l := range continuum[1:] {
			report(l, generic.DocumentError(fmt.Sprintf("is a second continuum description (the first is %s); a folder describes one continuum", continuum[0].file)))
		}
	}
	sort.Slice(set.Clusters, func(i, j int) bool { return set.Clusters[i].Name < set.Clusters[j].Name })
	sort.Slice(set.Nodes, func(i, j int) bool { return set.Nodes[i].Name < set.Nodes[j].Name })
	sort.Slice(set.Datacenters, func(i, j int) bool { return set.Datacenters[i].Name < set.Datacenters[j].Name })

	haveClusters := len(set.Clusters) > 0 || hasFolder[mlsysopsv1.KindCluster]
	haveNodes := len(set.Nodes) > 0 || hasFolder[mlsysopsv1.KindNode]

	if c := set.Continuum; c != nil && haveClusters {
		l := origin[c]
		for i, id := range c.Spec.Clusters {
			if set.Cluster(id) == nil {
				report(l, notFound(l.spec.Child("clusters").Index(i), id, "no cluster description has this cluster_id"))
			}
		}
	}

	listedBy := map[string]*mlsysopsv1.MLSysOpsCluster{}
	for _, c := range set.Clusters {
		l := origin[c]
		for i, name := range c.Spec.Nodes {
			p := l.spec.Child("nodes").Index(i)
			if prev, dup := listedBy[name]; dup {
				report(l, field.Invalid(p, name, fmt.Sprintf("is also listed by cluster %s; a node belongs to one cluster", prev.Name)))
				continue
			}
			listedBy[name] = c
			if !haveNodes {
				continue
			}
			n := set.Node(name)
			if n == nil {
				report(l, notFound(p, name, "no node description has this host name"))
				continue
			}
			nl := origin[n]
			switch n.Spec.ClusterID {
			case c.Name:
			case "":
				report(nl, field.Required(nl.spec.Child("cluster_id"), fmt.Sprintf("cluster %s lists this node; set cluster_id: %s", c.Name, c.Name)))
			default:
				report(nl, field.Invalid(nl.spec.Child("cluster_id"), n.Spec.ClusterID, fmt.Sprintf("cluster %s lists this node", c.Name)))
			}
		}
	}
	if haveClusters {
		for _, n := range set.Nodes {
			if n.Spec.ClusterID == "" || listedBy[n.Name] != nil {
				continue
			}
			nl := origin[n]
			if set.Cluster(n.Spec.ClusterID) == nil {
				report(nl, notFound(nl.spec.Child("cluster_id"), n.Spec.ClusterID, "no cluster description has this cluster_id"))
			} else {
				report(nl, field.Invalid(nl.spec.Child("cluster_id"), n.Spec.ClusterID, fmt.Sprintf("cluster %s does not list this node in its nodes", n.Spec.ClusterID)))
			}
		}
	}
	return set, problems
}

// Hostname returns the name an agent looks its own description up by: the
// NODE_NAME environment variable (set from the pod's spec.nodeName), else
// the machine's host name.
func Hostname() (string, error) { return generic.Hostname() }

// FindOwn returns the path of the description of kind for hostname in dir:
// <hostname>.yaml or <hostname>.yml, in the kind's folder (continuum/,
// clusters/, nodes/, datacenters/) or at the top of dir (a ConfigMap mount).
func FindOwn(dir, hostname, kind string) (string, error) { return generic.FindOwn(dir, hostname, kind) }

// loadOwn loads the description of kind for hostname from dir.
func loadOwn(dir, hostname, kind string) (Object, error) {
	path, err := FindOwn(dir, hostname, kind)
	if err != nil {
		return nil, err
	}
	obj, err := LoadFile(path)
	if err != nil {
		return nil, err
	}
	if got := KindOf(obj); got != kind {
		return nil, fmt.Errorf("load own description %s: it is a %s, expected a %s", path, got, kind)
	}
	return obj, nil
}

// NodeFor loads the node description of hostname from dir.
func NodeFor(dir, hostname string) (*mlsysopsv1.MLSysOpsNode, error) {
	obj, err := loadOwn(dir, hostname, mlsysopsv1.KindNode)
	if err != nil {
		return nil, err
	}
	return obj.(*mlsysopsv1.MLSysOpsNode), nil
}

// ClusterFor loads the cluster description whose file is named after
// hostname (the node running the cluster agent) from dir.
func ClusterFor(dir, hostname string) (*mlsysopsv1.MLSysOpsCluster, error) {
	obj, err := loadOwn(dir, hostname, mlsysopsv1.KindCluster)
	if err != nil {
		return nil, err
	}
	return obj.(*mlsysopsv1.MLSysOpsCluster), nil
}

// ContinuumFor loads the continuum description whose file is named after
// hostname (the node running the continuum agent) from dir.
func ContinuumFor(dir, hostname string) (*mlsysopsv1.MLSysOpsContinuum, error) {
	obj, err := loadOwn(dir, hostname, mlsysopsv1.KindContinuum)
	if err != nil {
		return nil, err
	}
	return obj.(*mlsysopsv1.MLSysOpsContinuum), nil
}

// OwnNode loads this machine's node description (see Hostname) from dir.
func OwnNode(dir string) (*mlsysopsv1.MLSysOpsNode, error) {
	h, err := Hostname()
	if err != nil {
		return nil, err
	}
	return NodeFor(dir, h)
}

// OwnCluster loads the cluster description named after this machine (see
// Hostname) from dir.
func OwnCluster(dir string) (*mlsysopsv1.MLSysOpsCluster, error) {
	h, err := Hostname()
	if err != nil {
		return nil, err
	}
	return ClusterFor(dir, h)
}

// OwnContinuum loads the continuum description named after this machine
// (see Hostname) from dir.
func OwnContinuum(dir string) (*mlsysopsv1.MLSysOpsContinuum, error) {
	h, err := Hostname()
	if err != nil {
		return nil, err
	}
	return ContinuumFor(dir, h)
}
