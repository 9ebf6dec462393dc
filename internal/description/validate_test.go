package description

import (
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/api/resource"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
)

func TestValidateApp(t *testing.T) {
	q := func(s string) *resource.Quantity { v := resource.MustParse(s); return &v }
	cases := map[string]struct {
		change func(a *mlsysopsv1.MLSysOpsApp)
		want   []string
	}{
		"valid": {change: func(*mlsysopsv1.MLSysOpsApp) {}},
		"no name": {
			change: func(a *mlsysopsv1.MLSysOpsApp) { a.Name = "" },
			want:   []string{"FieldValueRequired metadata.name"},
		},
		"name not a DNS label": {
			change: func(a *mlsysopsv1.MLSysOpsApp) { a.Name = "my.app" },
			want:   []string{"FieldValueInvalid metadata.name"},
		},
		"no components": {
			change: func(a *mlsysopsv1.MLSysOpsApp) {
				a.Spec.Components = nil
				a.Spec.ComponentInteractions = nil
				a.Spec.GlobalSatisfaction = nil
			},
			want: []string{"FieldValueRequired spec.components"},
		},
		"duplicate component names": {
			change: func(a *mlsysopsv1.MLSysOpsApp) {
				a.Spec.Components[1].Metadata.Name = "server"
				a.Spec.Components[1].DependsOn = nil
				a.Spec.ComponentInteractions = nil
			},
			want: []string{"FieldValueDuplicate spec.components[1].metadata.name"},
		},
		"component name not a DNS-1035 label": {
			change: func(a *mlsysopsv1.MLSysOpsApp) { a.Spec.Components[1].Metadata.Name = "1client" },
			want: []string{
				"FieldValueInvalid spec.components[1].metadata.name",
				"FieldValueNotFound spec.component_interactions[0].component_name1",
			},
		},
		"volumes, init containers and probes": {
			change: func(a *mlsysopsv1.MLSysOpsApp) {
				c := &a.Spec.Components[0]
				c.Volumes = []mlsysopsv1.Volume{{Name: "models"}, {Name: "models"}, {Name: "Bad_Name"}}
				c.InitContainers = []mlsysopsv1.Container{{
					Image:          "fetch:1",
					Ports:          []mlsysopsv1.ContainerPort{{ContainerPort: 80}},
					ReadinessProbe: &mlsysopsv1.Probe{HTTPGet: &mlsysopsv1.HTTPGetProbe{Path: "/ready", Port: 80}},
					VolumeMounts:   []mlsysopsv1.VolumeMount{{Name: "nope", MountPath: "/models"}},
				}}
				c.Containers[0].VolumeMounts = []mlsysopsv1.VolumeMount{
					{Name: "models", MountPath: "/models"}, {Name: "models", MountPath: "/models"}, {Name: "models", MountPath: "models/../x"},
				}
				c.Containers[0].ReadinessProbe = &mlsysopsv1.Probe{HTTPGet: &mlsysopsv1.HTTPGetProbe{Path: "ready", Port: 8080}}
			},
			want: []string{
				"FieldValueDuplicate spec.components[0].volumes[1].name",
				"FieldValueInvalid spec.components[0].volumes[2].name",
				"FieldValueForbidden spec.components[0].init_containers[0].ports",
				"FieldValueForbidden spec.components[0].init_containers[0].readiness_probe",
				"FieldValueNotFound spec.components[0].init_containers[0].volume_mounts[0].name",
				"FieldValueDuplicate spec.components[0].containers[0].volume_mounts[1].mount_path",
				"FieldValueInvalid spec.components[0].containers[0].volume_mounts[2].mount_path",
				"FieldValueInvalid spec.components[0].containers[0].readiness_probe.http_get.path",
			},
		},
		"probe without a handler": {
			change: func(a *mlsysopsv1.MLSysOpsApp) {
				a.Spec.Components[0].Containers[0].ReadinessProbe = &mlsysopsv1.Probe{PeriodSeconds: 2}
			},
			want: []string{"FieldValueRequired spec.components[0].containers[0].readiness_probe.http_get"},
		},
		"depends_on unknown component": {
			change: func(a *mlsysopsv1.MLSysOpsApp) { a.Spec.Components[1].DependsOn = []string{"db"} },
			want:   []string{"FieldValueNotFound spec.components[1].depends_on[0]"},
		},
		"depends_on itself": {
			change: func(a *mlsysopsv1.MLSysOpsApp) { a.Spec.Components[1].DependsOn = []string{"client"} },
			want:   []string{"FieldValueInvalid spec.components[1].depends_on[0]"},
		},
		"dependency cycle": {
			change: func(a *mlsysopsv1.MLSysOpsApp) { a.Spec.Components[0].DependsOn = []string{"client"} },
			want:   []string{"FieldValueInvalid spec.components[1].depends_on"},
		},
		"duplicate depends_on": {
			change: func(a *mlsysopsv1.MLSysOpsApp) { a.Spec.Components[1].DependsOn = []string{"server", "server"} },
			want:   []string{"FieldValueDuplicate spec.components[1].depends_on[1]"},
		},
		"interaction names unknown component": {
			change: func(a *mlsysopsv1.MLSysOpsApp) { a.Spec.ComponentInteractions[0].ComponentName2 = "db" },
			want:   []string{"FieldValueNotFound spec.component_interactions[0].component_name2"},
		},
		"interaction with itself": {
			change: func(a *mlsysopsv1.MLSysOpsApp) { a.Spec.ComponentInteractions[0].ComponentName2 = "client" },
			want:   []string{"FieldValueInvalid spec.component_interactions[0].component_name2"},
		},
		"interaction type not in enum": {
			change: func(a *mlsysopsv1.MLSysOpsApp) { a.Spec.ComponentInteractions[0].Type = "sideways" },
			want:   []string{"FieldValueNotSupported spec.component_interactions[0].type"},
		},
		"GPU requests differ from limits": {
			change: func(a *mlsysopsv1.MLSysOpsApp) {
				a.Spec.Components[0].Containers[0].PlatformRequirements.GPU.Requests = 2
			},
			want: []string{"FieldValueInvalid spec.components[0].containers[0].platform_requirements.gpu.requests"},
		},
		"GPU requests only": {
			change: func(a *mlsysopsv1.MLSysOpsApp) {
				a.Spec.Components[0].Containers[0].PlatformRequirements.GPU.Limits = 0
			},
		},
		"negative GPU count": {
			change: func(a *mlsysopsv1.MLSysOpsApp) {
				a.Spec.Components[0].Containers[0].PlatformRequirements.GPU.Limits = -1
				a.Spec.Components[0].Containers[0].PlatformRequirements.GPU.Requests = 0
			},
			want: []string{"FieldValueInvalid spec.components[0].containers[0].platform_requirements.gpu.limits"},
		},
		"CPU requests above limits": {
			change: func(a *mlsysopsv1.MLSysOpsApp) {
				a.Spec.Components[0].Containers[0].PlatformRequirements.CPU.Requests = q("4")
			},
			want: []string{"FieldValueInvalid spec.components[0].containers[0].platform_requirements.cpu.requests"},
		},
		"memory without a unit": {
			change: func(a *mlsysopsv1.MLSysOpsApp) {
				a.Spec.Components[0].Containers[0].PlatformRequirements.Memory.Requests = q("4")
			},
			want: []string{"FieldValueInvalid spec.components[0].containers[0].platform_requirements.memory.requests"},
		},
		"containers disagree on architecture": {
			change: func(a *mlsysopsv1.MLSysOpsApp) {
				c := &a.Spec.Components[0]
				c.Containers = append(c.Containers, mlsysopsv1.Container{Image: "x", PlatformRequirements: &mlsysopsv1.PlatformRequirements{
					CPU: &mlsysopsv1.CPURequirements{Architecture: []string{"arm64"}}}})
			},
			want: []string{"FieldValueInvalid spec.components[0].containers"},
		},
		"containers disagree on GPU model": {
			change: func(a *mlsysopsv1.MLSysOpsApp) {
				c := &a.Spec.Components[0]
				c.Containers = append(c.Containers, mlsysopsv1.Container{Image: "x", PlatformRequirements: &mlsysopsv1.PlatformRequirements{
					GPU: &mlsysopsv1.GPURequirements{Model: "Tesla-T4"}}})
			},
			want: []string{"FieldValueInvalid spec.components[0].containers[1].platform_requirements.gpu.model"},
		},
		"architecture not in enum": {
			change: func(a *mlsysopsv1.MLSysOpsApp) {
				a.Spec.Components[0].Containers[0].PlatformRequirements.CPU.Architecture = []string{"riscv64"}
			},
			want: []string{"FieldValueNotSupported spec.components[0].containers[0].platform_requirements.cpu.architecture[0]"},
		},
		"port out of range": {
			change: func(a *mlsysopsv1.MLSysOpsApp) { a.Spec.Components[0].Containers[0].Ports[0].ContainerPort = 70000 },
			want:   []string{"FieldValueInvalid spec.components[0].containers[0].ports[0].container_port"},
		},
		"port name invalid": {
			change: func(a *mlsysopsv1.MLSysOpsApp) { a.Spec.Components[0].Containers[0].Ports[0].Name = "http_port" },
			want:   []string{"FieldValueInvalid spec.components[0].containers[0].ports[0].name"},
		},
		"duplicate port in one component": {
			change: func(a *mlsysopsv1.MLSysOpsApp) {
				c := &a.Spec.Components[0]
				c.Containers = append(c.Containers, mlsysopsv1.Container{Image: "x", Ports: []mlsysopsv1.ContainerPort{{Name: "http", ContainerPort: 8080}}})
			},
			want: []string{
				"FieldValueDuplicate spec.components[0].containers[1].ports[0].container_port",
				"FieldValueDuplicate spec.components[0].containers[1].ports[0].name",
			},
		},
		"same port number, other protocol": {
			change: func(a *mlsysopsv1.MLSysOpsApp) {
				c := &a.Spec.Components[0].Containers[0]
				c.Ports = append(c.Ports, mlsysopsv1.ContainerPort{ContainerPort: 8080, Protocol: "UDP"})
			},
		},
		"host port differs from container port with host network": {
			change: func(a *mlsysopsv1.MLSysOpsApp) {
				a.Spec.Components[0].HostNetwork = true
				a.Spec.Components[0].Containers[0].Ports[0].HostPort = 9090
			},
			want: []string{"FieldValueInvalid spec.components[0].containers[0].ports[0].host_port"},
		},
		"host IP not an IP": {
			change: func(a *mlsysopsv1.MLSysOpsApp) { a.Spec.Components[0].Containers[0].Ports[0].HostIP = "localhost" },
			want:   []string{"FieldValueInvalid spec.components[0].containers[0].ports[0].host_ip"},
		},
		"env value and value_from": {
			change: func(a *mlsysopsv1.MLSysOpsApp) { a.Spec.Components[0].Containers[0].Env[0].Value = "x" },
			want:   []string{"FieldValueInvalid spec.components[0].containers[0].env[0].value_from"},
		},
		"env field path unknown": {
			change: func(a *mlsysopsv1.MLSysOpsApp) {
				a.Spec.Components[0].Containers[0].Env[0].ValueFrom.FieldRef.FieldPath = "status.phase"
			},
			want: []string{"FieldValueNotSupported spec.components[0].containers[0].env[0].value_from.field_ref.field_path"},
		},
		"env field path from a label": {
			change: func(a *mlsysopsv1.MLSysOpsApp) {
				a.Spec.Components[0].Containers[0].Env[0].ValueFrom.FieldRef.FieldPath = "metadata.labels['mlsysops.eu/app']"
			},
		},
		"env value_from without field_ref": {
			change: func(a *mlsysopsv1.MLSysOpsApp) { a.Spec.Components[0].Containers[0].Env[0].ValueFrom.FieldRef = nil },
			want:   []string{"FieldValueRequired spec.components[0].containers[0].env[0].value_from.field_ref"},
		},
		"duplicate env": {
			change: func(a *mlsysopsv1.MLSysOpsApp) {
				c := &a.Spec.Components[0].Containers[0]
				c.Env = append(c.Env, mlsysopsv1.EnvVar{Name: "NODE_IP", Value: "1"})
			},
			want: []string{"FieldValueDuplicate spec.components[0].containers[0].env[1].name"},
		},
		"env name invalid": {
			change: func(a *mlsysopsv1.MLSysOpsApp) { a.Spec.Components[0].Containers[0].Env[0].Name = "A=B" },
			want:   []string{"FieldValueInvalid spec.components[0].containers[0].env[0].name"},
		},
		"empty image": {
			change: func(a *mlsysopsv1.MLSysOpsApp) { a.Spec.Components[1].Containers[0].Image = "" },
			want:   []string{"FieldValueRequired spec.components[1].containers[0].image"},
		},
		"node placement label without key": {
			change: func(a *mlsysopsv1.MLSysOpsApp) { a.Spec.Components[0].NodePlacement.Labels = []string{":x"} },
			want:   []string{"FieldValueInvalid spec.components[0].node_placement.labels[0]"},
		},
		"node placement node invalid": {
			change: func(a *mlsysopsv1.MLSysOpsApp) { a.Spec.Components[0].NodePlacement.Node = "Node_1" },
			want:   []string{"FieldValueInvalid spec.components[0].node_placement.node"},
		},
		"continuum layer any": {
			change: func(a *mlsysopsv1.MLSysOpsApp) {
				a.Spec.Components[0].NodePlacement.ContinuumLayer = []mlsysopsv1.ContinuumLayer{mlsysopsv1.LayerAny}
			},
		},
		"continuum layer not in enum": {
			change: func(a *mlsysopsv1.MLSysOpsApp) {
				a.Spec.Components[0].NodePlacement.ContinuumLayer = []mlsysopsv1.ContinuumLayer{"fog"}
			},
			want: []string{"FieldValueNotSupported spec.components[0].node_placement.continuum_layer[0]"},
		},
		"sensor entry without a sensor": {
			change: func(a *mlsysopsv1.MLSysOpsApp) {
				a.Spec.Components[0].Sensors = []mlsysopsv1.AppSensor{{Protocol: "RTSP"}}
			},
			want: []string{"FieldValueRequired spec.components[0].sensors[0]"},
		},
		"sensor entry with two sensors": {
			change: func(a *mlsysopsv1.MLSysOpsApp) {
				a.Spec.Components[0].Sensors = []mlsysopsv1.AppSensor{{Camera: &mlsysopsv1.AppCameraSensor{}, Temperature: &mlsysopsv1.TemperatureSensor{}}}
			},
			want: []string{"FieldValueInvalid spec.components[0].sensors[0]"},
		},
		"QoS target without relation": {
			change: func(a *mlsysopsv1.MLSysOpsApp) { a.Spec.Components[0].QoSMetrics[0].Relation = "" },
			want:   []string{"FieldValueRequired spec.components[0].qos_metrics[0].relation"},
		},
		"duplicate QoS metric": {
			change: func(a *mlsysopsv1.MLSysOpsApp) {
				c := &a.Spec.Components[0]
				c.QoSMetrics = append(c.QoSMetrics, c.QoSMetrics[0])
			},
			want: []string{"FieldValueDuplicate spec.components[0].qos_metrics[1].application_metric_id"},
		},
		"duplicate bucket": {
			change: func(a *mlsysopsv1.MLSysOpsApp) {
				a.Spec.Components[0].Storage = &mlsysopsv1.Storage{Buckets: []mlsysopsv1.Bucket{{BucketID: "b"}, {BucketID: "b"}}}
			},
			want: []string{"FieldValueDuplicate spec.components[0].storage.buckets[1].bucket_id"},
		},
		"weight for unknown metric": {
			change: func(a *mlsysopsv1.MLSysOpsApp) {
				a.Spec.GlobalSatisfaction.AchievementWeights[0].MetricID = "throughput"
			},
			want: []string{"FieldValueNotFound spec.global_satisfaction.achievement_weights[0].metric_id"},
		},
		"weights above one": {
			change: func(a *mlsysopsv1.MLSysOpsApp) {
				gs := a.Spec.GlobalSatisfaction
				gs.AchievementWeights = append(gs.AchievementWeights, mlsysopsv1.AchievementWeight{MetricID: "other", Weight: 0.5})
				a.Spec.Components[1].QoSMetrics = []mlsysopsv1.QoSMetric{{ApplicationMetricID: "other"}}
			},
			want: []string{"FieldValueInvalid spec.global_satisfaction.achievement_weights"},
		},
		"threshold zero": {
			change: func(a *mlsysopsv1.MLSysOpsApp) { zero := 0.0; a.Spec.GlobalSatisfaction.Threshold = &zero },
			want:   []string{"FieldValueInvalid spec.global_satisfaction.threshold"},
		},
		"threshold above one": {
			change: func(a *mlsysopsv1.MLSysOpsApp) { v := 1.5; a.Spec.GlobalSatisfaction.Threshold = &v },
			want:   []string{"FieldValueInvalid spec.global_satisfaction.threshold"},
		},
		"permitted action not in enum": {
			change: func(a *mlsysopsv1.MLSysOpsApp) { a.Spec.PermittedActions = []string{"reboot"} },
			want:   []string{"FieldValueNotSupported spec.permitted_actions[0]"},
		},
		"permitted action star": {
			change: func(a *mlsysopsv1.MLSysOpsApp) { a.Spec.PermittedActions = []string{"*"} },
		},
		"cluster id invalid": {
			change: func(a *mlsysopsv1.MLSysOpsApp) { a.Spec.ClusterPlacement.ClusterID = []string{"Cloud_1"} },
			want:   []string{"FieldValueInvalid spec.cluster_placement.cluster_id[0]"},
		},
		"single_node unknown component and overlap": {
			change: func(a *mlsysopsv1.MLSysOpsApp) {
				a.Spec.SingleNode = []mlsysopsv1.SingleNodePlacement{
					{Components: []string{"server", "client"}},
					{Components: []string{"client", "db"}},
					{},
				}
			},
			want: []string{
				"FieldValueInvalid spec.single_node[1].components[0]",
				"FieldValueNotFound spec.single_node[1].components[1]",
				"FieldValueRequired spec.single_node[2].components",
			},
		},
		"restart policy not in enum": {
			change: func(a *mlsysopsv1.MLSysOpsApp) { a.Spec.Components[0].RestartPolicy = "Sometimes" },
			want:   []string{"FieldValueNotSupported spec.components[0].restart_policy"},
		},
		"runtime class not in enum": {
			change: func(a *mlsysopsv1.MLSysOpsApp) { a.Spec.Components[0].RuntimeClassName = "gvisor" },
			want:   []string{"FieldValueNotSupported spec.components[0].runtime_class_name"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			app := validApp()
			tc.change(app)
			got := summary(ValidateApp(app))
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty(), cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
				t.Errorf("ValidateApp problems (-want +got):\n%s\nall: %v", diff, ValidateApp(app))
			}
		})
	}
}

