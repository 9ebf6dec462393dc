package agentconfig

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// kind is how a setting's value is written.
type kind int

const (
	kindString kind = iota
	kindLayer
	kindStrings
	kindMetrics // a list of names, or the string "None"
	kindDuration
	kindBool
	kindInt
	kindUint64
)

// setting ties a file key to its flag, environment variable and field.
type setting struct {
	key   string
	flag  string
	usage string
	kind  kind
	ptr   any
}

// env is the environment variable of a setting.
func (s setting) env() string { return "MLSYSOPS_" + strings.ToUpper(s.key) }

// settings lists every option that can come from the file, the environment
// and flags. The upstream keys come first.
func (o *Options) settings() []setting {
	return []setting{
		{"continuum_layer", "continuum-layer", "the agent's layer: continuum, cluster or node", kindLayer, &o.Layer},
		{"mechanisms", "mechanisms", "mechanisms to enable (default: the layer's: continuum clusterPlacement, cluster fluidity, node fluidity_proxy)", kindStrings, &o.Mechanisms},
		{"mechanisms_directory", "mechanisms-directory", "accepted for upstream compatibility; mechanisms are built into the agent", kindString, &o.MechanismsDirectory},
		{"policy_directory", "policy-directory", "folder of user policies (policy-<name>.star), hot-reloaded", kindString, &o.PolicyDirectory},
		{"monitoring_interval", "monitoring-interval", "default telemetry sampling period (e.g. 5s)", kindDuration, &o.MonitoringInterval},
		{"default_telemetry_metrics", "default-telemetry-metrics", "metrics always sampled: a comma-separated list, or None", kindMetrics, &o.DefaultTelemetryMetrics},
		{"node_exporter_scrape_interval", "node-exporter-scrape-interval", "scrape interval of the telemetry collectors (e.g. 10s)", kindDuration, &o.NodeExporterScrapeInterval},
		{"node_exporter_enabled", "node-exporter-enabled", "deploy a node exporter", kindBool, &o.NodeExporterEnabled},
		{"otel_deploy_enabled", "otel-deploy-enabled", "deploy an OpenTelemetry collector", kindBool, &o.OtelDeployEnabled},
		{"policy_max_steps", "policy-max-steps", "Starlark execution steps allowed per policy call", kindUint64, &o.PolicyMaxSteps},
		{"policy_timeout", "policy-timeout", "wall-clock time allowed per policy call", kindDuration, &o.PolicyTimeout},
		{"policy_max_memory_mib", "policy-max-memory-mib", "memory one policy call may allocate and keep, in MiB", kindInt, &o.PolicyMaxMemoryMiB},
		{"policy_max_depth", "policy-max-depth", "how deeply a policy's calls may nest (recursion)", kindInt, &o.PolicyMaxDepth},
		{"policy_poll_interval", "policy-poll-interval", "how often the policy folder is rescanned besides file-system notifications", kindDuration, &o.PolicyPollInterval},
		{"plan_log_size", "plan-log-size", "number of plans kept in the plan log", kindInt, &o.PlanLogSize},
		{"pending_timeout", "pending-timeout", "how long a plan waits for an asynchronous mechanism result", kindDuration, &o.PendingTimeout},
		{"sysfs_root", "sysfs-root", "where sysfs is mounted", kindString, &o.SysfsRoot},
		{"procfs_root", "procfs-root", "where procfs is mounted", kindString, &o.ProcfsRoot},
		{"nvidia_smi", "nvidia-smi", "nvidia-smi binary (default: looked up in PATH)", kindString, &o.NvidiaSMI},
	}
}

// ignoredKeys are keys found in upstream files that the upstream agent
// never reads either.
var ignoredKeys = map[string]string{
	"monitor_data_retention_time": "not used by the agent",
	"managed_telemetry_enabled":   "not used by the agent",
	"node_description":            "the description is read from the description folder",
	"system_description":          "the description is read from the description folder",
}

