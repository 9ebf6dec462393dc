package testcount

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// section is the part of a Markdown document Render rewrites.
var section = regexp.MustCompile(`(?s)(<!-- testcount -->\n).*?(<!-- /testcount -->)`)

// Render rewrites the marked section of doc with the counts of funcs.
func Render(doc string, funcs []Func) (string, error) {
	if !section.MatchString(doc) {
		return "", errors.New("no <!-- testcount --> ... <!-- /testcount --> section")
	}
	body := Summary(funcs)
	return section.ReplaceAllStringFunc(doc, func(m string) string {
		g := section.FindStringSubmatch(m)
		return g[1] + body + g[2]
	}), nil
}

// Summary says how many tests of each kind there are, in all and by
// folder.
func Summary(funcs []Func) string {
	c := Count(funcs)
	n := func(typ string, k Kind) int { return c[typ][k] }
	var b strings.Builder
	fmt.Fprintf(&b, "%d test functions: **%d unit tests** of pure logic (with fakes at most) and **%d integration tests** against real components; "+
		"%d benchmarks (%d unit, %d integration) and %d fuzz tests (%d unit, %d integration) besides.\n\n",
		n("Test", Unit)+n("Test", Integration), n("Test", Unit), n("Test", Integration),
		n("Benchmark", Unit)+n("Benchmark", Integration), n("Benchmark", Unit), n("Benchmark", Integration),
		n("Fuzz", Unit)+n("Fuzz", Integration), n("Fuzz", Unit), n("Fuzz", Integration))
	byFolder := map[string]map[Kind]int{}
	for _, f := range funcs {
		if f.Type != "Test" {
			continue
		}
		folder := area(f.Dir)
		if byFolder[folder] == nil {
			byFolder[folder] = map[Kind]int{}
		}
		byFolder[folder][f.Kind]++
	}
	var folders []string
	for f := range byFolder {
		folders = append(folders, f)
	}
	sort.Strings(folders)
	b.WriteString("| folder | unit tests | integration tests |\n| --- | --- | --- |\n")
	for _, f := range folders {
		fmt.Fprintf(&b, "| `%s` | %d | %d |\n", f, byFolder[f][Unit], byFolder[f][Integration])
	}
	return b.String()
}

// area is the folder a test is counted under: the top-level folder, or
// the package under test/integration.
func area(dir string) string {
	parts := strings.Split(dir, "/")
	switch {
	case len(parts) >= 3 && parts[0] == "test" && parts[1] == "integration":
		return strings.Join(parts[:3], "/") + "/"
	case len(parts) >= 2 && parts[0] == "internal":
		return strings.Join(parts[:2], "/") + "/"
	case dir == ".":
		return "./"
	}
	return parts[0] + "/"
}
