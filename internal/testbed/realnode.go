package testbed

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/images"
	"github.com/mlsysops-go/mlsysops/internal/resources"
	"github.com/mlsysops-go/mlsysops/internal/testbed/pki"
	"github.com/mlsysops-go/mlsysops/internal/testbed/proc"
)

// A real node is a simulated machine that really runs pods: its own
// containerd, kubelet and kube-proxy in a network namespace of its own
// (see netPlan), with its own directories, cgroup tree, CNI bridge and pod
// subnet, client certificate and the project's images imported. KWOK
// simulates every other node.
//
// Which nodes are real is data: the label "testbed-node:real" (or
// "testbed-node:kwok") in a node description's labels. Without it a
// cluster's control node (named like the cluster, where its agent runs)
// is real and the others are KWOK nodes. The Karmada host cluster always
// gets one real node, named after the continuum, labelled
// mlsysops.eu/continuumLayer=continuum.
const (
	// RealNodeLabel is the description label key choosing a node's kind.
	RealNodeLabel = "testbed-node"
	// RealNodeValue and KWOKNodeValue are its values.
	RealNodeValue = "real"
	KWOKNodeValue = "kwok"
)

// GPUTaint is the taint of real GPU nodes, as the NVIDIA GPU operator's
// nodes usually carry it: only pods that tolerate it (GPU workloads) land
// there.
var GPUTaint = corev1.Taint{Key: string(mlsysopsv1.ResourceGPU), Value: "present", Effect: corev1.TaintEffectNoSchedule}

// realNode is one real node of the plan.
type realNode struct {
	name    string
	context string // kubeconfig context of its cluster
	index   int    // in the address plan
	// labels, taints and extended resources the testbed sets on the node
	// once the kubelet registered it.
	labels   map[string]string
	taints   []corev1.Taint
	extended corev1.ResourceList
}

