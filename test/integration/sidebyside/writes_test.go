package sidebyside_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
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

// promCounters reads the counters of a Prometheus endpoint whose names
// start with one of prefixes, by full series ("name{labels}").
func promCounters(url string, prefixes ...string) map[string]float64 {
	out := map[string]float64{}
	resp, err := http.Get(url)
	if err != nil {
		return out
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		match := false
		for _, p := range prefixes {
			if strings.HasPrefix(line, p) {
				match = true
			}
		}
		i := strings.LastIndexByte(line, ' ')
		if !match || i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// karmadaQueues is what Karmada's controllers and scheduler did during a
// run: the scheduler's attempts and their end-to-end time, and per
// controller queue the items added, their time waiting in the queue and
// being worked on.
type karmadaQueues struct {
	sched, cm map[string]float64
}

func (h *harness) karmadaQueues() karmadaQueues {
	return karmadaQueues{
		sched: promCounters(h.env.KarmadaScheduler.MetricsURL, "karmada_scheduler_e2e_scheduling_duration_seconds_sum", "karmada_scheduler_e2e_scheduling_duration_seconds_count"),
		cm:    promCounters(h.env.KarmadaControllers.MetricsURL, "workqueue_adds_total", "workqueue_queue_duration_seconds_sum", "workqueue_work_duration_seconds_sum"),
	}
}

// since describes the difference: the scheduler's, then the busiest
// controller queues.
func (q karmadaQueues) since(before karmadaQueues) string {
	sum := func(m, b map[string]float64, prefix string) float64 {
		t := 0.0
		for k, v := range m {
			if strings.HasPrefix(k, prefix) {
				t += v - b[k]
			}
		}
		return t
	}
	n := sum(q.sched, before.sched, "karmada_scheduler_e2e_scheduling_duration_seconds_count")
	s := sum(q.sched, before.sched, "karmada_scheduler_e2e_scheduling_duration_seconds_sum")
	type ctl struct {
		name              string
		adds, queue, work float64
	}
	byName := map[string]*ctl{}
	for k, v := range q.cm {
		i := strings.Index(k, `name="`)
		if i < 0 {
			continue
		}
		name := k[i+6:]
		name = name[:strings.IndexByte(name, '"')]
		c := byName[name]
		if c == nil {
			c = &ctl{name: name}
			byName[name] = c
		}
		d := v - before.cm[k]
		switch {
		case strings.HasPrefix(k, "workqueue_adds_total"):
			c.adds += d
		case strings.HasPrefix(k, "workqueue_queue_duration"):
			c.queue += d
		default:
			c.work += d
		}
	}
	var ctls []*ctl
	for _, c := range byName {
		if c.adds > 0 {
			ctls = append(ctls, c)
		}
	}
	sort.Slice(ctls, func(i, j int) bool { return ctls[i].work+ctls[i].queue > ctls[j].work+ctls[j].queue })
	parts := []string{fmt.Sprintf("scheduler %.0f attempts, %.2f s each", n, s/max(n, 1))}
	for i, c := range ctls {
		if i == 6 {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.0f items, %.2f s queued + %.2f s worked each", c.name, c.adds, c.queue/c.adds, c.work/c.adds))
	}
	return strings.Join(parts, "; ")
}
