package generic

import (
	"encoding/json"
	"fmt"
	"net"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/mlsysops-go/mlsysops/internal/resources/sanitize"
)

// ValidateSpec applies the rules a schema cannot express to the spec of a
// system description (node, cluster, continuum or datacenter), given as
// checked generic data or as the typed spec of internal/api/v1: both
// encode to the same JSON. Paths start at p. It stays quiet about empty
// values: the schema check reports missing required fields, and values it
// rejected arrive here empty. Applications' rules need the API types and
// live in package description; ValidateSpec returns nil for them.
func ValidateSpec(kind string, spec interface{}, p *field.Path) field.ErrorList {
	var rules interface {
		validate(p *field.Path) field.ErrorList
	}
	switch kind {
	case KindNode:
		rules = &nodeSpec{}
	case KindCluster:
		rules = &clusterSpec{}
	case KindContinuum:
		rules = &continuumSpec{}
	case KindDatacenter:
		rules = &datacenterSpec{}
	default:
		return nil
	}
	data, err := json.Marshal(spec)
	if err == nil {
		err = json.Unmarshal(data, rules)
	}
	if err != nil {
		return field.ErrorList{field.InternalError(p, fmt.Errorf("read the %s spec for its rules: %w", kind, err))}
	}
	return rules.validate(p)
}

// nodeSensorKinds are the keys of a node's sensors entry that describe the
// sensor, of which an entry has exactly one.
var nodeSensorKinds = []string{"camera", "temperature", "accelerometer", "humidity", "sound", "co2", "barometer", "air_quality"}

// nodeSpec holds the parts of an MLSysOpsNode spec its rules read.
type nodeSpec struct {
	Labels          []string                     `json:"labels"`
	ClusterID       string                       `json:"cluster_id"`
	Location        []float64                    `json:"location"`
	Sensors         []map[string]json.RawMessage `json:"sensors"`
	AccelerationAPI []struct {
		CallName string `json:"call_name"`
	} `json:"acceleration_api"`
	Hardware *struct {
		GPU  *model `json:"gpu"`
		FPGA *model `json:"fpga"`
	} `json:"hardware"`
	NetworkResources *struct {
		RedirectionInterface []struct {
			PairingInfo *struct {
				IPAddress string `json:"ip_address"`
			} `json:"pairing_info"`
		} `json:"redirection_interface"`
	} `json:"network_resources"`
}

type model struct {
	Model string `json:"model"`
}

func (spec *nodeSpec) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, ValidateLabels(p.Child("labels"), spec.Labels)...)
	if spec.ClusterID != "" {
		errs = append(errs, ValidateClusterID(p.Child("cluster_id"), spec.ClusterID)...)
	}
	errs = append(errs, validateLocation(p.Child("location"), spec.Location)...)
	for i, s := range spec.Sensors {
		set := make([]bool, len(nodeSensorKinds))
		for j, k := range nodeSensorKinds {
			v, ok := s[k]
			set[j] = ok && string(v) != "null"
		}
		errs = append(errs, OneSensor(p.Child("sensors").Index(i), "camera, temperature, accelerometer, humidity, sound, co2, barometer, air_quality", set...)...)
	}
	calls := map[string]bool{}
	for i, api := range spec.AccelerationAPI {
		if api.CallName != "" && calls[api.CallName] {
			errs = append(errs, field.Duplicate(p.Child("acceleration_api").Index(i).Child("call_name"), api.CallName))
		}
		calls[api.CallName] = true
	}
	if hw := spec.Hardware; hw != nil {
		hp := p.Child("hardware")
		if hw.GPU != nil {
			if hw.GPU.Model == "" {
				errs = append(errs, field.Required(hp.Child("gpu", "model"), "placement matches GPUs by model (e.g. NVIDIA-H100-80GB-HBM3)"))
			}
			errs = append(errs, Labelable(hp.Child("gpu", "model"), hw.GPU.Model)...)
		}
		if hw.FPGA != nil {
			if hw.FPGA.Model == "" {
				errs = append(errs, field.Required(hp.Child("fpga", "model"), "placement matches FPGAs by model (e.g. zcu102)"))
			}
			errs = append(errs, Labelable(hp.Child("fpga", "model"), hw.FPGA.Model)...)
		}
	}
	if nr := spec.NetworkResources; nr != nil {
		for i, ri := range nr.RedirectionInterface {
			if ri.PairingInfo != nil && ri.PairingInfo.IPAddress != "" && net.ParseIP(ri.PairingInfo.IPAddress) == nil {
				errs = append(errs, field.Invalid(p.Child("network_resources", "redirection_interface").Index(i).Child("pairing_info", "ip_address"),
					ri.PairingInfo.IPAddress, "must be an IP address"))
			}
		}
	}
	return errs
}

