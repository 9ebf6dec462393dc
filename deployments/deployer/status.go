package deployer

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Status prints what is installed in each API and the readiness of every
// workload, per member cluster for the agents. It returns an error when
// nothing is installed or a workload is not ready.
func (d *Deployer) Status(ctx context.Context, w io.Writer) error {
	if d.cl == nil {
		cl, err := Connect(ctx, d.opts)
		if err != nil {
			return err
		}
		d.cl = cl
	}
	if p, err := NewPlan(d.opts); err == nil {
		d.plan = p
	}
	total, notReady := 0, 0
	for _, c := range []*Cluster{d.cl.Host, d.cl.Karmada} {
		objs, err := c.Owned(ctx)
		if err != nil {
			return err
		}
		total += len(objs)
		kinds := map[string]int{}
		for _, o := range objs {
			kinds[o.GetKind()]++
		}
		var parts []string
		for k, n := range kinds {
			parts = append(parts, fmt.Sprintf("%d %s", n, k))
		}
		sort.Strings(parts)
		fmt.Fprintf(w, "%s API (%s): %d objects: %s\n", c.Name, c.Config.Host, len(objs), strings.Join(parts, ", "))
		for _, wl := range workloads(c, objs) {
			st, err := d.workloadState(ctx, wl)
			if err != nil {
				st = state{Summary: "unknown: " + err.Error()}
			}
			mark := "ready"
			if !st.Ready {
				mark = "NOT READY"
				notReady++
			}
			fmt.Fprintf(w, "  %-9s %s: %s\n", mark, workloadName(wl.obj), st.Summary)
			for _, p := range st.Problems {
				fmt.Fprintf(w, "            %s\n", p)
			}
		}
	}
	switch {
	case total == 0:
		return fmt.Errorf("MLSysOps is not installed in %s nor %s", d.cl.Host.Config.Host, d.cl.Karmada.Config.Host)
	case notReady > 0:
		return fmt.Errorf("%d workloads not ready", notReady)
	}
	return nil
}

func workloadName(o *unstructured.Unstructured) string {
	return o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
}
