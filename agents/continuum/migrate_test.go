package continuum

import (
	"slices"
	"testing"

	workv1alpha1 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha1"
	workv1alpha2 "github.com/karmada-io/karmada/pkg/apis/work/v1alpha2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

// TestWorksPlacement: the clusters whose copies an application's Works
// hand over to its binding are those of its Works not being deleted and
// of those being deleted with their copies preserved; a Work being
// deleted with its copy is not handed over; once a move began (a Work
// being deleted with its copy preserved) the placement recorded on the
// binding stands, the Works gone since being in it.
func TestWorksPlacement(t *testing.T) {
	now := metav1.Now()
	work := func(deleting, preserve bool) *workv1alpha1.Work {
		w := &workv1alpha1.Work{}
		if deleting {
			w.DeletionTimestamp = &now
		}
		if preserve {
			w.Spec.PreserveResourcesOnDeletion = ptr(true)
		}
		return w
	}
	placed := &workv1alpha2.ResourceBinding{ObjectMeta: metav1.ObjectMeta{
		Annotations: map[string]string{mlsysopsv1.AnnotationPlacement: "cloud,edge,fog"},
	}}
	unplaced := &workv1alpha2.ResourceBinding{}
	for _, c := range []struct {
		name  string
		works map[string]*workv1alpha1.Work
		rb    *workv1alpha2.ResourceBinding
		want  []string
	}{
		{"works in place", map[string]*workv1alpha1.Work{"edge": work(false, false), "cloud": work(false, false)}, unplaced, []string{"cloud", "edge"}},
		{"the Works win over an older record", map[string]*workv1alpha1.Work{"edge": work(false, false)}, placed, []string{"edge"}},
		{"marked, not deleted yet", map[string]*workv1alpha1.Work{"edge": work(false, true)}, unplaced, []string{"edge"}},
		{"a removal from a cluster", map[string]*workv1alpha1.Work{"edge": work(true, false), "cloud": work(false, false)}, placed, []string{"cloud"}},
		{"only removals", map[string]*workv1alpha1.Work{"edge": work(true, false)}, unplaced, nil},
		{"a move cut short", map[string]*workv1alpha1.Work{"edge": work(true, true)}, placed, []string{"cloud", "edge", "fog"}},
		{"a move cut short, no record", map[string]*workv1alpha1.Work{"edge": work(true, true), "cloud": work(false, false)}, unplaced, []string{"cloud", "edge"}},
	} {
		if got := worksPlacement(c.works, c.rb); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestMovedClusters: an application moved from its binding to Works goes
// on the clusters the binding is scheduled on; placed but not scheduled
// (a move to the bindings cut short), on those of its placement; neither,
// on none (the placement controller places it).
func TestMovedClusters(t *testing.T) {
	scheduled := &workv1alpha2.ResourceBinding{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{mlsysopsv1.AnnotationPlacement: "cloud,edge"}},
		Spec:       workv1alpha2.ResourceBindingSpec{Clusters: []workv1alpha2.TargetCluster{{Name: "edge"}}},
	}
	placedOnly := &workv1alpha2.ResourceBinding{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{mlsysopsv1.AnnotationPlacement: "cloud,edge"}},
	}
	for name, c := range map[string]struct {
		rb   *workv1alpha2.ResourceBinding
		want []string
	}{
		"scheduled":             {scheduled, []string{"edge"}},
		"placed, not scheduled": {placedOnly, []string{"cloud", "edge"}},
		"neither":               {&workv1alpha2.ResourceBinding{}, nil},
	} {
		if got := movedClusters(c.rb); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", name, got, c.want)
		}
	}
}