// clusterSpec holds the parts of an MLSysOpsCluster spec its rules read.
type clusterSpec struct {
	ClusterID string   `json:"cluster_id"`
	Nodes     []string `json:"nodes"`
}

func (spec *clusterSpec) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.ClusterID != "" {
		errs = append(errs, ValidateClusterID(p.Child("cluster_id"), spec.ClusterID)...)
	}
	for i, n := range spec.Nodes {
		errs = append(errs, validateHostname(p.Child("nodes").Index(i), n)...)
	}
	return errs
}

// continuumSpec holds the parts of an MLSysOpsContinuum spec its rules
// read.
type continuumSpec struct {
	Clusters []string `json:"clusters"`
}

func (spec *continuumSpec) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, c := range spec.Clusters {
		errs = append(errs, ValidateClusterID(p.Child("clusters").Index(i), c)...)
	}
	return errs
}

// datacenterSpec holds the parts of an MLSysOpsDatacenter spec its rules
// read.
type datacenterSpec struct {
	ClusterID string    `json:"cluster_id"`
	Nodes     []string  `json:"nodes"`
	Location  []float64 `json:"location"`
}

func (spec *datacenterSpec) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.ClusterID != "" {
		errs = append(errs, ValidateClusterID(p.Child("cluster_id"), spec.ClusterID)...)
	}
	for i, n := range spec.Nodes {
		errs = append(errs, validateHostname(p.Child("nodes").Index(i), n)...)
	}
	return append(errs, validateLocation(p.Child("location"), spec.Location)...)
}

// ValidateClusterID checks a cluster id: it is a Karmada cluster name and
// the value of the mlsysops.eu/cluster label.
func ValidateClusterID(p *field.Path, id string) field.ErrorList {
	if id == "" {
		return field.ErrorList{field.Required(p, "must not be empty")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(id) {
		errs = append(errs, field.Invalid(p, id, msg))
	}
	return errs
}

// validateHostname checks a node's host name, which is a Kubernetes node
// name.
func validateHostname(p *field.Path, name string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "must not be empty")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(p, name, msg))
	}
	return errs
}

func validateLocation(p *field.Path, loc []float64) field.ErrorList {
	if len(loc) != 2 {
		return nil // the schema reports the length
	}
	var errs field.ErrorList
	if loc[0] < -180 || loc[0] > 180 {
		errs = append(errs, field.Invalid(p.Index(0), loc[0], "longitude must be between -180 and 180 (location is [longitude, latitude])"))
	}
	if loc[1] < -90 || loc[1] > 90 {
		errs = append(errs, field.Invalid(p.Index(1), loc[1], "latitude must be between -90 and 90 (location is [longitude, latitude])"))
	}
	return errs
}

// ValidateLabels checks that free-form labels convert into Kubernetes
// labels, and that no two convert into the same label key.
func ValidateLabels(p *field.Path, labels []string) field.ErrorList {
	var errs field.ErrorList
	keys := map[string]string{}
	for i, l := range labels {
		key, _, ok := sanitize.UserLabel(l)
		if !ok {
			errs = append(errs, field.Invalid(p.Index(i), l, "must have a key made of letters, digits, '-', '_' or '.', such as node-type:rpi or gpu"))
			continue
		}
		if prev, dup := keys[key]; dup {
			errs = append(errs, field.Invalid(p.Index(i), l, fmt.Sprintf("gives the same Kubernetes label key %s as %q", userLabelKey(key), prev)))
			continue
		}
		keys[key] = l
	}
	return errs
}

// userLabelKey is the label key a user label's sanitized name becomes; it
// equals internal/api/v1.LabelUserPrefix + name.
func userLabelKey(name string) string { return group + "/label." + name }

// Labelable checks that a model name can be matched through a node label.
func Labelable(p *field.Path, v string) field.ErrorList {
	if v != "" && sanitize.LabelValue(v) == "" {
		return field.ErrorList{field.Invalid(p, v, "must contain letters or digits")}
	}
	return nil
}

// OneSensor checks that a sensors entry describes one sensor: set tells,
// for each kind of sensor the entry may describe (listed in kinds), whether
// it does.
func OneSensor(p *field.Path, kinds string, set ...bool) field.ErrorList {
	n := 0
	for _, s := range set {
		if s {
			n++
		}
	}
	switch {
	case n == 0:
		return field.ErrorList{field.Required(p, "describe one sensor: "+kinds)}
	case n > 1:
		return field.ErrorList{field.Invalid(p, field.OmitValueType{}, "describe one sensor per entry, not "+fmt.Sprint(n))}
	}
	return nil
}
