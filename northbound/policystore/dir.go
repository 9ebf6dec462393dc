package policystore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/mlsysops-go/mlsysops/northbound/api"
)

// DirStore keeps policies as files of one directory per layer, for agents
// that run as local processes and watch those directories.
type DirStore struct {
	dirs map[string]string
}

var _ Store = (*DirStore)(nil)

// NewDirStore returns a store over the given directories, by layer. The
// directories are created on the first write.
func NewDirStore(dirs map[string]string) *DirStore { return &DirStore{dirs: dirs} }

func (s *DirStore) dir(layer string) (string, error) {
	d, ok := s.dirs[layer]
	if !ok || d == "" {
		return "", fmt.Errorf("no policy directory configured for layer %q", layer)
	}
	return d, nil
}

// List implements Store.
func (s *DirStore) List(_ context.Context, layer string) ([]api.Policy, error) {
	d, err := s.dir(layer)
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(d)
	if errors.Is(err, fs.ErrNotExist) {
		return []api.Policy{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list policies in %s: %w", d, err)
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
		out = append(out, api.Policy{Layer: layer, Name: e.Name(), Size: int(info.Size()), Location: d})
	}
	sortPolicies(out)
	return out, nil
}

// Get implements Store.
func (s *DirStore) Get(_ context.Context, layer, name string) (api.Policy, error) {
	d, err := s.dir(layer)
	if err != nil {
		return api.Policy{}, err
	}
	if !ValidName(name) {
		return api.Policy{}, fmt.Errorf("policy %s of layer %s: %w", name, layer, ErrNotFound)
	}
	b, err := os.ReadFile(filepath.Join(d, name))
	if errors.Is(err, fs.ErrNotExist) {
		return api.Policy{}, fmt.Errorf("policy %s of layer %s: %w", name, layer, ErrNotFound)
	}
	if err != nil {
		return api.Policy{}, fmt.Errorf("read policy %s: %w", name, err)
	}
	return api.Policy{Layer: layer, Name: name, Size: len(b), Location: d, Source: string(b)}, nil
}

// Put implements Store. The file is written to a temporary name and
// renamed, so a watching agent never reads half a policy.
func (s *DirStore) Put(_ context.Context, layer, name string, source []byte) (bool, error) {
	d, err := s.dir(layer)
	if err != nil {
		return false, err
	}
	if !ValidName(name) {
		return false, fmt.Errorf("policy name %q: want policy-<name>.star", name)
	}
	if err := os.MkdirAll(d, 0o755); err != nil {
		return false, fmt.Errorf("policy directory %s: %w", d, err)
	}
	path := filepath.Join(d, name)
	_, statErr := os.Stat(path)
	tmp, err := os.CreateTemp(d, ".tmp-"+name+"-*")
	if err != nil {
		return false, fmt.Errorf("write policy %s: %w", name, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(source); err != nil {
		tmp.Close()
		return false, fmt.Errorf("write policy %s: %w", name, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return false, fmt.Errorf("write policy %s: %w", name, err)
	}
	if err := tmp.Close(); err != nil {
		return false, fmt.Errorf("write policy %s: %w", name, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return false, fmt.Errorf("write policy %s: %w", name, err)
	}
	return errors.Is(statErr, fs.ErrNotExist), nil
}

// Delete implements Store.
func (s *DirStore) Delete(_ context.Context, layer, name string) error {
	d, err := s.dir(layer)
	if err != nil {
		return err
	}
	if !ValidName(name) {
		return fmt.Errorf("policy %s of layer %s: %w", name, layer, ErrNotFound)
	}
	err = os.Remove(filepath.Join(d, name))
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("policy %s of layer %s: %w", name, layer, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("delete policy %s: %w", name, err)
	}
	return nil
}
