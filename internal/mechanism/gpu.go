package mechanism

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// GPUName is the name plans use for the GPU mechanism.
const GPUName = "GPUConfigurator"

// gpuQueryFields are the nvidia-smi fields the mechanism reads.
var gpuQueryFields = []string{
	"index", "name",
	"power.limit", "power.min_limit", "power.max_limit", "power.default_limit",
	"clocks.applications.graphics", "clocks.applications.memory",
	"clocks.max.graphics", "clocks.max.memory",
	"utilization.gpu", "memory.used", "memory.total",
}

// gpuInfo is one line of the query; NaN means not reported.
type gpuInfo struct {
	index                                        int
	name                                         string
	powerLimit, powerMin, powerMax, powerDefault float64
	appGraphics, appMemory                       float64
	maxGraphics, maxMemory                       float64
	utilisation, memUsed, memTotal               float64
}

// GPUConfigurator sets NVIDIA GPU power limits and application clocks with
// nvidia-smi. Commands:
//
//	{"command": "set", "gpu": "all" | 0 | "0,1",
//	 "power_limit": 150 | "150W",                        needs set_power_cap
//	 "graphics_clock": 1410, "memory_clock": 1215}       MHz, needs gpu_frequency
//	{"command": "reset", "gpu": ..., "target": "all" | "clocks" | "power"}
//
// "gpu_id" is accepted for "gpu" (the upstream NVML mechanism's key).
// Power limits are checked against the GPU's min/max limits and clocks
// against its maximum clocks before nvidia-smi is run (-pl, -ac, -rac).
// When nvidia-smi is absent the mechanism is unavailable: State and Apply
// return an error wrapping ErrUnavailable.
type GPUConfigurator struct {
	smi     string
	reason  string
	perms   Permissions
	log     *slog.Logger
	timeout time.Duration

	mu sync.Mutex
}

var _ Mechanism = (*GPUConfigurator)(nil)

// NewGPUConfigurator is the Factory of GPUName. Config keys: timeout (a
// duration string for each nvidia-smi call, default 30s).
func NewGPUConfigurator(env Env) (Mechanism, error) {
	m := &GPUConfigurator{perms: env.Permissions, log: env.Logger, timeout: 30 * time.Second}
	if m.log == nil {
		m.log = slog.Default()
	}
	if s, ok := env.Config["timeout"].(string); ok {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("config timeout: %q is not a positive duration", s)
		}
		m.timeout = d
	}
	name := env.NvidiaSMI
	if name == "" {
		name = "nvidia-smi"
	}
	p, err := exec.LookPath(name)
	if err != nil {
		m.reason = fmt.Sprintf("nvidia-smi not found (%v); install the NVIDIA driver or set nvidia_smi", err)
		m.log.Info("gpu control unavailable", "reason", m.reason)
		return m, nil
	}
	m.smi = p
	return m, nil
}

func (m *GPUConfigurator) unavailable() error {
	return fmt.Errorf("%w: %s", ErrUnavailable, m.reason)
}

// run runs nvidia-smi with args.
func (m *GPUConfigurator) run(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, m.smi, args...).Output()
	if err != nil {
		msg := ""
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			msg = strings.TrimSpace(string(ee.Stderr))
			if msg == "" {
				msg = strings.TrimSpace(string(out))
			}
		}
		if msg != "" {
			return "", fmt.Errorf("nvidia-smi %s: %w: %s", strings.Join(args, " "), err, msg)
		}
		return "", fmt.Errorf("nvidia-smi %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}

func (m *GPUConfigurator) query(ctx context.Context) ([]gpuInfo, error) {
	out, err := m.run(ctx, "--query-gpu="+strings.Join(gpuQueryFields, ","), "--format=csv,noheader,nounits")
	if err != nil {
		return nil, err
	}
	r := csv.NewReader(strings.NewReader(out))
	r.TrimLeadingSpace = true
	r.FieldsPerRecord = -1
	recs, err := r.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi output: %w", err)
	}
	var gpus []gpuInfo
	for i, rec := range recs {
		if len(rec) != len(gpuQueryFields) {
			return nil, fmt.Errorf("nvidia-smi output line %d: want %d fields, got %d", i+1, len(gpuQueryFields), len(rec))
		}
		idx, err := strconv.Atoi(strings.TrimSpace(rec[0]))
		if err != nil {
			return nil, fmt.Errorf("nvidia-smi output line %d: index %q is not a number", i+1, rec[0])
		}
		num := func(j int) float64 {
			v, err := strconv.ParseFloat(strings.TrimSpace(rec[j]), 64)
			if err != nil {
				return math.NaN() // [N/A], [Not Supported]
			}
			return v
		}
		gpus = append(gpus, gpuInfo{
			index: idx, name: strings.TrimSpace(rec[1]),
			powerLimit: num(2), powerMin: num(3), powerMax: num(4), powerDefault: num(5),
			appGraphics: num(6), appMemory: num(7), maxGraphics: num(8), maxMemory: num(9),
			utilisation: num(10), memUsed: num(11), memTotal: num(12),
		})
	}
	return gpus, nil
}

