package testbed

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	karmadaclientset "github.com/karmada-io/karmada/pkg/generated/clientset/versioned"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

// waitPlaceable waits until Karmada sees the MLSysOps API in every member
// cluster: the continuum agent installs it and Karmada propagates it, and
// until Karmada's next look at a member, applications cannot be placed
// there. `make up` returns once an application can be placed at once.
func (tb *Testbed) waitPlaceable(ctx context.Context, timeout time.Duration) error {
	cfg, err := tb.karmadaConfig()
	if err != nil {
		return err
	}
	return WaitPlaceable(ctx, cfg, tb.clusters, timeout)
}

// WaitPlaceable waits until Karmada (at cfg) sees the MLSysOps API in
// every cluster named: until then applications fit nowhere.
func WaitPlaceable(ctx context.Context, cfg *rest.Config, clusters []string, timeout time.Duration) error {
	kc, err := karmadaclientset.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var missing []string
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := kc.ClusterV1alpha1().Clusters().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		has := map[string]bool{}
		for _, c := range list.Items {
			for _, e := range c.Status.APIEnablements {
				for _, r := range e.Resources {
					if e.GroupVersion == mlsysopsv1.SchemeGroupVersion.String() && r.Kind == "MLSysOpsApp" {
						has[c.Name] = true
					}
				}
			}
		}
		missing = missing[:0]
		for _, name := range clusters {
			if !has[name] {
				missing = append(missing, name)
			}
		}
		return len(missing) == 0, nil
	})
	if err != nil {
		sort.Strings(missing)
		return fmt.Errorf("Karmada does not see the MLSysOps API in %s (see logs/agent-continuum-*.log and logs/karmada-controller-manager.log)", strings.Join(missing, ", "))
	}
	return nil
}
