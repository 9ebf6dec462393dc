package images

import (
	"archive/tar"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Files under an output directory.
const (
	// LayoutDir is the OCI image layout with every image's index.
	LayoutDir = "oci"
	// ArchiveFile is the same layout as one tar, for `ctr images import`.
	ArchiveFile = "images.tar"
	// ManifestFile lists what was built (Manifest).
	ManifestFile = "images.json"
)

// AnnotationContainerdName names an image for containerd's importer, in
// containerd's normalized form (docker.io/mlsysops/agent:v1; go-containerregistry
// would say index.docker.io).
const AnnotationContainerdName = "io.containerd.image.name"

// Manifest is what an output directory holds, written as ManifestFile.
type Manifest struct {
	Version string          `json:"version"`
	Images  []ManifestImage `json:"images"`
}

// ManifestImage is one image of a Manifest.
type ManifestImage struct {
	Name         string   `json:"name"`
	Ref          string   `json:"ref"`
	Digest       string   `json:"digest"`
	Platforms    []string `json:"platforms"`
	SizeBytes    int64    `json:"sizeBytes"`
	BuildSeconds float64  `json:"buildSeconds"`
}

// Refs returns the references of every image.
func (m *Manifest) Refs() []string {
	out := make([]string, 0, len(m.Images))
	for _, im := range m.Images {
		out = append(out, im.Ref)
	}
	return out
}

// Ref returns the reference of the named image, or "".
func (m *Manifest) Ref(image string) string {
	for _, im := range m.Images {
		if im.Name == image {
			return im.Ref
		}
	}
	return ""
}

// LoadManifest reads the Manifest of an output directory.
func LoadManifest(dir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, fmt.Errorf("images in %s: %w (run `make images`)", dir, err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("images in %s: %s: %w", dir, ManifestFile, err)
	}
	return &m, nil
}

// Write replaces dir's content with the built images: the OCI layout, its
// tar archive and the manifest.
func Write(dir, version string, built []Built) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	lp := filepath.Join(dir, LayoutDir)
	if err := os.RemoveAll(lp); err != nil {
		return err
	}
	p, err := layout.Write(lp, empty.Index)
	if err != nil {
		return fmt.Errorf("OCI layout %s: %w", lp, err)
	}
	m := Manifest{Version: version}
	for _, b := range built {
		ref, err := name.ParseReference(b.Ref)
		if err != nil {
			return err
		}
		ann := map[string]string{
			AnnotationContainerdName:            b.Ref,
			"org.opencontainers.image.ref.name": ref.Identifier(),
		}
		if err := p.AppendIndex(b.Index, layout.WithAnnotations(ann)); err != nil {
			return fmt.Errorf("OCI layout %s: image %s: %w", lp, b.Image.Name, err)
		}
		m.Images = append(m.Images, ManifestImage{
			Name: b.Image.Name, Ref: b.Ref, Digest: b.Digest, Platforms: b.Platforms,
			SizeBytes: b.SizeBytes, BuildSeconds: b.Duration.Seconds(),
		})
	}
	if err := tarDir(lp, filepath.Join(dir, ArchiveFile)); err != nil {
		return err
	}
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ManifestFile), append(mb, '\n'), 0o644)
}

// tarDir writes dir's files into a tar at out, in a stable order with
// fixed times.
func tarDir(dir, out string) error {
	var files []string
	if err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			files = append(files, p)
		}
		return nil
	}); err != nil {
		return err
	}
	sort.Strings(files)
	// A file of its own: two builds of one checkout may write out at once.
	f, err := os.CreateTemp(filepath.Dir(out), filepath.Base(out)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	tw := tar.NewWriter(f)
	for _, p := range files {
		rel, _ := filepath.Rel(dir, p)
		st, err := os.Stat(p)
		if err != nil {
			f.Close()
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, Size: st.Size(), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}); err != nil {
			f.Close()
			return err
		}
		src, err := os.Open(p)
		if err != nil {
			f.Close()
			return err
		}
		_, err = io.Copy(tw, src)
		src.Close()
		if err != nil {
			f.Close()
			return err
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

// Push writes every built image's index to registry (host[:port][/path])
// as registry/mlsysops/<name>:<tag>, with the credentials of the Docker
// config (~/.docker/config.json) when it has some. insecure allows plain
// HTTP.
func Push(ctx context.Context, registry, version string, built []Built, insecure bool, log io.Writer) ([]string, error) {
	if log == nil {
		log = io.Discard
	}
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	var refs []string
	for _, b := range built {
		ref, err := name.ParseReference(b.Image.Ref(registry, version), opts...)
		if err != nil {
			return refs, fmt.Errorf("image %s: %w", b.Image.Name, err)
		}
		if err := remote.WriteIndex(ref, b.Index, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return refs, fmt.Errorf("push %s: %w", ref, err)
		}
		fmt.Fprintf(log, "pushed %s@%s\n", ref, b.Digest)
		refs = append(refs, ref.String())
	}
	return refs, nil
}
