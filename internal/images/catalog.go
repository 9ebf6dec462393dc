// Package images builds the project's container images in Go, the way ko
// does: a static binary (or a cgo binary with the shared libraries it
// needs) on a small base layer with CA certificates and a non-root user,
// no shell, fixed timestamps so the same input gives the same digest, OCI
// labels with the version, and one image index per image for every
// platform. The images are written as an OCI layout and a tar archive of
// it (what `ctr images import` reads), and can be pushed to a registry.
//
// Which images exist is data: Catalog. Adding an image is adding an entry.
package images

import (
	"fmt"
	"sort"
	"strings"
)

// Platforms every image is built for unless its entry says otherwise: the
// cloud nodes are amd64, the edge nodes arm64.
var DefaultPlatforms = []string{"linux/amd64", "linux/arm64"}

// Image is one container image of the project.
type Image struct {
	// Name is the repository name below the project's prefix: "agent"
	// becomes mlsysops/agent.
	Name string
	// Package is the Go package built as the image's entrypoint, relative
	// to the module root ("./agents").
	Package string
	// Binary is the file name of the built program in the image; it lives
	// in BinDir and is the entrypoint.
	Binary string
	// Tags are Go build tags.
	Tags []string
	// LDFlags are extra -ldflags; "{{version}}" is replaced by the
	// version being built.
	LDFlags []string
	// Args are the default arguments (the image's Cmd).
	Args []string
	// Env is added to the image's environment (KEY=value).
	Env []string
	// CGO builds with cgo; the binary is dynamically linked and its shared
	// libraries (found with ldd) go into the image. Without a cross
	// toolchain only the host's platform can be built.
	CGO bool
	// Platforms overrides DefaultPlatforms ("linux/amd64").
	Platforms []string
	// Files are copied into the image, e.g. a model runtime's shared
	// library. Their shared libraries are added too when CGO is set.
	Files []File
	// Tag, when set, is used instead of the version: for images that
	// configuration names and that should not change name with every
	// commit (the pause image in containerd's sandbox_image).
	Tag string
	// Description is the org.opencontainers.image.description label.
	Description string
}

// File is a file of the build machine copied into an image.
type File struct {
	// Src is the path on the build machine, relative to the module root
	// or absolute.
	Src string
	// Dst is the absolute path in the image.
	Dst string
	// Mode is the file mode; zero keeps the source's permission bits.
	Mode int64
}

// Layout of every image.
const (
	// BinDir holds the image's program; it is on PATH.
	BinDir = "/usr/local/bin"
	// UID and GID of the non-root user every image runs as (distroless'
	// "nonroot").
	UID = 65532
	GID = 65532
	// Prefix is the repository prefix of every image: <registry>/mlsysops/<name>.
	Prefix = "mlsysops"
	// DefaultRegistry is where short names (mlsysops/agent:v1) resolve;
	// images imported into containerd are named with it.
	DefaultRegistry = "docker.io"
)

