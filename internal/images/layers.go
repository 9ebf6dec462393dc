package images

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// tarFile is one entry of a layer.
type tarFile struct {
	name     string // absolute path in the image
	mode     int64
	uid, gid int
	dir      bool
	data     []byte
}

// fileEntry reads src (following symbolic links) as the image file dst.
// A zero mode keeps the source's permission bits.
func fileEntry(src, dst string, mode int64) (tarFile, error) {
	st, err := os.Stat(src)
	if err != nil {
		return tarFile{}, err
	}
	if !st.Mode().IsRegular() {
		return tarFile{}, fmt.Errorf("%s is not a regular file", src)
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return tarFile{}, err
	}
	if mode == 0 {
		mode = int64(st.Mode().Perm())
	}
	return tarFile{name: dst, mode: mode, data: b}, nil
}

// baseLayer holds what every image shares: CA certificates, /etc/passwd
// and /etc/group with root and nonroot, /tmp and nonroot's home. No shell.
func baseLayer(certs []byte, created time.Time) (v1.Layer, error) {
	files := []tarFile{
		{name: "/etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: certs},
		{name: "/etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "/etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{name: "/etc/nsswitch.conf", mode: 0o644, data: []byte("hosts: files dns\n")},
		{name: "/tmp", mode: 0o1777, dir: true},
		{name: "/home/nonroot", mode: 0o700, dir: true, uid: UID, gid: GID},
	}
	return layerOf(files, created)
}

// layerOf writes files (and their parent directories) into a
// deterministic layer: sorted entries, fixed times, root ownership unless
// the entry says otherwise, gzip without a timestamp.
func layerOf(files []tarFile, created time.Time) (v1.Layer, error) {
	all := map[string]tarFile{}
	for _, f := range files {
		name := strings.TrimPrefix(path.Clean(f.name), "/")
		for d := path.Dir(name); d != "." && d != "/"; d = path.Dir(d) {
			if _, ok := all[d]; !ok {
				all[d] = tarFile{name: d, mode: 0o755, dir: true}
			}
		}
		f.name = name
		all[name] = f
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		f := all[n]
		h := &tar.Header{Name: n, Mode: f.mode, Uid: f.uid, Gid: f.gid, ModTime: created, Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag, h.Name = tar.TypeDir, n+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if !f.dir {
			if _, err := tw.Write(f.data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}

// sharedLibraries lists the shared libraries (and the dynamic loader) the
// given ELF files need, as ldd resolves them on the build machine.
func sharedLibraries(objs ...string) ([]string, error) {
	set := map[string]bool{}
	for _, o := range objs {
		out, err := exec.Command("ldd", o).CombinedOutput()
		if err != nil {
			// ldd fails on static binaries and plain files: nothing to add.
			if strings.Contains(string(out), "not a dynamic executable") {
				continue
			}
			return nil, fmt.Errorf("ldd %s: %w\n%s", o, err, out)
		}
		s := bufio.NewScanner(bytes.NewReader(out))
		for s.Scan() {
			line := strings.TrimSpace(s.Text())
			if strings.Contains(line, "not found") {
				return nil, fmt.Errorf("ldd %s: %s", o, line)
			}
			// "libm.so.6 => /lib/x86_64-linux-gnu/libm.so.6 (0x...)" or
			// "/lib64/ld-linux-x86-64.so.2 (0x...)"; linux-vdso has no file.
			if _, after, ok := strings.Cut(line, "=> "); ok {
				line = after
			}
			p, _, _ := strings.Cut(line, " ")
			if strings.HasPrefix(p, "/") {
				set[filepath.Clean(p)] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	return out, nil
}

// Git is what the images' labels say about the source.
type Git struct {
	// Version is `git describe --tags --always --dirty`.
	Version string
	// Revision is the commit.
	Revision string
	// Created is the commit's time: fixed for a given commit, so the same
	// source gives the same digests.
	Created time.Time
}

// GitInfo reads version, revision and commit time of the checkout at root.
func GitInfo(ctx context.Context, root string) (Git, error) {
	run := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, "git", args...)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("git %s in %s: %w", strings.Join(args, " "), root, err)
		}
		return strings.TrimSpace(string(out)), nil
	}
	var g Git
	var err error
	if g.Version, err = run("describe", "--tags", "--always", "--dirty"); err != nil {
		return g, err
	}
	if g.Revision, err = run("rev-parse", "HEAD"); err != nil {
		return g, err
	}
	ts, err := run("show", "-s", "--format=%ct", "HEAD")
	if err != nil {
		return g, err
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return g, fmt.Errorf("commit time %q: %w", ts, err)
	}
	g.Created = time.Unix(sec, 0).UTC()
	return g, nil
}
