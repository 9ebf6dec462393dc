package generic

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// frequencyPaths lists, per kind, where CPU and MCU frequencies sit in a
// spec; "[]" steps into every item of a list.
var frequencyPaths = map[string][][]string{
	KindNode: {
		{"hardware", "cpu", "frequency", "[]"},
		{"hardware", "mcu", "frequency"},
	},
	KindApp: {
		{"components", "[]", "containers", "[]", "platform_requirements", "cpu", "frequency"},
		{"components", "[]", "containers", "[]", "platform_requirements", "mcu", "frequency"},
	},
}

// normalizeFrequencies rewrites every CPU and MCU frequency of spec in Hz.
// Values that are not frequencies are reported and marked so that the
// schema check does not report them twice. Values of the wrong shape on the
// way (a list where an object belongs) are left for the schema check.
func normalizeFrequencies(kind string, spec map[string]interface{}, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, steps := range frequencyPaths[kind] {
		errs = append(errs, normalizeAt(spec, steps, p)...)
	}
	return errs
}

func normalizeAt(v interface{}, steps []string, p *field.Path) field.ErrorList {
	step := steps[0]
	last := len(steps) == 1
	var errs field.ErrorList
	if step == "[]" {
		list, ok := v.([]interface{})
		if !ok {
			return nil
		}
		for i := range list {
			if last {
				list[i], errs = convertFrequency(list[i], p.Index(i), errs)
				continue
			}
			errs = append(errs, normalizeAt(list[i], steps[1:], p.Index(i))...)
		}
		return errs
	}
	m, ok := v.(map[string]interface{})
	if !ok {
		return nil
	}
	child, ok := m[step]
	if !ok || child == nil {
		return nil
	}
	if last {
		m[step], errs = convertFrequency(child, p.Child(step), errs)
		return errs
	}
	return normalizeAt(child, steps[1:], p.Child(step))
}

func convertFrequency(v interface{}, p *field.Path, errs field.ErrorList) (interface{}, field.ErrorList) {
	hz, err := FrequencyHz(v)
	if err != nil {
		return reported{}, append(errs, field.Invalid(p, ShownValue(v), err.Error()))
	}
	return hz, errs
}

// FrequencyHz reads a frequency the way upstream files write it and returns
// it in Hz. Numbers below 100 are GHz (2.4), numbers below 100000 are MHz
// (600), larger numbers are Hz (2400000000); a string may carry a unit
// ("2.4GHz", "600 MHz", "32kHz", "2400000000Hz").
func FrequencyHz(v interface{}) (int64, error) {
	var (
		f    float64
		mult float64
	)
	switch x := v.(type) {
	case int64:
		f = float64(x)
	case float64:
		f = x
	case int:
		f = float64(x)
	case string:
		s := strings.ToLower(strings.TrimSpace(x))
		for _, u := range []struct {
			suffix string
			mult   float64
		}{{"ghz", 1e9}, {"mhz", 1e6}, {"khz", 1e3}, {"hz", 1}} {
			if strings.HasSuffix(s, u.suffix) {
				s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
				break
			}
		}
		parsed, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, fmt.Errorf("must be a frequency such as 2400000000 (Hz), 2.4 (GHz) or \"2.4GHz\"")
		}
		f = parsed
	default:
		return 0, fmt.Errorf("must be a frequency such as 2400000000 (Hz), 2.4 (GHz) or \"2.4GHz\", not %s", ValueKind(v))
	}
	if math.IsNaN(f) || math.IsInf(f, 0) || f <= 0 {
		return 0, fmt.Errorf("must be a positive frequency")
	}
	if mult == 0 {
		switch {
		case f < 100:
			mult = 1e9
		case f < 100000:
			mult = 1e6
		default:
			mult = 1
		}
	}
	hz := math.Round(f * mult)
	if hz < 1 || hz > 1e15 {
		return 0, fmt.Errorf("must be a frequency between 1 Hz and 1 PHz")
	}
	return int64(hz), nil
}
