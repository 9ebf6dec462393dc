package mechanism

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeSMI writes an nvidia-smi stand-in that appends its arguments to a
// log, answers --query-gpu with query and fails calls whose arguments
// contain failOn.
func fakeSMI(t *testing.T, query, failOn string) (bin string, calls func() []string) {
	t.Helper()
	dir := t.TempDir()
	log := filepath.Join(dir, "calls.txt")
	bin = filepath.Join(dir, "nvidia-smi")
	script := `#!/bin/sh
echo "$*" >> '` + log + `'
case "$*" in
  --query-gpu=*) cat <<'OUT'
` + query + `OUT
  ;;
esac
`
	if failOn != "" {
		script += `case "$*" in *'` + failOn + `'*) echo "Insufficient Permissions" >&2; exit 4;; esac
`
	}
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, func() []string {
		b, err := os.ReadFile(log)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if !strings.HasPrefix(l, "--query-gpu=") {
				out = append(out, l)
			}
		}
		return out
	}
}

// Two GPUs: index, name, power limit/min/max/default (W), application
// clocks graphics/memory, max clocks graphics/memory (MHz), utilisation,
// memory used/total (MiB). GPU 1 reports no application clocks.
const twoGPUs = `0, NVIDIA A100-PCIE-40GB, 250.00, 150.00, 250.00, 250.00, 1410, 1215, 1410, 1215, 37, 1200, 40960
1, Tesla T4, 70.00, 60.00, 70.00, 70.00, [N/A], [N/A], 1590, 5001, 0, 0, 15360
`

