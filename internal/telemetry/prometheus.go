package telemetry

import (
	"fmt"
	"sort"

	"github.com/prometheus/client_golang/prometheus"
)

// nodeMetric describes one node_* series family for Prometheus.
type nodeMetric struct {
	help   string
	labels []string
}

// nodeMetrics lists every name Snapshot.Readings produces.
var nodeMetrics = map[string]nodeMetric{
	"node_cpu_cores":                           {"Number of CPUs.", nil},
	"node_cpu_utilisation_ratio":               {"Busy fraction of all CPUs since the previous sample.", nil},
	"node_cpu_core_utilisation_ratio":          {"Busy fraction of one CPU since the previous sample.", []string{"cpu"}},
	"node_load1":                               {"1m load average.", nil},
	"node_load5":                               {"5m load average.", nil},
	"node_load15":                              {"15m load average.", nil},
	"node_procs_running":                       {"Processes in runnable state.", nil},
	"node_memory_MemTotal_bytes":               {"Memory information field MemTotal_bytes.", nil},
	"node_memory_MemFree_bytes":                {"Memory information field MemFree_bytes.", nil},
	"node_memory_MemAvailable_bytes":           {"Memory information field MemAvailable_bytes.", nil},
	"node_memory_Buffers_bytes":                {"Memory information field Buffers_bytes.", nil},
	"node_memory_Cached_bytes":                 {"Memory information field Cached_bytes.", nil},
	"node_memory_SwapTotal_bytes":              {"Memory information field SwapTotal_bytes.", nil},
	"node_memory_SwapFree_bytes":               {"Memory information field SwapFree_bytes.", nil},
	"node_memory_utilisation_ratio":            {"Fraction of memory not available (1 - MemAvailable/MemTotal).", nil},
	"node_filesystem_size_bytes":               {"File system size in bytes.", []string{"mountpoint"}},
	"node_filesystem_free_bytes":               {"File system free space in bytes.", []string{"mountpoint"}},
	"node_filesystem_avail_bytes":              {"File system space available to non-root users in bytes.", []string{"mountpoint"}},
	"node_disk_read_bytes_per_second":          {"Bytes read per second since the previous sample.", []string{"device"}},
	"node_disk_written_bytes_per_second":       {"Bytes written per second since the previous sample.", []string{"device"}},
	"node_disk_reads_per_second":               {"Reads completed per second since the previous sample.", []string{"device"}},
	"node_disk_writes_per_second":              {"Writes completed per second since the previous sample.", []string{"device"}},
	"node_disk_io_time_ratio":                  {"Fraction of time the device was busy since the previous sample.", []string{"device"}},
	"node_network_receive_bytes_per_second":    {"Bytes received per second since the previous sample.", []string{"device"}},
	"node_network_transmit_bytes_per_second":   {"Bytes sent per second since the previous sample.", []string{"device"}},
	"node_network_receive_packets_per_second":  {"Packets received per second since the previous sample.", []string{"device"}},
	"node_network_transmit_packets_per_second": {"Packets sent per second since the previous sample.", []string{"device"}},
	"node_network_receive_errors_per_second":   {"Receive errors per second since the previous sample.", []string{"device"}},
	"node_network_transmit_errors_per_second":  {"Transmit errors per second since the previous sample.", []string{"device"}},
	"node_cpu_scaling_frequency_hertz":         {"Current scaled CPU frequency.", []string{"cpu"}},
	"node_cpu_scaling_frequency_min_hertz":     {"Minimum scaled CPU frequency.", []string{"cpu"}},
	"node_cpu_scaling_frequency_max_hertz":     {"Maximum scaled CPU frequency.", []string{"cpu"}},
	"node_gpu_utilisation_ratio":               {"GPU busy fraction (nvidia-smi utilization.gpu).", []string{"gpu", "name"}},
	"node_gpu_memory_used_bytes":               {"GPU memory used (nvidia-smi memory.used).", []string{"gpu", "name"}},
	"node_gpu_memory_total_bytes":              {"GPU memory (nvidia-smi memory.total).", []string{"gpu", "name"}},
	"node_gpu_power_watts":                     {"GPU power draw (nvidia-smi power.draw).", []string{"gpu", "name"}},
}

// nodePromCollector exports a NodeCollector's latest snapshot.
type nodePromCollector struct {
	c     *NodeCollector
	descs map[string]*prometheus.Desc
}

// Register registers a Prometheus collector that exports the latest
// snapshot as gauges. Scrapes do not sample the node: the Sampler does, so
// Prometheus sees what the policies see.
func (c *NodeCollector) Register(reg prometheus.Registerer) error {
	pc := &nodePromCollector{c: c, descs: map[string]*prometheus.Desc{}}
	for name, m := range nodeMetrics {
		pc.descs[name] = prometheus.NewDesc(name, m.help, m.labels, nil)
	}
	if err := reg.Register(pc); err != nil {
		return fmt.Errorf("register node telemetry metrics: %w", err)
	}
	return nil
}

// Describe implements prometheus.Collector.
func (p *nodePromCollector) Describe(ch chan<- *prometheus.Desc) {
	names := make([]string, 0, len(p.descs))
	for n := range p.descs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		ch <- p.descs[n]
	}
}

// Collect implements prometheus.Collector.
func (p *nodePromCollector) Collect(ch chan<- prometheus.Metric) {
	s := p.c.Latest()
	if s.Time.IsZero() {
		return
	}
	for _, r := range s.Readings() {
		d, ok := p.descs[r.Name]
		if !ok {
			continue
		}
		values := make([]string, len(nodeMetrics[r.Name].labels))
		for i, l := range nodeMetrics[r.Name].labels {
			values[i] = r.Labels[l]
		}
		m, err := prometheus.NewConstMetric(d, prometheus.GaugeValue, r.Value, values...)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(d, err)
			continue
		}
		ch <- m
	}
}