// fromFile sets the setting from a value decoded from YAML (through JSON,
// with numbers as json.Number). It returns problems with their key paths.
func (s setting) fromFile(v any) []Problem {
	bad := func(format string, args ...any) []Problem {
		return []Problem{{Key: s.key, Message: fmt.Sprintf(format, args...)}}
	}
	switch s.kind {
	case kindString, kindLayer:
		str, ok := v.(string)
		if !ok {
			return bad("want a string, got %s", describe(v))
		}
		if s.kind == kindLayer {
			*s.ptr.(*Layer) = Layer(str)
		} else {
			*s.ptr.(*string) = str
		}
	case kindStrings, kindMetrics:
		if s.kind == kindMetrics {
			if v == nil {
				*s.ptr.(*[]string) = nil
				return nil
			}
			if str, ok := v.(string); ok {
				if strings.EqualFold(str, "none") {
					*s.ptr.(*[]string) = nil
					return nil
				}
				return bad("want a list of metric names or \"None\", got %s", describe(v))
			}
		}
		list, ok := v.([]any)
		if !ok {
			return bad("want a list of strings, got %s", describe(v))
		}
		out := make([]string, 0, len(list))
		var ps []Problem
		for i, e := range list {
			str, ok := e.(string)
			if !ok {
				ps = append(ps, Problem{Key: fmt.Sprintf("%s[%d]", s.key, i), Message: fmt.Sprintf("want a string, got %s", describe(e))})
				continue
			}
			out = append(out, str)
		}
		if len(ps) > 0 {
			return ps
		}
		*s.ptr.(*[]string) = out
	case kindDuration:
		d, err := ParseInterval(v)
		if err != nil {
			return bad("%v", err)
		}
		*s.ptr.(*time.Duration) = d
	case kindBool:
		b, ok := v.(bool)
		if !ok {
			return bad("want a boolean (true or false), got %s", describe(v))
		}
		*s.ptr.(*bool) = b
	case kindInt, kindUint64:
		n, ok := v.(json.Number)
		if !ok {
			return bad("want a whole number, got %s", describe(v))
		}
		i, err := strconv.ParseInt(n.String(), 10, 64)
		if err != nil || i < 0 || (s.kind == kindInt && i > math.MaxInt32) {
			return bad("want a non-negative whole number, got %s", n.String())
		}
		if s.kind == kindInt {
			*s.ptr.(*int) = int(i)
		} else {
			*s.ptr.(*uint64) = uint64(i)
		}
	}
	return nil
}

// fromEnv sets the setting from an environment variable's text.
func (s setting) fromEnv(text string) error {
	switch s.kind {
	case kindString:
		*s.ptr.(*string) = text
	case kindLayer:
		*s.ptr.(*Layer) = Layer(text)
	case kindStrings:
		*s.ptr.(*[]string) = splitList(text)
	case kindMetrics:
		return (*metricsValue)(s.ptr.(*[]string)).Set(text)
	case kindDuration:
		return (*intervalValue)(s.ptr.(*time.Duration)).Set(text)
	case kindBool:
		b, err := strconv.ParseBool(strings.TrimSpace(text))
		if err != nil {
			return fmt.Errorf("want true or false, got %q", text)
		}
		*s.ptr.(*bool) = b
	case kindInt:
		i, err := strconv.Atoi(strings.TrimSpace(text))
		if err != nil || i < 0 {
			return fmt.Errorf("want a non-negative whole number, got %q", text)
		}
		*s.ptr.(*int) = i
	case kindUint64:
		i, err := strconv.ParseUint(strings.TrimSpace(text), 10, 64)
		if err != nil {
			return fmt.Errorf("want a non-negative whole number, got %q", text)
		}
		*s.ptr.(*uint64) = i
	}
	return nil
}

func splitList(text string) []string {
	var out []string
	for _, p := range strings.Split(text, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	if out == nil {
		out = []string{}
	}
	return out
}

// describe names the type of a decoded value for error messages.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "nothing (null)"
	case string:
		return fmt.Sprintf("the string %q", x)
	case bool:
		return fmt.Sprintf("the boolean %v", x)
	case json.Number:
		return "the number " + x.String()
	case []any:
		return "a list"
	case map[string]any:
		return "a map"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// intervalValue is a pflag.Value for intervals written as 5s, 1d or 5.
type intervalValue time.Duration

func (v *intervalValue) String() string { return time.Duration(*v).String() }
func (v *intervalValue) Type() string   { return "duration" }
func (v *intervalValue) Set(s string) error {
	d, err := ParseInterval(s)
	if err != nil {
		return err
	}
	*v = intervalValue(d)
	return nil
}

// metricsValue is a pflag.Value for a comma-separated list or "None".
type metricsValue []string

func (v *metricsValue) String() string {
	if *v == nil {
		return "None"
	}
	return strings.Join(*v, ",")
}
func (v *metricsValue) Type() string { return "metrics" }
func (v *metricsValue) Set(s string) error {
	if strings.EqualFold(strings.TrimSpace(s), "none") {
		*v = nil
		return nil
	}
	*v = splitList(s)
	return nil
}

// layerValue is a pflag.Value for a Layer.
type layerValue Layer

func (v *layerValue) String() string { return string(*v) }
func (v *layerValue) Type() string   { return "layer" }
func (v *layerValue) Set(s string) error {
	if !Layer(s).Valid() {
		return fmt.Errorf("%q is not one of continuum, cluster, node", s)
	}
	*v = layerValue(s)
	return nil
}
