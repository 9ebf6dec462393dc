package mechanism

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// CPUFrequencyName is the name plans use for the CPU frequency mechanism
// (the upstream name).
const CPUFrequencyName = "CPUFrequencyConfigurator"

// kHz per unit for frequencies written with a unit; a bare number is kHz,
// the unit sysfs uses.
var frequencyUnits = map[string]float64{"hz": 0.001, "khz": 1, "mhz": 1000, "ghz": 1e6}

// CPUFrequencyConfigurator sets the cpufreq governor and the scaling
// frequency limits of the node's CPUs through sysfs
// (/sys/devices/system/cpu/cpuN/cpufreq). Commands:
//
//	{"command": "set", "cpu": "all" | 0 | "0,1" | "0-3",
//	 "frequency": "min" | "max" | 1800000 | "1.8GHz"}   pin min=max
//	{"command": "set", "cpu": ..., "governor": "powersave",
//	 "min_frequency": ..., "max_frequency": ...}       any of the three
//	{"command": "reset", "cpu": ...}                    back to the settings
//	                                                    found at start-up
//
// Frequencies without a unit are kHz, as in sysfs; "min" and "max" are the
// hardware limits (cpuinfo_min_freq, cpuinfo_max_freq). Every value is
// checked against the available governors and the hardware limits of every
// selected CPU before anything is written. It needs the cpu_frequency
// permitted action.
type CPUFrequencyConfigurator struct {
	dir           string
	perms         Permissions
	log           *slog.Logger
	resetGovernor string

	mu      sync.Mutex
	initial map[int]cpuSettings
}

var _ Mechanism = (*CPUFrequencyConfigurator)(nil)

// cpuSettings are what the mechanism writes.
type cpuSettings struct {
	Governor string
	MinKHz   int64
	MaxKHz   int64
}

// cpuInfo is what sysfs says about one CPU.
type cpuInfo struct {
	cpu       int
	dir       string
	current   cpuSettings
	governors []string
	hwMin     int64
	hwMax     int64
	curKHz    int64
	available []int64
}

// NewCPUFrequencyConfigurator is the Factory of CPUFrequencyName. It
// remembers the CPUs' settings for "reset". Config keys: reset_governor
// (the governor "reset" sets instead of the one found at start-up).
func NewCPUFrequencyConfigurator(env Env) (Mechanism, error) {
	root := env.SysfsRoot
	if root == "" {
		root = "/sys"
	}
	m := &CPUFrequencyConfigurator{
		dir:     filepath.Join(root, "devices", "system", "cpu"),
		perms:   env.Permissions,
		log:     env.Logger,
		initial: map[int]cpuSettings{},
	}
	if m.log == nil {
		m.log = slog.Default()
	}
	if g, ok := env.Config["reset_governor"].(string); ok {
		m.resetGovernor = g
	}
	cpus, err := m.cpus()
	if err != nil {
		m.log.Info("cpu frequency control unavailable", "err", err)
		return m, nil
	}
	for _, n := range cpus {
		info, err := m.read(n)
		if err != nil {
			return nil, fmt.Errorf("read cpufreq settings of cpu %d: %w", n, err)
		}
		m.initial[n] = info.current
	}
	return m, nil
}

// cpus lists the CPUs that have a cpufreq folder.
func (m *CPUFrequencyConfigurator) cpus() ([]int, error) {
	dirs, err := filepath.Glob(filepath.Join(m.dir, "cpu[0-9]*", "cpufreq"))
	if err != nil {
		return nil, err
	}
	var out []int
	for _, d := range dirs {
		n, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(filepath.Dir(d)), "cpu"))
		if err == nil {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no %s folders (the kernel has no cpufreq driver, or sysfs is not mounted there)", ErrUnavailable, filepath.Join(m.dir, "cpuN", "cpufreq"))
	}
	sort.Ints(out)
	return out, nil
}

func (m *CPUFrequencyConfigurator) read(n int) (cpuInfo, error) {
	d := filepath.Join(m.dir, "cpu"+strconv.Itoa(n), "cpufreq")
	info := cpuInfo{cpu: n, dir: d}
	str := func(name string) (string, error) {
		b, err := os.ReadFile(filepath.Join(d, name))
		return strings.TrimSpace(string(b)), err
	}
	num := func(name string) (int64, error) {
		s, err := str(name)
		if err != nil {
			return 0, err
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %q is not a number", filepath.Join(d, name), s)
		}
		return v, nil
	}
	var err error
	if info.current.Governor, err = str("scaling_governor"); err != nil {
		return info, err
	}
	if info.current.MinKHz, err = num("scaling_min_freq"); err != nil {
		return info, err
	}
	if info.current.MaxKHz, err = num("scaling_max_freq"); err != nil {
		return info, err
	}
	if info.hwMin, err = num("cpuinfo_min_freq"); err != nil {
		return info, err
	}
	if info.hwMax, err = num("cpuinfo_max_freq"); err != nil {
		return info, err
	}
	if g, err := str("scaling_available_governors"); err == nil {
		info.governors = strings.Fields(g)
	}
	if v, err := num("scaling_cur_freq"); err == nil {
		info.curKHz = v
	}
	if s, err := str("scaling_available_frequencies"); err == nil {
		for _, f := range strings.Fields(s) {
			if v, err := strconv.ParseInt(f, 10, 64); err == nil {
				info.available = append(info.available, v)
			}
		}
		sort.Slice(info.available, func(i, j int) bool { return info.available[i] < info.available[j] })
	}
	return info, nil
}