// Apply implements Mechanism.
func (m *GPUConfigurator) Apply(ctx context.Context, cmd map[string]any) (Result, error) {
	if m.smi == "" {
		return Result{}, m.unavailable()
	}
	command, _, err := getString(cmd, "command")
	if err != nil {
		return Result{}, err
	}
	sel := cmd["gpu"]
	if sel == nil {
		sel = cmd["gpu_id"]
	}
	all, selected, err := parseSelection(sel, "gpu")
	if err != nil {
		return Result{}, err
	}

	// What the command does decides the permissions it needs; check them
	// before touching anything.
	var steps [][]string
	m.mu.Lock()
	defer m.mu.Unlock()
	switch command {
	case "set":
		_, hasPower := cmd["power_limit"]
		_, hasGraphics := cmd["graphics_clock"]
		_, hasMemory := cmd["memory_clock"]
		if !hasPower && !hasGraphics && !hasMemory {
			return Result{}, errors.New("set needs power_limit, graphics_clock or memory_clock")
		}
		if hasPower {
			if err := m.perms.Require(ActionSetPowerCap); err != nil {
				return Result{}, err
			}
		}
		if hasGraphics || hasMemory {
			if err := m.perms.Require(ActionGPUFrequency); err != nil {
				return Result{}, err
			}
		}
		gpus, err := m.selectGPUs(ctx, all, selected)
		if err != nil {
			return Result{}, err
		}
		for _, g := range gpus {
			s, err := setSteps(cmd, g)
			if err != nil {
				return Result{}, fmt.Errorf("gpu %d: %w", g.index, err)
			}
			steps = append(steps, s...)
		}
	case "reset":
		target, _, err := getString(cmd, "target")
		if err != nil {
			return Result{}, err
		}
		if target == "" {
			target = "all"
		}
		clocks, power := target == "all" || target == "clocks", target == "all" || target == "power"
		if !clocks && !power {
			return Result{}, fmt.Errorf(`target: %q is not "all", "clocks" or "power"`, target)
		}
		if clocks {
			if err := m.perms.Require(ActionGPUFrequency); err != nil {
				return Result{}, err
			}
		}
		if power {
			if err := m.perms.Require(ActionSetPowerCap); err != nil {
				return Result{}, err
			}
		}
		gpus, err := m.selectGPUs(ctx, all, selected)
		if err != nil {
			return Result{}, err
		}
		for _, g := range gpus {
			id := strconv.Itoa(g.index)
			if clocks {
				steps = append(steps, []string{"-i", id, "-rac"})
			}
			if power {
				if math.IsNaN(g.powerDefault) {
					return Result{}, fmt.Errorf("gpu %d: reset power: the GPU reports no default power limit", g.index)
				}
				steps = append(steps, []string{"-i", id, "-pl", formatNumber(g.powerDefault)})
			}
		}
	case "":
		return Result{}, errors.New(`command: required: "set" or "reset"`)
	default:
		return Result{}, fmt.Errorf(`command: %q is not "set" or "reset"`, command)
	}

	var done []any
	for _, args := range steps {
		if _, err := m.run(ctx, args...); err != nil {
			return Result{}, err
		}
		done = append(done, strings.Join(args, " "))
	}
	m.log.Info("gpu settings applied", "command", command, "calls", len(done))
	return Result{Status: StatusSuccess, Detail: map[string]any{"command": command, "nvidia_smi": done}}, nil
}

