package images

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Options say what to build and how to label it.
type Options struct {
	// Root is the module root the packages are built from.
	Root string
	// Images to build; empty builds the whole Catalog.
	Images []Image
	// Version tags the images and is their org.opencontainers.image.version
	// label; Revision and Created label them too and Created is every
	// timestamp in them. Zero values come from git (see GitInfo).
	Version  string
	Revision string
	Created  time.Time
	// Source is the org.opencontainers.image.source label.
	Source string
	// CACertificates is the CA bundle copied into every image.
	CACertificates string
	// Log receives one line per step; nil discards.
	Log io.Writer
}

// Defaults for Options.
const (
	DefaultSource         = "https://github.com/mlsysops-go/mlsysops"
	DefaultCACertificates = "/etc/ssl/certs/ca-certificates.crt"
)

// Validate reports every problem with the options.
func (o *Options) Validate() error {
	var errs []error
	if o.Root == "" {
		errs = append(errs, errors.New("root: the module root must be set"))
	}
	for i, im := range o.Images {
		if im.Name == "" || im.Package == "" || im.Binary == "" {
			errs = append(errs, fmt.Errorf("images[%d]: name, package and binary are required", i))
		}
		for _, p := range im.platforms() {
			if _, err := v1.ParsePlatform(p); err != nil || !strings.HasPrefix(p, "linux/") {
				errs = append(errs, fmt.Errorf("images[%d] (%s): platform %q: want linux/<arch>", i, im.Name, p))
			}
			if im.CGO && p != "linux/"+runtime.GOARCH {
				errs = append(errs, fmt.Errorf("images[%d] (%s): cgo binaries are built for the host's platform only (linux/%s), not %s", i, im.Name, runtime.GOARCH, p))
			}
		}
		for j, f := range im.Files {
			if f.Src == "" || !strings.HasPrefix(f.Dst, "/") {
				errs = append(errs, fmt.Errorf("images[%d] (%s).files[%d]: src is required and dst must be absolute", i, im.Name, j))
			}
		}
	}
	return errors.Join(errs...)
}

// Built is one image built for all its platforms.
type Built struct {
	Image Image
	// Ref is the image's reference with DefaultRegistry.
	Ref string
	// Digest of the image index.
	Digest string
	// Platforms built, e.g. linux/amd64.
	Platforms []string
	// SizeBytes is the compressed size of every platform's layers and
	// config, with shared layers counted once.
	SizeBytes int64
	// Duration is the time the build of this image took.
	Duration time.Duration
	// Index is the image index.
	Index v1.ImageIndex
}

// Build builds the images: each image's binary for each of its
// platforms, a base layer, the binary's layer, and an index over the
// platforms. Nothing is written; see WriteLayout and Push.
func Build(ctx context.Context, opts Options) ([]Built, error) {
	if len(opts.Images) == 0 {
		opts.Images = Catalog
	}
	if opts.CACertificates == "" {
		opts.CACertificates = DefaultCACertificates
	}
	if opts.Source == "" {
		opts.Source = DefaultSource
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Version == "" || opts.Revision == "" || opts.Created.IsZero() {
		info, err := GitInfo(ctx, opts.Root)
		if err != nil {
			return nil, err
		}
		if opts.Version == "" {
			opts.Version = info.Version
		}
		if opts.Revision == "" {
			opts.Revision = info.Revision
		}
		if opts.Created.IsZero() {
			opts.Created = info.Created
		}
	}
	opts.Created = opts.Created.UTC().Truncate(time.Second)
	logw := opts.Log
	if logw == nil {
		logw = io.Discard
	}
	certs, err := os.ReadFile(opts.CACertificates)
	if err != nil {
		return nil, fmt.Errorf("CA certificates for the images: %w (install Debian's ca-certificates)", err)
	}
	base, err := baseLayer(certs, opts.Created)
	if err != nil {
		return nil, fmt.Errorf("base layer: %w", err)
	}
	tmp, err := os.MkdirTemp("", "mlsysops-images-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)

	var out []Built
	for _, im := range opts.Images {
		start := time.Now()
		b, err := buildImage(ctx, opts, im, base, tmp, logw)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", im.Name, err)
		}
		b.Duration = time.Since(start)
		fmt.Fprintf(logw, "%-12s %s %s (%s, %.1f MiB, %.1fs)\n", im.Name, b.Ref, b.Digest[:19], strings.Join(b.Platforms, ", "), float64(b.SizeBytes)/(1<<20), b.Duration.Seconds())
		out = append(out, b)
	}
	return out, nil
}

func buildImage(ctx context.Context, opts Options, im Image, base v1.Layer, tmp string, logw io.Writer) (Built, error) {
	b := Built{Image: im, Ref: im.Ref("", opts.Version)}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	seen := map[v1.Hash]bool{}
	for _, p := range im.platforms() {
		plat, err := v1.ParsePlatform(p)
		if err != nil {
			return b, err
		}
		bin := filepath.Join(tmp, im.Name+"-"+plat.OS+"-"+plat.Architecture)
		if err := goBuild(ctx, opts, im, plat, bin); err != nil {
			return b, err
		}
		img, err := assemble(opts, im, plat, base, bin)
		if err != nil {
			return b, fmt.Errorf("%s: %w", p, err)
		}
		if err := sizeOf(img, seen, &b.SizeBytes); err != nil {
			return b, err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return b, err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: cf.Platform()}})
		b.Platforms = append(b.Platforms, p)
	}
	idx = mutate.Annotations(idx, labels(opts, im)).(v1.ImageIndex)
	d, err := idx.Digest()
	if err != nil {
		return b, err
	}
	b.Index, b.Digest = idx, d.String()
	return b, nil
}

