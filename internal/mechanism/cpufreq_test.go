package mechanism

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// sysfs builds a fixture cpufreq tree.
type sysfs struct {
	t    *testing.T
	root string
}

func newSysfs(t *testing.T) *sysfs {
	return &sysfs{t: t, root: t.TempDir()}
}

// CPU adds cpuN with the intel_pstate-like governors, hardware limits
// 800-3600 MHz and the given current governor and limits (kHz).
func (s *sysfs) CPU(n int, governor string, minKHz, maxKHz int) *sysfs {
	d := filepath.Join(s.root, "devices", "system", "cpu", "cpu"+strconv.Itoa(n), "cpufreq")
	if err := os.MkdirAll(d, 0o755); err != nil {
		s.t.Fatal(err)
	}
	for name, v := range map[string]string{
		"scaling_governor":            governor,
		"scaling_available_governors": "performance powersave schedutil",
		"scaling_min_freq":            strconv.Itoa(minKHz),
		"scaling_max_freq":            strconv.Itoa(maxKHz),
		"scaling_cur_freq":            strconv.Itoa(maxKHz),
		"cpuinfo_min_freq":            "800000",
		"cpuinfo_max_freq":            "3600000",
	} {
		if err := os.WriteFile(filepath.Join(d, name), []byte(v+"\n"), 0o644); err != nil {
			s.t.Fatal(err)
		}
	}
	return s
}

// read returns cpuN's governor, min and max as written in the tree.
func (s *sysfs) read(n int) [3]string {
	d := filepath.Join(s.root, "devices", "system", "cpu", "cpu"+strconv.Itoa(n), "cpufreq")
	var out [3]string
	for i, name := range []string{"scaling_governor", "scaling_min_freq", "scaling_max_freq"} {
		b, err := os.ReadFile(filepath.Join(d, name))
		if err != nil {
			s.t.Fatal(err)
		}
		out[i] = strings.TrimSpace(string(b))
	}
	return out
}

