package images

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"runtime"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// ExtractProgram writes the program of the named image, for this
// machine's platform, from the OCI layout in dir (what Write made) to out:
// the very file the image runs, for a runner that runs the image's
// program without a container runtime (the testbed's kwoklet).
func ExtractProgram(dir, image, out string) error {
	var im *Image
	for i := range Catalog {
		if Catalog[i].Name == image {
			im = &Catalog[i]
		}
	}
	if im == nil {
		return fmt.Errorf("no image %s in the catalog", image)
	}
	p, err := layout.FromPath(filepath.Join(dir, LayoutDir))
	if err != nil {
		return fmt.Errorf("OCI layout in %s: %w", dir, err)
	}
	root, err := p.ImageIndex()
	if err != nil {
		return err
	}
	want := path.Join(BinDir, im.Binary)
	top, err := root.IndexManifest()
	if err != nil {
		return err
	}
	for _, d := range top.Manifests {
		if d.Annotations[AnnotationContainerdName] == "" || imageName(d.Annotations[AnnotationContainerdName]) != image {
			continue
		}
		idx, err := root.ImageIndex(d.Digest)
		if err != nil {
			return err
		}
		im, err := platformImage(idx)
		if err != nil {
			return fmt.Errorf("image %s: %w", image, err)
		}
		return extractFile(im, want, out)
	}
	return fmt.Errorf("image %s is not in %s (run `make images`)", image, dir)
}

// imageName is the catalog name of a reference docker.io/mlsysops/<name>:<tag>.
func imageName(ref string) string {
	n := ref
	if i := lastIndex(n, ':'); i > lastIndex(n, '/') {
		n = n[:i]
	}
	return path.Base(n)
}

func lastIndex(s string, c byte) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == c {
			return i
		}
	}
	return -1
}

func platformImage(idx v1.ImageIndex) (v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if d.Platform != nil && d.Platform.OS == "linux" && d.Platform.Architecture == runtime.GOARCH {
			return idx.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("not built for linux/%s", runtime.GOARCH)
}

// extractFile copies one file of the image's layers (the last layer that
// has it wins) to out, executable.
func extractFile(im v1.Image, file, out string) error {
	layers, err := im.Layers()
	if err != nil {
		return err
	}
	rel := file[1:]
	for i := len(layers) - 1; i >= 0; i-- {
		rc, err := layers[i].Uncompressed()
		if err != nil {
			return err
		}
		found, err := copyFromTar(rc, rel, out)
		rc.Close()
		if err != nil || found {
			return err
		}
	}
	return fmt.Errorf("%s is in no layer", file)
}

func copyFromTar(r io.Reader, rel, out string) (bool, error) {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if path.Clean(h.Name) != rel {
			continue
		}
		// A file of its own beside out: two testbeds of one checkout
		// extract the same program at once (a shared ".tmp" was renamed
		// away under the other).
		f, err := os.CreateTemp(filepath.Dir(out), filepath.Base(out)+".*.tmp")
		if err != nil {
			return false, err
		}
		tmp := f.Name()
		defer os.Remove(tmp) // gone once renamed
		if _, err := io.Copy(f, tr); err != nil {
			f.Close()
			return false, err
		}
		if err := f.Chmod(0o755); err != nil {
			f.Close()
			return false, err
		}
		if err := f.Close(); err != nil {
			return false, err
		}
		return true, os.Rename(tmp, out)
	}
}
