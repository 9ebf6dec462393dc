package testbed_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	mlsysopsv1 "github.com/mlsysops-go/mlsysops/internal/api/v1"
	"github.com/mlsysops-go/mlsysops/internal/images"
	"github.com/mlsysops-go/mlsysops/internal/testbed"
)

// The real nodes are Ready with containerd as their runtime, beside the
// KWOK ones, with what the descriptions say.
func TestRealNodesReady(t *testing.T) {
	env := testbed.Shared(t)
	ctx := context.Background()
	want := map[string]string{"mls-continuum": testbed.ContextHost, "cloud-1": "cloud-1", "edge-1": "edge-1", "cloud-gpu-l4-1": "cloud-1"}
	got := map[string]string{}
	for _, n := range env.RealNodes {
		got[n.Name] = n.Context
	}
	for name, c := range want {
		if got[name] != c {
			t.Errorf("real nodes %v: want %s in %s", got, name, c)
		}
	}
	for _, rn := range env.RealNodes {
		cs := kubernetes.NewForConfigOrDie(env.RESTConfig(t, rn.Context))
		n, err := cs.CoreV1().Nodes().Get(ctx, rn.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(n.Status.NodeInfo.ContainerRuntimeVersion, "containerd://") || n.Labels[testbed.KWOKLabel] != "" || !ready(n) {
			t.Errorf("node %s: runtime %q, KWOK label %q, ready %v", rn.Name, n.Status.NodeInfo.ContainerRuntimeVersion, n.Labels[testbed.KWOKLabel], ready(n))
		}
		if len(n.Status.Addresses) == 0 || n.Status.Addresses[0].Address != rn.IP {
			t.Errorf("node %s: addresses %v, want %s", rn.Name, n.Status.Addresses, rn.IP)
		}
	}
	host := kubernetes.NewForConfigOrDie(env.RESTConfig(t, testbed.ContextHost))
	if n, err := host.CoreV1().Nodes().Get(ctx, "mls-continuum", metav1.GetOptions{}); err != nil || n.Labels[mlsysopsv1.LabelContinuumLayer] != mlsysopsv1.AgentLayerContinuum {
		t.Errorf("host node: %v %v", labelsOf(n), err)
	}
	cloud := kubernetes.NewForConfigOrDie(env.RESTConfig(t, "cloud-1"))
	if n, err := cloud.CoreV1().Nodes().Get(ctx, "cloud-1", metav1.GetOptions{}); err != nil || n.Labels[mlsysopsv1.LabelContinuumLayer] != mlsysopsv1.AgentLayerCluster {
		t.Errorf("control node: %v %v", labelsOf(n), err)
	}
	gpu, err := cloud.CoreV1().Nodes().Get(ctx, "cloud-gpu-l4-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if q := gpu.Status.Allocatable[mlsysopsv1.ResourceGPU]; q.Value() != 1 {
		t.Errorf("GPU node allocatable %s = %s, want 1", mlsysopsv1.ResourceGPU, q.String())
	}
	for k, v := range map[string]string{mlsysopsv1.LabelGPUPresent: "true", mlsysopsv1.LabelGPUProduct: "NVIDIA-L4", mlsysopsv1.LabelGPUCount: "1", mlsysopsv1.LabelGPUMemory: "24576"} {
		if gpu.Labels[k] != v {
			t.Errorf("GPU node label %s = %q, want %q", k, gpu.Labels[k], v)
		}
	}
	if len(gpu.Spec.Taints) == 0 || !hasTaint(gpu, testbed.GPUTaint) {
		t.Errorf("GPU node taints %v, want %s", gpu.Spec.Taints, testbed.GPUTaint.ToString())
	}
}

// A pod of the project's node agent image runs on a real node: it answers
// HTTP from the host on its pod IP, its logs and exec work, and from
// inside it the kubernetes Service's ClusterIP reaches the apiserver
// through kube-proxy.
func TestProjectImageRunsOnRealNode(t *testing.T) {
	env := testbed.Shared(t)
	ctx := context.Background()
	cfg := env.RESTConfig(t, "cloud-1")
	cs := kubernetes.NewForConfigOrDie(cfg)
	ns := namespace(t, cs, "real-")
	ref := imageRef(t, "agent-node")
	desc, err := os.ReadFile(filepath.Join(repoRoot(t), "descriptions", "nodes", "cloud-1.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "desc"}, Data: map[string]string{"cloud-1.yaml": string(desc)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "xmpp"}, StringData: map[string]string{"password": rand.String(16)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{corev1.LabelHostname: "cloud-1"},
			Containers: []corev1.Container{{
				Name: "agent", Image: ref, ImagePullPolicy: corev1.PullNever,
				// No XMPP server for it here: it serves /healthz while it
				// retries.
				Args: []string{"--layer", "node", "--node-name", "cloud-1", "--descriptions", "/descriptions",
					"--xmpp-server", env.Network.HostIP + ":5222", "--xmpp-domain", env.XMPPDomain,
					"--xmpp-password-file", "/xmpp/password", "--listen", "0.0.0.0:8080", "--policy-directory", "/tmp/policies"},
				Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "desc", MountPath: "/descriptions/nodes"}, {Name: "xmpp", MountPath: "/xmpp"},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "desc", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "desc"}}}},
				{Name: "xmpp", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "xmpp"}}},
			},
		},
	}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	running := waitPodPhase(t, cs, ns, "agent", corev1.PodRunning)
	if running.Spec.NodeName != "cloud-1" || running.Annotations[testbed.AnnotationSimulatedOnly] != "" {
		t.Fatalf("pod on %s, annotations %v", running.Spec.NodeName, running.Annotations)
	}

	var body string
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		resp, err := http.Get("http://" + running.Status.PodIP + ":8080/healthz")
		if err != nil {
			return false, nil
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		return resp.StatusCode == http.StatusOK, nil
	}); err != nil {
		t.Fatalf("GET http://%s:8080/healthz from the host: %v (last %q)", running.Status.PodIP, err, body)
	}

	logs, err := cs.CoreV1().Pods(ns).GetLogs("agent", &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil || !bytes.Contains(logs, []byte(`"agent starting"`)) {
		t.Errorf("logs: %v\n%s", err, logs)
	}

	out, err := execIn(ctx, cfg, cs, ns, "agent", "mlsysops-agent-node", "--help")
	if err != nil || !strings.Contains(out, "MLSysOps agent") {
		t.Errorf("exec mlsysops-agent-node --help: %v\n%s", err, out)
	}
	if out, err := execIn(ctx, cfg, cs, ns, "agent", "/bin/sh", "-c", "true"); err == nil {
		t.Errorf("the image has a shell: %s", out)
	}

	// From the pod's network namespace, as an in-cluster client would.
	podNS := podNetNS(t, env, "cloud-1", running.Status.PodIP)
	var status int
	err = inNetNS(podNS, func() error {
		// Dialled here, on the thread in the pod's namespace (an
		// http.Transport would dial from another goroutine).
		conn, err := net.DialTimeout("tcp", env.Network.KubernetesServiceIP+":443", 10*time.Second)
		if err != nil {
			return err
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		tc := tls.Client(conn, &tls.Config{InsecureSkipVerify: true})
		req, _ := http.NewRequest(http.MethodGet, "https://"+env.Network.KubernetesServiceIP+"/readyz", nil)
		if err := req.Write(tc); err != nil {
			return err
		}
		resp, err := http.ReadResponse(bufio.NewReader(tc), req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		status = resp.StatusCode
		return nil
	})
	if err != nil || status != http.StatusOK {
		t.Errorf("GET https://%s/readyz (the kubernetes Service) from the pod: %d %v", env.Network.KubernetesServiceIP, status, err)
	}
}

// A pod requesting a GPU and tolerating the GPU taint runs on the real GPU
// node; without the toleration it stays Pending, the taint being the
// scheduler's reason.
func TestGPUPodOnRealGPUNode(t *testing.T) {
	env := testbed.Shared(t)
	cs := kubernetes.NewForConfigOrDie(env.RESTConfig(t, "cloud-1"))
	ns := namespace(t, cs, "gpu-")
	pause := imageRef(t, "pause")
	gpuPod := func(name string, tolerate bool) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{
				NodeSelector: map[string]string{mlsysopsv1.LabelGPUProduct: "NVIDIA-L4"},
				Containers: []corev1.Container{{Name: "c", Image: pause, Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{mlsysopsv1.ResourceGPU: *resourceQty("1")},
				}}},
			},
		}
		if tolerate {
			p.Spec.Tolerations = []corev1.Toleration{{Key: string(mlsysopsv1.ResourceGPU), Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
		}
		return p
	}
	for _, p := range []*corev1.Pod{gpuPod("tolerating", true), gpuPod("intolerant", false)} {
		if _, err := cs.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if p := waitPodPhase(t, cs, ns, "tolerating", corev1.PodRunning); p.Spec.NodeName != "cloud-gpu-l4-1" {
		t.Errorf("GPU pod on %s, want cloud-gpu-l4-1", p.Spec.NodeName)
	}
	msg := waitUnschedulable(t, cs, ns, "intolerant")
	if !strings.Contains(msg, "untolerated taint {nvidia.com/gpu: present}") {
		t.Errorf("intolerant pod: %s", msg)
	}
	if p, _ := cs.CoreV1().Pods(ns).Get(context.Background(), "intolerant", metav1.GetOptions{}); p.Status.Phase != corev1.PodPending || p.Spec.NodeName != "" {
		t.Errorf("intolerant pod %s on %q", p.Status.Phase, p.Spec.NodeName)
	}
}

// Pods of images no real node has (nothing can be pulled here) never
// start on a real node: pinned to one they stay Pending with the reason in
// an annotation; free, they run on a KWOK node.
func TestUnpullableImagesStayOnKWOKNodes(t *testing.T) {
	env := testbed.Shared(t)
	cs := kubernetes.NewForConfigOrDie(env.RESTConfig(t, "cloud-1"))
	ns := namespace(t, cs, "kwok-")
	image := "registry.example.org/mlsysops/gateway:1.4.2"
	pinned := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pinned"}, Spec: corev1.PodSpec{
		NodeSelector: map[string]string{corev1.LabelHostname: "cloud-1"},
		Containers:   []corev1.Container{{Name: "c", Image: image}},
	}}
	free := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "free"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: image}}}}
	for _, p := range []*corev1.Pod{pinned, free} {
		if _, err := cs.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	msg := waitUnschedulable(t, cs, ns, "pinned")
	if !strings.Contains(msg, "didn't match Pod's node affinity/selector") {
		t.Errorf("pinned pod: %s", msg)
	}
	p, err := cs.CoreV1().Pods(ns).Get(context.Background(), "pinned", metav1.GetOptions{})
	if err != nil || !strings.Contains(p.Annotations[testbed.AnnotationSimulatedOnly], image) {
		t.Errorf("pinned pod annotations %v %v", p.Annotations, err)
	}
	run := waitPodPhase(t, cs, ns, "free", corev1.PodRunning)
	node, err := cs.CoreV1().Nodes().Get(context.Background(), run.Spec.NodeName, metav1.GetOptions{})
	if err != nil || node.Labels[testbed.KWOKLabel] != "fake" {
		t.Errorf("free pod on %s (labels %v): want a KWOK node", run.Spec.NodeName, labelsOf(node))
	}
}

