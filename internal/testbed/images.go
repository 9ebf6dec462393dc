package testbed

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"time"

	"github.com/mlsysops-go/mlsysops/internal/images"
)

// builtImages is the project's images for the real nodes, being made in
// the background while the control planes start.
type builtImages struct {
	done    chan struct{}
	m       *images.Manifest
	archive string
	err     error
}

func (b *builtImages) wait() (*images.Manifest, string, error) {
	if b == nil {
		return nil, "", errors.New("images not built: the testbed runs no real node")
	}
	<-b.done
	return b.m, b.archive, b.err
}

// imagesDir is where `make images` writes (bin/images).
func (tb *Testbed) imagesDir() string { return filepath.Join(tb.opts.BinDir, "images") }

// ensureImages uses the images in bin/images when they were built from
// the current commit (`make images`), and otherwise builds them for this
// machine's platform only (what the real nodes run) into bin/images. A
// dirty tree keeps its version: after changing code, run `make images`.
func (tb *Testbed) ensureImages(ctx context.Context) *builtImages {
	b := &builtImages{done: make(chan struct{})}
	go func() {
		defer close(b.done)
		root, err := RepoRoot()
		if err != nil {
			b.err = err
			return
		}
		dir := tb.imagesDir()
		b.archive = filepath.Join(dir, images.ArchiveFile)
		// Testbeds of one checkout (make up, the tests) share bin/images:
		// one builds, the others wait and use what it wrote.
		if err := os.MkdirAll(tb.opts.BinDir, 0o755); err != nil {
			b.err = err
			return
		}
		lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			b.err = err
			return
		}
		defer lock.Close()
		if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
			b.err = err
			return
		}
		defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
		git, err := images.GitInfo(ctx, root)
		if err != nil {
			b.err = err
			return
		}
		if m, err := images.LoadManifest(dir); err == nil && m.Version == git.Version && len(m.Images) >= len(images.Catalog) {
			if _, err := os.Stat(b.archive); err == nil {
				b.m = m
				tb.progress("%s (%d images, %s)", "images", git.Version, len(m.Images), tb.rel(dir))
				return
			}
		}
		start := time.Now()
		list := append([]images.Image(nil), images.Catalog...)
		for i := range list {
			list[i].Platforms = []string{"linux/" + runtime.GOARCH}
		}
		built, err := images.Build(ctx, images.Options{Root: root, Images: list, Version: git.Version, Revision: git.Revision, Created: git.Created})
		if err != nil {
			b.err = err
			return
		}
		if err := images.Write(dir, git.Version, built); err != nil {
			b.err = err
			return
		}
		if b.m, b.err = images.LoadManifest(dir); b.err == nil {
			tb.progress("built for linux/%s in %.0fs (%s; `make images` builds every platform)", "images", runtime.GOARCH, time.Since(start).Seconds(), tb.rel(dir))
		}
	}()
	return b
}

// builtImagesAsIs returns the images bin/images holds, whatever version of
// the checkout built them, and builds them (ensureImages) only when there
// are none: a restart of one component must not wait for a rebuild.
func (tb *Testbed) builtImagesAsIs(ctx context.Context) *builtImages {
	dir := tb.imagesDir()
	m, err := images.LoadManifest(dir)
	if err != nil {
		return tb.ensureImages(ctx)
	}
	b := &builtImages{done: make(chan struct{}), m: m, archive: filepath.Join(dir, images.ArchiveFile)}
	close(b.done)
	return b
}

// ImagesDir is the folder with the images the real nodes import.
func (tb *Testbed) ImagesDir() string { return tb.imagesDir() }
