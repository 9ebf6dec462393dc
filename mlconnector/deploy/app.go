package deploy

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/mlconnector/api"
)

// Names inside the application of a deployment.
const (
	// Component is the one component: its Deployment and Service are
	// named model in namespace mls-<deployment id>.
	Component = "model"
	// ModelName is the model's name in the Open Inference Protocol paths.
	ModelName = "model"
	// modelDir is where the init container puts the files.
	modelDir    = "/models"
	volumeName  = "models"
	dataFile    = "train.csv"
	versionFlag = "--model-version"
)

// buildInput is everything an application description is made from.
type buildInput struct {
	ID      string
	Spec    api.DeploymentSpec
	Model   api.Model
	Version api.Version
	// Data is the training data served with the model (explanations'
	// background); nil when the model has none.
	Data    *api.Artifact
	Runtime api.Runtime
	// FetchImage runs the init container (`fetch`); its first argument.
	FetchImage string
	// DownloadURL is the connector's base URL as pods reach it.
	DownloadURL string
	// Key signs download tokens.
	Key []byte
}

// fileExt keeps a safe extension of the uploaded file's name.
var fileExt = regexp.MustCompile(`\.[A-Za-z0-9]{1,10}$`)

// modelFile names the model file in the pod: model plus the upload's
// extension (the model server reads the format from it).
func modelFile(v api.Version) string {
	ext := strings.ToLower(fileExt.FindString(v.Artifact.FileName))
	if ext == "" {
		ext = map[string]string{"onnx": ".onnx", "lightgbm": ".txt"}[v.Format]
	}
	return "model" + ext
}

// DownloadToken authorises a deployment's init container to download one
// file: an HMAC of the deployment and file ids, so it names nothing else,
// and works as long as the deployment exists.
func DownloadToken(key []byte, deploymentID, fileID string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("mlconnector-download\x00" + deploymentID + "\x00" + fileID))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (in *buildInput) downloadURI(fileID string) string {
	return strings.TrimRight(in.DownloadURL, "/") + api.PathDownloads + "/" + url.PathEscape(in.ID) + "/" + url.PathEscape(fileID) +
		"?token=" + DownloadToken(in.Key, in.ID, fileID)
}

// manifest is what the init container reads (modelserver fetch).
type manifest struct {
	Artifacts []manifestEntry `json:"artifacts"`
}

