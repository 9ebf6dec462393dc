package commands

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mlsysops-go/mlsysops/internal/description"
)

// ValidateOptions are the options of mls validate.
type ValidateOptions struct {
	// Output is the report format: text or json.
	Output string

	streams IOStreams
}

// NewValidateCommand builds mls validate.
func NewValidateCommand(streams IOStreams) *cobra.Command {
	o := &ValidateOptions{Output: "text", streams: streams}
	cmd := &cobra.Command{
		Use:   "validate FILE|DIR...",
		Short: "Check application and system descriptions",
		Long: `Check MLSysOps application and system descriptions, in the upstream form
(one root key such as MLSysOpsNode:) or as custom resources.

A file may hold any kind; the kind is detected. A directory laid out as
continuum/, clusters/ and nodes/ (datacenters/ optional) is loaded as one set
and cross-checked: every cluster the continuum lists and every node a
cluster lists must be described, and node cluster_ids must agree. Other
directories have each of their .yaml, .yml and .json files checked, and are
cross-checked too when they hold no application.

Every problem is printed with its file and field path; the exit code is 1
when there is any.`,
		Example: `  mls validate descriptions/
  mls validate examples/apps/gpu-inference.yaml
  mls validate -o json app.yaml`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(args)
		},
	}
	cmd.Flags().StringVarP(&o.Output, "output", "o", o.Output, "report format: text or json")
	return cmd
}

// Validate checks the options.
func (o *ValidateOptions) Validate() error {
	switch o.Output {
	case "text", "json":
		return nil
	}
	return fmt.Errorf("--output must be text or json, not %q", o.Output)
}

// checked is one valid description in the report.
type checked struct {
	File string `json:"file"`
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// validateReport is what mls validate -o json prints.
type validateReport struct {
	Valid    []checked             `json:"valid"`
	Problems []description.Problem `json:"problems"`
}

// Run checks every path and reports.
func (o *ValidateOptions) Run(paths []string) error {
	report := validateReport{Valid: []checked{}, Problems: []description.Problem{}}
	for _, p := range paths {
		valid, problems := checkPath(p)
		report.Valid = append(report.Valid, valid...)
		report.Problems = append(report.Problems, problems...)
	}
	if o.Output == "json" {
		enc := json.NewEncoder(o.streams.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(report); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
	} else {
		for _, c := range report.Valid {
			fmt.Fprintf(o.streams.Out, "ok       %s (%s %s)\n", c.File, c.Kind, c.Name)
		}
		for _, p := range report.Problems {
			fmt.Fprintf(o.streams.Out, "problem  %s\n", p.String())
		}
		if n := len(report.Problems); n > 0 {
			fmt.Fprintf(o.streams.ErrOut, "%d problem(s) found\n", n)
		}
	}
	if len(report.Problems) > 0 {
		return errReported
	}
	return nil
}

// checkPath validates one file or directory.
func checkPath(path string) ([]checked, []description.Problem) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, []description.Problem{{File: path, Type: "FieldValueNotFound", Message: err.Error()}}
	}
	if !info.IsDir() {
		obj, err := description.LoadFile(path)
		if err != nil {
			return nil, description.ProblemsOf(err)
		}
		return []checked{checkedOf(path, obj)}, nil
	}
	if hasLayout(path) {
		return checkSet(path)
	}
	files, err := descriptionFiles(path)
	if err != nil {
		return nil, []description.Problem{{File: path, Type: "InternalError", Message: err.Error()}}
	}
	if len(files) == 0 {
		return nil, []description.Problem{{File: path, Type: "FieldValueRequired", Message: "holds no .yaml, .yml or .json file"}}
	}
	var (
		valid    []checked
		problems []description.Problem
		apps     bool
	)
	for _, f := range files {
		obj, err := description.LoadFile(f)
		if err != nil {
			problems = append(problems, description.ProblemsOf(err)...)
			continue
		}
		apps = apps || description.KindOf(obj) == "MLSysOpsApp"
		valid = append(valid, checkedOf(f, obj))
	}
	if len(problems) == 0 && !apps {
		// A flat folder of system descriptions, such as a ConfigMap's
		// content: check it as a set too.
		return checkSet(path)
	}
	return valid, problems
}

func checkSet(dir string) ([]checked, []description.Problem) {
	set, err := description.LoadDir(dir)
	if err != nil {
		return nil, description.ProblemsOf(err)
	}
	var out []checked
	for _, obj := range set.Objects() {
		out = append(out, checked{File: set.FileOf(obj), Kind: description.KindOf(obj), Name: obj.GetName()})
	}
	return out, nil
}

func checkedOf(file string, obj description.Object) checked {
	return checked{File: file, Kind: description.KindOf(obj), Name: obj.GetName()}
}

// hasLayout tells whether dir is laid out as continuum/, clusters/,
// nodes/ or datacenters/.
func hasLayout(dir string) bool {
	for _, sub := range []string{"continuum", "clusters", "nodes", "datacenters"} {
		if st, err := os.Stat(filepath.Join(dir, sub)); err == nil && st.IsDir() {
			return true
		}
	}
	return false
}

// descriptionFiles lists the description files at the top of dir.
func descriptionFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", dir, err)
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue
		}
		switch strings.ToLower(filepath.Ext(name)) {
		case ".yaml", ".yml", ".json":
		default:
			continue
		}
		path := filepath.Join(dir, name)
		if st, err := os.Stat(path); err != nil || st.IsDir() {
			continue
		}
		out = append(out, path)
	}
	sort.Strings(out)
	return out, nil
}