func TestCPUFrequencyApply(t *testing.T) {
	initial := [3]string{"powersave", "800000", "3600000"}
	cases := map[string]struct {
		permitted []string
		cmd       map[string]any
		want      map[int][3]string // CPUs not listed keep initial
		wantErr   string
	}{
		"upstream set all max pins every cpu": {
			permitted: []string{"cpu_frequency"},
			cmd:       map[string]any{"command": "set", "cpu": "all", "frequency": "max"},
			want:      map[int][3]string{0: {"powersave", "3600000", "3600000"}, 1: {"powersave", "3600000", "3600000"}, 2: {"powersave", "3600000", "3600000"}},
		},
		"upstream set one cpu min": {
			permitted: []string{"*"},
			cmd:       map[string]any{"command": "set", "cpu": "1", "frequency": "min"},
			want:      map[int][3]string{1: {"powersave", "800000", "800000"}},
		},
		"frequency with a unit, list of cpus": {
			permitted: []string{"cpu_frequency"},
			cmd:       map[string]any{"command": "set", "cpu": "0,2", "frequency": "1.8GHz"},
			want:      map[int][3]string{0: {"powersave", "1800000", "1800000"}, 2: {"powersave", "1800000", "1800000"}},
		},
		"upstream 'N Hz' string": {
			permitted: []string{"cpu_frequency"},
			cmd:       map[string]any{"command": "set", "cpu": int64(2), "frequency": "2000000000 Hz"},
			want:      map[int][3]string{2: {"powersave", "2000000", "2000000"}},
		},
		"bare number is kHz": {
			permitted: []string{"cpu_frequency"},
			cmd:       map[string]any{"command": "set", "cpu": []any{int64(0)}, "frequency": int64(1200000)},
			want:      map[int][3]string{0: {"powersave", "1200000", "1200000"}},
		},
		"governor and limits over a range": {
			permitted: []string{"cpu_frequency"},
			cmd:       map[string]any{"command": "set", "cpu": "0-1", "governor": "performance", "min_frequency": "1000MHz", "max_frequency": "max"},
			want:      map[int][3]string{0: {"performance", "1000000", "3600000"}, 1: {"performance", "1000000", "3600000"}},
		},
		"only the maximum": {
			permitted: []string{"cpu_frequency"},
			cmd:       map[string]any{"command": "set", "max_frequency": "2.4GHz"},
			want:      map[int][3]string{0: {"powersave", "800000", "2400000"}, 1: {"powersave", "800000", "2400000"}, 2: {"powersave", "800000", "2400000"}},
		},
		"forbidden without cpu_frequency": {
			permitted: []string{"gpu_frequency"},
			cmd:       map[string]any{"command": "set", "cpu": "all", "frequency": "max"},
			wantErr:   `action cpu_frequency is not permitted on this node (permitted_actions: gpu_frequency); add "cpu_frequency" or "*" to permitted_actions in the node's MLSysOpsNode description to allow it`,
		},
		"forbidden when nothing is permitted": {
			cmd:     map[string]any{"command": "reset"},
			wantErr: `action cpu_frequency is not permitted on this node (permitted_actions: none); add "cpu_frequency" or "*" to permitted_actions in the node's MLSysOpsNode description to allow it`,
		},
		"above the hardware maximum": {
			permitted: []string{"cpu_frequency"},
			cmd:       map[string]any{"command": "set", "cpu": "all", "frequency": "4GHz"},
			wantErr:   "cpu 0: frequency: 4000000 kHz is outside the hardware range 800000-3600000 kHz",
		},
		"unknown governor": {
			permitted: []string{"cpu_frequency"},
			cmd:       map[string]any{"command": "set", "governor": "userspace"},
			wantErr:   `cpu 0: governor: "userspace" is not available; available governors: performance, powersave, schedutil`,
		},
		"min above max": {
			permitted: []string{"cpu_frequency"},
			cmd:       map[string]any{"command": "set", "min_frequency": "3GHz", "max_frequency": "2GHz"},
			wantErr:   "cpu 0: minimum 3000000 kHz is above maximum 2000000 kHz",
		},
		"frequency and limits together": {
			permitted: []string{"cpu_frequency"},
			cmd:       map[string]any{"command": "set", "frequency": "max", "max_frequency": "max"},
			wantErr:   "cpu 0: frequency pins the CPU to one frequency; give either frequency or min_frequency/max_frequency",
		},
		"nothing to set": {
			permitted: []string{"cpu_frequency"},
			cmd:       map[string]any{"command": "set", "cpu": "all"},
			wantErr:   "cpu 0: set needs frequency, min_frequency, max_frequency or governor",
		},
		"unknown cpu changes nothing": {
			permitted: []string{"cpu_frequency"},
			cmd:       map[string]any{"command": "set", "cpu": "1,7", "frequency": "max"},
			wantErr:   "cpu: cpu 7 has no cpufreq folder; this node's CPUs are 0-2",
		},
		"bad cpu selection": {
			permitted: []string{"cpu_frequency"},
			cmd:       map[string]any{"command": "set", "cpu": "first", "frequency": "max"},
			wantErr:   `cpu: "first" is not "all", a number, a list such as "0,1" or a range such as "0-3"`,
		},
		"bad frequency": {
			permitted: []string{"cpu_frequency"},
			cmd:       map[string]any{"command": "set", "frequency": "fast"},
			wantErr:   `cpu 0: frequency: "fast" is not a quantity or min or max`,
		},
		"missing command": {
			permitted: []string{"cpu_frequency"},
			cmd:       map[string]any{"cpu": "all"},
			wantErr:   `command: required: "set" or "reset"`,
		},
		"unknown command": {
			permitted: []string{"cpu_frequency"},
			cmd:       map[string]any{"command": "boost"},
			wantErr:   `command: "boost" is not "set" or "reset"`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			fs := newSysfs(t).CPU(0, "powersave", 800000, 3600000).CPU(1, "powersave", 800000, 3600000).CPU(2, "powersave", 800000, 3600000)
			m, err := NewCPUFrequencyConfigurator(Env{SysfsRoot: fs.root, Permissions: NewPermissions(tc.permitted)})
			if err != nil {
				t.Fatal(err)
			}
			res, err := m.Apply(context.Background(), tc.cmd)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tc.wantErr {
				t.Fatalf("error = %q\nwant    %q", gotErr, tc.wantErr)
			}
			if err == nil && res.Status != StatusSuccess {
				t.Errorf("status = %q, want Success", res.Status)
			}
			for n := 0; n < 3; n++ {
				want, ok := tc.want[n]
				if !ok {
					want = initial
				}
				if diff := cmp.Diff(want, fs.read(n)); diff != "" {
					t.Errorf("cpu %d settings (-want +got):\n%s", n, diff)
				}
			}
		})
	}
}