type manifestEntry struct {
	Name   string `json:"name"`
	URI    string `json:"uri"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// GPUMemoryGB is the GPU memory a replica of the model needs, in GB (the
// unit of descriptions, read as GiB): what the user asks for, what the
// model declares (runresource gpu_memory or gpu_memory_gb), and twice its
// file, whichever is most; at least 1.
func GPUMemoryGB(m api.Model, v api.Version, askGB int64) int64 {
	need := int64(math.Ceil(float64(2*v.Artifact.Size) / float64(1<<30)))
	for _, r := range m.RunResource {
		if r.ResourceName == "gpu_memory" || r.ResourceName == "gpu_memory_gb" {
			if x, err := strconv.ParseFloat(r.Value.String(), 64); err == nil && x > 0 {
				need = max(need, int64(math.Ceil(x)))
			}
		}
	}
	return max(need, askGB, 1)
}

// memoryRequest is the default memory of a replica: three times the model
// file (loading, copies, the runtime's arenas) plus 128 MiB for the
// server, at least 256 MiB.
func memoryRequest(v api.Version) *resource.Quantity {
	b := max(3*v.Artifact.Size+(128<<20), 256<<20)
	mi := (b + (1<<20 - 1)) >> 20
	return resource.NewQuantity(mi<<20, resource.BinarySI)
}

// buildApp makes the MLSysOps application of a deployment: one component
// whose init container fetches the version's files (checking their
// SHA-256) into a scratch volume, and whose container serves them with the
// runtime's image on its port, ready once the model is loaded; GPUs, GPU
// memory (the model's too) and placement as asked.
func buildApp(in buildInput) (*mlsysopsv1.MLSysOpsApp, error) {
	spec := in.Spec
	file := modelFile(in.Version)
	man := manifest{Artifacts: []manifestEntry{{Name: file, URI: in.downloadURI(in.Version.Artifact.ID), SHA256: in.Version.Artifact.SHA256, Size: in.Version.Artifact.Size}}}
	scratch := in.Version.Artifact.Size
	if in.Data != nil {
		man.Artifacts = append(man.Artifacts, manifestEntry{Name: dataFile, URI: in.downloadURI(in.Data.ID), SHA256: in.Data.SHA256, Size: in.Data.Size})
		scratch += in.Data.Size
	}
	manJSON, err := json.Marshal(man)
	if err != nil {
		return nil, err
	}
	// The folder holds the files, with room for the temporary copy fetch
	// writes before renaming.
	sizeLimit := resource.NewQuantity(max(2*scratch+(16<<20), 64<<20), resource.BinarySI)

	rt := in.Runtime
	image := rt.Image
	if spec.Image != "" {
		image = spec.Image
	}
	port := rt.Port
	vars := map[string]string{
		"{model_file}": path.Join(modelDir, file), "{model_dir}": modelDir, "{model_name}": ModelName,
		"{model_version}": strconv.Itoa(in.Version.Version), "{format}": in.Version.Format, "{port}": strconv.Itoa(int(port)),
	}
	var args []string
	if rt.BuiltIn {
		args = []string{"serve", "--listen", ":" + strconv.Itoa(int(port)), "--model", path.Join(modelDir, file),
			"--name", ModelName, versionFlag, strconv.Itoa(in.Version.Version)}
		if f := serverFormat(in.Version.Format, file); f != "" {
			args = append(args, "--format", f)
		}
		if in.Data != nil {
			args = append(args, "--background", path.Join(modelDir, dataFile))
			var targets []string
			for _, f := range in.Model.FeatureList {
				if f.Kind == api.FeatureTarget {
					targets = append(targets, f.FeatureName)
				}
			}
			if len(targets) > 0 {
				args = append(args, "--background-exclude", strings.Join(targets, ","))
			}
		}
	} else {
		for _, a := range rt.Args {
			for k, v := range vars {
				a = strings.ReplaceAll(a, k, v)
			}
			args = append(args, a)
		}
	}
	cpu := resource.MustParse("250m")
	if spec.Resources.CPU != "" {
		cpu = resource.MustParse(spec.Resources.CPU)
	}
	mem := memoryRequest(in.Version)
	if spec.Resources.Memory != "" {
		q := resource.MustParse(spec.Resources.Memory)
		mem = &q
	}
	pr := &mlsysopsv1.PlatformRequirements{
		CPU:    &mlsysopsv1.CPURequirements{Requests: &cpu},
		Memory: &mlsysopsv1.MemoryRequirements{Requests: mem},
	}
	if g := spec.Resources.GPU; g != nil && g.Count > 0 {
		pr.GPU = &mlsysopsv1.GPURequirements{Requests: g.Count, Limits: g.Count, Model: g.Model,
			Memory: GPUMemoryGB(in.Model, in.Version, g.MinMemoryGB)}
	}
	fetchCPU, fetchMem := resource.MustParse("100m"), resource.MustParse("64Mi")
	comp := mlsysopsv1.Component{
		Metadata:       mlsysopsv1.ComponentMetadata{Name: Component},
		ExternalAccess: true,
		RestartPolicy:  "Always",
		Volumes:        []mlsysopsv1.Volume{{Name: volumeName, EmptyDir: &mlsysopsv1.EmptyDirVolume{SizeLimit: sizeLimit}}},
		InitContainers: []mlsysopsv1.Container{{
			Image: in.FetchImage,
			Args:  []string{"fetch", "--dest", modelDir},
			Env:   []mlsysopsv1.EnvVar{{Name: "MODELSERVER_MANIFEST", Value: string(manJSON)}},
			PlatformRequirements: &mlsysopsv1.PlatformRequirements{
				CPU: &mlsysopsv1.CPURequirements{Requests: &fetchCPU}, Memory: &mlsysopsv1.MemoryRequirements{Requests: &fetchMem},
			},
			VolumeMounts: []mlsysopsv1.VolumeMount{{Name: volumeName, MountPath: modelDir}},
		}},
		Containers: []mlsysopsv1.Container{{
			Image: image,
			Args:  args,
			Ports: []mlsysopsv1.ContainerPort{{ContainerPort: port, Name: "http"}},
			Env: []mlsysopsv1.EnvVar{
				{Name: "MODEL_DIR", Value: modelDir}, {Name: "MODEL_FILE", Value: path.Join(modelDir, file)},
				{Name: "MODEL_NAME", Value: ModelName}, {Name: "MODEL_VERSION", Value: strconv.Itoa(in.Version.Version)},
				{Name: "MODEL_FORMAT", Value: in.Version.Format},
			},
			VolumeMounts: []mlsysopsv1.VolumeMount{{Name: volumeName, MountPath: modelDir, ReadOnly: true}},
			ReadinessProbe: &mlsysopsv1.Probe{
				HTTPGet: &mlsysopsv1.HTTPGetProbe{Path: "/v2/health/ready", Port: port}, PeriodSeconds: 2, FailureThreshold: 3,
			},
			PlatformRequirements: pr,
		}},
	}
	np := &mlsysopsv1.NodePlacement{}
	if spec.Placement.Continuum != "" {
		np.ContinuumLayer = []mlsysopsv1.ContinuumLayer{mlsysopsv1.ContinuumLayer(spec.Placement.Continuum)}
	}
	if spec.Placement.Node != "" {
		np.Node = spec.Placement.Node
	}
	if spec.Replicas > 1 {
		np.Scaling = &mlsysopsv1.Scaling{ScalingMode: "manual", Instances: spec.Replicas}
	}
	if np.Node != "" || len(np.ContinuumLayer) > 0 || np.Scaling != nil {
		comp.NodePlacement = np
	}
	app := &mlsysopsv1.MLSysOpsApp{
		TypeMeta:   metav1.TypeMeta{APIVersion: mlsysopsv1.SchemeGroupVersion.String(), Kind: mlsysopsv1.KindApp},
		ObjectMeta: metav1.ObjectMeta{Name: in.ID},
		Spec: mlsysopsv1.MLSysOpsAppSpec{
			Components: []mlsysopsv1.Component{comp},
			// The agents may move the model server between nodes and
			// clusters when one fails.
			PermittedActions: []string{"component_relocation"},
		},
	}
	if spec.Placement.ClusterID != "" || pr.GPU != nil {
		cp := &mlsysopsv1.ClusterPlacement{}
		if spec.Placement.ClusterID != "" {
			cp.ClusterID = []string{spec.Placement.ClusterID}
		}
		if pr.GPU != nil {
			cp.Accelerators = []string{"gpu"}
		}
		app.Spec.ClusterPlacement = cp
	}
	return app, nil
}

// serverFormat is the built-in server's --format for a version: its own
// names, or "" to let it read the file.
func serverFormat(format, file string) string {
	switch format {
	case "onnx":
		return format
	case "xgboost":
		// XGBoost 1.0+ saves JSON; older versions a binary format.
		if strings.HasSuffix(file, ".json") {
			return "xgboost-json"
		}
		return "xgboost"
	case "lightgbm":
		if strings.HasSuffix(file, ".json") {
			return "lightgbm-json"
		}
		return "lightgbm"
	}
	return ""
}

// servedVersion reads the version a pod serves from its container's
// arguments (--model-version N), 0 when it does not say.
func servedVersion(args []string) int {
	for i, a := range args {
		if a == versionFlag && i+1 < len(args) {
			n, _ := strconv.Atoi(args[i+1])
			return n
		}
		if v, ok := strings.CutPrefix(a, versionFlag+"="); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}
