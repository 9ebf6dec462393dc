package agentconfig

import (
	"fmt"
	"sort"
	"time"

	"github.com/spf13/pflag"
)

// Layer is the level of the agent hierarchy an agent runs at.
type Layer string

// The three agent layers.
const (
	LayerContinuum Layer = "continuum"
	LayerCluster   Layer = "cluster"
	LayerNode      Layer = "node"
)

// Layers lists the valid layers in hierarchy order.
var Layers = []Layer{LayerContinuum, LayerCluster, LayerNode}

// Valid tells whether l is one of Layers.
func (l Layer) Valid() bool {
	for _, v := range Layers {
		if l == v {
			return true
		}
	}
	return false
}

// DefaultMechanisms are the mechanisms an agent of each layer enables when
// its configuration names none (the upstream per-layer config.yaml files).
var DefaultMechanisms = map[Layer][]string{
	LayerContinuum: {"clusterPlacement"},
	LayerCluster:   {"fluidity"},
	LayerNode:      {"fluidity_proxy"},
}

// Behaviour is one entry of the behaviours map: whether the behaviour runs
// and the parameters it is given.
type Behaviour struct {
	// Enabled turns the behaviour on. Upstream files always set it; a
	// behaviour listed without it is enabled.
	Enabled bool
	// Params are the other keys of the entry (e.g. period), as decoded
	// from the file.
	Params map[string]any
}

// Options is the whole configuration of an agent. NewOptions returns the
// defaults; Load fills it from a file, the environment and flags.
type Options struct {
	// ConfigFile is the YAML file the options were read from; empty when
	// none was found.
	ConfigFile string
	// InstallPath is the agent's base folder (MLSYSOPS_INSTALL_PATH); the
	// default config file is <InstallPath>/config/<NodeName>-config.yaml.
	InstallPath string
	// NodeName is the agent's identity: the host name of the machine it
	// manages (NODE_NAME, else the host name).
	NodeName string

	// Layer is the agent's layer (continuum_layer).
	Layer Layer
	// Mechanisms are the names of the mechanisms to enable (mechanisms).
	// Nil means the layer's DefaultMechanisms; see EnabledMechanisms.
	Mechanisms []string
	// MechanismsDirectory is accepted for upstream compatibility; Go
	// mechanisms are compiled into the agent, so it is not used.
	MechanismsDirectory string
	// PolicyDirectory is the folder of user policies, usually a ConfigMap
	// mount (policy_directory). A missing folder means no user policies
	// until it appears.
	PolicyDirectory string
	// MonitoringInterval is the default telemetry sampling period
	// (monitoring_interval). Policies may ask for a shorter one.
	MonitoringInterval time.Duration
	// DefaultTelemetryMetrics are metrics sampled whatever the policies
	// ask for (default_telemetry_metrics; the string "None" means none).
	DefaultTelemetryMetrics []string
	// NodeExporterScrapeInterval is the scrape interval given to the
	// telemetry collectors (node_exporter_scrape_interval).
	NodeExporterScrapeInterval time.Duration
	// NodeExporterEnabled deploys a node exporter (node_exporter_enabled).
	NodeExporterEnabled bool
	// OtelDeployEnabled deploys an OpenTelemetry collector
	// (otel_deploy_enabled).
	OtelDeployEnabled bool
	// Behaviours maps a messaging behaviour name to its settings
	// (behaviours).
	Behaviours map[string]Behaviour

	// PolicyMaxSteps bounds the Starlark execution steps of one policy
	// call (policy_max_steps).
	PolicyMaxSteps uint64
	// PolicyTimeout bounds the wall-clock time of one policy call
	// (policy_timeout).
	PolicyTimeout time.Duration
	// PolicyMaxMemoryMiB bounds what one policy call may allocate and keep,
	// in MiB (policy_max_memory_mib; policy.Limits.MaxMemory).
	PolicyMaxMemoryMiB int
	// PolicyMaxDepth bounds how deeply a policy's calls nest
	// (policy_max_depth; policy.Limits.MaxDepth).
	PolicyMaxDepth int
	// PolicyPollInterval is how often the policy folder is rescanned in
	// addition to file-system notifications (policy_poll_interval).
	PolicyPollInterval time.Duration
	// PlanLogSize is the number of plans kept for queries (plan_log_size).
	PlanLogSize int
	// PendingTimeout is how long a plan may wait for an asynchronous
	// mechanism result before it fails (pending_timeout).
	PendingTimeout time.Duration
	// SysfsRoot is where /sys is mounted (sysfs_root); node mechanisms
	// and telemetry read and write below it.
	SysfsRoot string
	// ProcfsRoot is where /proc is mounted (procfs_root).
	ProcfsRoot string
	// NvidiaSMI is the nvidia-smi binary (nvidia_smi); empty means look it
	// up in PATH.
	NvidiaSMI string
}

