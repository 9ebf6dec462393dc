package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"time"
)

// NodeOptions configure a NodeCollector.
type NodeOptions struct {
	// ProcRoot is where procfs is mounted. Default /proc.
	ProcRoot string
	// SysRoot is where sysfs is mounted. Default /sys.
	SysRoot string
	// Mounts are the file systems to report, by path as the agent sees
	// them (statfs). Default: "/".
	Mounts []string
	// IgnoreDevices matches block devices left out of disk rates. Default:
	// RAM disks, loop devices and partitions (as the node exporter does).
	IgnoreDevices *regexp.Regexp
	// IgnoreInterfaces matches network interfaces left out. Default: lo.
	IgnoreInterfaces *regexp.Regexp
	// NvidiaSMI is the nvidia-smi binary. Empty means look it up in PATH;
	// when it cannot be found the collector reports no GPUs.
	NvidiaSMI string
	// DisableGPU skips GPU telemetry even when nvidia-smi exists.
	DisableGPU bool
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// DefaultIgnoredDevices is the default NodeOptions.IgnoreDevices.
var DefaultIgnoredDevices = regexp.MustCompile(`^(z?ram|loop|fd|(h|s|v|xv)d[a-z]+|nvme\d+n\d+p|mmcblk\d+p)\d+$|^(z?ram|loop|fd)$`)

// Snapshot is one reading of a node, for reports and policies.
type Snapshot struct {
	Time         time.Time         `json:"time"`                    // when the sample was taken
	CPU          CPUStats          `json:"cpu"`                     // utilisation
	Load         LoadStats         `json:"load"`                    // /proc/loadavg
	Memory       MemoryStats       `json:"memory"`                  // /proc/meminfo
	Filesystems  []FilesystemStats `json:"filesystems,omitempty"`   // the configured mounts
	Disks        []DiskStats       `json:"disks,omitempty"`         // block device rates (empty on the first sample)
	Network      []NetworkStats    `json:"network,omitempty"`       // interface rates (empty on the first sample)
	CPUFrequency []CPUFrequency    `json:"cpu_frequency,omitempty"` // cpufreq, per CPU
	GPUs         []GPUStats        `json:"gpus,omitempty"`          // nvidia-smi, when present
	// RatesValid is false on the first sample: disk and network rates
	// need two readings.
	RatesValid bool `json:"rates_valid"`
	// Errors lists what could not be read (a missing file, a failing
	// nvidia-smi); the rest of the snapshot is still valid.
	Errors []string `json:"errors,omitempty"`
}

// CPUStats is CPU utilisation: the busy fraction (0..1) since the previous
// sample, or since boot on the first one.
type CPUStats struct {
	Cores       int               `json:"cores"`              // CPUs in /proc/stat
	Utilisation float64           `json:"utilisation"`        // all CPUs, 0..1
	PerCore     []CoreUtilisation `json:"per_core,omitempty"` // by CPU number
}

// CoreUtilisation is one CPU's busy fraction.
type CoreUtilisation struct {
	CPU         int     `json:"cpu"`         // CPU number
	Utilisation float64 `json:"utilisation"` // 0..1
}

// LoadStats is /proc/loadavg.
type LoadStats struct {
	Load1     float64 `json:"load1"`     // 1-minute load average
	Load5     float64 `json:"load5"`     // 5-minute load average
	Load15    float64 `json:"load15"`    // 15-minute load average
	Running   int     `json:"running"`   // runnable tasks
	Processes int     `json:"processes"` // tasks in total
}

// MemoryStats is /proc/meminfo, in bytes.
type MemoryStats struct {
	TotalBytes     uint64  `json:"total_bytes"`      // MemTotal
	FreeBytes      uint64  `json:"free_bytes"`       // MemFree
	AvailableBytes uint64  `json:"available_bytes"`  // MemAvailable (estimated on old kernels)
	UsedBytes      uint64  `json:"used_bytes"`       // TotalBytes - AvailableBytes
	BuffersBytes   uint64  `json:"buffers_bytes"`    // Buffers
	CachedBytes    uint64  `json:"cached_bytes"`     // Cached
	SwapTotalBytes uint64  `json:"swap_total_bytes"` // SwapTotal
	SwapFreeBytes  uint64  `json:"swap_free_bytes"`  // SwapFree
	Utilisation    float64 `json:"utilisation"`      // UsedBytes / TotalBytes
}

// FilesystemStats is one mounted file system.
type FilesystemStats struct {
	Mount      string `json:"mount"`       // the path given to statfs
	SizeBytes  uint64 `json:"size_bytes"`  // total size
	FreeBytes  uint64 `json:"free_bytes"`  // free, including reserved blocks
	AvailBytes uint64 `json:"avail_bytes"` // free for unprivileged users
}

// DiskStats are one block device's rates since the previous sample.
type DiskStats struct {
	Device                string  `json:"device"`                   // e.g. sda, nvme0n1
	ReadBytesPerSecond    float64 `json:"read_bytes_per_second"`    // bytes read per second
	WrittenBytesPerSecond float64 `json:"written_bytes_per_second"` // bytes written per second
	ReadsPerSecond        float64 `json:"reads_per_second"`         // reads completed per second
	WritesPerSecond       float64 `json:"writes_per_second"`        // writes completed per second
	// IOTime is the fraction of the time the device was busy.
	IOTime float64 `json:"io_time"`
}

// NetworkStats are one interface's rates since the previous sample.
type NetworkStats struct {
	Interface                string  `json:"interface"`                   // e.g. eth0
	ReceiveBytesPerSecond    float64 `json:"receive_bytes_per_second"`    // bytes received per second
	TransmitBytesPerSecond   float64 `json:"transmit_bytes_per_second"`   // bytes sent per second
	ReceivePacketsPerSecond  float64 `json:"receive_packets_per_second"`  // packets received per second
	TransmitPacketsPerSecond float64 `json:"transmit_packets_per_second"` // packets sent per second
	ReceiveErrorsPerSecond   float64 `json:"receive_errors_per_second"`   // receive errors per second
	TransmitErrorsPerSecond  float64 `json:"transmit_errors_per_second"`  // transmit errors per second
}

// CPUFrequency is one CPU's current frequency and scaling limits, in Hz.
type CPUFrequency struct {
	CPU       int     `json:"cpu"`        // CPU number
	CurrentHz float64 `json:"current_hz"` // scaling_cur_freq
	MinHz     float64 `json:"min_hz"`     // scaling_min_freq
	MaxHz     float64 `json:"max_hz"`     // scaling_max_freq
}

// GPUStats is one GPU as nvidia-smi reports it.
type GPUStats struct {
	Index int    `json:"index"` // nvidia-smi index
	Name  string `json:"name"`  // product name
	// Utilisation is the busy fraction (0..1); HasUtilisation is false
	// when the GPU does not report it.
	Utilisation      float64 `json:"utilisation"`
	HasUtilisation   bool    `json:"-"`                  // Utilisation was reported
	MemoryUsedBytes  float64 `json:"memory_used_bytes"`  // memory.used
	MemoryTotalBytes float64 `json:"memory_total_bytes"` // memory.total
	// PowerWatts is the power draw; HasPower is false when the GPU does
	// not report it.
	PowerWatts float64 `json:"power_watts"`
	HasPower   bool    `json:"-"` // PowerWatts was reported
}

// NodeCollector reads the node's telemetry from procfs, sysfs, statfs and
// nvidia-smi. It is a Source for a Sampler, a Prometheus collector through
// Register, and keeps the latest Snapshot for reports. It is safe for
// concurrent use.
type NodeCollector struct {
	opts NodeOptions
	smi  string

	mu     sync.Mutex
	prev   *rawSample
	latest Snapshot
}

// rawSample holds the cumulative counters rates are computed from.
type rawSample struct {
	at     time.Time
	cpu    cpuTimes
	perCPU map[int]cpuTimes
	disks  map[string]diskCounters
	nets   map[string]netCounters
}

// NewNodeCollector returns a collector. It looks nvidia-smi up once; a
// GPU driver installed later needs an agent restart.
func NewNodeCollector(opts NodeOptions) *NodeCollector {
	if opts.ProcRoot == "" {
		opts.ProcRoot = "/proc"
	}
	if opts.SysRoot == "" {
		opts.SysRoot = "/sys"
	}
	if opts.Mounts == nil {
		opts.Mounts = []string{"/"}
	}
	if opts.IgnoreDevices == nil {
		opts.IgnoreDevices = DefaultIgnoredDevices
	}
	if opts.IgnoreInterfaces == nil {
		opts.IgnoreInterfaces = regexp.MustCompile(`^lo$`)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	c := &NodeCollector{opts: opts}
	if !opts.DisableGPU {
		c.smi = resolveNvidiaSMI(opts.NvidiaSMI)
	}
	return c
}

// resolveNvidiaSMI returns the path of a usable nvidia-smi or "".
func resolveNvidiaSMI(configured string) string {
	name := configured
	if name == "" {
		name = "nvidia-smi"
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return ""
	}
	return p
}

// HasGPU tells whether nvidia-smi was found.
func (c *NodeCollector) HasGPU() bool { return c.smi != "" }

// Name implements Source.
func (c *NodeCollector) Name() string { return "node" }

// Collect implements Source: it samples the node and returns every
// reading; wanted is ignored because reading everything costs a few file
// reads.
func (c *NodeCollector) Collect(ctx context.Context, _ []string) ([]Reading, error) {
	s, err := c.Sample(ctx)
	return s.Readings(), err
}

// Latest returns the most recent snapshot (the zero Snapshot before the
// first sample).
func (c *NodeCollector) Latest() Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.latest
}

// Sample reads the node now. Parts that cannot be read are listed in
// Snapshot.Errors and joined into the error; the snapshot holds the rest.
func (c *NodeCollector) Sample(ctx context.Context) (Snapshot, error) {
	c.mu.Lock()
	defer c.mu.Unlock()

	now := c.opts.Now()
	s := Snapshot{Time: now}
	raw := &rawSample{at: now}
	var errs []error
	fail := func(err error) {
		errs = append(errs, err)
		s.Errors = append(s.Errors, err.Error())
	}
	proc := func(name string) ([]byte, error) {
		return os.ReadFile(filepath.Join(c.opts.ProcRoot, name))
	}

	if data, err := proc("stat"); err != nil {
		fail(fmt.Errorf("read cpu times: %w", err))
	} else if all, per, err := parseStat(data); err != nil {
		fail(err)
	} else {
		raw.cpu, raw.perCPU = all, per
		var prevAll cpuTimes
		var prevPer map[int]cpuTimes
		if c.prev != nil && c.prev.perCPU != nil {
			prevAll, prevPer = c.prev.cpu, c.prev.perCPU
		}
		s.CPU.Cores = len(per)
		s.CPU.Utilisation = utilisation(prevAll, all)
		for _, n := range sortedKeys(per) {
			s.CPU.PerCore = append(s.CPU.PerCore, CoreUtilisation{CPU: n, Utilisation: utilisation(prevPer[n], per[n])})
		}
	}
	if data, err := proc("loadavg"); err != nil {
		fail(fmt.Errorf("read load: %w", err))
	} else if l, err := parseLoadavg(data); err != nil {
		fail(err)
	} else {
		s.Load = l
	}
	if data, err := proc("meminfo"); err != nil {
		fail(fmt.Errorf("read memory: %w", err))
	} else if m, err := parseMeminfo(data); err != nil {
		fail(err)
	} else {
		s.Memory = m
	}
	for _, m := range c.opts.Mounts {
		fs, err := statfs(m)
		if err != nil {
			fail(fmt.Errorf("statfs %s: %w", m, err))
			continue
		}
		s.Filesystems = append(s.Filesystems, fs)
	}
	if data, err := proc("diskstats"); err != nil {
		fail(fmt.Errorf("read disk counters: %w", err))
	} else if d, err := parseDiskstats(data); err != nil {
		fail(err)
	} else {
		raw.disks = d
	}
	if data, err := proc(filepath.Join("net", "dev")); err != nil {
		fail(fmt.Errorf("read network counters: %w", err))
	} else if n, err := parseNetDev(data); err != nil {
		fail(err)
	} else {
		raw.nets = n
	}
	if freqs, err := readCPUFreqs(c.opts.SysRoot); err != nil {
		fail(fmt.Errorf("read cpu frequencies: %w", err))
	} else {
		s.CPUFrequency = freqs
	}
	if c.smi != "" {
		gpus, err := queryGPUs(ctx, c.smi)
		if err != nil {
			fail(fmt.Errorf("query gpus: %w", err))
		} else {
			s.GPUs = gpus
		}
	}

	if c.prev != nil {
		if dt := now.Sub(c.prev.at).Seconds(); dt > 0 {
			s.RatesValid = true
			s.Disks = c.diskRates(c.prev.disks, raw.disks, dt)
			s.Network = c.netRates(c.prev.nets, raw.nets, dt)
		}
	}
	c.prev = raw
	c.latest = s
	return s, errors.Join(errs...)
}

func (c *NodeCollector) diskRates(prev, cur map[string]diskCounters, dt float64) []DiskStats {
	var out []DiskStats
	for _, name := range sortedKeys(cur) {
		if c.opts.IgnoreDevices.MatchString(name) {
			continue
		}
		p, ok := prev[name]
		n := cur[name]
		if !ok || n.reads < p.reads || n.writes < p.writes || n.readSectors < p.readSectors || n.writeSectors < p.writeSectors || n.ioMillis < p.ioMillis {
			continue // new device or counters reset
		}
		// /proc/diskstats counts 512-byte sectors whatever the device's
		// sector size.
		out = append(out, DiskStats{
			Device:                name,
			ReadBytesPerSecond:    float64(n.readSectors-p.readSectors) * 512 / dt,
			WrittenBytesPerSecond: float64(n.writeSectors-p.writeSectors) * 512 / dt,
			ReadsPerSecond:        float64(n.reads-p.reads) / dt,
			WritesPerSecond:       float64(n.writes-p.writes) / dt,
			IOTime:                min(1, float64(n.ioMillis-p.ioMillis)/1000/dt),
		})
	}
	return out
}

func (c *NodeCollector) netRates(prev, cur map[string]netCounters, dt float64) []NetworkStats {
	var out []NetworkStats
	for _, name := range sortedKeys(cur) {
		if c.opts.IgnoreInterfaces.MatchString(name) {
			continue
		}
		p, ok := prev[name]
		n := cur[name]
		if !ok || n.rxBytes < p.rxBytes || n.txBytes < p.txBytes || n.rxPackets < p.rxPackets || n.txPackets < p.txPackets || n.rxErrs < p.rxErrs || n.txErrs < p.txErrs {
			continue
		}
		out = append(out, NetworkStats{
			Interface:                name,
			ReceiveBytesPerSecond:    float64(n.rxBytes-p.rxBytes) / dt,
			TransmitBytesPerSecond:   float64(n.txBytes-p.txBytes) / dt,
			ReceivePacketsPerSecond:  float64(n.rxPackets-p.rxPackets) / dt,
			TransmitPacketsPerSecond: float64(n.txPackets-p.txPackets) / dt,
			ReceiveErrorsPerSecond:   float64(n.rxErrs-p.rxErrs) / dt,
			TransmitErrorsPerSecond:  float64(n.txErrs-p.txErrs) / dt,
		})
	}
	return out
}

func sortedKeys[V any, K int | string](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Readings flattens the snapshot into node_* series, named like the
// Prometheus node exporter's where it has the same metric.
func (s Snapshot) Readings() []Reading {
	var rs []Reading
	add := func(name string, v float64, kv ...string) {
		var l Labels
		if len(kv) > 0 {
			l = Labels{}
			for i := 0; i+1 < len(kv); i += 2 {
				l[kv[i]] = kv[i+1]
			}
		}
		rs = append(rs, Reading{Name: name, Labels: l, Value: v})
	}
	if s.CPU.Cores > 0 {
		add("node_cpu_cores", float64(s.CPU.Cores))
		add("node_cpu_utilisation_ratio", s.CPU.Utilisation)
		for _, c := range s.CPU.PerCore {
			add("node_cpu_core_utilisation_ratio", c.Utilisation, "cpu", strconv.Itoa(c.CPU))
		}
	}
	if s.Load != (LoadStats{}) {
		add("node_load1", s.Load.Load1)
		add("node_load5", s.Load.Load5)
		add("node_load15", s.Load.Load15)
		add("node_procs_running", float64(s.Load.Running))
	}
	if m := s.Memory; m.TotalBytes > 0 {
		add("node_memory_MemTotal_bytes", float64(m.TotalBytes))
		add("node_memory_MemFree_bytes", float64(m.FreeBytes))
		add("node_memory_MemAvailable_bytes", float64(m.AvailableBytes))
		add("node_memory_Buffers_bytes", float64(m.BuffersBytes))
		add("node_memory_Cached_bytes", float64(m.CachedBytes))
		add("node_memory_SwapTotal_bytes", float64(m.SwapTotalBytes))
		add("node_memory_SwapFree_bytes", float64(m.SwapFreeBytes))
		add("node_memory_utilisation_ratio", m.Utilisation)
	}
	for _, f := range s.Filesystems {
		add("node_filesystem_size_bytes", float64(f.SizeBytes), "mountpoint", f.Mount)
		add("node_filesystem_free_bytes", float64(f.FreeBytes), "mountpoint", f.Mount)
		add("node_filesystem_avail_bytes", float64(f.AvailBytes), "mountpoint", f.Mount)
	}
	for _, d := range s.Disks {
		add("node_disk_read_bytes_per_second", d.ReadBytesPerSecond, "device", d.Device)
		add("node_disk_written_bytes_per_second", d.WrittenBytesPerSecond, "device", d.Device)
		add("node_disk_reads_per_second", d.ReadsPerSecond, "device", d.Device)
		add("node_disk_writes_per_second", d.WritesPerSecond, "device", d.Device)
		add("node_disk_io_time_ratio", d.IOTime, "device", d.Device)
	}
	for _, n := range s.Network {
		add("node_network_receive_bytes_per_second", n.ReceiveBytesPerSecond, "device", n.Interface)
		add("node_network_transmit_bytes_per_second", n.TransmitBytesPerSecond, "device", n.Interface)
		add("node_network_receive_packets_per_second", n.ReceivePacketsPerSecond, "device", n.Interface)
		add("node_network_transmit_packets_per_second", n.TransmitPacketsPerSecond, "device", n.Interface)
		add("node_network_receive_errors_per_second", n.ReceiveErrorsPerSecond, "device", n.Interface)
		add("node_network_transmit_errors_per_second", n.TransmitErrorsPerSecond, "device", n.Interface)
	}
	for _, f := range s.CPUFrequency {
		cpu := strconv.Itoa(f.CPU)
		add("node_cpu_scaling_frequency_hertz", f.CurrentHz, "cpu", cpu)
		if f.MinHz > 0 {
			add("node_cpu_scaling_frequency_min_hertz", f.MinHz, "cpu", cpu)
		}
		if f.MaxHz > 0 {
			add("node_cpu_scaling_frequency_max_hertz", f.MaxHz, "cpu", cpu)
		}
	}
	for _, g := range s.GPUs {
		idx := strconv.Itoa(g.Index)
		if g.HasUtilisation {
			add("node_gpu_utilisation_ratio", g.Utilisation, "gpu", idx, "name", g.Name)
		}
		add("node_gpu_memory_used_bytes", g.MemoryUsedBytes, "gpu", idx, "name", g.Name)
		add("node_gpu_memory_total_bytes", g.MemoryTotalBytes, "gpu", idx, "name", g.Name)
		if g.HasPower {
			add("node_gpu_power_watts", g.PowerWatts, "gpu", idx, "name", g.Name)
		}
	}
	return rs
}

// Map renders the snapshot as plain data (maps, lists, numbers) for
// reports sent to other agents and for policies.
func (s Snapshot) Map() map[string]any {
	m := map[string]any{
		"time": float64(s.Time.UnixNano()) / 1e9,
		"cpu": map[string]any{
			"cores":       s.CPU.Cores,
			"utilisation": s.CPU.Utilisation,
			"per_core": func() []any {
				out := []any{}
				for _, c := range s.CPU.PerCore {
					out = append(out, map[string]any{"cpu": c.CPU, "utilisation": c.Utilisation})
				}
				return out
			}(),
		},
		"load": map[string]any{"load1": s.Load.Load1, "load5": s.Load.Load5, "load15": s.Load.Load15, "running": s.Load.Running, "processes": s.Load.Processes},
		"memory": map[string]any{
			"total_bytes": s.Memory.TotalBytes, "free_bytes": s.Memory.FreeBytes, "available_bytes": s.Memory.AvailableBytes,
			"used_bytes": s.Memory.UsedBytes, "buffers_bytes": s.Memory.BuffersBytes, "cached_bytes": s.Memory.CachedBytes,
			"swap_total_bytes": s.Memory.SwapTotalBytes, "swap_free_bytes": s.Memory.SwapFreeBytes, "utilisation": s.Memory.Utilisation,
		},
		"rates_valid": s.RatesValid,
	}
	var fss, disks, nets, freqs, gpus []any
	for _, f := range s.Filesystems {
		fss = append(fss, map[string]any{"mount": f.Mount, "size_bytes": f.SizeBytes, "free_bytes": f.FreeBytes, "avail_bytes": f.AvailBytes})
	}
	for _, d := range s.Disks {
		disks = append(disks, map[string]any{"device": d.Device, "read_bytes_per_second": d.ReadBytesPerSecond, "written_bytes_per_second": d.WrittenBytesPerSecond,
			"reads_per_second": d.ReadsPerSecond, "writes_per_second": d.WritesPerSecond, "io_time": d.IOTime})
	}
	for _, n := range s.Network {
		nets = append(nets, map[string]any{"interface": n.Interface, "receive_bytes_per_second": n.ReceiveBytesPerSecond, "transmit_bytes_per_second": n.TransmitBytesPerSecond,
			"receive_packets_per_second": n.ReceivePacketsPerSecond, "transmit_packets_per_second": n.TransmitPacketsPerSecond,
			"receive_errors_per_second": n.ReceiveErrorsPerSecond, "transmit_errors_per_second": n.TransmitErrorsPerSecond})
	}
	for _, f := range s.CPUFrequency {
		freqs = append(freqs, map[string]any{"cpu": f.CPU, "current_hz": f.CurrentHz, "min_hz": f.MinHz, "max_hz": f.MaxHz})
	}
	for _, g := range s.GPUs {
		e := map[string]any{"index": g.Index, "name": g.Name, "memory_used_bytes": g.MemoryUsedBytes, "memory_total_bytes": g.MemoryTotalBytes}
		if g.HasUtilisation {
			e["utilisation"] = g.Utilisation
		}
		if g.HasPower {
			e["power_watts"] = g.PowerWatts
		}
		gpus = append(gpus, e)
	}
	for k, v := range map[string][]any{"filesystems": fss, "disks": disks, "network": nets, "cpu_frequency": freqs, "gpus": gpus} {
		if v == nil {
			v = []any{}
		}
		m[k] = v
	}
	if len(s.Errors) > 0 {
		errs := make([]any, len(s.Errors))
		for i, e := range s.Errors {
			errs[i] = e
		}
		m["errors"] = errs
	}
	return m
}