func TestValidateNode(t *testing.T) {
	cases := map[string]struct {
		change func(n *mlsysopsv1.MLSysOpsNode)
		want   []string
	}{
		"valid": {change: func(*mlsysopsv1.MLSysOpsNode) {}},
		"no continuum layer": {
			change: func(n *mlsysopsv1.MLSysOpsNode) { n.Spec.ContinuumLayer = "" },
			want:   []string{"FieldValueNotSupported spec.continuum_layer"},
		},
		"GPU without model": {
			change: func(n *mlsysopsv1.MLSysOpsNode) { n.Spec.Hardware.GPU.Model = "" },
			want:   []string{"FieldValueRequired spec.hardware.gpu.model"},
		},
		"GPU model that is no label value": {
			change: func(n *mlsysopsv1.MLSysOpsNode) { n.Spec.Hardware.GPU.Model = "???" },
			want:   []string{"FieldValueInvalid spec.hardware.gpu.model"},
		},
		"GPU model is a free string": {
			change: func(n *mlsysopsv1.MLSysOpsNode) { n.Spec.Hardware.GPU.Model = "NVIDIA GeForce RTX 4090" },
		},
		"FPGA without model": {
			change: func(n *mlsysopsv1.MLSysOpsNode) { n.Spec.Hardware.FPGA = &mlsysopsv1.NodeFPGA{Memory: 4} },
			want:   []string{"FieldValueRequired spec.hardware.fpga.model"},
		},
		"labels colliding after sanitizing": {
			change: func(n *mlsysopsv1.MLSysOpsNode) { n.Spec.Labels = []string{"gpu class:a", "gpu-class:b"} },
			want:   []string{"FieldValueInvalid spec.labels[1]"},
		},
		"location out of range": {
			change: func(n *mlsysopsv1.MLSysOpsNode) { n.Spec.Location = []float64{37.9, 123.7} },
			want:   []string{"FieldValueInvalid spec.location[1]"},
		},
		"location with three numbers": {
			change: func(n *mlsysopsv1.MLSysOpsNode) { n.Spec.Location = []float64{1, 2, 3} },
			want:   []string{"FieldValueTooMany spec.location"},
		},
		"cluster id invalid": {
			change: func(n *mlsysopsv1.MLSysOpsNode) { n.Spec.ClusterID = "cloud.1" },
			want:   []string{"FieldValueInvalid spec.cluster_id"},
		},
		"sensor entry without a sensor": {
			change: func(n *mlsysopsv1.MLSysOpsNode) { n.Spec.Sensors = []mlsysopsv1.NodeSensor{{Endpoint: "x"}} },
			want:   []string{"FieldValueRequired spec.sensors[0]"},
		},
		"duplicate acceleration call": {
			change: func(n *mlsysopsv1.MLSysOpsNode) {
				api := mlsysopsv1.NodeAccelerationAPI{CallName: "image_inference", SupportedPlatforms: []mlsysopsv1.SupportedPlatform{{Name: "gpu"}}}
				n.Spec.AccelerationAPI = []mlsysopsv1.NodeAccelerationAPI{api, api}
			},
			want: []string{"FieldValueDuplicate spec.acceleration_api[1].call_name"},
		},
		"acceleration call without platforms": {
			change: func(n *mlsysopsv1.MLSysOpsNode) {
				n.Spec.AccelerationAPI = []mlsysopsv1.NodeAccelerationAPI{{CallName: "image_inference"}}
			},
			want: []string{"FieldValueRequired spec.acceleration_api[0].supported_platforms"},
		},
		"CPU frequency zero": {
			change: func(n *mlsysopsv1.MLSysOpsNode) { n.Spec.Hardware.CPU.Frequency = []int64{0} },
			want:   []string{"FieldValueInvalid spec.hardware.cpu.frequency[0]"},
		},
		"pairing IP invalid": {
			change: func(n *mlsysopsv1.MLSysOpsNode) {
				n.Spec.NetworkResources = &mlsysopsv1.NetworkResources{RedirectionInterface: []mlsysopsv1.RedirectionInterface{
					{ConnectionType: "wifi", PairingInfo: &mlsysopsv1.PairingInfo{IPAddress: "10.0.0"}}}}
			},
			want: []string{"FieldValueInvalid spec.network_resources.redirection_interface[0].pairing_info.ip_address"},
		},
		"redirection interface without connection type": {
			change: func(n *mlsysopsv1.MLSysOpsNode) {
				n.Spec.NetworkResources = &mlsysopsv1.NetworkResources{RedirectionInterface: []mlsysopsv1.RedirectionInterface{{}}}
			},
			want: []string{"FieldValueNotSupported spec.network_resources.redirection_interface[0].connection_type"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			node := validNode()
			tc.change(node)
			got := summary(Validate(node))
			sort.Strings(got)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Validate problems (-want +got):\n%s\nall: %v", diff, Validate(node))
			}
		})
	}
}