// Apply implements Mechanism.
func (m *CPUFrequencyConfigurator) Apply(ctx context.Context, cmd map[string]any) (Result, error) {
	if err := m.perms.Require(ActionCPUFrequency); err != nil {
		return Result{}, err
	}
	command, _, err := getString(cmd, "command")
	if err != nil {
		return Result{}, err
	}
	all, selected, err := parseSelection(cmd["cpu"], "cpu")
	if err != nil {
		return Result{}, err
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	present, err := m.cpus()
	if err != nil {
		return Result{}, err
	}
	if all {
		selected = present
	}
	have := map[int]bool{}
	for _, n := range present {
		have[n] = true
	}
	infos := make([]cpuInfo, 0, len(selected))
	for _, n := range selected {
		if !have[n] {
			return Result{}, fmt.Errorf("cpu: cpu %d has no cpufreq folder; this node's CPUs are %s", n, ranges(present))
		}
		info, err := m.read(n)
		if err != nil {
			return Result{}, fmt.Errorf("read cpufreq settings of cpu %d: %w", n, err)
		}
		infos = append(infos, info)
	}

	targets := make([]cpuSettings, len(infos))
	switch command {
	case "set":
		for i, info := range infos {
			t, err := setTarget(cmd, info)
			if err != nil {
				return Result{}, fmt.Errorf("cpu %d: %w", info.cpu, err)
			}
			targets[i] = t
		}
	case "reset":
		for i, info := range infos {
			t, ok := m.initial[info.cpu]
			if !ok {
				t = cpuSettings{Governor: info.current.Governor, MinKHz: info.hwMin, MaxKHz: info.hwMax}
			}
			if m.resetGovernor != "" {
				t.Governor = m.resetGovernor
			}
			if err := checkGovernor(t.Governor, info); err != nil {
				return Result{}, fmt.Errorf("cpu %d: reset: %w", info.cpu, err)
			}
			targets[i] = t
		}
	case "":
		return Result{}, errors.New(`command: required: "set" or "reset"`)
	default:
		return Result{}, fmt.Errorf(`command: %q is not "set" or "reset"`, command)
	}

	settings := map[string]any{}
	for i, info := range infos {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		if err := m.write(info, targets[i]); err != nil {
			return Result{}, fmt.Errorf("cpu %d: %w", info.cpu, err)
		}
		settings[strconv.Itoa(info.cpu)] = map[string]any{"governor": targets[i].Governor, "min_khz": targets[i].MinKHz, "max_khz": targets[i].MaxKHz}
	}
	cpus := make([]any, len(infos))
	for i, info := range infos {
		cpus[i] = int64(info.cpu)
	}
	m.log.Info("cpu frequency settings applied", "command", command, "cpus", ranges(selected))
	return Result{Status: StatusSuccess, Detail: map[string]any{"command": command, "cpus": cpus, "settings": settings}}, nil
}

// setTarget computes one CPU's settings for a "set" command.
func setTarget(cmd map[string]any, info cpuInfo) (cpuSettings, error) {
	t := info.current
	freq := func(key string) (int64, bool, error) {
		v, ok := cmd[key]
		if !ok || v == nil {
			return 0, false, nil
		}
		f, word, err := parseQuantity(v, key, frequencyUnits, "min", "max")
		if err != nil {
			return 0, true, err
		}
		khz := int64(f)
		switch word {
		case "min":
			khz = info.hwMin
		case "max":
			khz = info.hwMax
		}
		if khz < info.hwMin || khz > info.hwMax {
			return 0, true, fmt.Errorf("%s: %d kHz is outside the hardware range %d-%d kHz", key, khz, info.hwMin, info.hwMax)
		}
		return khz, true, nil
	}
	pinned, hasPin, err := freq("frequency")
	if err != nil {
		return t, err
	}
	lo, hasLo, err := freq("min_frequency")
	if err != nil {
		return t, err
	}
	hi, hasHi, err := freq("max_frequency")
	if err != nil {
		return t, err
	}
	gov, hasGov, err := getString(cmd, "governor")
	if err != nil {
		return t, err
	}
	switch {
	case hasPin && (hasLo || hasHi):
		return t, errors.New("frequency pins the CPU to one frequency; give either frequency or min_frequency/max_frequency")
	case !hasPin && !hasLo && !hasHi && !hasGov:
		return t, errors.New("set needs frequency, min_frequency, max_frequency or governor")
	}
	if hasPin {
		t.MinKHz, t.MaxKHz = pinned, pinned
	}
	if hasLo {
		t.MinKHz = lo
	}
	if hasHi {
		t.MaxKHz = hi
	}
	if t.MinKHz > t.MaxKHz {
		return t, fmt.Errorf("minimum %d kHz is above maximum %d kHz", t.MinKHz, t.MaxKHz)
	}
	if hasGov {
		if err := checkGovernor(gov, info); err != nil {
			return t, err
		}
		t.Governor = gov
	}
	return t, nil
}

func checkGovernor(g string, info cpuInfo) error {
	if info.governors == nil {
		return nil // the driver does not list them; the kernel will check
	}
	for _, a := range info.governors {
		if a == g {
			return nil
		}
	}
	return fmt.Errorf("governor: %q is not available; available governors: %s", g, strings.Join(info.governors, ", "))
}

// write applies settings in an order the kernel accepts: the limit that
// moves away from the other first, so that min never exceeds max.
func (m *CPUFrequencyConfigurator) write(info cpuInfo, t cpuSettings) error {
	if t.Governor != info.current.Governor {
		if err := writeSysfs(filepath.Join(info.dir, "scaling_governor"), t.Governor); err != nil {
			return err
		}
	}
	writeMin := func() error {
		if t.MinKHz == info.current.MinKHz {
			return nil
		}
		return writeSysfs(filepath.Join(info.dir, "scaling_min_freq"), strconv.FormatInt(t.MinKHz, 10))
	}
	writeMax := func() error {
		if t.MaxKHz == info.current.MaxKHz {
			return nil
		}
		return writeSysfs(filepath.Join(info.dir, "scaling_max_freq"), strconv.FormatInt(t.MaxKHz, 10))
	}
	first, second := writeMin, writeMax
	if t.MinKHz > info.current.MaxKHz {
		first, second = writeMax, writeMin
	}
	if err := first(); err != nil {
		return err
	}
	return second()
}

// writeSysfs writes an attribute without creating it: a missing attribute
// is an error, not a new file.
func writeSysfs(path, value string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fmt.Errorf("write %s to %s: %w%s", value, path, err, permissionHint(err))
	}
	_, werr := f.WriteString(value)
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("write %s to %s: %w%s", value, path, werr, permissionHint(werr))
	}
	return nil
}