// Nothing the testbed runs may send a packet off the machine: an address
// of any of its ranges that nothing serves fails at once on the host (a
// blackhole route, not a packet out of eth0), and a real node, pods
// included, has no route off the machine at all.
func TestNetworkHygiene(t *testing.T) {
	env := testbed.Shared(t)
	if len(env.RealNodes) == 0 {
		t.Fatal("no real node")
	}
	for use, cidr := range env.Network.Ranges {
		t.Run(use, func(t *testing.T) {
			addr := unservedIn(t, env, cidr)
			err := dialErr(addr)
			if !refusedLocally(err) {
				t.Errorf("dial %s (%s): %v, want a local routing error", addr, cidr, err)
			}
		})
	}
	// From inside a real node: no route but the testbed's.
	node := env.RealNodes[0]
	err := inNetNS(node.NetNS, func() error { return dialErr("192.0.2.99") })
	if !refusedLocally(err) {
		t.Errorf("dial 192.0.2.99 from real node %s: %v, want network unreachable", node.Name, err)
	}
}

// dialErr dials TCP port 9 of addr and returns the error.
func dialErr(addr string) error {
	c, err := net.DialTimeout("tcp", net.JoinHostPort(addr, "9"), 5*time.Second)
	if err == nil {
		c.Close()
		return errors.New("connected")
	}
	return err
}