// descriptionKind returns "real", "kwok" or "" from a description's labels.
func descriptionKind(labels []string) string {
	for _, l := range labels {
		k, v, _ := strings.Cut(l, ":")
		if strings.TrimSpace(k) == RealNodeLabel {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// planRealNodes lists the real nodes: the host's first, then each member
// cluster's by name.
func (tb *Testbed) planRealNodes() ([]*realNode, error) {
	if tb.opts.KWOKOnly || !tb.settings().realNodes {
		return nil, nil
	}
	var out []*realNode
	if tb.set.Continuum != nil {
		name := tb.set.Continuum.Name
		out = append(out, &realNode{name: name, context: ContextHost, labels: map[string]string{
			mlsysopsv1.LabelContinuumLayer: mlsysopsv1.AgentLayerContinuum,
		}})
	}
	described := map[string]bool{}
	for _, n := range tb.set.Nodes {
		described[n.Name] = true
		kind := descriptionKind(n.Spec.Labels)
		switch kind {
		case RealNodeValue:
		case KWOKNodeValue:
			continue
		case "":
			if n.Name != n.Spec.ClusterID {
				continue
			}
		default:
			return nil, fmt.Errorf("node description %s: label %s:%s: want %s or %s", n.Name, RealNodeLabel, kind, RealNodeValue, KWOKNodeValue)
		}
		rn := &realNode{name: n.Name, context: n.Spec.ClusterID, labels: map[string]string{}}
		for k, v := range resources.NodeLabels(n) {
			switch k {
			// The kubelet owns these: it reports the machine it runs on.
			case mlsysopsv1.LabelArch, mlsysopsv1.LabelKubeOS, mlsysopsv1.LabelHostname:
				continue
			}
			rn.labels[k] = v
		}
		if n.Name == n.Spec.ClusterID {
			rn.labels[mlsysopsv1.LabelContinuumLayer] = mlsysopsv1.AgentLayerCluster
		}
		if gpus, ok := resources.NodeCapacity(n)[mlsysopsv1.ResourceGPU]; ok {
			rn.extended = corev1.ResourceList{mlsysopsv1.ResourceGPU: gpus}
			rn.taints = []corev1.Taint{GPUTaint}
		}
		out = append(out, rn)
	}
	// A cluster without a control node description gets one (nodes.go):
	// real by default.
	for _, c := range tb.clusters {
		if !described[c] {
			out = append(out, &realNode{name: c, context: c, labels: map[string]string{
				mlsysopsv1.LabelContinuumLayer: mlsysopsv1.AgentLayerCluster, mlsysopsv1.LabelCluster: c,
			}})
		}
	}
	sort.SliceStable(out[min(1, len(out)):], func(i, j int) bool {
		a, b := out[1+i], out[1+j]
		if a.context != b.context {
			return a.context < b.context
		}
		return a.name < b.name
	})
	if len(out) > maxRealNodes {
		return nil, fmt.Errorf("%d real nodes: the testbed's address plan has room for %d", len(out), maxRealNodes)
	}
	for i, n := range out {
		n.index = i
	}
	return out, nil
}

// isReal reports whether the named node of a cluster is a real node.
func isReal(real []*realNode, name string) bool {
	for _, n := range real {
		if n.name == name {
			return true
		}
	}
	return false
}

// Paths of a real node.
func (tb *Testbed) nodeDir(n *realNode, parts ...string) string {
	return tb.l.path(append([]string{"nodes", n.name}, parts...)...)
}

func (tb *Testbed) nodeSocket(n *realNode) string { return tb.nodeDir(n, "containerd.sock") }

// cgroupRoot is the node's kubelet cgroupRoot; runtimeCgroup holds its
// containerd (and the shims), kubelet and kube-proxy.
func (tb *Testbed) cgroupBase() string                     { return "/mlsysops-" + strconv.Itoa(tb.opts.PortBase) }
func (tb *Testbed) cgroupRoot(n *realNode) string          { return tb.cgroupBase() + "/" + n.name }
func (tb *Testbed) runtimeCgroup(n *realNode) string       { return tb.cgroupRoot(n) + "/runtime" }
func nodeProcessName(n *realNode, component string) string { return "node-" + n.name + "-" + component }

// apiServerPort is the port of the apiserver of a kubeconfig context.
func (tb *Testbed) apiServerPort(context string) int {
	switch context {
	case ContextHost:
		return tb.l.port(portHostAPIServer)
	case ContextKarmada:
		return tb.l.port(portKarmadaAPI)
	}
	return tb.l.memberPort(tb.memberIndex(context), memberAPIServer)
}

// nodeProcesses returns the node's containerd, kubelet and kube-proxy, in
// start order.
func (tb *Testbed) nodeProcesses(n *realNode) []*proc.Process {
	ip := tb.net.NodeIP(n.index)
	containerd := tb.process(nodeProcessName(n, "containerd"), "", []string{"--config", tb.nodeDir(n, "containerd.toml")}, socketReady(tb.nodeSocket(n)))
	containerd.Path = containerdPath
	kubelet := tb.process(nodeProcessName(n, "kubelet"), "kubelet", []string{
		"--config=" + tb.nodeDir(n, "kubelet.yaml"),
		"--kubeconfig=" + tb.nodeDir(n, "kubelet.kubeconfig"),
		"--root-dir=" + tb.nodeDir(n, "kubelet"),
		"--cert-dir=" + tb.nodeDir(n, "pki"),
		"--hostname-override=" + n.name,
		"--node-ip=" + ip,
		"--v=1",
	}, httpReady(fmt.Sprintf("http://%s:%d/healthz", ip, kubeletHealthzPort)))
	proxy := tb.process(nodeProcessName(n, "kube-proxy"), "kube-proxy", []string{
		"--config=" + tb.nodeDir(n, "kube-proxy.yaml"),
		"--hostname-override=" + n.name,
		"--v=1",
	}, httpReady(fmt.Sprintf("http://%s:%d/healthz", ip, kubeProxyHealthzPort)))
	// The kubelet and kube-proxy find iptables on PATH; containerd finds
	// runc there and the shim next to itself.
	ps := []*proc.Process{containerd, kubelet, proxy}
	for _, p := range ps {
		p.NetNS = tb.net.NetNSFile(n.index)
		p.Started = func(pid int) error { return joinCgroup(tb.runtimeCgroup(n), pid) }
		p.Env = append(p.Env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	}
	return ps
}

// prepareRealNode writes the node's certificates, kubeconfigs and
// configuration files and returns its processes in start order.
func (tb *Testbed) prepareRealNode(n *realNode, pauseRef string) ([]*proc.Process, error) {
	for _, d := range []string{"containerd", "kubelet", "pod-logs", "cni/net.d", "cni/ipam", "runc", "pki"} {
		if err := os.MkdirAll(tb.nodeDir(n, d), 0o755); err != nil {
			return nil, err
		}
	}
	c := tb.certs
	ip := tb.net.NodeIP(n.index)
	pkiDir := tb.nodeDir(n, "pki")
	kcCert, kcKey, err := c.ca.Issue(pkiDir, "kubelet-client", pki.CertSpec{CommonName: "system:node:" + n.name, Organization: []string{"system:nodes"}, Client: true})
	if err != nil {
		return nil, err
	}
	ksCert, ksKey, err := c.ca.Issue(pkiDir, "kubelet-serving", pki.CertSpec{CommonName: n.name, DNSNames: []string{n.name}, IPs: []net.IP{net.ParseIP(ip)}, Server: true})
	if err != nil {
		return nil, err
	}
	kpCert, kpKey, err := c.client("kube-proxy", "system:kube-proxy")
	if err != nil {
		return nil, err
	}
	server := fmt.Sprintf("https://%s:%d", tb.net.HostIP(), tb.apiServerPort(n.context))
	kubeletKC := tb.nodeDir(n, "kubelet.kubeconfig")
	proxyKC := tb.nodeDir(n, "kube-proxy.kubeconfig")
	if err := writeKubeconfig(kubeletKC, c.ca.CertFile, n.context, kubeconfigEntry{n.context, server, kcCert, kcKey}); err != nil {
		return nil, err
	}
	if err := writeKubeconfig(proxyKC, c.ca.CertFile, n.context, kubeconfigEntry{n.context, server, kpCert, kpKey}); err != nil {
		return nil, err
	}

	files := map[string]string{
		"containerd.toml":                tb.containerdConfig(n, pauseRef),
		"cni/net.d/10-mlsysops.conflist": tb.cniConfig(n),
		"kubelet.yaml":                   tb.kubeletConfig(n, ksCert, ksKey),
		"kube-proxy.yaml":                tb.kubeProxyConfig(n, proxyKC),
	}
	for f, content := range files {
		if err := writeIfChanged(tb.nodeDir(n, f), []byte(content)); err != nil {
			return nil, err
		}
	}
	return tb.nodeProcesses(n), nil
}

// writeIfChanged writes a configuration file unless it already holds
// content: kube-proxy exits when its configuration file is written, so
// an up that wrote the same file again restarted every kube-proxy.
func writeIfChanged(path string, content []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, content) {
		return nil
	}
	return os.WriteFile(path, content, 0o644)
}

// Fixed ports inside each real node's namespace: every node has its own
// address and port space.
const (
	kubeletHealthzPort   = 10248
	kubeProxyHealthzPort = 10256
	criStreamPort        = 10010
	containerdPath       = "/usr/bin/containerd"
	ctrPath              = "/usr/bin/ctr"
)

// socketReady is ready when a unix socket accepts connections.
func socketReady(path string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		var d net.Dialer
		c, err := d.DialContext(ctx, "unix", path)
		if err != nil {
			return err
		}
		return c.Close()
	}
}

func (tb *Testbed) containerdConfig(n *realNode, pauseRef string) string {
	cri := `plugins."io.containerd.grpc.v1.cri"`
	return fmt.Sprintf(`# Written by the testbed for real node %[1]s.
version = 2
root = %[2]q
state = %[3]q
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %[4]q

[ttrpc]
  address = %[5]q

[plugins."io.containerd.internal.v1.opt"]
  path = %[6]q

[%[7]s]
  sandbox_image = %[8]q
  stream_server_address = %[9]q
  stream_server_port = "%[10]d"
  # Without it every sandbox fails: this machine's capability bounding set
  # lacks CAP_SYS_RESOURCE, so no OOM score may go below 0.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  enable_selinux = false

[%[7]s.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[%[7]s.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[%[7]s.containerd.runtimes.runc.options]
  SystemdCgroup = false
  Root = %[11]q

# The handler of RuntimeClass nvidia: there is no GPU on this machine, so
# GPU pods run with plain runc.
[%[7]s.containerd.runtimes.nvidia]
  runtime_type = "io.containerd.runc.v2"

[%[7]s.containerd.runtimes.nvidia.options]
  SystemdCgroup = false
  Root = %[11]q

[%[7]s.cni]
  bin_dir = "/usr/lib/cni"
  conf_dir = %[12]q
  max_conf_num = 1
`, n.name, tb.nodeDir(n, "containerd", "root"), tb.nodeDir(n, "containerd", "state"), tb.nodeSocket(n), tb.nodeSocket(n)+".ttrpc",
		tb.nodeDir(n, "containerd", "opt"), cri, pauseRef, tb.net.NodeIP(n.index), criStreamPort, tb.nodeDir(n, "runc"), tb.nodeDir(n, "cni", "net.d"))
}

func (tb *Testbed) cniConfig(n *realNode) string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": %q,
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": %q, "gateway": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": %q
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, tb.net.NetNS(n.index), tb.net.PodSubnet(n.index), tb.net.PodGateway(n.index), tb.nodeDir(n, "cni", "ipam"))
}

