package deployer

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// renderBoth renders the test descriptions in both service modes.
func renderBoth(t *testing.T) map[string][]*unstructured.Unstructured {
	t.Helper()
	out := map[string][]*unstructured.Unstructured{}
	for name, set := range renderModes() {
		o := NewOptionsFromEnv(noEnv)
		o.Descriptions = "testdata/descriptions"
		set(o)
		r, err := Render(context.Background(), o, nil)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = append(r.Host, r.Karmada...)
	}
	return out
}

// podSpec returns the pod template of a workload object, or nil.
func podSpec(t *testing.T, obj *unstructured.Unstructured) *corev1.PodSpec {
	t.Helper()
	conv := func(into any) {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, into); err != nil {
			t.Fatalf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
	switch obj.GetKind() {
	case "Deployment":
		var d appsv1.Deployment
		conv(&d)
		return &d.Spec.Template.Spec
	case "DaemonSet":
		var d appsv1.DaemonSet
		conv(&d)
		return &d.Spec.Template.Spec
	case "StatefulSet":
		var d appsv1.StatefulSet
		conv(&d)
		return &d.Spec.Template.Spec
	}
	return nil
}

// TestRenderedNoSecretInArgs: no container's command or arguments refer to
// an environment variable taken from a Secret ($(VAR), which the kubelet
// expands into the process's arguments, readable by every process on the
// node), and no container takes a password, token or key as a flag value.
func TestRenderedNoSecretInArgs(t *testing.T) {
	workloads := 0
	for mode, objs := range renderBoth(t) {
		for _, obj := range objs {
			spec := podSpec(t, obj)
			if spec == nil {
				continue
			}
			workloads++
			for _, c := range append(append([]corev1.Container(nil), spec.InitContainers...), spec.Containers...) {
				where := fmt.Sprintf("%s: %s %s container %s", mode, obj.GetKind(), obj.GetName(), c.Name)
				line := strings.Join(append(append([]string(nil), c.Command...), c.Args...), " ")
				for _, e := range c.Env {
					if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && strings.Contains(line, "$("+e.Name+")") {
						t.Errorf("%s: Secret variable %s expanded into the arguments: %s", where, e.Name, line)
					}
				}
				for _, a := range append(append([]string(nil), c.Command...), c.Args...) {
					flag, value, _ := strings.Cut(a, "=")
					if strings.HasPrefix(flag, "--") && value != "" && (strings.Contains(flag, "password") && !strings.HasSuffix(flag, "-file") && !strings.HasSuffix(flag, "-dir") ||
						strings.HasSuffix(flag, "-token") || flag == "--requirepass") {
						t.Errorf("%s: secret flag %s", where, a)
					}
					if a == "--requirepass" {
						t.Errorf("%s: --requirepass on the command line", where)
					}
				}
			}
		}
	}
	if workloads < 5 {
		t.Fatalf("only %d workloads rendered", workloads)
	}
}

// TestBundledRedisCommand runs the bundled Redis container's command and
// arguments, as rendered, with the Debian redis-server on a free port: it
// serves with the password from the environment, refuses clients without
// it, and the password is not in any process's command line.
func TestBundledRedisCommand(t *testing.T) {
	var c *corev1.Container
	for _, obj := range renderBoth(t)["bundled"] {
		if obj.GetKind() == "Deployment" && obj.GetName() == "mlsysops-redis" {
			spec := podSpec(t, obj)
			c = &spec.Containers[0]
		}
	}
	if c == nil {
		t.Fatal("no mlsysops-redis Deployment rendered")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server (make deps installs it): %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	const pw = "Bundled-Redis-Password-0123456789"
	// The rendered arguments, then this test's folder and port instead of
	// /data and 6379.
	args := append(append([]string(nil), c.Command[1:]...), c.Args...)
	dir := false
	for i := range args {
		if args[i] == "/data" && args[i-1] == "--dir" {
			args[i], dir = t.TempDir(), true
		}
	}
	if !dir {
		t.Fatalf("no --dir /data in %q", args)
	}
	args = append(args, "--port", fmt.Sprint(port), "--bind", "127.0.0.1")
	cmd := exec.Command(c.Command[0], args...)
	cmd.Env = append(os.Environ(), "REDIS_PASSWORD="+pw)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The shell must have exec'd redis-server (its pid is the server's,
	// so the pod's signals reach it): killing the pid ends the server.
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	ctx := context.Background()
	cl := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), Password: pw})
	defer cl.Close()
	deadline := time.Now().Add(30 * time.Second)
	for cl.Ping(ctx).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("redis did not answer with the password: %v\n%s", cl.Ping(ctx).Err(), log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if v, err := cl.ConfigGet(ctx, "appendonly").Result(); err != nil || v["appendonly"] != "yes" {
		t.Errorf("appendonly: %v, %v", v, err)
	}
	anon := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port)})
	defer anon.Close()
	if err := anon.Set(ctx, "k", "v", 0).Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Errorf("client without the password: %v, want NOAUTH", err)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(cmdline, []byte("redis-server")) || bytes.Contains(cmdline, []byte(pw)) {
		t.Errorf("server's command line: %q", bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
	}
}

// TestAdminPasswordOnlyInReconciler: in both modes only the accounts
// reconciler's pod gets ejabberd's admin credential; the bundled ejabberd
// creates its admin account from its command line (CTL_ON_CREATE) with
// the one-time bootstrap password, which the deployer replaces through
// the admin API (provision.HTTPAPI.Bootstrap, tested against a real
// ejabberd in test/integration/messaging TestAdminBootstrap).
func TestAdminPasswordOnlyInReconciler(t *testing.T) {
	for mode, objs := range renderBoth(t) {
		bootstrapped := false
		for _, obj := range objs {
			spec := podSpec(t, obj)
			if spec == nil {
				continue
			}
			uses := func(name string) bool {
				for _, v := range spec.Volumes {
					if v.Secret != nil && v.Secret.SecretName == name {
						return true
					}
					if v.Projected != nil {
						for _, s := range v.Projected.Sources {
							if s.Secret != nil && s.Secret.Name == name {
								return true
							}
						}
					}
				}
				for _, c := range append(append([]corev1.Container(nil), spec.InitContainers...), spec.Containers...) {
					for _, e := range c.Env {
						if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == name {
							return true
						}
					}
					for _, f := range c.EnvFrom {
						if f.SecretRef != nil && f.SecretRef.Name == name {
							return true
						}
					}
				}
				return false
			}
			if uses(SecretEjabberdAdmin) && obj.GetName() != accountsReconciler {
				t.Errorf("%s: %s %s mounts the ejabberd admin Secret", mode, obj.GetKind(), obj.GetName())
			}
			if obj.GetName() != "mlsysops-ejabberd" {
				if uses(SecretEjabberdBootstrap) {
					t.Errorf("%s: %s %s gets the bootstrap password", mode, obj.GetKind(), obj.GetName())
				}
				continue
			}
			bootstrapped = true
			for _, e := range spec.Containers[0].Env {
				if e.Name == "CTL_ON_CREATE" && !strings.HasSuffix(e.Value, "$(EJABBERD_BOOTSTRAP_PASSWORD)") {
					t.Errorf("%s: ejabberd creates its admin account with %q, want the bootstrap password", mode, e.Value)
				}
			}
			if !uses(SecretEjabberdBootstrap) {
				t.Errorf("%s: the bundled ejabberd does not get its bootstrap password", mode)
			}
		}
		if mode == "bundled" && !bootstrapped {
			t.Errorf("bundled: no ejabberd Deployment rendered")
		}
	}
}
