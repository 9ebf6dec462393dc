package telemetry

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// copyTree copies the fixture folder src over dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// stepClock returns the given times one after the other.
func stepClock(times ...time.Time) func() time.Time {
	i := 0
	return func() time.Time {
		t := times[min(i, len(times)-1)]
		i++
		return t
	}
}

// fakeNvidiaSMI writes an executable script that records its arguments to
// args.txt and prints output.
func fakeNvidiaSMI(t *testing.T, output string, exitCode int) (bin, argsFile string) {
	t.Helper()
	dir := t.TempDir()
	argsFile = filepath.Join(dir, "args.txt")
	bin = filepath.Join(dir, "nvidia-smi")
	script := "#!/bin/sh\necho \"$@\" >> '" + argsFile + "'\ncat <<'OUT'\n" + output + "OUT\nexit " + string(rune('0'+exitCode)) + "\n"
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, argsFile
}

func TestNodeCollectorFixtures(t *testing.T) {
	root := t.TempDir()
	proc := filepath.Join(root, "proc")
	copyTree(t, "testdata/node/t0/proc", proc)
	t0 := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	smi, argsFile := fakeNvidiaSMI(t, "0, NVIDIA A100-SXM4-40GB, 45, 1024, 40960, 120.50\n1, NVIDIA A100-SXM4-40GB, [N/A], 0, 40960, [N/A]\n", 0)
	c := NewNodeCollector(NodeOptions{
		ProcRoot:  proc,
		SysRoot:   "testdata/node/sys",
		Mounts:    []string{},
		NvidiaSMI: smi,
		Now:       stepClock(t0, t0.Add(2*time.Second)),
	})
	if !c.HasGPU() {
		t.Fatal("the fake nvidia-smi was not found")
	}

	first, err := c.Sample(context.Background())
	if err != nil {
		t.Fatalf("first sample: %v", err)
	}
	if first.RatesValid || first.Disks != nil || first.Network != nil {
		t.Errorf("first sample has rates: valid=%v disks=%v network=%v", first.RatesValid, first.Disks, first.Network)
	}
	// With no earlier reading, utilisation is the average since boot.
	if diff := cmp.Diff(CPUStats{Cores: 2, Utilisation: 0.2, PerCore: []CoreUtilisation{{0, 0.2}, {1, 0.2}}}, first.CPU, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("first cpu (-want +got):\n%s", diff)
	}

	copyTree(t, "testdata/node/t1/proc", proc)
	got, err := c.Sample(context.Background())
	if err != nil {
		t.Fatalf("second sample: %v", err)
	}
	gpus := []GPUStats{
		{Index: 0, Name: "NVIDIA A100-SXM4-40GB", Utilisation: 0.45, HasUtilisation: true, MemoryUsedBytes: 1024 << 20, MemoryTotalBytes: 40960 << 20, PowerWatts: 120.5, HasPower: true},
		{Index: 1, Name: "NVIDIA A100-SXM4-40GB", MemoryTotalBytes: 40960 << 20},
	}
	want := Snapshot{
		Time: t0.Add(2 * time.Second),
		CPU:  CPUStats{Cores: 2, Utilisation: 0.5, PerCore: []CoreUtilisation{{0, 0.6}, {1, 0.4}}},
		Load: LoadStats{Load1: 1.5, Load5: 0.75, Load15: 0.25, Running: 3, Processes: 412},
		Memory: MemoryStats{
			TotalBytes: 16000000 * 1024, FreeBytes: 4000000 * 1024, AvailableBytes: 8000000 * 1024, UsedBytes: 8000000 * 1024,
			BuffersBytes: 500000 * 1024, CachedBytes: 3000000 * 1024, SwapTotalBytes: 2000000 * 1024, SwapFreeBytes: 1000000 * 1024,
			Utilisation: 0.5,
		},
		// sda: +200 reads, +4000 sectors read, +100 writes, +4000 sectors
		// written, +1000 ms busy, in 2 s. Loop devices and partitions are
		// left out, and nvme1n1 appeared only in the second reading.
		Disks: []DiskStats{
			{Device: "nvme0n1"},
			{Device: "sda", ReadBytesPerSecond: 1024000, WrittenBytesPerSecond: 1024000, ReadsPerSecond: 100, WritesPerSecond: 50, IOTime: 0.5},
		},
		Network: []NetworkStats{
			{Interface: "eth0", ReceiveBytesPerSecond: 1000, TransmitBytesPerSecond: 500, ReceivePacketsPerSecond: 10, TransmitPacketsPerSecond: 5, ReceiveErrorsPerSecond: 1},
		},
		CPUFrequency: []CPUFrequency{
			{CPU: 0, CurrentHz: 1.2e9, MinHz: 0.8e9, MaxHz: 2.4e9},
			{CPU: 1, CurrentHz: 2.4e9, MinHz: 0.8e9, MaxHz: 2.4e9},
		},
		GPUs:       gpus,
		RatesValid: true,
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("snapshot (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, c.Latest(), cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("latest (-want +got):\n%s", diff)
	}

	args, err := os.ReadFile(argsFile)
	if err != nil {
		t.Fatal(err)
	}
	wantArgs := strings.Repeat("--query-gpu=index,name,utilization.gpu,memory.used,memory.total,power.draw --format=csv,noheader,nounits\n", 2)
	if diff := cmp.Diff(wantArgs, string(args)); diff != "" {
		t.Errorf("nvidia-smi arguments (-want +got):\n%s", diff)
	}

	// The same values reach Prometheus.
	reg := prometheus.NewPedanticRegistry()
	if err := c.Register(reg); err != nil {
		t.Fatal(err)
	}
	expected := `
# HELP node_cpu_core_utilisation_ratio Busy fraction of one CPU since the previous sample.
# TYPE node_cpu_core_utilisation_ratio gauge
node_cpu_core_utilisation_ratio{cpu="0"} 0.6
node_cpu_core_utilisation_ratio{cpu="1"} 0.4
# HELP node_load1 1m load average.
# TYPE node_load1 gauge
node_load1 1.5
# HELP node_disk_read_bytes_per_second Bytes read per second since the previous sample.
# TYPE node_disk_read_bytes_per_second gauge
node_disk_read_bytes_per_second{device="nvme0n1"} 0
node_disk_read_bytes_per_second{device="sda"} 1.024e+06
# HELP node_gpu_power_watts GPU power draw (nvidia-smi power.draw).
# TYPE node_gpu_power_watts gauge
node_gpu_power_watts{gpu="0",name="NVIDIA A100-SXM4-40GB"} 120.5
# HELP node_network_receive_bytes_per_second Bytes received per second since the previous sample.
# TYPE node_network_receive_bytes_per_second gauge
node_network_receive_bytes_per_second{device="eth0"} 1000
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected),
		"node_cpu_core_utilisation_ratio", "node_load1", "node_disk_read_bytes_per_second", "node_gpu_power_watts", "node_network_receive_bytes_per_second"); err != nil {
		t.Error(err)
	}
}

func TestNodeCollectorPartialFailures(t *testing.T) {
	root := t.TempDir()
	proc := filepath.Join(root, "proc")
	copyTree(t, "testdata/node/t0/proc", proc)
	if err := os.Remove(filepath.Join(proc, "meminfo")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proc, "loadavg"), []byte("garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	smi, _ := fakeNvidiaSMI(t, "", 3)
	c := NewNodeCollector(NodeOptions{ProcRoot: proc, SysRoot: filepath.Join(root, "nosys"), Mounts: []string{filepath.Join(root, "missing")}, NvidiaSMI: smi})
	s, err := c.Sample(context.Background())
	if err == nil {
		t.Fatal("want an error for the unreadable parts")
	}
	wantPrefixes := []string{
		`/proc/loadavg: want at least 3 fields, got "garbage"`,
		"read memory: open " + filepath.Join(proc, "meminfo"),
		"statfs " + filepath.Join(root, "missing"),
		"query gpus: " + smi + ": exit status 3",
	}
	if len(s.Errors) != len(wantPrefixes) {
		t.Fatalf("errors = %q, want %d", s.Errors, len(wantPrefixes))
	}
	for i, p := range wantPrefixes {
		if !strings.HasPrefix(s.Errors[i], p) {
			t.Errorf("error %d = %q, want prefix %q", i, s.Errors[i], p)
		}
	}
	// What could be read is still there.
	if s.CPU.Cores != 2 {
		t.Errorf("cpu cores = %d, want 2", s.CPU.Cores)
	}
}

func TestStatfs(t *testing.T) {
	dir := t.TempDir()
	c := NewNodeCollector(NodeOptions{ProcRoot: "testdata/node/t0/proc", SysRoot: "testdata/node/sys", Mounts: []string{dir}, DisableGPU: true})
	s, err := c.Sample(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Filesystems) != 1 {
		t.Fatalf("filesystems = %v", s.Filesystems)
	}
	f := s.Filesystems[0]
	if f.Mount != dir || f.SizeBytes == 0 || f.AvailBytes > f.SizeBytes || f.FreeBytes > f.SizeBytes {
		t.Errorf("implausible file system %+v", f)
	}
}

func TestNoNvidiaSMI(t *testing.T) {
	c := NewNodeCollector(NodeOptions{ProcRoot: "testdata/node/t0/proc", SysRoot: "testdata/node/sys", Mounts: []string{}, NvidiaSMI: filepath.Join(t.TempDir(), "nvidia-smi")})
	if c.HasGPU() {
		t.Fatal("HasGPU with no nvidia-smi")
	}
	s, err := c.Sample(context.Background())
	if err != nil || s.GPUs != nil {
		t.Fatalf("sample without GPUs: gpus=%v err=%v", s.GPUs, err)
	}
}

// Every reading name has a Prometheus description with its label names,
// so nothing the collector produces is silently dropped from /metrics.
func TestReadingsAreDescribed(t *testing.T) {
	s := Snapshot{
		Time:         time.Unix(1, 0),
		CPU:          CPUStats{Cores: 1, PerCore: []CoreUtilisation{{0, 0.1}}},
		Load:         LoadStats{Load1: 1},
		Memory:       MemoryStats{TotalBytes: 1},
		Filesystems:  []FilesystemStats{{Mount: "/"}},
		Disks:        []DiskStats{{Device: "sda"}},
		Network:      []NetworkStats{{Interface: "eth0"}},
		CPUFrequency: []CPUFrequency{{CPU: 0, CurrentHz: 1, MinHz: 1, MaxHz: 1}},
		GPUs:         []GPUStats{{Index: 0, Name: "x", HasUtilisation: true, HasPower: true}},
	}
	seen := map[string]bool{}
	for _, r := range s.Readings() {
		m, ok := nodeMetrics[r.Name]
		if !ok {
			t.Errorf("reading %s has no description", r.Name)
			continue
		}
		var names []string
		for k := range r.Labels {
			names = append(names, k)
		}
		if diff := cmp.Diff(m.labels, names, cmpopts.SortSlices(func(a, b string) bool { return a < b }), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s labels (-described +produced):\n%s", r.Name, diff)
		}
		seen[r.Name] = true
	}
	for name := range nodeMetrics {
		if !seen[name] {
			t.Errorf("described metric %s is never produced", name)
		}
	}
}

func TestSnapshotMap(t *testing.T) {
	s := Snapshot{Time: time.Unix(10, 500_000_000), CPU: CPUStats{Cores: 1, Utilisation: 0.25}, GPUs: []GPUStats{{Index: 0, Name: "T4", HasPower: true, PowerWatts: 70}}, Errors: []string{"x"}}
	m := s.Map()
	if m["time"] != 10.5 {
		t.Errorf("time = %v", m["time"])
	}
	gpu := m["gpus"].([]any)[0].(map[string]any)
	if _, ok := gpu["utilisation"]; ok {
		t.Errorf("unknown utilisation reported: %v", gpu)
	}
	if gpu["power_watts"] != 70.0 {
		t.Errorf("power = %v", gpu["power_watts"])
	}
	if diff := cmp.Diff([]any{}, m["disks"]); diff != "" {
		t.Errorf("disks: %s", diff)
	}
	if diff := cmp.Diff([]any{"x"}, m["errors"]); diff != "" {
		t.Errorf("errors: %s", diff)
	}
}
