package description

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/description/generic"
)

func TestGenericConstants(t *testing.T) {
	for _, c := range [][2]string{
		{generic.KindApp, mlsysopsv1.KindApp},
		{generic.KindNode, mlsysopsv1.KindNode},
		{generic.KindCluster, mlsysopsv1.KindCluster},
		{generic.KindContinuum, mlsysopsv1.KindContinuum},
		{generic.KindDatacenter, mlsysopsv1.KindDatacenter},
		{generic.APIVersion, mlsysopsv1.SchemeGroupVersion.String()},
	} {
		if c[0] != c[1] {
			t.Errorf("generic has %q where internal/api/v1 has %q", c[0], c[1])
		}
	}
	errs := generic.ValidateLabels(field.NewPath("labels"), []string{"gpu", "gpu:true"})
	if len(errs) != 1 || !strings.Contains(errs[0].Detail, mlsysopsv1.LabelUserPrefix+"gpu ") {
		t.Errorf("duplicate label: %v, want the key %sgpu", errs, mlsysopsv1.LabelUserPrefix)
	}
}

// TestLoadOwnMatchesParse checks that the node agent's light loader
// (generic.LoadOwn) accepts and rejects the system descriptions of
// testdata/ and descriptions/ as Parse does, with the same problems, and
// reads the same description.
func TestLoadOwnMatchesParse(t *testing.T) {
	inputs, err := filepath.Glob("testdata/*.input.y*ml")
	if err != nil {
		t.Fatal(err)
	}
	repo, err := filepath.Glob("../../descriptions/*/*.yaml")
	if err != nil || len(repo) == 0 {
		t.Fatalf("no repository descriptions: %v", err)
	}
	for _, in := range append(inputs, repo...) {
		data, err := os.ReadFile(in)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.SplitN(filepath.Base(in), ".", 2)[0]
		if c, _ := generic.Check(data, FormatAuto, "", func(interface{}) (string, field.ErrorList) { return "", nil }); c != nil && c.Kind == mlsysopsv1.KindApp {
			continue // applications are not system descriptions
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, name+".yaml")
			if err := os.WriteFile(file, data, 0o644); err != nil {
				t.Fatal(err)
			}
			obj, errs := Parse(file, data)
			kind := mlsysopsv1.KindNode
			if obj != nil {
				kind = KindOf(obj)
			}
			d, err := generic.LoadOwn(dir, name, kind)
			if len(errs) > 0 {
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("Parse found %d problems, LoadOwn returned %v", len(errs), err)
				}
				if diff := cmp.Diff(ProblemsFrom(file, errs), e.Problems); diff != "" {
					t.Errorf("problems (-Parse +LoadOwn):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse accepted the description, LoadOwn: %v", err)
			}
			if d.Name != obj.GetName() {
				t.Errorf("name %q, Parse: %q", d.Name, obj.GetName())
			}
			// The spec LoadOwn reads decodes into the one Parse returns.
			light := newObject(kind)
			data, err = json.Marshal(map[string]interface{}{"spec": d.Spec})
			if err == nil {
				err = json.Unmarshal(data, light)
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(specOf(obj), specOf(light)); diff != "" {
				t.Errorf("spec (-Parse +LoadOwn):\n%s", diff)
			}
		})
	}
}

func specOf(obj Object) interface{} {
	switch o := obj.(type) {
	case *mlsysopsv1.MLSysOpsNode:
		return o.Spec
	case *mlsysopsv1.MLSysOpsCluster:
		return o.Spec
	case *mlsysopsv1.MLSysOpsContinuum:
		return o.Spec
	case *mlsysopsv1.MLSysOpsDatacenter:
		return o.Spec
	}
	return nil
}