func (m *GPUConfigurator) selectGPUs(ctx context.Context, all bool, selected []int) ([]gpuInfo, error) {
	gpus, err := m.query(ctx)
	if err != nil {
		return nil, err
	}
	if len(gpus) == 0 {
		return nil, fmt.Errorf("%w: nvidia-smi lists no GPUs", ErrUnavailable)
	}
	if all {
		return gpus, nil
	}
	byIndex := map[int]gpuInfo{}
	var have []int
	for _, g := range gpus {
		byIndex[g.index] = g
		have = append(have, g.index)
	}
	var out []gpuInfo
	for _, n := range selected {
		g, ok := byIndex[n]
		if !ok {
			return nil, fmt.Errorf("gpu: there is no GPU %d; this node's GPUs are %s", n, ranges(have))
		}
		out = append(out, g)
	}
	return out, nil
}

// setSteps turns a "set" command into nvidia-smi calls for one GPU.
func setSteps(cmd map[string]any, g gpuInfo) ([][]string, error) {
	id := strconv.Itoa(g.index)
	var steps [][]string
	if v, ok := cmd["power_limit"]; ok {
		w, _, err := parseQuantity(v, "power_limit", map[string]float64{"w": 1, "mw": 0.001, "kw": 1000})
		if err != nil {
			return nil, err
		}
		if !math.IsNaN(g.powerMin) && !math.IsNaN(g.powerMax) && (w < g.powerMin || w > g.powerMax) {
			return nil, fmt.Errorf("power_limit: %s W is outside the GPU's range %s-%s W", formatNumber(w), formatNumber(g.powerMin), formatNumber(g.powerMax))
		}
		steps = append(steps, []string{"-i", id, "-pl", formatNumber(w)})
	}
	clock := func(key string, current, max float64) (float64, bool, error) {
		v, ok := cmd[key]
		if !ok {
			return current, false, nil
		}
		mhz, word, err := parseQuantity(v, key, map[string]float64{"mhz": 1, "ghz": 1000}, "max")
		if err != nil {
			return 0, true, err
		}
		if word == "max" {
			mhz = max
		}
		if mhz <= 0 || (!math.IsNaN(max) && mhz > max) {
			return 0, true, fmt.Errorf("%s: %s MHz is outside the GPU's range 1-%s MHz", key, formatNumber(mhz), formatNumber(max))
		}
		return mhz, true, nil
	}
	graphics, hasG, err := clock("graphics_clock", g.appGraphics, g.maxGraphics)
	if err != nil {
		return nil, err
	}
	memory, hasM, err := clock("memory_clock", g.appMemory, g.maxMemory)
	if err != nil {
		return nil, err
	}
	if hasG || hasM {
		// -ac takes both clocks; the one not given keeps its current value.
		if math.IsNaN(graphics) || math.IsNaN(memory) {
			return nil, errors.New("the GPU does not report application clocks; give both graphics_clock and memory_clock")
		}
		steps = append(steps, []string{"-i", id, "-ac", formatNumber(memory) + "," + formatNumber(graphics)})
	}
	return steps, nil
}

func formatNumber(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// State implements Mechanism: per GPU, its limits, clocks and use.
func (m *GPUConfigurator) State(ctx context.Context) (map[string]any, error) {
	if m.smi == "" {
		return nil, m.unavailable()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	gpus, err := m.query(ctx)
	if err != nil {
		return nil, err
	}
	list := make([]any, 0, len(gpus))
	for _, g := range gpus {
		e := map[string]any{"index": int64(g.index), "name": g.name}
		for k, v := range map[string]float64{
			"power_limit_w": g.powerLimit, "power_min_limit_w": g.powerMin, "power_max_limit_w": g.powerMax, "power_default_limit_w": g.powerDefault,
			"graphics_clock_mhz": g.appGraphics, "memory_clock_mhz": g.appMemory, "max_graphics_clock_mhz": g.maxGraphics, "max_memory_clock_mhz": g.maxMemory,
			"utilisation_percent": g.utilisation, "memory_used_mib": g.memUsed, "memory_total_mib": g.memTotal,
		} {
			if !math.IsNaN(v) {
				e[k] = v
			}
		}
		list = append(list, e)
	}
	return map[string]any{"available": true, "gpus": list}, nil
}

// Options implements Mechanism.
func (m *GPUConfigurator) Options() map[string]any {
	if m.smi == "" {
		return map[string]any{"available": false, "reason": m.reason}
	}
	return map[string]any{
		"available": true,
		"commands":  []any{"set", "reset"},
		"set":       []any{"power_limit", "graphics_clock", "memory_clock"},
		"reset":     []any{"all", "clocks", "power"},
	}
}
