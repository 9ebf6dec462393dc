package policy

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
)

//go:embed builtin
var builtinFS embed.FS

// BuiltinSources returns the source of the built-in policies of a layer
// (continuum, cluster or node) by file name.
func BuiltinSources(layer string) (map[string][]byte, error) {
	dir := path.Join("builtin", layer)
	entries, err := fs.ReadDir(builtinFS, dir)
	if err != nil {
		return nil, nil // a layer without built-in policies
	}
	out := map[string][]byte{}
	for _, e := range entries {
		if _, ok := NameFromFile(e.Name()); !ok {
			continue
		}
		src, err := builtinFS.ReadFile(path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read built-in policy %s: %w", e.Name(), err)
		}
		out[e.Name()] = src
	}
	return out, nil
}

// Builtins compiles the built-in policies of a layer: staticPlacement and
// dynamicPlacement for clusters, clusterPlacement for the continuum, none
// for nodes. They keep the system working when the policy folder is
// empty; a file of the same name replaces one.
func Builtins(ctx context.Context, layer string, rt Runtime) ([]Template, error) {
	srcs, err := BuiltinSources(layer)
	if err != nil {
		return nil, err
	}
	files := make([]string, 0, len(srcs))
	for f := range srcs {
		files = append(files, f)
	}
	sort.Strings(files)
	var out []Template
	for _, f := range files {
		name, _ := NameFromFile(f)
		s, err := Compile(ctx, name, path.Join("builtin", layer, f), srcs[f], rt)
		if err != nil {
			return nil, fmt.Errorf("built-in policy %s: %w", name, err)
		}
		s.origin = "builtin:" + path.Join(layer, f)
		out = append(out, s)
	}
	return out, nil
}