// sizeOf adds the compressed size of img's config and layers not seen yet.
func sizeOf(img v1.Image, seen map[v1.Hash]bool, total *int64) error {
	m, err := img.Manifest()
	if err != nil {
		return err
	}
	for _, d := range append([]v1.Descriptor{m.Config}, m.Layers...) {
		if !seen[d.Digest] {
			seen[d.Digest] = true
			*total += d.Size
		}
	}
	return nil
}

// labels are the OCI labels of an image (and the annotations of its index).
func labels(opts Options, im Image) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.version":  opts.Version,
		"org.opencontainers.image.revision": opts.Revision,
		"org.opencontainers.image.source":   opts.Source,
		"org.opencontainers.image.created":  opts.Created.Format(time.RFC3339),
		"org.opencontainers.image.title":    Prefix + "/" + im.Name,
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
	if im.Description != "" {
		l["org.opencontainers.image.description"] = im.Description
	}
	return l
}

// goBuild builds the image's package for plat into out: static unless the
// image is a cgo one, reproducible (-trimpath, no VCS stamping: the
// version comes through -ldflags).
func goBuild(ctx context.Context, opts Options, im Image, plat *v1.Platform, out string) error {
	ldflags := []string{"-s", "-w"}
	for _, f := range im.LDFlags {
		ldflags = append(ldflags, strings.ReplaceAll(f, "{{version}}", opts.Version))
	}
	args := []string{"build", "-trimpath", "-buildvcs=false", "-ldflags", strings.Join(ldflags, " ")}
	if len(im.Tags) > 0 {
		args = append(args, "-tags", strings.Join(im.Tags, ","))
	}
	args = append(args, "-o", out, im.Package)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = opts.Root
	cgo := "0"
	if im.CGO {
		cgo = "1"
	}
	env := []string{"GOOS=" + plat.OS, "GOARCH=" + plat.Architecture, "CGO_ENABLED=" + cgo}
	if plat.Architecture == "arm64" && plat.Variant != "" {
		env = append(env, "GOARM64="+plat.Variant+".0")
	}
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s go %s: %w\n%s", strings.Join(env, " "), strings.Join(args, " "), err, stderr.String())
	}
	return nil
}

// assemble makes the image of one platform: base layer, shared libraries
// and extra files (if any), the binary.
func assemble(opts Options, im Image, plat *v1.Platform, base v1.Layer, bin string) (v1.Image, error) {
	layers := []v1.Layer{base}
	var extra []tarFile
	for _, f := range im.Files {
		src := f.Src
		if !filepath.IsAbs(src) {
			src = filepath.Join(opts.Root, src)
		}
		tf, err := fileEntry(src, f.Dst, f.Mode)
		if err != nil {
			return nil, fmt.Errorf("file %s: %w", f.Src, err)
		}
		extra = append(extra, tf)
	}
	if im.CGO {
		objs := []string{bin}
		for _, f := range im.Files {
			src := f.Src
			if !filepath.IsAbs(src) {
				src = filepath.Join(opts.Root, src)
			}
			objs = append(objs, src)
		}
		libs, err := sharedLibraries(objs...)
		if err != nil {
			return nil, err
		}
		for _, l := range libs {
			tf, err := fileEntry(l, l, 0)
			if err != nil {
				return nil, fmt.Errorf("shared library %s: %w", l, err)
			}
			extra = append(extra, tf)
		}
	}
	if len(extra) > 0 {
		l, err := layerOf(extra, opts.Created)
		if err != nil {
			return nil, err
		}
		layers = append(layers, l)
	}
	app, err := fileEntry(bin, BinDir+"/"+im.Binary, 0o755)
	if err != nil {
		return nil, err
	}
	appLayer, err := layerOf([]tarFile{app}, opts.Created)
	if err != nil {
		return nil, err
	}
	layers = append(layers, appLayer)

	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.AppendLayers(img, layers...)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = plat.OS, plat.Architecture, plat.Variant
	cf.Author = "MLSysOps"
	cf.Created = v1.Time{Time: opts.Created}
	cf.Config.Entrypoint = []string{BinDir + "/" + im.Binary}
	cf.Config.Cmd = im.Args
	cf.Config.User = fmt.Sprintf("%d:%d", UID, GID)
	cf.Config.WorkingDir = "/home/nonroot"
	cf.Config.Env = append([]string{"PATH=" + BinDir, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt", "HOME=/home/nonroot"}, im.Env...)
	cf.Config.Labels = labels(opts, im)
	cf.History = nil
	for range layers {
		cf.History = append(cf.History, v1.History{Created: v1.Time{Time: opts.Created}, CreatedBy: "mlsysops images", Comment: im.Name})
	}
	return mutate.ConfigFile(img, cf)
}
