package testbed_test

// This file's name puts its test last in the package (go test runs the
// files in name order): it kills and then takes the shared testbed down,
// which `make test` does at the end anyway. `make test` runs it on its own
// after the chaos soak, so that the Redis modes and the soak find the
// testbed up instead of starting it again.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/mlsysops-go/mlsysops/internal/testbed"
)

// After every process of the testbed was killed with SIGKILL (containers,
// shims and the real nodes' daemons included), up brings it back with its
// real nodes Ready and their pods running again; down then leaves nothing
// of it on the machine: no process, mount, bridge, route, network
// namespace, cgroup or iptables chain, and the kernel settings the
// kubelets changed are back to what they were before the first up.
func TestKilledThenDownLeavesNothing(t *testing.T) {
	env := testbed.Shared(t)
	ctx := context.Background()
	before, err := testbed.HostState()
	if err != nil || before == nil {
		t.Fatalf("host state record: %v %v", before, err)
	}
	hostChains := iptablesChains(t)

	cs := kubernetes.NewForConfigOrDie(env.RESTConfig(t, "cloud-1"))
	namespace := namespace(t, cs, "down-")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "sleeper"}, Spec: corev1.PodSpec{
		NodeSelector: map[string]string{corev1.LabelHostname: "cloud-1"},
		Containers:   []corev1.Container{{Name: "c", Image: imageRef(t, "pause")}},
	}}
	if _, err := cs.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	first := waitPodPhase(t, cs, namespace, "sleeper", corev1.PodRunning)

	testbed.KillShared(t)
	if pids := processesOf(env); len(pids) > 0 {
		t.Fatalf("alive after SIGKILL: %v", pids)
	}
	testbed.RestoreShared(t)
	for _, rn := range env.RealNodes {
		ncs := kubernetes.NewForConfigOrDie(env.RESTConfig(t, rn.Context))
		n, err := ncs.CoreV1().Nodes().Get(ctx, rn.Name, metav1.GetOptions{})
		if err != nil || !ready(n) {
			t.Errorf("real node %s after the restart: ready %v, %v", rn.Name, err == nil && ready(n), err)
		}
	}
	// Right after the restart the pod may still show the Running phase of
	// before the kill while the kubelet recreates its sandbox (no address
	// then): it runs again once it is Ready with an address.
	again := waitPodServing(t, cs, namespace, "sleeper")
	if again.UID != first.UID || again.Status.PodIP == "" {
		t.Errorf("pod after the restart: uid %s (was %s), ip %q", again.UID, first.UID, again.Status.PodIP)
	}

	testbed.DownShared(t)

	if pids := processesOf(env); len(pids) > 0 {
		t.Errorf("processes left: %v", pids)
	}
	if b, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(b), env.StateDir) {
		var left []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, env.StateDir) {
				left = append(left, l)
			}
		}
		t.Errorf("mounts left:\n%s", strings.Join(left, "\n"))
	}
	if out, _ := exec.Command("ip", "-br", "link").Output(); strings.Contains(string(out), env.Network.Bridge) {
		t.Errorf("links left:\n%s", out)
	}
	if out, _ := exec.Command("ip", "route", "show", "root", env.Network.Range).Output(); strings.TrimSpace(string(out)) != "" {
		t.Errorf("routes left:\n%s", out)
	}
	if entries, _ := os.ReadDir("/run/netns"); len(entries) > 0 {
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), env.Network.Bridge+"-") {
				t.Errorf("network namespace left: %s", e.Name())
			}
		}
	}
	if cg, _ := filepath.Glob("/sys/fs/cgroup/*" + env.Network.CgroupRoot); len(cg) > 0 {
		t.Errorf("cgroups left: %v", cg)
	}
	if after := iptablesChains(t); strings.Join(after, ",") != strings.Join(hostChains, ",") {
		t.Errorf("host iptables chains before %v, after %v", hostChains, after)
	}
	now, err := testbed.HostState()
	if err != nil {
		t.Fatal(err)
	}
	if now != nil {
		// Another testbed with real nodes still runs on this machine: the
		// settings are its to keep until it goes down.
		t.Logf("another testbed with real nodes runs: kernel settings stay as its kubelets set them")
		return
	}
	for k, v := range before {
		b, err := os.ReadFile("/proc/sys/" + k)
		if err != nil {
			continue
		}
		if got := strings.TrimSpace(string(b)); got != v {
			t.Errorf("%s = %s after down, %s before up", strings.ReplaceAll(k, "/", "."), got, v)
		}
	}
}

// processesOf lists the live processes of the testbed: those whose pid
// file is in its state folder, and those in its cgroup tree.
func processesOf(env *testbed.Env) []int {
	var out []int
	files, _ := filepath.Glob(filepath.Join(env.StateDir, "pids", "*.pid"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		if pid > 0 && alive(pid) {
			out = append(out, pid)
		}
	}
	_ = filepath.WalkDir("/sys/fs/cgroup/pids"+env.Network.CgroupRoot, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.Name() != "cgroup.procs" {
			return nil
		}
		b, _ := os.ReadFile(p)
		for _, s := range strings.Fields(string(b)) {
			if pid, _ := strconv.Atoi(s); pid > 0 {
				out = append(out, pid)
			}
		}
		return nil
	})
	// Anything else started from the state folder (shims name it).
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if strings.Contains(string(cmd), env.StateDir+"/") && alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && i+2 < len(b) && b[i+2] != 'Z'
}

// iptablesChains lists the host's chains, table by table.
func iptablesChains(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("iptables-save").Output()
	if err != nil {
		t.Fatalf("iptables-save: %v", err)
	}
	var chains []string
	table := ""
	for _, l := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(l, "*"):
			table = l[1:]
		case strings.HasPrefix(l, ":"):
			chains = append(chains, table+"/"+strings.Fields(l[1:])[0])
		}
	}
	return chains
}

// waitPodServing waits until the pod is Running, Ready and has an address.
func waitPodServing(t *testing.T, cs kubernetes.Interface, ns, name string) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	if err := wait.PollUntilContextTimeout(context.Background(), time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = p
		if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
			return false, nil
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("pod %s/%s not running again: %+v", ns, name, last.Status)
	}
	return last
}
