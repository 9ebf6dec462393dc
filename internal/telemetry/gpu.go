package telemetry

import (
	"context"
	"encoding/csv"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// gpuQuery is the nvidia-smi query the collector runs; memory is in MiB
// and power in W because of nounits.
const gpuQuery = "index,name,utilization.gpu,memory.used,memory.total,power.draw"

// queryGPUs runs nvidia-smi and parses one line per GPU.
func queryGPUs(ctx context.Context, path string) ([]GPUStats, error) {
	cmd := exec.CommandContext(ctx, path, "--query-gpu="+gpuQuery, "--format=csv,noheader,nounits")
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
			return nil, fmt.Errorf("%s: %w: %s", path, err, strings.TrimSpace(string(ee.Stderr)))
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return parseGPUCSV(string(out))
}

func parseGPUCSV(text string) ([]GPUStats, error) {
	r := csv.NewReader(strings.NewReader(text))
	r.TrimLeadingSpace = true
	r.FieldsPerRecord = -1
	recs, err := r.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi output: %w", err)
	}
	var out []GPUStats
	for i, rec := range recs {
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue
		}
		if len(rec) != 6 {
			return nil, fmt.Errorf("nvidia-smi output line %d: want 6 fields (%s), got %d", i+1, gpuQuery, len(rec))
		}
		idx, err := strconv.Atoi(strings.TrimSpace(rec[0]))
		if err != nil {
			return nil, fmt.Errorf("nvidia-smi output line %d: index %q is not a number", i+1, rec[0])
		}
		g := GPUStats{Index: idx, Name: strings.TrimSpace(rec[1])}
		g.Utilisation, g.HasUtilisation = smiNumber(rec[2], 0.01)
		g.MemoryUsedBytes, _ = smiNumber(rec[3], 1024*1024)
		g.MemoryTotalBytes, _ = smiNumber(rec[4], 1024*1024)
		g.PowerWatts, g.HasPower = smiNumber(rec[5], 1)
		out = append(out, g)
	}
	return out, nil
}

// smiNumber parses a number nvidia-smi printed, scaled; "[N/A]" and
// "[Not Supported]" give false.
func smiNumber(s string, scale float64) (float64, bool) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return 0, false
	}
	return v * scale, true
}
