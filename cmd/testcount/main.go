// Command testcount counts the module's test functions by kind (unit, or
// integration against real components) and keeps the counts in the
// README true:
//
//	go run ./cmd/testcount                    # print the counts
//	go run ./cmd/testcount -v                 # and every test with its kind
//	go run ./cmd/testcount --write README.md  # rewrite its <!-- testcount --> section
//	go run ./cmd/testcount --check README.md  # fail when that section is stale
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/mlsysops-go/mlsysops/internal/testcount"
)

// module is this module's path, under which internal/testbed is found.
const module = "github.com/mlsysops-go/mlsysops"

func main() {
	write := flag.String("write", "", "Markdown file whose testcount section to rewrite")
	check := flag.String("check", "", "Markdown file whose testcount section must be current")
	verbose := flag.Bool("v", false, "list every test function with its kind")
	flag.Parse()
	if err := run(*write, *check, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "testcount:", err)
		os.Exit(1)
	}
}

func run(write, check string, verbose bool) error {
	funcs, err := testcount.Scan(".", module)
	if err != nil {
		return err
	}
	if verbose {
		for _, f := range funcs {
			fmt.Printf("%-11s %-9s %s.%s\n", f.Kind, f.Type, f.Dir, f.Name)
		}
	}
	for _, file := range []string{write, check} {
		if file == "" {
			continue
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		doc, err := testcount.Render(string(b), funcs)
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		if file == check {
			if doc != string(b) {
				return fmt.Errorf("the test counts in %s are stale: run make test-count", file)
			}
			continue
		}
		if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
			return err
		}
	}
	fmt.Print(testcount.Summary(funcs))
	return nil
}
