// Command vulnreport reads govulncheck's JSON output on standard input and
// fails unless every vulnerability the module's code calls is accepted,
// with its reason, in the accepted-findings file (and every acceptance
// still matches a finding):
//
//	govulncheck -format json ./... | go run ./cmd/vulnreport --accepted hack/vulncheck-accepted.yaml
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/mlsysops-go/mlsysops/internal/vulnreport"
)

func main() {
	acceptedFile := flag.String("accepted", "", "YAML list of accepted findings (id, module, reason)")
	flag.Parse()
	if err := run(*acceptedFile); err != nil {
		fmt.Fprintln(os.Stderr, "vulnreport:", err)
		os.Exit(1)
	}
}

func run(acceptedFile string) error {
	var accepted []vulnreport.Acceptance
	if acceptedFile != "" {
		data, err := os.ReadFile(acceptedFile)
		if err != nil {
			return err
		}
		if accepted, err = vulnreport.ReadAccepted(data); err != nil {
			return fmt.Errorf("%s: %w", acceptedFile, err)
		}
	}
	scan, err := vulnreport.Read(os.Stdin)
	if err != nil {
		return err
	}
	v := vulnreport.Judge(scan, accepted)
	vulnreport.Print(os.Stdout, scan, v, accepted)
	if !v.Clean() {
		return fmt.Errorf("%d vulnerabilities called and not accepted, %d stale acceptances", len(v.Failing), len(v.Stale))
	}
	return nil
}
