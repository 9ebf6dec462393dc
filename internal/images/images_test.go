package images

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

var fixed = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func pauseOpts(t *testing.T) Options {
	pause, err := Lookup("pause")
	if err != nil {
		t.Fatal(err)
	}
	return Options{Root: repoRoot(t), Images: pause, Version: "v9.9.9-test", Revision: "0123456789abcdef", Created: fixed}
}

// The same source, version and time give the same index digest; another
// version gives another one.
func TestBuildIsDeterministic(t *testing.T) {
	ctx := context.Background()
	first, err := Build(ctx, pauseOpts(t))
	if err != nil {
		t.Fatal(err)
	}
	second, err := Build(ctx, pauseOpts(t))
	if err != nil {
		t.Fatal(err)
	}
	if first[0].Digest != second[0].Digest {
		t.Errorf("two builds of the same input: %s and %s", first[0].Digest, second[0].Digest)
	}
	// Written twice, the archives are byte for byte the same.
	a, b := t.TempDir(), t.TempDir()
	if err := Write(a, "v9.9.9-test", first); err != nil {
		t.Fatal(err)
	}
	if err := Write(b, "v9.9.9-test", second); err != nil {
		t.Fatal(err)
	}
	ta, _ := os.ReadFile(filepath.Join(a, ArchiveFile))
	tb, _ := os.ReadFile(filepath.Join(b, ArchiveFile))
	if len(ta) == 0 || string(ta) != string(tb) {
		t.Errorf("archives differ (%d and %d bytes)", len(ta), len(tb))
	}
	o := pauseOpts(t)
	o.Version = "v9.9.10-test"
	o.Images[0].Tag = ""
	other, err := Build(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if other[0].Digest == first[0].Digest {
		t.Error("another version gave the same digest")
	}
}

// Every platform's image: non-root, no shell, the binary as entrypoint,
// CA certificates, labels, fixed times; the index has both platforms.
func TestImageContent(t *testing.T) {
	built, err := Build(context.Background(), pauseOpts(t))
	if err != nil {
		t.Fatal(err)
	}
	b := built[0]
	if diff := cmp.Diff([]string{"linux/amd64", "linux/arm64"}, b.Platforms); diff != "" {
		t.Errorf("platforms (-want +got):\n%s", diff)
	}
	if b.Ref != "docker.io/mlsysops/pause:"+PauseTag {
		t.Errorf("ref %s", b.Ref)
	}
	im, err := b.Index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var archs []string
	for _, d := range im.Manifests {
		archs = append(archs, d.Platform.Architecture)
		img, err := b.Index.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{
			"org.opencontainers.image.version":     "v9.9.9-test",
			"org.opencontainers.image.revision":    "0123456789abcdef",
			"org.opencontainers.image.source":      DefaultSource,
			"org.opencontainers.image.created":     "2026-01-02T03:04:05Z",
			"org.opencontainers.image.title":       "mlsysops/pause",
			"org.opencontainers.image.licenses":    "Apache-2.0",
			"org.opencontainers.image.description": "Pod sandbox: sleeps, reaps children, exits on TERM or INT",
		}
		if diff := cmp.Diff(want, cf.Config.Labels); diff != "" {
			t.Errorf("%s labels (-want +got):\n%s", d.Platform.Architecture, diff)
		}
		if cf.Config.User != "65532:65532" || !cf.Created.Time.Equal(fixed) || cf.Architecture != d.Platform.Architecture {
			t.Errorf("%s config: user %q created %s arch %s", d.Platform.Architecture, cf.Config.User, cf.Created, cf.Architecture)
		}
		if diff := cmp.Diff([]string{"/usr/local/bin/pause"}, cf.Config.Entrypoint); diff != "" {
			t.Errorf("entrypoint (-want +got):\n%s", diff)
		}
		files := filesOf(t, img)
		for _, f := range []string{"usr/local/bin/pause", "etc/ssl/certs/ca-certificates.crt", "etc/passwd", "etc/group", "tmp/", "home/nonroot/"} {
			if _, ok := files[f]; !ok {
				t.Errorf("%s: no %s in the image", d.Platform.Architecture, f)
			}
		}
		for f, h := range files {
			if strings.HasSuffix(f, "/sh") || strings.HasSuffix(f, "/bash") || strings.HasSuffix(f, "/busybox") {
				t.Errorf("%s: shell %s in the image", d.Platform.Architecture, f)
			}
			if !h.ModTime.Equal(fixed) {
				t.Errorf("%s: %s has time %s", d.Platform.Architecture, f, h.ModTime)
			}
		}
		if h := files["home/nonroot/"]; h.Uid != UID {
			t.Errorf("home owned by %d", h.Uid)
		}
	}
	if diff := cmp.Diff([]string{"amd64", "arm64"}, archs); diff != "" {
		t.Errorf("index platforms (-want +got):\n%s", diff)
	}
}

func filesOf(t *testing.T, img v1.Image) map[string]*tar.Header {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*tar.Header{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			out[h.Name] = h
		}
		rc.Close()
	}
	return out
}

