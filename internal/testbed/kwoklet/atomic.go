package kwoklet

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// File is one file of a volume: its content and mode.
type File struct {
	Data []byte
	Mode os.FileMode
}

// dataDir is the link that names the current generation of a volume, as
// the kubelet's atomic writer lays ConfigMap, Secret, projected and
// downward API volumes out: each key is a link <key> -> ..data/<key>, and
// ..data -> ..<timestamp>, a folder with the files. An update writes a
// new generation and swaps ..data in one rename, so a reader sees either
// the old files or the new ones.
const dataDir = "..data"

// WriteAtomic makes dir hold exactly files (relative paths), owned by
// uid and gid (-1 keeps them), in the atomic writer's layout. It reports
// whether anything changed; a volume whose files are already those is left
// alone.
func WriteAtomic(dir string, files map[string]File, uid, gid int) (bool, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return false, err
	}
	if same(dir, files) {
		return false, nil
	}
	gen := ".." + time.Now().UTC().Format("2006_01_02_15_04_05.000000000")
	genDir := filepath.Join(dir, gen)
	if err := os.Mkdir(genDir, 0o755); err != nil {
		return false, err
	}
	for rel, f := range files {
		if err := validRel(rel); err != nil {
			return false, err
		}
		p := filepath.Join(genDir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return false, err
		}
		if err := os.WriteFile(p, f.Data, f.Mode.Perm()); err != nil {
			return false, err
		}
		if err := os.Chmod(p, f.Mode.Perm()); err != nil {
			return false, err
		}
		if uid >= 0 || gid >= 0 {
			if err := os.Lchown(p, uid, gid); err != nil {
				return false, err
			}
		}
	}
	tmp := filepath.Join(dir, "..data_tmp")
	_ = os.Remove(tmp)
	if err := os.Symlink(gen, tmp); err != nil {
		return false, err
	}
	old, _ := os.Readlink(filepath.Join(dir, dataDir))
	if err := os.Rename(tmp, filepath.Join(dir, dataDir)); err != nil {
		return false, err
	}
	// The top-level links: one per first path element.
	tops := map[string]bool{}
	for rel := range files {
		tops[strings.SplitN(rel, "/", 2)[0]] = true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") {
			continue
		}
		if !tops[e.Name()] {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
				return false, err
			}
		}
	}
	for top := range tops {
		link := filepath.Join(dir, top)
		if target, err := os.Readlink(link); err == nil && target == filepath.Join(dataDir, top) {
			continue
		}
		_ = os.Remove(link)
		if err := os.Symlink(filepath.Join(dataDir, top), link); err != nil {
			return false, err
		}
	}
	if old != "" && old != gen {
		if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
			return false, err
		}
	}
	return true, nil
}

// same reports whether dir's current generation holds exactly files.
func same(dir string, files map[string]File) bool {
	cur := filepath.Join(dir, dataDir)
	if _, err := os.Stat(cur); err != nil {
		return false
	}
	n := 0
	err := filepath.Walk(cur+"/", func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		n++
		rel, _ := filepath.Rel(cur, p)
		f, ok := files[rel]
		if !ok || f.Mode.Perm() != info.Mode().Perm() {
			return errDiffers
		}
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(b, f.Data) {
			return errDiffers
		}
		return nil
	})
	return err == nil && n == len(files)
}

var errDiffers = fmt.Errorf("differs")

// validRel refuses paths that would leave the volume.
func validRel(rel string) error {
	clean := filepath.Clean(rel)
	if rel == "" || filepath.IsAbs(rel) || clean != rel || strings.HasPrefix(clean, "..") {
		return fmt.Errorf("volume path %q: must be relative, clean and not start with ..", rel)
	}
	return nil
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
