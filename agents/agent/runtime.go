package agent

import (
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/mlsysops-go/mlsysops/internal/agentconfig"
)

// nodeGCPercent is the garbage collector's target on nodes. A node agent's
// live heap is about 1 MB; with Go's default of 100 the heap grows to the
// 4 MB minimum goal between collections, with 50 to 2 MB, which saves about
// 2 MB of resident memory for a few more collections a minute (no
// measurable CPU: 0.1% of a core either way).
const nodeGCPercent = 50

// runtimeSettings are the Go runtime settings an agent runs with.
type runtimeSettings struct {
	gcPercent   int   // 0: left as $GOGC or Go's default
	memoryLimit int64 // bytes; 0: left as $GOMEMLIMIT or none
}

// runtimeFor picks the runtime settings of an agent of layer: the flags
// when given, else $GOGC and $GOMEMLIMIT (which the Go runtime reads
// itself), else the layer's default.
func runtimeFor(layer agentconfig.Layer, conn *Connection, env agentconfig.LookupEnv) (runtimeSettings, error) {
	var rs runtimeSettings
	switch _, gogc := env("GOGC"); {
	case conn.GCPercent != 0:
		rs.gcPercent = conn.GCPercent
	case !gogc && layer == agentconfig.LayerNode:
		rs.gcPercent = nodeGCPercent
	}
	if conn.MemoryLimit != "" {
		n, err := parseBytes(conn.MemoryLimit)
		if err != nil {
			return rs, fmt.Errorf("--memory-limit: %w", err)
		}
		rs.memoryLimit = n
	}
	return rs, nil
}

// apply sets the runtime and logs what the agent runs with.
func (rs runtimeSettings) apply(log *slog.Logger) {
	if rs.gcPercent != 0 {
		debug.SetGCPercent(rs.gcPercent)
	}
	if rs.memoryLimit != 0 {
		debug.SetMemoryLimit(rs.memoryLimit)
	}
	gcPercent := debug.SetGCPercent(-1)
	debug.SetGCPercent(gcPercent)
	limit := "none"
	if l := debug.SetMemoryLimit(-1); l != math.MaxInt64 {
		limit = strconv.FormatInt(l, 10)
	}
	log.Info("go runtime", "gc_percent", gcPercent, "memory_limit_bytes", limit, "gomaxprocs", runtime.GOMAXPROCS(0), "go", runtime.Version())
}

// parseBytes reads a size the way $GOMEMLIMIT writes it: a whole number of
// bytes, optionally followed by B, KiB, MiB, GiB or TiB.
func parseBytes(s string) (int64, error) {
	num, mult := strings.TrimSpace(s), int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"B", 1}} {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSpace(strings.TrimSuffix(num, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("want a positive size such as 32MiB (B, KiB, MiB, GiB or TiB), got %q", s)
	}
	return n * mult, nil
}
