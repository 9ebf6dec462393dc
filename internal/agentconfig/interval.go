package agentconfig

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ParseInterval reads an interval written the upstream way ("5s", "10m",
// "2h", "1d"), as a Go duration ("1m30s", "250ms"), or as a number of
// seconds (5, 0.5, "5"). Zero is allowed (policies use an analyze_interval
// of 0 to mean "run once"); negative values are not.
func ParseInterval(v any) (time.Duration, error) {
	switch x := v.(type) {
	case time.Duration:
		if x < 0 {
			return 0, fmt.Errorf("interval %s is negative", x)
		}
		return x, nil
	case int:
		return seconds(float64(x))
	case int64:
		return seconds(float64(x))
	case float64:
		return seconds(x)
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return 0, fmt.Errorf("interval %q is not a number", x.String())
		}
		return seconds(f)
	case string:
		return parseIntervalString(x)
	case nil:
		return 0, fmt.Errorf("interval is empty")
	default:
		return 0, fmt.Errorf("interval must be a string such as \"5s\" or a number of seconds, got %T", v)
	}
}

func seconds(f float64) (time.Duration, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
		return 0, fmt.Errorf("interval %v is not a non-negative number of seconds", f)
	}
	if f > float64(math.MaxInt64)/float64(time.Second) {
		return 0, fmt.Errorf("interval %v seconds is too large", f)
	}
	return time.Duration(f * float64(time.Second)), nil
}

func parseIntervalString(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("interval is empty")
	}
	if f, err := strconv.ParseFloat(t, 64); err == nil {
		return seconds(f)
	}
	// Days are not a Go duration unit but upstream policies use them.
	if strings.HasSuffix(t, "d") {
		f, err := strconv.ParseFloat(strings.TrimSuffix(t, "d"), 64)
		if err == nil {
			return seconds(f * 24 * 60 * 60)
		}
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return 0, fmt.Errorf("interval %q: want a duration such as 5s, 10m, 2h or 1d", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("interval %q is negative", s)
	}
	return d, nil
}
