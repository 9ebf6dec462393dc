// Package testcount counts the test functions of the module by kind, so
// that what the documentation says about the tests stays true: a unit
// test checks pure logic (with fakes at most); an integration test runs
// against real components (servers and processes the testbed starts).
//
// A test function is an integration test when it, or a function of its
// package's test files it refers to (directly or through others), uses a
// package of internal/testbed, which starts the real components. The
// count is of top-level Test, Benchmark and Fuzz functions; subtests are
// not counted.
package testcount

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Kind is what a test function runs against.
type Kind string

const (
	// Unit tests check pure logic, with fakes at most.
	Unit Kind = "unit"
	// Integration tests run against real components.
	Integration Kind = "integration"
)

// Func is one test function.
type Func struct {
	// Dir is the package's folder, relative to the module root.
	Dir  string
	Name string
	// Type is "Test", "Benchmark" or "Fuzz".
	Type string
	Kind Kind
}

// Counts are test functions by type and kind.
type Counts map[string]map[Kind]int

// Count returns the counts of funcs.
func Count(funcs []Func) Counts {
	c := Counts{}
	for _, f := range funcs {
		if c[f.Type] == nil {
			c[f.Type] = map[Kind]int{}
		}
		c[f.Type][f.Kind]++
	}
	return c
}

// Scan reads every _test.go file under root (a module root whose path is
// module), skipping nested modules and hidden folders.
func Scan(root, module string) ([]Func, error) {
	dirs := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			if path != root {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // another module
				}
			}
			return nil
		}
		if strings.HasSuffix(path, "_test.go") {
			dirs[filepath.Dir(path)] = append(dirs[filepath.Dir(path)], path)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []Func
	for dir, files := range dirs {
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			return nil, err
		}
		funcs, err := scanDir(rel, files, module+"/internal/testbed")
		if err != nil {
			return nil, err
		}
		out = append(out, funcs...)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Dir != out[j].Dir {
			return out[i].Dir < out[j].Dir
		}
		return out[i].Name < out[j].Name
	})
	return out, nil
}

// decl is what one function (or method) of a test folder refers to.
type decl struct {
	real bool            // uses a package that starts real components
	refs map[string]bool // names it refers to
}

// scanDir classifies the test functions of one folder. The files of the
// package and of its external test package are one scope: helpers are
// found by name, which may count a unit test as an integration test when
// names collide, never the other way round.
func scanDir(rel string, files []string, realPrefix string) ([]Func, error) {
	fset := token.NewFileSet()
	decls := map[string][]*decl{}
	var tests []Func
	for _, path := range files {
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", path, err)
		}
		real := map[string]bool{} // import names of real-component packages
		for _, imp := range f.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			if p != realPrefix && !strings.HasPrefix(p, realPrefix+"/") {
				continue
			}
			name := filepath.Base(p)
			if imp.Name != nil {
				name = imp.Name.Name
			}
			real[name] = true
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			dc := &decl{refs: map[string]bool{}}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.SelectorExpr:
					if id, ok := x.X.(*ast.Ident); ok && real[id.Name] {
						dc.real = true
					}
					dc.refs[x.Sel.Name] = true
				case *ast.Ident:
					dc.refs[x.Name] = true
				}
				return true
			})
			decls[fn.Name.Name] = append(decls[fn.Name.Name], dc)
			if fn.Recv == nil {
				if typ := testType(fn); typ != "" {
					tests = append(tests, Func{Dir: filepath.ToSlash(rel), Name: fn.Name.Name, Type: typ})
				}
			}
		}
	}
	// A function is real when it refers to one that is.
	for changed := true; changed; {
		changed = false
		for _, ds := range decls {
			for _, d := range ds {
				if d.real {
					continue
				}
				for ref := range d.refs {
					if anyReal(decls[ref]) {
						d.real, changed = true, true
						break
					}
				}
			}
		}
	}
	for i := range tests {
		tests[i].Kind = Unit
		if anyReal(decls[tests[i].Name]) {
			tests[i].Kind = Integration
		}
	}
	return tests, nil
}

func anyReal(ds []*decl) bool {
	for _, d := range ds {
		if d.real {
			return true
		}
	}
	return false
}

// testType returns "Test", "Benchmark" or "Fuzz" for a test function of
// that type, "" otherwise.
func testType(fn *ast.FuncDecl) string {
	params := fn.Type.Params.List
	if len(params) != 1 || fn.Type.Results != nil {
		return ""
	}
	star, ok := params[0].Type.(*ast.StarExpr)
	if !ok {
		return ""
	}
	sel, ok := star.X.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	for _, t := range []struct{ prefix, param string }{{"Test", "T"}, {"Benchmark", "B"}, {"Fuzz", "F"}} {
		name := strings.TrimPrefix(fn.Name.Name, t.prefix)
		if name != fn.Name.Name && sel.Sel.Name == t.param && (name == "" || !isLower(name[0])) {
			return t.prefix
		}
	}
	return ""
}

func isLower(b byte) bool { return 'a' <= b && b <= 'z' }
