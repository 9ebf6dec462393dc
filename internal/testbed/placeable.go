package testbed

import (
	"bytes"
	"context"
	"fmt"
	"os"
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

// detectorLine is what Karmada's resource detector logs when it starts
// following a kind of resource templates: it looks for new APIs every
// 30 s (v1.13), so an application made in the seconds after the MLSysOps
// API was installed waits up to that long before Karmada binds it.
const detectorLine = "Setup informer for mlsysops.eu/v1, Resource=mlsysopsapps"

// waitDetector waits until Karmada's resource detector follows
// MLSysOpsApps, from the controller manager's log: `make up` returns when
// the first application is taken at once. Past timeout it says so and
// goes on (the detector's next look will find the API).
func (tb *Testbed) waitDetector(ctx context.Context, timeout time.Duration) {
	file := tb.l.path("logs", "karmada-controller-manager.log")
	start := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		b, err := os.ReadFile(file)
		return err == nil && detectorFollows(b), nil
	})
	if err != nil {
		tb.progress("Karmada's resource detector did not follow MLSysOpsApps within %s (see %s): the first application waits for its next look", "placement", timeout, tb.rel(file))
		return
	}
	tb.progress("Karmada's resource detector follows MLSysOpsApps (waited %.1fs)", "placement", time.Since(start).Seconds())
}

// detectorFollows reports whether the log of the controller manager's
// current run (after the testbed's last start marker) has detectorLine.
func detectorFollows(log []byte) bool {
	if i := bytes.LastIndex(log, []byte("\n==== ")); i >= 0 {
		log = log[i:]
	}
	return bytes.Contains(log, []byte(detectorLine))
}