// refusedLocally tells a failure the kernel gives without sending
// anything (blackhole, no route) from a timeout.
func refusedLocally(err error) bool {
	return errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EPERM)
}

// unservedIn picks an address of cidr that no interface, route or
// Service of the testbed serves.
func unservedIn(t *testing.T, env *testbed.Env, cidr string) string {
	t.Helper()
	_, n, err := net.ParseCIDR(cidr)
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]bool{env.Network.HostIP: true}
	for _, rn := range env.RealNodes {
		served[rn.IP] = true
	}
	ones, bits := n.Mask.Size()
	base := n.IP.To4()
	// From the top of the range down: the pod subnets of real nodes and
	// the services are allocated from the bottom.
	for off := (1 << (bits - ones)) - 2; off > 0; off-- {
		ip := make(net.IP, 4)
		v := uint32(base[0])<<24 | uint32(base[1])<<16 | uint32(base[2])<<8 | uint32(base[3])
		v += uint32(off)
		ip[0], ip[1], ip[2], ip[3] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
		if served[ip.String()] {
			continue
		}
		inPods := false
		for _, rn := range env.RealNodes {
			_, pn, _ := net.ParseCIDR(rn.PodSubnet)
			inPods = inPods || pn.Contains(ip)
		}
		if !inPods {
			return ip.String()
		}
	}
	t.Fatalf("no unserved address in %s", cidr)
	return ""
}

