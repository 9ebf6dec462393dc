package v1_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

func TestAddToScheme(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := mlsysopsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{
		mlsysopsv1.KindApp, mlsysopsv1.KindNode, mlsysopsv1.KindCluster, mlsysopsv1.KindContinuum, mlsysopsv1.KindDatacenter,
	} {
		for _, k := range []string{kind, kind + "List"} {
			gvk := mlsysopsv1.SchemeGroupVersion.WithKind(k)
			if _, err := scheme.New(gvk); err != nil {
				t.Errorf("scheme.New(%s): %v", gvk, err)
			}
		}
	}
	if got := mlsysopsv1.Resource(mlsysopsv1.ResourceNodes).String(); got != "mlsysopsnodes.mlsysops.eu" {
		t.Errorf("Resource(mlsysopsnodes) = %s", got)
	}
}

func TestDeepCopyIsDeep(t *testing.T) {
	q := resource.MustParse("1")
	app := &mlsysopsv1.MLSysOpsApp{Spec: mlsysopsv1.MLSysOpsAppSpec{Components: []mlsysopsv1.Component{{
		Metadata:   mlsysopsv1.ComponentMetadata{Name: "a"},
		Containers: []mlsysopsv1.Container{{Image: "x", PlatformRequirements: &mlsysopsv1.PlatformRequirements{CPU: &mlsysopsv1.CPURequirements{Requests: &q}}}},
	}}}}
	cp := app.DeepCopyObject().(*mlsysopsv1.MLSysOpsApp)
	cp.Spec.Components[0].Metadata.Name = "b"
	cp.Spec.Components[0].Containers[0].PlatformRequirements.CPU.Requests.Set(5)
	if app.Spec.Components[0].Metadata.Name != "a" || app.Spec.Components[0].Containers[0].PlatformRequirements.CPU.Requests.Value() != 1 {
		t.Errorf("changing a deep copy changed the original")
	}
}

// TestWellKnownNames checks that every label key is a valid Kubernetes
// label key and every prefix builds valid keys.
func TestWellKnownNames(t *testing.T) {
	keys := []string{
		mlsysopsv1.LabelContinuumLayer, mlsysopsv1.LabelLayer, mlsysopsv1.LabelCluster, mlsysopsv1.LabelDatacenter,
		mlsysopsv1.LabelNodeType, mlsysopsv1.LabelOS, mlsysopsv1.LabelMobile, mlsysopsv1.LabelAvailability,
		mlsysopsv1.LabelFPGAPresent, mlsysopsv1.LabelFPGAModel, mlsysopsv1.LabelSensorPrefix + "air_quality",
		mlsysopsv1.LabelUserPrefix + "node-type", mlsysopsv1.LabelHostname, mlsysopsv1.LabelArch, mlsysopsv1.LabelKubeOS,
		mlsysopsv1.LabelGPUPresent, mlsysopsv1.LabelGPUProduct, mlsysopsv1.LabelGPUMemory, mlsysopsv1.LabelGPUCount,
		mlsysopsv1.LabelApp, mlsysopsv1.LabelComponent, string(mlsysopsv1.ResourceGPU),
	}
	seen := map[string]bool{}
	for _, k := range keys {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			t.Errorf("%q is not a valid label key: %v", k, errs)
		}
		if seen[k] {
			t.Errorf("%q is declared twice", k)
		}
		seen[k] = true
	}
}