// NewOptions returns the default options.
func NewOptions() *Options {
	return &Options{
		InstallPath:                "/etc/mlsysops",
		PolicyDirectory:            "/etc/mlsysops/policies",
		MonitoringInterval:         5 * time.Second,
		NodeExporterScrapeInterval: 10 * time.Second,
		NodeExporterEnabled:        true,
		OtelDeployEnabled:          true,
		PolicyMaxSteps:             5_000_000,
		PolicyMaxMemoryMiB:         256,
		PolicyMaxDepth:             200,
		PolicyTimeout:              2 * time.Second,
		PolicyPollInterval:         10 * time.Second,
		PlanLogSize:                1000,
		PendingTimeout:             5 * time.Minute,
		SysfsRoot:                  "/sys",
		ProcfsRoot:                 "/proc",
	}
}

// EnabledMechanisms returns the mechanisms to enable: Mechanisms, or the
// layer's defaults when the configuration names none.
func (o *Options) EnabledMechanisms() []string {
	if o.Mechanisms != nil {
		return append([]string(nil), o.Mechanisms...)
	}
	return append([]string(nil), DefaultMechanisms[o.Layer]...)
}

// EnabledBehaviours returns the names of the enabled behaviours, sorted.
func (o *Options) EnabledBehaviours() []string {
	var names []string
	for name, b := range o.Behaviours {
		if b.Enabled {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// AddFlags adds one flag per option to fs. Flags take precedence over the
// environment and the file.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.ConfigFile, "config", o.ConfigFile, "agent configuration file (YAML, upstream config.yaml format); default $CONFIG_PATH, else <install-path>/config/<node-name>-config.yaml, else ./config.yaml")
	fs.StringVar(&o.InstallPath, "install-path", o.InstallPath, "agent base folder ($MLSYSOPS_INSTALL_PATH)")
	fs.StringVar(&o.NodeName, "node-name", o.NodeName, "the agent's host name ($NODE_NAME; default: the host name)")
	for _, s := range o.settings() {
		if s.flag == "" {
			continue
		}
		switch p := s.ptr.(type) {
		case *string:
			fs.StringVar(p, s.flag, *p, s.usage)
		case *Layer:
			fs.Var((*layerValue)(p), s.flag, s.usage)
		case *[]string:
			if s.kind == kindMetrics {
				fs.Var((*metricsValue)(p), s.flag, s.usage)
			} else {
				fs.StringSliceVar(p, s.flag, *p, s.usage)
			}
		case *time.Duration:
			fs.Var((*intervalValue)(p), s.flag, s.usage)
		case *bool:
			fs.BoolVar(p, s.flag, *p, s.usage)
		case *int:
			fs.IntVar(p, s.flag, *p, s.usage)
		case *uint64:
			fs.Uint64Var(p, s.flag, *p, s.usage)
		}
	}
}

// Validate checks the options and returns an *Error listing every problem
// with its key.
func (o *Options) Validate() error {
	var ps []Problem
	add := func(key, format string, args ...any) {
		ps = append(ps, Problem{Key: key, Message: fmt.Sprintf(format, args...)})
	}
	if o.NodeName == "" {
		add("node_name", "is empty; set NODE_NAME or --node-name")
	}
	if o.Layer == "" {
		add("continuum_layer", "is required: one of continuum, cluster, node")
	} else if !o.Layer.Valid() {
		add("continuum_layer", "%q is not one of continuum, cluster, node", o.Layer)
	}
	checkNames := func(key string, names []string) {
		seen := map[string]bool{}
		for i, n := range names {
			switch {
			case n == "":
				add(fmt.Sprintf("%s[%d]", key, i), "is empty")
			case seen[n]:
				add(fmt.Sprintf("%s[%d]", key, i), "%q is listed twice", n)
			}
			seen[n] = true
		}
	}
	checkNames("mechanisms", o.Mechanisms)
	checkNames("default_telemetry_metrics", o.DefaultTelemetryMetrics)
	for name := range o.Behaviours {
		if name == "" {
			add("behaviours", "has an entry with an empty name")
		}
	}
	positive := func(key string, d time.Duration) {
		if d <= 0 {
			add(key, "must be positive, got %s", d)
		}
	}
	positive("monitoring_interval", o.MonitoringInterval)
	positive("node_exporter_scrape_interval", o.NodeExporterScrapeInterval)
	positive("policy_timeout", o.PolicyTimeout)
	positive("policy_poll_interval", o.PolicyPollInterval)
	positive("pending_timeout", o.PendingTimeout)
	if o.PolicyMaxSteps == 0 {
		add("policy_max_steps", "must be positive")
	}
	if o.PolicyMaxMemoryMiB <= 0 || o.PolicyMaxMemoryMiB > 1<<20 {
		add("policy_max_memory_mib", "must be between 1 and 1048576, got %d", o.PolicyMaxMemoryMiB)
	}
	if o.PolicyMaxDepth <= 0 || o.PolicyMaxDepth > 10_000 {
		add("policy_max_depth", "must be between 1 and 10000, got %d", o.PolicyMaxDepth)
	}
	if o.PlanLogSize <= 0 || o.PlanLogSize > 1_000_000 {
		add("plan_log_size", "must be between 1 and 1000000, got %d", o.PlanLogSize)
	}
	if o.SysfsRoot == "" {
		add("sysfs_root", "is empty")
	}
	if o.ProcfsRoot == "" {
		add("procfs_root", "is empty")
	}
	return newError("options", ps)
}