// Written images are an OCI layout whose index names each image for
// containerd, and a manifest; pushed, they land in the registry under
// REGISTRY/mlsysops/<name>:<tag> with the same digest.
func TestWriteAndPush(t *testing.T) {
	ctx := context.Background()
	built, err := Build(ctx, pauseOpts(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := Write(dir, "v9.9.9-test", built); err != nil {
		t.Fatal(err)
	}
	m, err := LoadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"docker.io/mlsysops/pause:" + PauseTag}, m.Refs()); diff != "" {
		t.Errorf("manifest refs (-want +got):\n%s", diff)
	}
	p, err := layout.FromPath(filepath.Join(dir, LayoutDir))
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Annotations[AnnotationContainerdName] != m.Images[0].Ref || im.Manifests[0].Digest.String() != built[0].Digest {
		t.Errorf("layout index: %+v", im.Manifests)
	}

	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	refs, err := Push(ctx, u.Host, "v9.9.9-test", built, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{u.Host + "/mlsysops/pause:" + PauseTag}, refs); diff != "" {
		t.Errorf("pushed (-want +got):\n%s", diff)
	}
	ref, err := name.ParseReference(refs[0], name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(ref, remote.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	if desc.Digest.String() != built[0].Digest {
		t.Errorf("registry has %s, built %s", desc.Digest, built[0].Digest)
	}
}

func TestOptionsValidate(t *testing.T) {
	other := "linux/arm64"
	if runtime.GOARCH == "arm64" {
		other = "linux/amd64"
	}
	cases := map[string]struct {
		opts Options
		want []string
	}{
		"catalog": {opts: Options{Root: "/src", Images: Catalog}},
		"no root": {opts: Options{Images: Catalog}, want: []string{"root: the module root must be set"}},
		"bad entries": {
			opts: Options{Root: "/src", Images: []Image{
				{Name: "x"},
				{Name: "y", Package: "./y", Binary: "y", Platforms: []string{"windows/amd64"}, Files: []File{{Src: "a", Dst: "rel"}}},
				{Name: "z", Package: "./z", Binary: "z", CGO: true, Platforms: []string{other}},
			}},
			want: []string{
				"images[0]: name, package and binary are required",
				`images[1] (y): platform "windows/amd64": want linux/<arch>`,
				"images[1] (y).files[0]: src is required and dst must be absolute",
				"images[2] (z): cgo binaries are built for the host's platform only (linux/" + runtime.GOARCH + "), not " + other,
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got []string
			if err := tc.opts.Validate(); err != nil {
				got = strings.Split(err.Error(), "\n")
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// A cgo program's image carries the shared libraries ldd finds and the
// dynamic loader.
func TestSharedLibraries(t *testing.T) {
	libs, err := sharedLibraries("/bin/ls")
	if err != nil {
		t.Fatal(err)
	}
	var libc, loader bool
	for _, l := range libs {
		libc = libc || strings.Contains(l, "libc.so")
		loader = loader || strings.Contains(l, "ld-linux")
	}
	if !libc || !loader {
		t.Errorf("libraries of /bin/ls: %v", libs)
	}
	if libs, err := sharedLibraries("/etc/passwd"); err != nil || len(libs) != 0 {
		t.Errorf("a plain file: %v %v", libs, err)
	}
}

func TestLookup(t *testing.T) {
	if _, err := Lookup("agent", "nope"); err == nil || !strings.Contains(err.Error(), "unknown images nope (have accounts, agent, agent-node, demo, mlconnector, modelserver, modelserver-static, northbound, pause)") {
		t.Errorf("Lookup: %v", err)
	}
	all, err := Lookup()
	if err != nil || len(all) != len(Catalog) {
		t.Errorf("Lookup(): %d %v", len(all), err)
	}
}

// A cgo image (the model server's kind): the dynamically linked binary,
// the shared libraries it needs with the dynamic loader, and extra files,
// for the build machine's platform.
func TestCGOImage(t *testing.T) {
	extra := filepath.Join(t.TempDir(), "model.onnx")
	if err := os.WriteFile(extra, []byte("weights"), 0o600); err != nil {
		t.Fatal(err)
	}
	im := Image{Name: "cgohello", Package: "./internal/images/testdata/cgohello", Binary: "cgohello", CGO: true,
		Platforms: []string{"linux/" + runtime.GOARCH}, Files: []File{{Src: extra, Dst: "/models/model.onnx", Mode: 0o644}}}
	built, err := Build(context.Background(), Options{Root: repoRoot(t), Images: []Image{im}, Version: "v1", Revision: "r", Created: fixed})
	if err != nil {
		t.Fatal(err)
	}
	im2, err := built[0].Index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	img, err := built[0].Index.Image(im2.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	files := filesOf(t, img)
	var libc, loader bool
	for f := range files {
		libc = libc || strings.Contains(f, "libc.so")
		loader = loader || strings.Contains(f, "ld-linux")
	}
	if !libc || !loader {
		t.Errorf("no libc (%v) or loader (%v) in the cgo image: %v", libc, loader, files)
	}
	if h, ok := files["models/model.onnx"]; !ok || h.Mode != 0o644 {
		t.Errorf("extra file: %+v", h)
	}
	if _, ok := files["usr/local/bin/cgohello"]; !ok {
		t.Error("no binary")
	}
}