func (tb *Testbed) kubeletConfig(n *realNode, cert, key string) string {
	ip := tb.net.NodeIP(n.index)
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: 10250
readOnlyPort: 0
healthzBindAddress: %[1]s
healthzPort: %[2]d
containerRuntimeEndpoint: unix://%[3]s
cgroupDriver: cgroupfs
cgroupRoot: %[4]s
cgroupsPerQOS: true
failSwapOn: false
podLogsDir: %[5]s
resolvConf: ""
tlsCertFile: %[6]s
tlsPrivateKeyFile: %[7]s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[8]s}
authorization:
  mode: Webhook
# Images cannot be pulled here: never collect them.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  nodefs.inodesFree: 1%%
  imagefs.available: 1%%
serializeImagePulls: false
maxPods: 110
`, ip, kubeletHealthzPort, tb.nodeSocket(n), tb.cgroupRoot(n), tb.nodeDir(n, "pod-logs"), cert, key, tb.certs.ca.CertFile)
}

func (tb *Testbed) kubeProxyConfig(n *realNode, kubeconfig string) string {
	ip := tb.net.NodeIP(n.index)
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %[1]s
mode: iptables
bindAddress: %[2]s
healthzBindAddress: %[2]s:%[3]d
metricsBindAddress: 127.0.0.1:10249
# Leave the kernel's global conntrack settings alone.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, kubeconfig, ip, kubeProxyHealthzPort)
}

// importImages imports the images archive into the node's containerd
// unless every image is there with the same digest.
func (tb *Testbed) importImages(ctx context.Context, n *realNode, m *images.Manifest, archive string) (bool, error) {
	out, err := exec.CommandContext(ctx, ctrPath, "--address", tb.nodeSocket(n), "--namespace", "k8s.io", "images", "ls").CombinedOutput()
	if err != nil {
		return false, fmt.Errorf("ctr images ls: %w: %s", err, bytes.TrimSpace(out))
	}
	have := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 3 {
			have[f[0]] = f[2]
		}
	}
	missing := false
	for _, im := range m.Images {
		if have[im.Ref] != im.Digest {
			missing = true
		}
	}
	if !missing {
		return false, nil
	}
	cmd := exec.CommandContext(ctx, ctrPath, "--address", tb.nodeSocket(n), "--namespace", "k8s.io", "images", "import", archive)
	if out, err := cmd.CombinedOutput(); err != nil {
		return false, fmt.Errorf("ctr images import %s: %w: %s", archive, err, bytes.TrimSpace(out))
	}
	return true, nil
}

// applyRealNode sets the testbed's labels, taints and extended resources
// on a registered real node, leaving what the kubelet and the controllers
// own alone.
func applyRealNode(ctx context.Context, cs kubernetes.Interface, n *realNode) error {
	nodes := cs.CoreV1().Nodes()
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		cur, err := nodes.Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		labels := nodeLabels(cur.Labels, n.labels)
		taints := append([]corev1.Taint(nil), cur.Spec.Taints...)
		for _, want := range n.taints {
			found := false
			for i, t := range taints {
				if t.Key == want.Key && t.Effect == want.Effect {
					taints[i], found = want, true
				}
			}
			if !found {
				taints = append(taints, want)
			}
		}
		if fmt.Sprint(labels) == fmt.Sprint(cur.Labels) && len(taints) == len(cur.Spec.Taints) && fmt.Sprint(taints) == fmt.Sprint(cur.Spec.Taints) {
			return nil
		}
		cur.Labels, cur.Spec.Taints = labels, taints
		_, err = nodes.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("node %s: labels and taints: %w", n.name, err)
	}
	if len(n.extended) == 0 {
		return nil
	}
	// Extended resources are advertised by patching the node's status
	// capacity (what a device plugin would do); the kubelet keeps them and
	// derives allocatable.
	var parts []string
	for k, v := range n.extended {
		parts = append(parts, fmt.Sprintf("%q: %q", k, v.String()))
	}
	sort.Strings(parts)
	body := fmt.Sprintf(`{"status": {"capacity": {%[1]s}, "allocatable": {%[1]s}}}`, strings.Join(parts, ", "))
	if _, err := nodes.Patch(ctx, n.name, types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("node %s: extended resources: %w", n.name, err)
	}
	return nil
}

// waitRegistered waits until the kubelet registered the node.
func waitRegistered(ctx context.Context, cs kubernetes.Interface, name string, timeout time.Duration) error {
	return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, nil
		}
		// A KWOK node of that name from an earlier run must go first.
		return n.Labels[KWOKLabel] == "", nil
	})
}

// hasExtended reports whether the node shows the extended resources in
// its allocatable.
func hasExtended(node *corev1.Node, want corev1.ResourceList) bool {
	for k, v := range want {
		if q, ok := node.Status.Allocatable[k]; !ok || q.Cmp(v) != 0 {
			return false
		}
	}
	return true
}

// startRealNodes starts every real node that is not running and makes
// each Ready with its labels, taints, extended resources and images.
func (tb *Testbed) startRealNodes(ctx context.Context, real []*realNode, imgs *builtImages) error {
	if len(real) == 0 {
		return nil
	}
	if err := acquireHostState(tb.l.state); err != nil {
		return fmt.Errorf("host state: %w", err)
	}
	var peers []int
	for _, n := range real {
		peers = append(peers, n.index)
	}
	keep := map[string]bool{}
	for _, n := range real {
		keep[tb.net.NetNS(n.index)] = true
	}
	for k := range tb.kwokletNodes() {
		keep[tb.net.KwokletNetNS(k)] = true
	}
	for _, ns := range tb.net.netnsList() {
		if !keep[ns] {
			if err := tb.net.removeNode(ns); err != nil {
				return err
			}
		}
	}
	m, archive, err := imgs.wait()
	if err != nil {
		return fmt.Errorf("images for the real nodes: %w", err)
	}
	pause := m.Ref("pause")
	if pause == "" {
		return fmt.Errorf("images in %s: no pause image", archive)
	}
	errs := make(chan error, len(real))
	for _, n := range real {
		go func() { errs <- tb.startRealNode(ctx, n, peers, m, archive, pause) }()
	}
	var all []error
	for range real {
		if err := <-errs; err != nil {
			all = append(all, err)
		}
	}
	return errors.Join(all...)
}

func (tb *Testbed) startRealNode(ctx context.Context, n *realNode, peers []int, m *images.Manifest, archive, pause string) error {
	start := time.Now()
	if err := tb.net.setupNode(n.index, peers); err != nil {
		return err
	}
	for _, cg := range []string{tb.cgroupRoot(n), tb.runtimeCgroup(n)} {
		if err := ensureCgroup(cg); err != nil {
			return fmt.Errorf("real node %s: %w", n.name, err)
		}
	}
	ps, err := tb.prepareRealNode(n, pause)
	if err != nil {
		return fmt.Errorf("real node %s: %w", n.name, err)
	}
	containerd, rest := ps[0], ps[1:]
	if err := tb.startAll(ctx, []*proc.Process{containerd}); err != nil {
		return err
	}
	imported, err := tb.importImages(ctx, n, m, archive)
	if err != nil {
		return fmt.Errorf("real node %s: %w (see %s)", n.name, err, tb.rel(containerd.LogFile))
	}
	if imported {
		tb.progress("imported %d images", containerd.Name, len(m.Images))
	}
	if err := tb.startAll(ctx, rest); err != nil {
		return err
	}
	cfg, err := restConfig(tb.l.path("kubeconfig"), n.context)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	kubeletLog := tb.rel(rest[0].LogFile)
	if err := waitRegistered(ctx, cs, n.name, 2*time.Minute); err != nil {
		return fmt.Errorf("real node %s: not registered by its kubelet (see %s): %w", n.name, kubeletLog, err)
	}
	if err := applyRealNode(ctx, cs, n); err != nil {
		return err
	}
	var last *corev1.Node
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		node, err := cs.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = node
		if len(n.extended) > 0 && !hasExtended(node, n.extended) {
			// The kubelet resets extended resources it does not know
			// when it registers again: advertise them again.
			if err := applyRealNode(ctx, cs, n); err != nil {
				return false, err
			}
			return false, nil
		}
		return nodeReady(node), nil
	})
	if err != nil {
		detail := ""
		if last != nil {
			for _, c := range last.Status.Conditions {
				if c.Type == corev1.NodeReady {
					detail = ": " + c.Reason + " " + c.Message
				}
			}
		}
		return fmt.Errorf("real node %s not Ready%s (see %s)", n.name, detail, kubeletLog)
	}
	tb.readyMu.Lock()
	if tb.readyIn == nil {
		tb.readyIn = map[string]time.Duration{}
	}
	tb.readyIn[n.name] = time.Since(start)
	tb.readyMu.Unlock()
	tb.progress("Ready (%s, containerd %s, pods %s)", "node "+n.name, tb.net.NodeIP(n.index), tb.rel(tb.nodeSocket(n)), tb.net.PodSubnet(n.index))
	return nil
}

// stopRealNodes stops every real node of the state directory, described
// or not: the kubelet and kube-proxy, then whatever runs in the nodes'
// cgroups (containers, shims), containerd; unmounts what they mounted,
// removes the cgroups, the namespaces and /var/log/containers links into
// the state directory.
func (tb *Testbed) stopRealNodes() error {
	var errs []error
	stop := func(suffix string) {
		files, _ := filepath.Glob(tb.l.path("pids", "node-*-"+suffix+".pid"))
		for _, f := range files {
			name := strings.TrimSuffix(filepath.Base(f), ".pid")
			if err := (&proc.Process{Name: name, PIDFile: f}).Stop(15 * time.Second); err != nil {
				errs = append(errs, err)
			} else {
				tb.progress("stopped", name)
			}
		}
	}
	stop("kubelet")
	stop("kube-proxy")
	if err := killCgroup(tb.cgroupBase(), 20*time.Second); err != nil {
		errs = append(errs, err)
	}
	stop("containerd")
	if err := unmountUnder(tb.l.path("nodes")); err != nil {
		errs = append(errs, err)
	}
	if err := removeCgroup(tb.cgroupBase()); err != nil {
		errs = append(errs, err)
	}
	for _, ns := range tb.net.netnsList() {
		if err := tb.net.removeNode(ns); err != nil {
			errs = append(errs, err)
		}
	}
	removeLinksInto("/var/log/containers", tb.l.state)
	return errors.Join(errs...)
}

// removeLinksInto removes the symbolic links in dir that point into target.
func removeLinksInto(dir, target string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if dst, err := os.Readlink(p); err == nil && strings.HasPrefix(dst, target+"/") {
			_ = os.Remove(p)
		}
	}
}
