// Package kwoklet_test runs a pod on a KWOK node of the shared testbed with
// the kwoklet: the container's program is this test binary, which serves
// what it sees (environment, user, files) and a readiness endpoint steered
// by a ConfigMap.
package kwoklet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/mlsysops-go/mlsysops/internal/testbed"
	"github.com/mlsysops-go/mlsysops/internal/testbed/kwoklet"
)

const serverEnv = "KWOKLET_TEST_SERVER_PORT"

func TestMain(m *testing.M) {
	kwoklet.RunSandboxIfAsked()
	if port := os.Getenv(serverEnv); port != "" {
		serve(port)
		return
	}
	os.Exit(m.Run())
}

// view is what the program in the pod reports of itself.
type view struct {
	UID, GID int
	Env      []string
	Files    map[string]string
	Cwd      string
}

// serve is the pod's program: /readyz answers 200 while the ConfigMap
// key "ready" says yes; /view tells what the process sees.
func serve(port string) {
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			return "<" + err.Error() + ">"
		}
		return string(b)
	}
	http.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if strings.TrimSpace(read("/etc/kwt/ready")) != "yes" {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
		}
	})
	http.HandleFunc("/view", func(w http.ResponseWriter, _ *http.Request) {
		wd, _ := os.Getwd()
		v := view{UID: os.Getuid(), GID: os.Getgid(), Env: os.Environ(), Cwd: wd, Files: map[string]string{}}
		for _, p := range []string{"/etc/kwt/greeting", "/etc/kwt/ready", "/var/run/kwt/password", "/var/run/secrets/kubernetes.io/serviceaccount/token", "/var/run/secrets/kubernetes.io/serviceaccount/namespace"} {
			v.Files[p] = read(p)
		}
		_ = json.NewEncoder(w).Encode(v)
	})
	fmt.Fprintln(os.Stderr, http.ListenAndServe("127.0.0.1:"+port, nil))
	os.Exit(1)
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func TestRunsAPodOnAKWOKNode(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the kwoklet's sandboxes need root")
	}
	env := testbed.Shared(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	member := env.Clusters[0]
	cfg := env.RESTConfig(t, member)
	cs := kubernetes.NewForConfigOrDie(cfg)
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: kwoklet.KWOKNodeLabel})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("no KWOK node in %s: %v", member, err)
	}
	node := nodes.Items[0].Name
	ns := "kwoklet-test"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kwt", Namespace: ns}, Data: map[string]string{"greeting": "hello", "ready": "no"}}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kwt", Namespace: ns}, Data: map[string][]byte{
		"xmpp-" + node + ".password": []byte("its own"), "xmpp-other.password": []byte("not its"),
	}}
	for _, err := range []error{
		func() error { _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); return err }(),
		func() error { _, err := cs.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{}); return err }(),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	r, err := kwoklet.New(kwoklet.Options{
		Cluster: member, Config: cfg, StateDir: t.TempDir(), Self: self,
		Images:   []kwoklet.Image{{Repository: "kwoklet-test/server", Entrypoint: "/usr/local/bin/kwoklet-test-server", Program: self, UID: 65532, GID: 65532}},
		Selector: "app.kubernetes.io/part-of=kwoklet-test",
		Log:      slog.New(slog.NewTextHandler(testWriter{t}, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()
	defer func() { cancel(); <-done }()

	mode := int32(0o440)
	group := int64(2000)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "server", Namespace: ns, Labels: map[string]string{"app.kubernetes.io/part-of": "kwoklet-test"}},
		Spec: corev1.PodSpec{
			NodeName:        node,
			SecurityContext: &corev1.PodSecurityContext{FSGroup: &group},
			Containers: []corev1.Container{{
				Name: "server", Image: "docker.io/kwoklet-test/server:1",
				Env: []corev1.EnvVar{
					{Name: serverEnv, Value: strconv.Itoa(port)},
					{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
					{Name: "GREETING_FILE", Value: "/etc/kwt/greeting-of-$(NODE_NAME)"},
				},
				Ports:          []corev1.ContainerPort{{Name: "http", ContainerPort: int32(port)}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("http")}}},
				WorkingDir:     "/etc/kwt",
				VolumeMounts: []corev1.VolumeMount{
					{Name: "cm", MountPath: "/etc/kwt", ReadOnly: true},
					{Name: "pw", MountPath: "/var/run/kwt/password", SubPathExpr: "xmpp-$(NODE_NAME).password", ReadOnly: true},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "kwt"}}}},
				{Name: "pw", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "kwt", DefaultMode: &mode}}},
			},
		},
	}
	testbed.Eventually(t, "the default ServiceAccount", 30*time.Second, func() error {
		_, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err
	})
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	readyIs := func(want corev1.ConditionStatus) func() error {
		return func() error {
			p, err := cs.CoreV1().Pods(ns).Get(ctx, "server", metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == want && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil {
					return nil
				}
			}
			return fmt.Errorf("conditions %+v, containers %+v", p.Status.Conditions, p.Status.ContainerStatuses)
		}
	}
	testbed.Eventually(t, "running, not ready (the ConfigMap says no)", time.Minute, readyIs(corev1.ConditionFalse))

	var v view
	testbed.Eventually(t, "the program answers", 30*time.Second, func() error {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/view", port))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		return json.NewDecoder(resp.Body).Decode(&v)
	})
	has := func(kv string) bool {
		for _, e := range v.Env {
			if e == kv {
				return true
			}
		}
		return false
	}
	for _, kv := range []string{"NODE_NAME=" + node, "GREETING_FILE=/etc/kwt/greeting-of-" + node, "HOSTNAME=server"} {
		if !has(kv) {
			t.Errorf("environment lacks %s: %v", kv, v.Env)
		}
	}
	if v.UID != 65532 || v.GID != 65532 || v.Cwd != "/etc/kwt" {
		t.Errorf("uid %d gid %d cwd %s, want the image's user 65532 and /etc/kwt", v.UID, v.GID, v.Cwd)
	}
	for file, want := range map[string]string{"/etc/kwt/greeting": "hello", "/var/run/kwt/password": "its own", "/var/run/secrets/kubernetes.io/serviceaccount/namespace": ns} {
		if v.Files[file] != want {
			t.Errorf("%s = %q, want %q", file, v.Files[file], want)
		}
	}
	// The token is the pod's ServiceAccount's, bound to the pod.
	review, err := cs.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: v.Files["/var/run/secrets/kubernetes.io/serviceaccount/token"]}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !review.Status.Authenticated || review.Status.User.Username != "system:serviceaccount:"+ns+":default" || review.Status.User.Extra["authentication.kubernetes.io/pod-name"][0] != "server" {
		t.Errorf("token review: %+v", review.Status)
	}
	if _, err := os.Stat("/etc/kwt"); err == nil {
		t.Error("the sandbox made /etc/kwt on the host")
	}

	// An edited ConfigMap reaches the running process.
	cm.Data["ready"] = "yes"
	if _, err := cs.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, "Ready after the ConfigMap says yes", time.Minute, readyIs(corev1.ConditionTrue))

	// A process that dies is restarted and counted.
	pid := serverPid(t, port)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, "restarted", time.Minute, func() error {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, "server", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if st := p.Status.ContainerStatuses; len(st) != 1 || st[0].RestartCount != 1 || !st[0].Ready {
			return fmt.Errorf("container status %+v", st)
		}
		return nil
	})

	// A deleted pod's process stops.
	pid = serverPid(t, port)
	if err := cs.CoreV1().Pods(ns).Delete(ctx, "server", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testbed.Eventually(t, "the process gone with its pod", time.Minute, func() error {
		if syscall.Kill(pid, 0) == nil {
			return fmt.Errorf("pid %d still runs", pid)
		}
		return nil
	})
}

// serverPid finds the process that listens on port.
func serverPid(t *testing.T, port int) int {
	t.Helper()
	var pid int
	testbed.Eventually(t, "the server's process", 30*time.Second, func() error {
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			n, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			b, err := os.ReadFile("/proc/" + e.Name() + "/environ")
			if err == nil && strings.Contains(string(b), serverEnv+"="+strconv.Itoa(port)+"\x00") {
				pid = n
				return nil
			}
		}
		return fmt.Errorf("no process with %s=%d", serverEnv, port)
	})
	return pid
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}