// Catalog lists the project's images. The ML connector and the model
// server join as entries; the model server, a cgo binary with ONNX
// Runtime's shared library, is an entry with CGO, Files and Platforms
// {"linux/amd64"}.
var Catalog = []Image{
	{
		Name: "agent", Package: "./agents", Binary: "mlsysops-agent",
		LDFlags:     []string{"-X github.com/mlsysops-go/mlsysops/agents/agent.Version={{version}}"},
		Description: "MLSysOps agent: continuum, cluster and node layers",
	},
	{
		Name: "agent-node", Package: "./agents", Binary: "mlsysops-agent-node", Tags: []string{"nodeagent"},
		LDFlags:     []string{"-X github.com/mlsysops-go/mlsysops/agents/agent.Version={{version}}"},
		Description: "MLSysOps node agent (node layer only)",
	},
	{
		Name: "northbound", Package: "./northbound", Binary: "mlsysops-northbound",
		LDFlags:     []string{"-X github.com/mlsysops-go/mlsysops/northbound/server.Version={{version}}"},
		Description: "MLSysOps northbound REST API",
	},
	{
		Name: "mlconnector", Package: "./mlconnector", Binary: "mlsysops-mlconnector",
		LDFlags:     []string{"-X github.com/mlsysops-go/mlsysops/mlconnector/server.Version={{version}}"},
		Description: "MLSysOps ML connector: model registry, model deployments, predictions, drift and explanations",
	},
	{
		// The model server with ONNX Runtime: a cgo binary (glibc) and the
		// shared library `make deps` fetches, for the build machine's
		// platform only.
		Name: "modelserver", Package: "./mlconnector/modelserver", Binary: "modelserver", CGO: true,
		Platforms: []string{"linux/amd64"},
		LDFlags:   []string{"-X github.com/mlsysops-go/mlsysops/mlconnector/serving/app.Version={{version}}"},
		Files:     []File{{Src: "bin/libonnxruntime.so.1", Dst: "/usr/local/lib/libonnxruntime.so.1", Mode: 0o755}},
		Env:       []string{"ONNXRUNTIME_LIB=/usr/local/lib/libonnxruntime.so.1", "LD_LIBRARY_PATH=/usr/local/lib"},
		Args:      []string{"serve"},
		Description: "MLSysOps model server: ONNX (ONNX Runtime), LightGBM and XGBoost models over the Open Inference Protocol v2; " +
			"`modelserver fetch` is its init container",
	},
	{
		// The same program without cgo, for amd64 and arm64 edge nodes:
		// LightGBM and XGBoost models only (ONNX models are refused at load
		// with the reason).
		Name: "modelserver-static", Package: "./mlconnector/modelserver", Binary: "modelserver",
		LDFlags:     []string{"-X github.com/mlsysops-go/mlsysops/mlconnector/serving/app.Version={{version}}"},
		Args:        []string{"serve"},
		Description: "MLSysOps model server without cgo: LightGBM and XGBoost models over the Open Inference Protocol v2; `modelserver fetch`",
	},
	{
		Name: "accounts", Package: "./cmd/mlsysops-accounts", Binary: "mlsysops-accounts",
		Description: "MLSysOps accounts reconciler: keeps the agents' XMPP accounts in place",
	},
	{
		Name: "demo", Package: "./cmd/demo", Binary: "mlsysops-demo", Args: []string{"server"}, Tag: DemoTag,
		Description: "MLSysOps demo workload: a server and a client exchanging messages, with QoS metrics (internal/demo)",
	},
	{
		Name: "pause", Package: "./cmd/pause", Binary: "pause", Tag: PauseTag,
		Description: "Pod sandbox: sleeps, reaps children, exits on TERM or INT",
	},
}

// PauseTag is the pause image's fixed tag (see Image.Tag).
const PauseTag = "1.0"

// DemoTag is the demo workload's fixed tag: the example applications name
// it (examples/apps/demo-loop.yaml).
const DemoTag = "1.0"

// Lookup returns the catalog entries with the given names, all of them
// when names is empty.
func Lookup(names ...string) ([]Image, error) {
	if len(names) == 0 {
		return append([]Image(nil), Catalog...), nil
	}
	byName := map[string]Image{}
	for _, im := range Catalog {
		byName[im.Name] = im
	}
	var out []Image
	var unknown []string
	for _, n := range names {
		im, ok := byName[n]
		if !ok {
			unknown = append(unknown, n)
			continue
		}
		out = append(out, im)
	}
	if len(unknown) > 0 {
		known := make([]string, 0, len(byName))
		for n := range byName {
			known = append(known, n)
		}
		sort.Strings(known)
		return nil, fmt.Errorf("unknown images %s (have %s)", strings.Join(unknown, ", "), strings.Join(known, ", "))
	}
	return out, nil
}

// Repository is the image's repository in registry: registry/mlsysops/name.
// An empty registry means DefaultRegistry.
func (im Image) Repository(registry string) string {
	if registry == "" {
		registry = DefaultRegistry
	}
	return strings.TrimSuffix(registry, "/") + "/" + Prefix + "/" + im.Name
}

// TagFor is the tag the image gets when version is built.
func (im Image) TagFor(version string) string {
	if im.Tag != "" {
		return im.Tag
	}
	return version
}

// Ref is the image's full reference in registry for version.
func (im Image) Ref(registry, version string) string {
	return im.Repository(registry) + ":" + im.TagFor(version)
}

func (im Image) platforms() []string {
	if len(im.Platforms) > 0 {
		return im.Platforms
	}
	return DefaultPlatforms
}