func TestCPUFrequencyReset(t *testing.T) {
	fs := newSysfs(t).CPU(0, "schedutil", 1000000, 3000000).CPU(1, "schedutil", 1000000, 3000000)
	m, err := NewCPUFrequencyConfigurator(Env{SysfsRoot: fs.root, Permissions: NewPermissions([]string{"cpu_frequency"})})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := m.Apply(ctx, map[string]any{"command": "set", "governor": "performance", "frequency": "min"}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([3]string{"performance", "800000", "800000"}, fs.read(1)); diff != "" {
		t.Fatalf("after set (-want +got):\n%s", diff)
	}
	res, err := m.Apply(ctx, map[string]any{"command": "reset", "cpu": "all"})
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < 2; n++ {
		if diff := cmp.Diff([3]string{"schedutil", "1000000", "3000000"}, fs.read(n)); diff != "" {
			t.Errorf("cpu %d after reset (-want +got):\n%s", n, diff)
		}
	}
	wantDetail := map[string]any{
		"command": "reset",
		"cpus":    []any{int64(0), int64(1)},
		"settings": map[string]any{
			"0": map[string]any{"governor": "schedutil", "min_khz": int64(1000000), "max_khz": int64(3000000)},
			"1": map[string]any{"governor": "schedutil", "min_khz": int64(1000000), "max_khz": int64(3000000)},
		},
	}
	if diff := cmp.Diff(wantDetail, res.Detail); diff != "" {
		t.Errorf("detail (-want +got):\n%s", diff)
	}
}

func TestCPUFrequencyStateAndOptions(t *testing.T) {
	fs := newSysfs(t).CPU(0, "powersave", 800000, 2000000)
	m, err := NewCPUFrequencyConfigurator(Env{SysfsRoot: fs.root})
	if err != nil {
		t.Fatal(err)
	}
	state, err := m.State(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	wantState := map[string]any{"available": true, "cpus": map[string]any{"0": map[string]any{
		"governor": "powersave", "min_khz": int64(800000), "max_khz": int64(2000000), "current_khz": int64(2000000),
		"hardware_min_khz": int64(800000), "hardware_max_khz": int64(3600000),
	}}}
	if diff := cmp.Diff(wantState, state); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
	wantOptions := map[string]any{
		"available": true, "commands": []any{"set", "reset"}, "cpus": []any{int64(0)},
		"governors": []any{"performance", "powersave", "schedutil"}, "hardware_min_khz": int64(800000), "hardware_max_khz": int64(3600000),
	}
	if diff := cmp.Diff(wantOptions, m.Options()); diff != "" {
		t.Errorf("options (-want +got):\n%s", diff)
	}
}

func TestCPUFrequencyUnavailable(t *testing.T) {
	m, err := NewCPUFrequencyConfigurator(Env{SysfsRoot: t.TempDir(), Permissions: AllowAll()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Apply(context.Background(), map[string]any{"command": "set", "frequency": "max"}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Apply error = %v, want ErrUnavailable", err)
	}
	if _, err := m.State(context.Background()); !errors.Is(err, ErrUnavailable) {
		t.Errorf("State error = %v, want ErrUnavailable", err)
	}
	if m.Options()["available"] != false {
		t.Errorf("options = %v", m.Options())
	}
}

// A sysfs attribute that has gone (a CPU taken offline) fails with its
// path, and nothing is created in its place.
func TestCPUFrequencyMissingAttribute(t *testing.T) {
	fs := newSysfs(t).CPU(0, "powersave", 800000, 3600000)
	minFile := filepath.Join(fs.root, "devices", "system", "cpu", "cpu0", "cpufreq", "scaling_min_freq")
	m, err := NewCPUFrequencyConfigurator(Env{SysfsRoot: fs.root, Permissions: AllowAll()})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(minFile); err != nil {
		t.Fatal(err)
	}
	_, err = m.Apply(context.Background(), map[string]any{"command": "set", "frequency": "2GHz"})
	if err == nil || !strings.Contains(err.Error(), minFile) {
		t.Fatalf("error = %v, want one naming %s", err, minFile)
	}
	if err := writeSysfs(minFile, "1000"); err == nil || !strings.Contains(err.Error(), "write 1000 to "+minFile) {
		t.Errorf("writeSysfs error = %v", err)
	}
	if _, statErr := os.Stat(minFile); !errors.Is(statErr, os.ErrNotExist) {
		t.Errorf("the missing attribute was created")
	}
}

func TestPermissions(t *testing.T) {
	cases := map[string]struct {
		listed []string
		action string
		want   bool
	}{
		"listed":          {listed: []string{"cpu_frequency", "gpu_frequency"}, action: "gpu_frequency", want: true},
		"not listed":      {listed: []string{"cpu_frequency"}, action: "set_power_cap", want: false},
		"star allows all": {listed: []string{"*"}, action: "set_power_cap", want: true},
		"nothing listed":  {action: "cpu_frequency", want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := NewPermissions(tc.listed)
			if got := p.Allows(tc.action); got != tc.want {
				t.Errorf("Allows(%s) = %v, want %v", tc.action, got, tc.want)
			}
			err := p.Require(tc.action)
			if (err == nil) != tc.want {
				t.Errorf("Require(%s) = %v", tc.action, err)
			}
			if err != nil && !errors.Is(err, ErrForbidden) {
				t.Errorf("error %v does not wrap ErrForbidden", err)
			}
		})
	}
}

func TestAppPermissions(t *testing.T) {
	cases := map[string]struct {
		listed []string
		action string
		want   bool
	}{
		"absent list permits all": {action: "component_relocation", want: true},
		"listed":                  {listed: []string{"component_relocation"}, action: "component_relocation", want: true},
		"not listed":              {listed: []string{"acceleration"}, action: "component_relocation", want: false},
		"star":                    {listed: []string{"*"}, action: "component_relocation", want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := NewAppPermissions("shop", tc.listed).Require(tc.action)
			if (err == nil) != tc.want {
				t.Fatalf("Require(%s) = %v, want allowed %v", tc.action, err, tc.want)
			}
			if err != nil && (!errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), "not permitted on application shop")) {
				t.Errorf("error %v: want ErrForbidden naming the application", err)
			}
		})
	}
}