func TestValidateClusterContinuumDatacenter(t *testing.T) {
	cases := map[string]struct {
		obj  Object
		want []string
	}{
		"valid cluster": {
			obj: &mlsysopsv1.MLSysOpsCluster{ObjectMeta: metaName("c1"), Spec: mlsysopsv1.MLSysOpsClusterSpec{ClusterID: "c1", Nodes: []string{"n1", "n2.example.org"}}},
		},
		"cluster with bad and duplicate nodes": {
			obj: &mlsysopsv1.MLSysOpsCluster{ObjectMeta: metaName("c1"), Spec: mlsysopsv1.MLSysOpsClusterSpec{ClusterID: "c1", Nodes: []string{"N1", "n2", "n2", ""}}},
			want: []string{
				"FieldValueDuplicate spec.nodes[2]",
				"FieldValueInvalid spec.nodes[0]",
				"FieldValueRequired spec.nodes[3]",
			},
		},
		"cluster without id": {
			obj:  &mlsysopsv1.MLSysOpsCluster{ObjectMeta: metaName("c1"), Spec: mlsysopsv1.MLSysOpsClusterSpec{Nodes: []string{}}},
			want: []string{"FieldValueRequired spec.cluster_id"},
		},
		"cluster without nodes": {
			obj:  &mlsysopsv1.MLSysOpsCluster{ObjectMeta: metaName("c1"), Spec: mlsysopsv1.MLSysOpsClusterSpec{ClusterID: "c1"}},
			want: []string{"FieldValueRequired spec.nodes"},
		},
		"continuum with bad cluster": {
			obj:  &mlsysopsv1.MLSysOpsContinuum{ObjectMeta: metaName("host"), Spec: mlsysopsv1.MLSysOpsContinuumSpec{ContinuumID: "x", Clusters: []string{"ok", "Not_OK"}}},
			want: []string{"FieldValueInvalid spec.clusters[1]"},
		},
		"datacenter with bad layer and location": {
			obj: &mlsysopsv1.MLSysOpsDatacenter{ObjectMeta: metaName("dc"), Spec: mlsysopsv1.MLSysOpsDatacenterSpec{
				DatacenterID: "dc", ClusterID: "c1", Continuum: "fog", Nodes: []string{"n1"}, Location: []float64{-200, 0}}},
			want: []string{"FieldValueInvalid spec.location[0]", "FieldValueNotSupported spec.continuum"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := summary(Validate(tc.obj))
			sort.Strings(got)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Validate problems (-want +got):\n%s\nall: %v", diff, Validate(tc.obj))
			}
		})
	}
}
