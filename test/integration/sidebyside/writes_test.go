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

// writes counts the requests every apiserver (Karmada's and each
// member's) has served, by "apiserver verb resource[/subresource]": what
// a run costs the control planes, beside its time. It holds the mutating
// requests and the reads (GET and LIST; watches are long-running and
// counted once each); only and reading split them.
type writes map[string]float64

// mutating is whether a verb writes.
func mutating(verb string) bool {
	switch verb {
	case "POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION":
		return true
	}
	return false
}

// split returns the mutating requests and the reads, each with its total,
// and the seconds the apiservers spent serving each kind of request
// (apiserver_request_duration_seconds: under a saturated CPU, where their
// time went).
func (w writes) split() (wr writes, wrote float64, rd writes, read float64, secs writes) {
	wr, rd, secs = writes{}, writes{}, writes{}
	for k, v := range w {
		if t, ok := strings.CutPrefix(k, secondsKey); ok {
			secs[t] = v
		} else if f := strings.Fields(k); len(f) > 1 && mutating(f[1]) {
			wr[k] = v
			wrote += v
		} else {
			rd[k] = v
			read += v
		}
	}
	return wr, wrote, rd, read, secs
}

// perServer sums the counts by apiserver (the first word of a key), per
// application: "karmada 30.1, cloud-01 15.2".
func (w writes) perServer(n int) string {
	sums := map[string]float64{}
	for k, v := range w {
		server, _, _ := strings.Cut(k, " ")
		sums[server] += v
	}
	names := make([]string, 0, len(sums))
	for s := range sums {
		names = append(names, s)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, s := range names {
		parts[i] = fmt.Sprintf("%s %.1f", s, sums[s]/float64(n))
	}
	return strings.Join(parts, ", ")
}

// secondsKey prefixes the keys of served seconds in writes.
const secondsKey = "seconds "

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
			metric, body, ok := strings.Cut(line, "{")
			if !ok || (metric != "apiserver_request_total" && metric != "apiserver_request_duration_seconds_sum") {
				continue
			}
			labels := map[string]string{}
			body = body[:strings.LastIndexByte(body, '}')]
			for _, kv := range strings.Split(body, ",") {
				k, v, _ := strings.Cut(kv, "=")
				labels[k] = strings.Trim(v, `"`)
			}
			if v := labels["verb"]; !mutating(v) && v != "GET" && v != "LIST" {
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
			key := name + " " + labels["verb"] + " " + res
			if c := labels["code"]; c != "" && c[0] != '2' {
				// Refused requests (conflicts, not found) apart.
				key += " " + c
			}
			if metric != "apiserver_request_total" {
				key = secondsKey + key
			}
			out[key] += v
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
func (w writes) top(n int) string { return w.largest(n, "%s=%.0f") }

// seconds describes the largest served times.
func (w writes) seconds(n int) string { return w.largest(n, "%s=%.1f") }

// largest describes the n largest values, each with format.
func (w writes) largest(n int, format string) string {
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
		parts = append(parts, fmt.Sprintf(format, k, w[k]))
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

// queues is what Karmada's controllers and scheduler, and the MLSysOps
// agents' controllers, did during a run: the scheduler's attempts and
// their end-to-end time, and per controller queue the items added, their
// time waiting in the queue and being worked on. cm is keyed by process
// ("" for Karmada's controller manager, else the agent), then series.
type queues struct {
	sched map[string]float64
	cm    map[string]map[string]float64
}

// queueSeries are the work queue counters read from every process.
var queueSeries = []string{"workqueue_adds_total", "workqueue_retries_total", "workqueue_queue_duration_seconds_sum", "workqueue_work_duration_seconds_sum"}

func (h *harness) queues() queues {
	q := queues{
		sched: promCounters(h.env.KarmadaScheduler.MetricsURL, "karmada_scheduler_e2e_scheduling_duration_seconds_sum", "karmada_scheduler_e2e_scheduling_duration_seconds_count"),
		cm:    map[string]map[string]float64{"": promCounters(h.env.KarmadaControllers.MetricsURL, queueSeries...)},
	}
	for name, url := range h.agentMetrics {
		q.cm[name] = promCounters(url, queueSeries...)
	}
	return q
}

// queueStats is one controller queue's difference over a run.
type queueStats struct {
	name                       string
	adds, retries, queue, work float64
}

// String says how many items the queue took and how many were put back
// with a delay (client-go's workqueue_retries_total counts every delayed
// add: a failed pass's rate-limited retry, and a controller's own
// "again in a while"; Karmada's resource detector puts back only failed
// passes).
func (c queueStats) String() string {
	return fmt.Sprintf("%s %.0f items (%.0f requeued), %.2f s queued + %.2f s worked each", c.name, c.adds, c.retries, c.queue/c.adds, c.work/c.adds)
}

// controllers returns the queues of one process that had items since
// before, busiest first; names are prefixed with process, if any.
func controllers(now, before map[string]float64, process string) []queueStats {
	byName := map[string]*queueStats{}
	for k, v := range now {
		i := strings.Index(k, `name="`)
		if i < 0 {
			continue
		}
		name := k[i+6:]
		name = name[:strings.IndexByte(name, '"')]
		if process != "" {
			name = process + "/" + name
		}
		c := byName[name]
		if c == nil {
			c = &queueStats{name: name}
			byName[name] = c
		}
		d := v - before[k]
		switch {
		case strings.HasPrefix(k, "workqueue_adds_total"):
			c.adds += d
		case strings.HasPrefix(k, "workqueue_retries_total"):
			c.retries += d
		case strings.HasPrefix(k, "workqueue_queue_duration"):
			c.queue += d
		default:
			c.work += d
		}
	}
	var out []queueStats
	for _, c := range byName {
		if c.adds > 0 {
			out = append(out, *c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].work+out[i].queue > out[j].work+out[j].queue })
	return out
}

// since describes the difference: Karmada's scheduler, then its busiest
// controller queues, then the agents' controller queues.
func (q queues) since(before queues) string {
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
	parts := []string{fmt.Sprintf("scheduler %.0f attempts, %.2f s each", n, s/max(n, 1))}
	for i, c := range controllers(q.cm[""], before.cm[""], "") {
		if i == 6 {
			break
		}
		parts = append(parts, c.String())
	}
	out := strings.Join(parts, "; ")
	var agents []string
	for process, m := range q.cm {
		if process == "" {
			continue
		}
		for _, c := range controllers(m, before.cm[process], process) {
			agents = append(agents, c.String())
		}
	}
	if len(agents) > 0 {
		sort.Strings(agents)
		out += "; agents: " + strings.Join(agents, "; ")
	}
	return out
}