// inNetNS runs fn on a thread in the network namespace file ns.
func inNetNS(ns string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// The thread never returns to the scheduler's pool: it ends with
		// this goroutine.
		f, err := os.Open(ns)
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// podNetNS finds the network namespace (under the node's containerd state
// folder) whose interfaces have ip.
func podNetNS(t *testing.T, env *testbed.Env, node, ip string) string {
	t.Helper()
	var dir string
	for _, rn := range env.RealNodes {
		if rn.Name == node {
			dir = rn.Dir
		}
	}
	var found string
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || found != "" || d.IsDir() || filepath.Base(filepath.Dir(p)) != "netns" {
			return nil
		}
		_ = inNetNS(p, func() error {
			addrs, _ := net.InterfaceAddrs()
			for _, a := range addrs {
				if strings.HasPrefix(a.String(), ip+"/") {
					found = p
				}
			}
			return nil
		})
		return nil
	})
	if found == "" {
		t.Fatalf("no network namespace of node %s has %s", node, ip)
	}
	return found
}

func execIn(ctx context.Context, cfg *rest.Config, cs kubernetes.Interface, ns, pod string, cmd ...string) (string, error) {
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Command: cmd, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ex, err := remotecommand.NewSPDYExecutor(cfg, http.MethodPost, req.URL())
	if err != nil {
		return "", err
	}
	// Two streams, two buffers: they are written concurrently.
	var stdout, stderr bytes.Buffer
	err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr})
	return stdout.String() + stderr.String(), err
}

func namespace(t *testing.T, cs kubernetes.Interface, prefix string) string {
	t.Helper()
	ns, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{}) })
	// The service account admission needs the namespace's default account.
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(ns.Name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("namespace %s: no default service account", ns.Name)
	}
	return ns.Name
}

func waitPodPhase(t *testing.T, cs kubernetes.Interface, ns, name string, phase corev1.PodPhase) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	if err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = p
		return p.Status.Phase == phase, nil
	}); err != nil {
		t.Fatalf("pod %s/%s not %s: %+v", ns, name, phase, last.Status)
	}
	return last
}

// waitUnschedulable waits for the scheduler's Unschedulable condition and
// returns its message.
func waitUnschedulable(t *testing.T, cs kubernetes.Interface, ns, name string) string {
	t.Helper()
	var msg string
	if err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				msg = c.Message
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("pod %s/%s never unschedulable", ns, name)
	}
	return msg
}

func imageRef(t *testing.T, name string) string {
	t.Helper()
	m, err := images.LoadManifest(filepath.Join(repoRoot(t), "bin", "images"))
	if err != nil {
		t.Fatal(err)
	}
	ref := m.Ref(name)
	if ref == "" {
		t.Fatalf("no image %s in bin/images", name)
	}
	return ref
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := testbed.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func hasTaint(n *corev1.Node, want corev1.Taint) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == want.Key && t.Value == want.Value && t.Effect == want.Effect {
			return true
		}
	}
	return false
}

func labelsOf(n *corev1.Node) map[string]string {
	if n == nil {
		return nil
	}
	return n.Labels
}

func resourceQty(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}
