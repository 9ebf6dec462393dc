package sidebyside_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/mlsysops-go/mlsysops/internal/testbed"
)

// writes counts the mutating requests every apiserver (Karmada's and each
// member's) has served, by "apiserver verb resource[/subresource]": what
// a run costs the control planes, beside its time.
type writes map[string]float64

func (h *harness) writes(tb testing.TB) writes {
	tb.Helper()
	out := writes{}
	servers := map[string]kubernetes.Interface{}
	for c, cs := range h.members {
		servers[c] = cs
	}
	ks, err := kubernetes.NewForConfig(h.env.RESTConfig(tb, testbed.ContextKarmada))
	if err != nil {
		tb.Fatal(err)
	}
	servers["karmada"] = ks
	for name, cs := range servers {
		raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
		if err != nil {
			tb.Fatalf("metrics of %s: %v", name, err)
		}
		for _, line := range strings.Split(string(raw), "\n") {
			if !strings.HasPrefix(line, "apiserver_request_total{") {
				continue
			}
			labels := map[string]string{}
			body := line[len("apiserver_request_total{"):strings.LastIndexByte(line, '}')]
			for _, kv := range strings.Split(body, ",") {
				k, v, _ := strings.Cut(kv, "=")
				labels[k] = strings.Trim(v, `"`)
			}
			switch labels["verb"] {
			case "POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION":
			default:
				continue
			}
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil {
				continue
			}
			res := labels["resource"]
			if s := labels["subresource"]; s != "" {
				res += "/" + s
			}
			out[name+" "+labels["verb"]+" "+res] += v
		}
	}
	return out
}

// since returns the writes between two readings, with their total.
func (w writes) since(before writes) (writes, float64) {
	out := writes{}
	total := 0.0
	for k, v := range w {
		if d := v - before[k]; d > 0 {
			out[k] = d
			total += d
		}
	}
	return out, total
}

// top describes the largest counts.
func (w writes) top(n int) string {
	keys := make([]string, 0, len(w))
	for k := range w {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return w[keys[i]] > w[keys[j]] })
	var parts []string
	for i, k := range keys {
		if i == n {
			break
		}
		parts = append(parts, fmt.Sprintf("%s=%.0f", k, w[k]))
	}
	return strings.Join(parts, ", ")
}