func TestGPUApply(t *testing.T) {
	cases := map[string]struct {
		permitted []string
		cmd       map[string]any
		failOn    string
		wantCalls []string
		wantErr   string
	}{
		"power limit on one gpu": {
			permitted: []string{"set_power_cap"},
			cmd:       map[string]any{"command": "set", "gpu": int64(0), "power_limit": int64(200)},
			wantCalls: []string{"-i 0 -pl 200"},
		},
		"power limit with a unit outside a gpu's range": {
			permitted: []string{"*"},
			cmd:       map[string]any{"command": "set", "gpu": "all", "power_limit": "65.5W"},
			wantErr:   "gpu 0: power_limit: 65.5 W is outside the GPU's range 150-250 W",
		},
		"graphics clock keeps the current memory clock": {
			permitted: []string{"gpu_frequency"},
			cmd:       map[string]any{"command": "set", "gpu_id": int64(0), "graphics_clock": int64(1200)},
			wantCalls: []string{"-i 0 -ac 1215,1200"},
		},
		"both clocks and power": {
			permitted: []string{"gpu_frequency", "set_power_cap"},
			cmd:       map[string]any{"command": "set", "gpu": "1", "graphics_clock": "max", "memory_clock": int64(5001), "power_limit": int64(60)},
			wantCalls: []string{"-i 1 -pl 60", "-i 1 -ac 5001,1590"},
		},
		"one clock on a gpu without application clocks": {
			permitted: []string{"gpu_frequency"},
			cmd:       map[string]any{"command": "set", "gpu": "1", "graphics_clock": int64(1000)},
			wantErr:   "gpu 1: the GPU does not report application clocks; give both graphics_clock and memory_clock",
		},
		"clock above the maximum": {
			permitted: []string{"gpu_frequency"},
			cmd:       map[string]any{"command": "set", "gpu": "0", "graphics_clock": "2GHz"},
			wantErr:   "gpu 0: graphics_clock: 2000 MHz is outside the GPU's range 1-1410 MHz",
		},
		"power needs set_power_cap": {
			permitted: []string{"gpu_frequency"},
			cmd:       map[string]any{"command": "set", "power_limit": int64(200)},
			wantErr:   `action set_power_cap is not permitted on this node (permitted_actions: gpu_frequency); add "set_power_cap" or "*" to permitted_actions in the node's MLSysOpsNode description to allow it`,
		},
		"clocks need gpu_frequency": {
			permitted: []string{"set_power_cap", "cpu_frequency"},
			cmd:       map[string]any{"command": "set", "memory_clock": int64(1215)},
			wantErr:   `action gpu_frequency is not permitted on this node (permitted_actions: set_power_cap, cpu_frequency); add "gpu_frequency" or "*" to permitted_actions in the node's MLSysOpsNode description to allow it`,
		},
		"reset everything": {
			permitted: []string{"*"},
			cmd:       map[string]any{"command": "reset"},
			wantCalls: []string{"-i 0 -rac", "-i 0 -pl 250", "-i 1 -rac", "-i 1 -pl 70"},
		},
		"reset clocks only needs gpu_frequency": {
			permitted: []string{"gpu_frequency"},
			cmd:       map[string]any{"command": "reset", "gpu": "1", "target": "clocks"},
			wantCalls: []string{"-i 1 -rac"},
		},
		"reset everything needs both": {
			permitted: []string{"gpu_frequency"},
			cmd:       map[string]any{"command": "reset"},
			wantErr:   `action set_power_cap is not permitted on this node (permitted_actions: gpu_frequency); add "set_power_cap" or "*" to permitted_actions in the node's MLSysOpsNode description to allow it`,
		},
		"unknown gpu": {
			permitted: []string{"*"},
			cmd:       map[string]any{"command": "set", "gpu": "3", "power_limit": int64(200)},
			wantErr:   "gpu: there is no GPU 3; this node's GPUs are 0-1",
		},
		"nvidia-smi refuses": {
			permitted: []string{"*"},
			cmd:       map[string]any{"command": "set", "gpu": "0", "power_limit": int64(200)},
			failOn:    "-pl",
			wantCalls: []string{"-i 0 -pl 200"},
			wantErr:   "nvidia-smi -i 0 -pl 200: exit status 4: Insufficient Permissions",
		},
		"nothing to set": {
			permitted: []string{"*"},
			cmd:       map[string]any{"command": "set"},
			wantErr:   "set needs power_limit, graphics_clock or memory_clock",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			bin, calls := fakeSMI(t, twoGPUs, tc.failOn)
			m, err := NewGPUConfigurator(Env{NvidiaSMI: bin, Permissions: NewPermissions(tc.permitted)})
			if err != nil {
				t.Fatal(err)
			}
			_, err = m.Apply(context.Background(), tc.cmd)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tc.wantErr {
				t.Fatalf("error = %q\nwant    %q", gotErr, tc.wantErr)
			}
			if diff := cmp.Diff(tc.wantCalls, calls()); diff != "" {
				t.Errorf("nvidia-smi calls (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGPUState(t *testing.T) {
	bin, _ := fakeSMI(t, twoGPUs, "")
	m, err := NewGPUConfigurator(Env{NvidiaSMI: bin})
	if err != nil {
		t.Fatal(err)
	}
	state, err := m.State(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"available": true, "gpus": []any{
		map[string]any{"index": int64(0), "name": "NVIDIA A100-PCIE-40GB", "power_limit_w": 250.0, "power_min_limit_w": 150.0, "power_max_limit_w": 250.0,
			"power_default_limit_w": 250.0, "graphics_clock_mhz": 1410.0, "memory_clock_mhz": 1215.0, "max_graphics_clock_mhz": 1410.0, "max_memory_clock_mhz": 1215.0,
			"utilisation_percent": 37.0, "memory_used_mib": 1200.0, "memory_total_mib": 40960.0},
		map[string]any{"index": int64(1), "name": "Tesla T4", "power_limit_w": 70.0, "power_min_limit_w": 60.0, "power_max_limit_w": 70.0,
			"power_default_limit_w": 70.0, "max_graphics_clock_mhz": 1590.0, "max_memory_clock_mhz": 5001.0,
			"utilisation_percent": 0.0, "memory_used_mib": 0.0, "memory_total_mib": 15360.0},
	}}
	if diff := cmp.Diff(want, state); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
	if m.Options()["available"] != true {
		t.Errorf("options = %v", m.Options())
	}
}

func TestGPUUnavailable(t *testing.T) {
	m, err := NewGPUConfigurator(Env{NvidiaSMI: filepath.Join(t.TempDir(), "nvidia-smi"), Permissions: AllowAll()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Apply(context.Background(), map[string]any{"command": "reset"})
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "nvidia-smi not found") {
		t.Errorf("Apply error = %v", err)
	}
	if _, err := m.State(context.Background()); !errors.Is(err, ErrUnavailable) {
		t.Errorf("State error = %v", err)
	}
	opts := m.Options()
	if opts["available"] != false || !strings.Contains(opts["reason"].(string), "nvidia-smi not found") {
		t.Errorf("options = %v", opts)
	}
}
