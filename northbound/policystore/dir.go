package policystore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/mlsysops-go/mlsysops/northbound/api"
)

// DirStore keeps policies as files of directories, for agents that run as
// local processes and watch those directories. A layer may have several
// directories (one per agent): writes go to all of them, reads come from
// the first.
type DirStore struct {
	dirs map[string][]string
}

var _ Store = (*DirStore)(nil)

// NewDirStore returns a store over the given directories, by layer. The
// directories are created on the first write.
func NewDirStore(dirs map[string][]string) *DirStore { return &DirStore{dirs: dirs} }

func (s *DirStore) layerDirs(layer string) ([]string, error) {
	ds := s.dirs[layer]
	if len(ds) == 0 || ds[0] == "" {
		return nil, fmt.Errorf("no policy directory configured for layer %q", layer)
	}
	return ds, nil
}

func location(ds []string) string {
	if len(ds) == 1 {
		return ds[0]
	}
	return ds[0] + fmt.Sprintf(" (and %d more)", len(ds)-1)
}

// List implements Store.
func (s *DirStore) List(_ context.Context, layer string) ([]api.Policy, error) {
	ds, err := s.layerDirs(layer)
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(ds[0])
	if errors.Is(err, fs.ErrNotExist) {
		return []api.Policy{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list policies in %s: %w", ds[0], err)
	}
	out := []api.Policy{}
	for _, e := range entries {
		if !e.Type().IsRegular() || !isPolicyKey(e.Name()) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		out = append(out, api.Policy{Layer: layer, Name: e.Name(), Size: int(info.Size()), Location: location(ds)})
	}
	sortPolicies(out)
	return out, nil
}

// Get implements Store.
func (s *DirStore) Get(_ context.Context, layer, name string) (api.Policy, error) {
	ds, err := s.layerDirs(layer)
	if err != nil {
		return api.Policy{}, err
	}
	if !ValidName(name) {
		return api.Policy{}, fmt.Errorf("policy %s of layer %s: %w", name, layer, ErrNotFound)
	}
	b, err := os.ReadFile(filepath.Join(ds[0], name))
	if errors.Is(err, fs.ErrNotExist) {
		return api.Policy{}, fmt.Errorf("policy %s of layer %s: %w", name, layer, ErrNotFound)
	}
	if err != nil {
		return api.Policy{}, fmt.Errorf("read policy %s: %w", name, err)
	}
	return api.Policy{Layer: layer, Name: name, Size: len(b), Location: location(ds), Source: string(b)}, nil
}

// Put implements Store. Each file is written to a temporary name and
// renamed, so a watching agent never reads half a policy.
func (s *DirStore) Put(_ context.Context, layer, name string, source []byte) (bool, error) {
	ds, err := s.layerDirs(layer)
	if err != nil {
		return false, err
	}
	if !ValidName(name) {
		return false, fmt.Errorf("policy name %q: want policy-<name>.star", name)
	}
	_, statErr := os.Stat(filepath.Join(ds[0], name))
	for _, d := range ds {
		if err := writeAtomic(d, name, source); err != nil {
			return false, err
		}
	}
	return errors.Is(statErr, fs.ErrNotExist), nil
}

func writeAtomic(dir, name string, source []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("policy directory %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, ".tmp-"+name+"-*")
	if err != nil {
		return fmt.Errorf("write policy %s in %s: %w", name, dir, err)
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(source)
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, name))
	}
	if err != nil {
		return fmt.Errorf("write policy %s in %s: %w", name, dir, err)
	}
	return nil
}

// Delete implements Store; ErrNotFound when no directory had the policy.
func (s *DirStore) Delete(_ context.Context, layer, name string) error {
	ds, err := s.layerDirs(layer)
	if err != nil {
		return err
	}
	if !ValidName(name) {
		return fmt.Errorf("policy %s of layer %s: %w", name, layer, ErrNotFound)
	}
	removed := 0
	var errs []string
	for _, d := range ds {
		err := os.Remove(filepath.Join(d, name))
		switch {
		case err == nil:
			removed++
		case !errors.Is(err, fs.ErrNotExist):
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("delete policy %s: %s", name, strings.Join(errs, "; "))
	}
	if removed == 0 {
		return fmt.Errorf("policy %s of layer %s: %w", name, layer, ErrNotFound)
	}
	return nil
}
