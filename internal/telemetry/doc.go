// Package telemetry samples what an agent monitors and keeps the recent
// values for its policies.
//
// A Sampler is the agent's one monitoring loop. Sources (the node's own
// /proc and /sys readings, a Prometheus endpoint, ...) are added to it; at
// every tick it collects them and appends the readings to a Store, which
// keeps a bounded history per series for policies to query. The tick is
// the smallest interval any requester (the agent's default, a policy's
// system_scrape_interval, a parent agent) asks for; removing a requester
// brings the interval back to the smallest of the others, and removing a
// requester twice is harmless.
//
// NodeCollector reads the node's CPU (per-core and total utilisation from
// /proc/stat deltas, frequencies from cpufreq in sysfs), load, memory,
// file systems (statfs), disk and network rates (/proc/diskstats,
// /proc/net/dev) and GPUs (nvidia-smi, when present). Its readings go to
// the Store as node_* series (node_load1, node_memory_MemAvailable_bytes,
// ... named as the Prometheus node exporter names them where it has the
// same metric), to Prometheus through Register, and to reports as a
// Snapshot. The /proc and /sys roots are configurable so that the agent can
// run in a container with the host's mounted elsewhere, and tests can use
// fixture trees.
package telemetry