func permissionHint(err error) string {
	if errors.Is(err, os.ErrPermission) {
		return " (the agent needs write access to sysfs: run it privileged or with /sys mounted read-write)"
	}
	return ""
}

// State implements Mechanism: per CPU, its governor, scaling limits,
// current frequency and hardware limits, in kHz.
func (m *CPUFrequencyConfigurator) State(ctx context.Context) (map[string]any, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	present, err := m.cpus()
	if err != nil {
		return nil, err
	}
	cpus := map[string]any{}
	for _, n := range present {
		info, err := m.read(n)
		if err != nil {
			return nil, fmt.Errorf("read cpufreq settings of cpu %d: %w", n, err)
		}
		cpus[strconv.Itoa(n)] = map[string]any{
			"governor":         info.current.Governor,
			"min_khz":          info.current.MinKHz,
			"max_khz":          info.current.MaxKHz,
			"current_khz":      info.curKHz,
			"hardware_min_khz": info.hwMin,
			"hardware_max_khz": info.hwMax,
		}
	}
	return map[string]any{"available": true, "cpus": cpus}, nil
}

// Options implements Mechanism: the commands, governors and frequency
// range (of the first CPU; cpufreq CPUs of one node rarely differ).
func (m *CPUFrequencyConfigurator) Options() map[string]any {
	m.mu.Lock()
	defer m.mu.Unlock()
	present, err := m.cpus()
	if err != nil {
		return map[string]any{"available": false, "reason": err.Error()}
	}
	info, err := m.read(present[0])
	if err != nil {
		return map[string]any{"available": false, "reason": err.Error()}
	}
	cpus := make([]any, len(present))
	for i, n := range present {
		cpus[i] = int64(n)
	}
	govs := make([]any, len(info.governors))
	for i, g := range info.governors {
		govs[i] = g
	}
	out := map[string]any{
		"available":        true,
		"commands":         []any{"set", "reset"},
		"cpus":             cpus,
		"governors":        govs,
		"hardware_min_khz": info.hwMin,
		"hardware_max_khz": info.hwMax,
	}
	if len(info.available) > 0 {
		fs := make([]any, len(info.available))
		for i, f := range info.available {
			fs[i] = f
		}
		out["available_frequencies_khz"] = fs
	}
	return out
}

// ranges renders CPU numbers compactly: 0-3,6.
func ranges(ns []int) string {
	var parts []string
	for i := 0; i < len(ns); {
		j := i
		for j+1 < len(ns) && ns[j+1] == ns[j]+1 {
			j++
		}
		if j > i {
			parts = append(parts, fmt.Sprintf("%d-%d", ns[i], ns[j]))
		} else {
			parts = append(parts, strconv.Itoa(ns[i]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}
