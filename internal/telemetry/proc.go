package telemetry

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// cpuTimes are the jiffies of one line of /proc/stat.
type cpuTimes struct {
	total, idle uint64
}

// parseStat reads the cpu lines of /proc/stat: the aggregate line and one
// per CPU, indexed by CPU number.
func parseStat(data []byte) (all cpuTimes, perCPU map[int]cpuTimes, err error) {
	perCPU = map[int]cpuTimes{}
	found := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 || !strings.HasPrefix(fields[0], "cpu") {
			continue
		}
		var v [8]uint64
		for i := 0; i < 8 && i+1 < len(fields); i++ {
			n, perr := strconv.ParseUint(fields[i+1], 10, 64)
			if perr != nil {
				return all, nil, fmt.Errorf("/proc/stat: %s: field %d %q is not a number", fields[0], i+1, fields[i+1])
			}
			v[i] = n
		}
		// user nice system idle iowait irq softirq steal; guest time is
		// already counted in user.
		t := cpuTimes{idle: v[3] + v[4]}
		for _, n := range v {
			t.total += n
		}
		if fields[0] == "cpu" {
			all, found = t, true
			continue
		}
		n, perr := strconv.Atoi(strings.TrimPrefix(fields[0], "cpu"))
		if perr != nil {
			continue
		}
		perCPU[n] = t
	}
	if !found {
		return all, nil, fmt.Errorf("/proc/stat: no aggregate cpu line")
	}
	return all, perCPU, nil
}

// utilisation is the busy fraction between two readings; with no earlier
// reading it is the average since boot.
func utilisation(prev, cur cpuTimes) float64 {
	dt := float64(cur.total) - float64(prev.total)
	di := float64(cur.idle) - float64(prev.idle)
	if dt <= 0 {
		return 0
	}
	u := 1 - di/dt
	if u < 0 {
		return 0
	}
	if u > 1 {
		return 1
	}
	return u
}

func parseLoadavg(data []byte) (LoadStats, error) {
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return LoadStats{}, fmt.Errorf("/proc/loadavg: want at least 3 fields, got %q", strings.TrimSpace(string(data)))
	}
	var l LoadStats
	for i, dst := range []*float64{&l.Load1, &l.Load5, &l.Load15} {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return LoadStats{}, fmt.Errorf("/proc/loadavg: field %d %q is not a number", i+1, f[i])
		}
		*dst = v
	}
	if len(f) >= 4 {
		if run, total, ok := strings.Cut(f[3], "/"); ok {
			l.Running, _ = strconv.Atoi(run)
			l.Processes, _ = strconv.Atoi(total)
		}
	}
	return l, nil
}

func parseMeminfo(data []byte) (MemoryStats, error) {
	vals := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			continue
		}
		if len(f) > 1 && f[1] == "kB" {
			v *= 1024
		}
		vals[key] = v
	}
	total, ok := vals["MemTotal"]
	if !ok {
		return MemoryStats{}, fmt.Errorf("/proc/meminfo: no MemTotal")
	}
	m := MemoryStats{
		TotalBytes:     total,
		FreeBytes:      vals["MemFree"],
		BuffersBytes:   vals["Buffers"],
		CachedBytes:    vals["Cached"],
		SwapTotalBytes: vals["SwapTotal"],
		SwapFreeBytes:  vals["SwapFree"],
	}
	if a, ok := vals["MemAvailable"]; ok {
		m.AvailableBytes = a
	} else {
		// Kernels before 3.14 have no MemAvailable; this is the usual
		// estimate.
		m.AvailableBytes = m.FreeBytes + m.BuffersBytes + m.CachedBytes
	}
	if m.AvailableBytes <= total {
		m.UsedBytes = total - m.AvailableBytes
	}
	if total > 0 {
		m.Utilisation = float64(m.UsedBytes) / float64(total)
	}
	return m, nil
}

// diskCounters are the cumulative counters of one block device.
type diskCounters struct {
	reads, writes, readSectors, writeSectors, ioMillis uint64
}

func parseDiskstats(data []byte) (map[string]diskCounters, error) {
	out := map[string]diskCounters{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 14 {
			continue
		}
		var n [14]uint64
		ok := true
		for _, i := range []int{3, 5, 7, 9, 12} {
			v, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				ok = false
				break
			}
			n[i] = v
		}
		if !ok {
			return nil, fmt.Errorf("/proc/diskstats: line for %s is malformed", f[2])
		}
		out[f[2]] = diskCounters{reads: n[3], readSectors: n[5], writes: n[7], writeSectors: n[9], ioMillis: n[12]}
	}
	return out, nil
}

// netCounters are the cumulative counters of one interface.
type netCounters struct {
	rxBytes, rxPackets, rxErrs, txBytes, txPackets, txErrs uint64
}

func parseNetDev(data []byte) (map[string]netCounters, error) {
	out := map[string]netCounters{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		name = strings.TrimSpace(name)
		f := strings.Fields(rest)
		if len(f) < 16 {
			return nil, fmt.Errorf("/proc/net/dev: line for %s has %d fields, want 16", name, len(f))
		}
		var v [16]uint64
		for _, i := range []int{0, 1, 2, 8, 9, 10} {
			n, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("/proc/net/dev: %s: field %d %q is not a number", name, i+1, f[i])
			}
			v[i] = n
		}
		out[name] = netCounters{rxBytes: v[0], rxPackets: v[1], rxErrs: v[2], txBytes: v[8], txPackets: v[9], txErrs: v[10]}
	}
	return out, nil
}

// readCPUFreqs reads scaling_cur_freq (else cpuinfo_cur_freq) and the
// scaling limits of every CPU with a cpufreq folder under sysRoot. Values
// in sysfs are kHz.
func readCPUFreqs(sysRoot string) ([]CPUFrequency, error) {
	dirs, err := filepath.Glob(filepath.Join(sysRoot, "devices", "system", "cpu", "cpu[0-9]*", "cpufreq"))
	if err != nil {
		return nil, err
	}
	var out []CPUFrequency
	for _, d := range dirs {
		n, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(filepath.Dir(d)), "cpu"))
		if err != nil {
			continue
		}
		f := CPUFrequency{CPU: n}
		cur, err := readKHz(d, "scaling_cur_freq")
		if err != nil {
			cur, err = readKHz(d, "cpuinfo_cur_freq")
		}
		if err != nil {
			continue
		}
		f.CurrentHz = cur
		f.MinHz, _ = readKHz(d, "scaling_min_freq")
		f.MaxHz, _ = readKHz(d, "scaling_max_freq")
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CPU < out[j].CPU })
	return out, nil
}

func readKHz(dir, name string) (float64, error) {
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(string(data)), 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a number", filepath.Join(dir, name), strings.TrimSpace(string(data)))
	}
	return v * 1000, nil
}
