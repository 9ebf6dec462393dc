package description

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

// validApp returns an application that passes every rule: a GPU server and
// a client that depends on it, with an interaction, QoS metrics and a
// global satisfaction goal. Test cases change one thing.
func validApp() *mlsysopsv1.MLSysOpsApp {
	target := 20.0
	threshold := 0.7
	q := resource.MustParse
	ptr := func(x resource.Quantity) *resource.Quantity { return &x }
	return &mlsysopsv1.MLSysOpsApp{
		ObjectMeta: metav1.ObjectMeta{Name: "demo"},
		Spec: mlsysopsv1.MLSysOpsAppSpec{
			ClusterPlacement: &mlsysopsv1.ClusterPlacement{ClusterID: []string{"cloud-1"}},
			Components: []mlsysopsv1.Component{
				{
					Metadata:      mlsysopsv1.ComponentMetadata{Name: "server"},
					NodePlacement: &mlsysopsv1.NodePlacement{ContinuumLayer: []mlsysopsv1.ContinuumLayer{"cloud"}, Labels: []string{"accelerator:gpu"}},
					Containers: []mlsysopsv1.Container{{
						Image: "example.org/server:1",
						PlatformRequirements: &mlsysopsv1.PlatformRequirements{
							CPU:    &mlsysopsv1.CPURequirements{Requests: ptr(q("1")), Limits: ptr(q("2")), Architecture: []string{"amd64"}},
							Memory: &mlsysopsv1.MemoryRequirements{Requests: ptr(q("1Gi")), Limits: ptr(q("2Gi"))},
							GPU:    &mlsysopsv1.GPURequirements{Requests: 1, Limits: 1, Model: "NVIDIA-H100-80GB-HBM3", Memory: 80},
						},
						Ports: []mlsysopsv1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: "TCP"}},
						Env:   []mlsysopsv1.EnvVar{{Name: "NODE_IP", ValueFrom: &mlsysopsv1.EnvVarSource{FieldRef: &mlsysopsv1.FieldRef{FieldPath: "status.hostIP"}}}},
					}},
					QoSMetrics: []mlsysopsv1.QoSMetric{{ApplicationMetricID: "latency", Target: &target, Relation: mlsysopsv1.RelationLowerOrEqual}},
				},
				{
					Metadata:   mlsysopsv1.ComponentMetadata{Name: "client"},
					DependsOn:  []string{"server"},
					Containers: []mlsysopsv1.Container{{Image: "example.org/client:1"}},
				},
			},
			ComponentInteractions: []mlsysopsv1.ComponentInteraction{{ComponentName1: "client", Type: "egress", ComponentName2: "server"}},
			PermittedActions:      []string{"component_relocation"},
			GlobalSatisfaction: &mlsysopsv1.GlobalSatisfaction{
				Threshold: &threshold, Relation: mlsysopsv1.RelationGreaterThan,
				AchievementWeights: []mlsysopsv1.AchievementWeight{{MetricID: "latency", Weight: 1}},
			},
		},
	}
}

// validNode returns a node description that passes every rule.
func validNode() *mlsysopsv1.MLSysOpsNode {
	return &mlsysopsv1.MLSysOpsNode{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-1"},
		Spec: mlsysopsv1.MLSysOpsNodeSpec{
			ClusterID:      "cloud-1",
			ContinuumLayer: mlsysopsv1.LayerCloud,
			Labels:         []string{"accelerator:gpu"},
			Location:       []float64{23.7, 37.9},
			Environment:    mlsysopsv1.NodeEnvironment{NodeType: "bare_metal", OS: "ubuntu", ContainerRuntime: []string{"containerd"}},
			Sensors:        []mlsysopsv1.NodeSensor{{Camera: &mlsysopsv1.NodeCameraSensor{Model: "d455"}}},
			Hardware: &mlsysopsv1.NodeHardware{
				CPU:    &mlsysopsv1.NodeCPU{Architecture: "amd64", Cores: 32, Frequency: []int64{2_000_000_000}},
				Memory: 256,
				Disk:   1000,
				GPU:    &mlsysopsv1.NodeGPU{Model: "NVIDIA-H100-80GB-HBM3", Memory: 80, Instances: 8},
			},
		},
	}
}

// summary reduces field errors to "Type path" strings, so that tests pin
// what is reported and where without pinning the wording.
func summary(errs field.ErrorList) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, string(e.Type)+" "+e.Field)
	}
	return out
}

func metaName(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }
