package testbed

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/mlsysops-go/mlsysops/deployments/deployer"
	"github.com/mlsysops-go/mlsysops/internal/images"
	"github.com/mlsysops-go/mlsysops/internal/state"
	"github.com/mlsysops-go/mlsysops/internal/testbed/kwoklet"
	"github.com/mlsysops-go/mlsysops/internal/testbed/proc"
)

// The MLSysOps agents of the testbed run from the DaemonSets the deployer
// installs (deployments/deployer, external services: the testbed's
// ejabberd and Redis): in containers on the real nodes, and on KWOK nodes
// as processes the kwoklet starts from the pods' specs, each KWOK node in
// a network namespace of its own on the testbed bridge.

// kwokletNode is a KWOK node whose agent pods the kwoklet runs.
type kwokletNode struct {
	Name    string `json:"name"`
	Cluster string `json:"cluster"`
	NetNS   string `json:"netns"`
	IP      string `json:"ip"`
}

// kwokletNodes lists the KWOK nodes of every member cluster in a stable
// order, which gives each its address.
func (tb *Testbed) kwokletNodes() []kwokletNode {
	var out []kwokletNode
	for _, n := range tb.set.Nodes {
		if isReal(tb.real, n.Name) {
			continue
		}
		out = append(out, kwokletNode{Name: n.Name, Cluster: n.Spec.ClusterID})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	for k := range out {
		out[k].NetNS, out[k].IP = tb.net.KwokletNetNSFile(k), tb.net.KwokletIP(k)
	}
	return out
}

func (tb *Testbed) kwokletNodesFile() string { return tb.l.path("run", "kwoklet-nodes.json") }

// setupKwokletNetwork gives every KWOK node its namespace and writes the
// list the kwoklets read.
func (tb *Testbed) setupKwokletNetwork() error {
	nodes := tb.kwokletNodes()
	for k := range nodes {
		if err := tb.net.setupKwokletNode(k); err != nil {
			return err
		}
	}
	b, err := json.MarshalIndent(nodes, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(tb.kwokletNodesFile(), b, 0o644)
}

// kwokletProcesses is one kwoklet per member cluster.
func (tb *Testbed) kwokletProcesses() []*proc.Process {
	var out []*proc.Process
	for _, c := range tb.clusters {
		args := []string{"kwoklet", "--cluster=" + c, "--kubeconfig=" + tb.l.path("kubeconfig"), "--context=" + c,
			"--state=" + tb.l.path("kwoklet", c), "--nodes=" + tb.kwokletNodesFile(), "--bin-dir=" + tb.opts.BinDir}
		out = append(out, tb.process("kwoklet-"+c, testbedBinary, args, func(context.Context) error { return nil }))
	}
	return out
}

// kwokletPrograms is where the images' programs are extracted for the
// kwoklet.
func kwokletPrograms(binDir string) string { return filepath.Join(binDir, "kwoklet") }

// extractPrograms copies each image's program out of the built images
// (bin/images) for the kwoklet: KWOK nodes run the very file the real
// nodes' containers run.
func (tb *Testbed) extractPrograms() error {
	dir := kwokletPrograms(tb.opts.BinDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, im := range images.Catalog {
		if im.Name == "pause" {
			continue
		}
		if err := images.ExtractProgram(tb.imagesDir(), im.Name, filepath.Join(dir, im.Binary)); err != nil {
			return fmt.Errorf("program of image %s for the kwoklet: %w", im.Name, err)
		}
	}
	return nil
}

// KwokletImages are the images the kwoklet runs, from the catalog: each
// image's program (extracted from the built image into binDir/kwoklet) at
// the image's entrypoint path, as the image's user.
func KwokletImages(binDir string) []kwoklet.Image {
	var out []kwoklet.Image
	for _, im := range images.Catalog {
		out = append(out, kwoklet.Image{
			Repository: images.Prefix + "/" + im.Name,
			Entrypoint: images.BinDir + "/" + im.Binary,
			Program:    filepath.Join(kwokletPrograms(binDir), im.Binary),
			Args:       im.Args, Env: append([]string{"PATH=" + images.BinDir + ":/usr/bin:/bin"}, im.Env...),
			UID: images.UID, GID: images.GID,
		})
	}
	return out
}

// KwokletOptions are the options of the kwoklet of one cluster (the
// testbed's hidden `kwoklet` command).
type KwokletOptions struct {
	Cluster, Kubeconfig, Context, StateDir, NodesFile, BinDir string
}

// RunKwoklet runs the kwoklet of one member cluster until ctx ends.
func RunKwoklet(ctx context.Context, o KwokletOptions, logOut io.Writer) error {
	cfg, err := restConfig(o.Kubeconfig, o.Context)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(o.NodesFile)
	if err != nil {
		return err
	}
	var nodes []kwokletNode
	if err := json.Unmarshal(b, &nodes); err != nil {
		return fmt.Errorf("%s: %w", o.NodesFile, err)
	}
	byName := map[string]kwokletNode{}
	for _, n := range nodes {
		byName[n.Name] = n
	}
	// Pods reach their cluster's apiserver where the testbed serves it on
	// the bridge: a KWOK node's namespace has no kube-proxy rules for the
	// kubernetes Service.
	api, err := url.Parse(cfg.Host)
	if err != nil || api.Hostname() == "" || api.Port() == "" {
		return fmt.Errorf("apiserver address %q of context %s: want https://host:port", cfg.Host, o.Context)
	}
	r, err := kwoklet.New(kwoklet.Options{
		Cluster: o.Cluster, Config: cfg, StateDir: o.StateDir,
		ServiceEnv: map[string]string{"KUBERNETES_SERVICE_HOST": api.Hostname(), "KUBERNETES_SERVICE_PORT": api.Port(),
			"KUBERNETES_SERVICE_PORT_HTTPS": api.Port()},
		Images:   KwokletImages(o.BinDir),
		Selector: "app.kubernetes.io/part-of=mlsysops",
		NodeRoot: func(node string) string { return filepath.Join(o.StateDir, "nodes", node) },
		Network: func(pod *corev1.Pod) (string, string, error) {
			n, ok := byName[pod.Spec.NodeName]
			if !ok {
				return "", "", fmt.Errorf("KWOK node %s has no network namespace (not in %s)", pod.Spec.NodeName, o.NodesFile)
			}
			return n.NetNS, n.IP, nil
		},
		Log: slog.New(slog.NewJSONHandler(logOut, nil)),
	})
	if err != nil {
		return err
	}
	return r.Run(ctx)
}

// InstallOptions are the deployer's options for MLSysOps on a testbed,
// as a user would install it: external services (the testbed's ejabberd
// and Redis on the bridge, where pods reach them), the images the real
// nodes have (version of bin/images), the Karmada API as the host's pods
// reach it.
func InstallOptions(env *Env) (*deployer.Options, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	m, err := images.LoadManifest(filepath.Join(root, "bin", "images"))
	if err != nil {
		return nil, err
	}
	o := deployer.NewOptionsFromEnv(func(string) (string, bool) { return "", false })
	o.Kubeconfig = env.Kubeconfig
	o.Descriptions = env.Agents.Descriptions
	o.Services = deployer.ModeExternal
	o.XMPPDomain, o.XMPPServer, o.XMPPCAFile = env.XMPPDomain, strings.Join(env.Agents.XMPPAddrs, ","), env.XMPPCAFile
	// The admin API on the bridge: the accounts reconciler's pod on the
	// host's real node uses it, and so does the deployer.
	o.EjabberdAPI, o.EjabberdAdmin, o.EjabberdAdminPasswordFile = env.Agents.XMPPAdminURL, env.XMPPAdminJID, env.Agents.AdminPasswordFile
	o.RedisAddress, o.RedisPasswordFile = env.Agents.RedisAddr, env.Agents.RedisPasswordFile
	// Each component logs in as its own ACL user, which the testbed's
	// Redis defines (redisACLUsers), with the password kept beside
	// Redis's own in the pki folder.
	o.RedisUserPasswordFiles = map[string]string{}
	for _, c := range state.Components() {
		o.RedisUserPasswordFiles[string(c)] = RedisUserPasswordFile(filepath.Dir(env.Agents.RedisPasswordFile), c)
	}
	// The ML connector's database, role and bucket on the testbed's
	// PostgreSQL and S3 server, on the bridge. Its download URL is its
	// NodePort on the host cluster's node (KARMADA_HOST_IP: no bundled
	// service uses it in external mode).
	o.PostgresAddress, o.PostgresPasswordFile = env.Agents.PostgresAddr, env.Agents.PostgresPasswordFile
	o.PostgresUser, o.PostgresDatabase = env.Agents.PostgresDatabase, env.Agents.PostgresDatabase
	o.S3Endpoint, o.S3AccessKeyFile, o.S3SecretKeyFile, o.S3Bucket = env.Agents.S3URL, env.Agents.S3AccessKeyFile, env.Agents.S3SecretKeyFile, InstalledS3Bucket
	o.KarmadaHostIP = env.Agents.ContinuumNodeIP
	// MLS_TOKEN and MLS_VIEWER_TOKEN work on the installed API and
	// connector as on the testbed's own.
	o.NorthboundTokensFile = env.Agents.NorthboundTokensFile
	o.Registry, o.Tag, o.PullPolicy = images.DefaultRegistry, m.Version, string(corev1.PullIfNotPresent)
	o.KarmadaAPIServer = env.Agents.KarmadaAPIServer
	o.Timeout = 5 * time.Minute
	return o, nil
}

// installMLSysOps installs MLSysOps onto the testbed with the deployer.
func (tb *Testbed) installMLSysOps(ctx context.Context) error {
	o, err := InstallOptions(tb.env())
	if err != nil {
		return err
	}
	if err := o.Validate(true, true); err != nil {
		return err
	}
	start := time.Now()
	rep, err := deployer.New(o, progressWriter{tb}).Install(ctx)
	if err != nil {
		return err
	}
	tb.progress("installed with the deployer in %.1fs (%d objects, %d written)", "mlsysops", time.Since(start).Seconds(), len(rep.Results), rep.Count(deployer.Created)+rep.Count(deployer.Changed))
	return nil
}

// progressWriter prints the deployer's lines as the testbed's progress.
type progressWriter struct{ tb *Testbed }

func (w progressWriter) Write(b []byte) (int, error) {
	w.tb.outMu.Lock()
	defer w.tb.outMu.Unlock()
	_, err := w.tb.opts.Out.Write(b)
	return len(b), err
}

// startKwoklets gives the KWOK nodes their namespaces, extracts the
// images' programs and starts one kwoklet per member cluster.
func (tb *Testbed) startKwoklets(ctx context.Context, imgs *builtImages) error {
	if _, _, err := imgs.wait(); err != nil {
		return err
	}
	if err := tb.setupKwokletNetwork(); err != nil {
		return err
	}
	if err := tb.extractPrograms(); err != nil {
		return err
	}
	ps := tb.kwokletProcesses()
	for _, p := range ps {
		if _, ok := p.Pid(); ok && p.SameCommand() {
			continue
		}
		_ = p.Stop(15 * time.Second)
		if err := p.Start(); err != nil {
			return err
		}
	}
	tb.progress("%d clusters, %d KWOK nodes, each in its namespace", "kwoklets", len(ps), len(tb.kwokletNodes()))
	return nil
}

// TagRealNodeImages gives every image of bin/images a second tag in the
// containerd of every real node (ctr images tag), as pushing a new version
// to a registry would make it pullable: an upgrade to that tag then runs
// on the real nodes as well as on the KWOK nodes.
func TagRealNodeImages(ctx context.Context, env *Env, tag string) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	m, err := images.LoadManifest(filepath.Join(root, "bin", "images"))
	if err != nil {
		return err
	}
	for _, n := range env.RealNodes {
		for _, im := range m.Images {
			repo := im.Ref[:strings.LastIndex(im.Ref, ":")]
			cmd := exec.CommandContext(ctx, "ctr", "-a", n.Containerd, "-n", "k8s.io", "images", "tag", "--force", im.Ref, repo+":"+tag)
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("node %s: ctr images tag %s: %w: %s", n.Name, im.Ref, err, out)
			}
		}
	}
	return nil
}
