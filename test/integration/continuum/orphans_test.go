package continuum_test

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mlsysops-go/mlsysops/agents/continuum"
	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/members"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
)

// TestOrphanedMemberCopyDeleted: a member's copy of an application that
// Karmada no longer has (Karmada left it behind, as the chaos soak saw
// after a create retried while the member's API server was down) is
// deleted by the continuum's sweep once the grace has passed, through
// Karmada's cluster proxy, by its uid; a copy whose application Karmada
// has, and one applied to the member by hand (not Karmada's), are kept.
func TestOrphanedMemberCopyDeleted(t *testing.T) {
	env := testbed.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, kc, log := intakeDeps(t, env, "orphans")
	scheme, _ := continuum.Scheme()
	member, err := client.New(env.RESTConfig(t, "cloud-1"), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	suffix := rand.String(5)
	copyOf := func(name string, managed bool) *mlsysopsv1.MLSysOpsApp {
		a := &mlsysopsv1.MLSysOpsApp{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: mlsysopsv1.Namespace}}
		if managed {
			a.Labels = map[string]string{continuum.LabelKarmadaManaged: "true"}
		}
		a.Spec.Name = name
		a.Spec.Components = []mlsysopsv1.Component{{Metadata: mlsysopsv1.ComponentMetadata{Name: "c"},
			Containers: []mlsysopsv1.Container{{Image: "registry.example.org/c:1"}}}}
		if err := member.Create(ctx, a); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = member.Delete(context.Background(), a) })
		return a
	}
	orphan := copyOf("orphan-"+suffix, true)
	kept := copyOf("kept-"+suffix, true)
	byHand := copyOf("byhand-"+suffix, false)
	// kept's application is in Karmada (bound to the applications'
	// policy; no continuum of this test places it, and wherever one of
	// another package sharing the testbed does, the copy stays).
	tmpl := &mlsysopsv1.MLSysOpsApp{ObjectMeta: metav1.ObjectMeta{Name: kept.Name, Namespace: mlsysopsv1.Namespace}, Spec: kept.Spec}
	if err := kc.Create(ctx, tmpl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kc.Delete(context.Background(), tmpl) })

	reader, err := members.NewReader(env.RESTConfig(t, testbed.ContextKarmada))
	if err != nil {
		t.Fatal(err)
	}
	// A delete by a uid that is not the copy's is refused.
	if err := reader.DeleteApp(ctx, "cloud-1", orphan.Name, "not-its-uid"); !apierrors.IsConflict(err) {
		t.Errorf("delete by a stale uid: %v; want a conflict", err)
	}
	now := time.Now()
	o := &continuum.OrphanSweeper{Karmada: kc, Members: reader, Grace: time.Minute, Log: log, Now: func() time.Time { return now }}
	if deleted, err := o.Sweep(ctx); err != nil || len(deleted) != 0 {
		t.Fatalf("first sweep: deleted %v, %v; want nothing yet (the grace)", deleted, err)
	}
	now = now.Add(61 * time.Second)
	deleted, err := o.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := "cloud-1/" + orphan.Name
	found := false
	for _, d := range deleted {
		found = found || d == want
		if d == "cloud-1/"+kept.Name || d == "cloud-1/"+byHand.Name {
			t.Errorf("deleted %s", d)
		}
	}
	if !found {
		t.Errorf("deleted %v; want %s among them", deleted, want)
	}
	if err := member.Get(ctx, client.ObjectKeyFromObject(orphan), &mlsysopsv1.MLSysOpsApp{}); !apierrors.IsNotFound(err) {
		t.Errorf("the orphaned copy in cloud-1: %v; want it gone", err)
	}
	for _, a := range []*mlsysopsv1.MLSysOpsApp{kept, byHand} {
		if err := member.Get(ctx, client.ObjectKeyFromObject(a), &mlsysopsv1.MLSysOpsApp{}); err != nil {
			t.Errorf("%s in cloud-1: %v; want it kept", a.Name, err)
		}
	}
}
