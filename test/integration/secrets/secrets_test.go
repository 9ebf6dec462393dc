// Package secrets_test checks that no secret the testbed generated
// (passwords, tokens) shows up where others can read it: in a log line,
// an error message, a ConfigMap of any cluster, or the command line of a
// process the testbed or the test's agents started.
package secrets_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mlsysops-go/mlsysops/internal/testbed"
	nbclient "github.com/mlsysops-go/mlsysops/northbound/client"
)

// minSecret is the shortest value treated as a secret: shorter ones would
// match by chance.
const minSecret = 12

// secret is one generated credential and where it came from.
type secret struct {
	name, value string
}

// finding is a secret seen where it must not be.
type finding struct {
	where, secret string
}

func TestNoSecretLeaks(t *testing.T) {
	env := testbed.Shared(t)
	agents := testbed.StartTestAgents(t, env, testbed.TestAgentsOptions{Nodes: true})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// Work the system a little, including its failure paths, so that the
	// logs hold more than start-up: a submission, reads, a removal, and
	// requests with a wrong token and with a token of the wrong role.
	op, err := nbclient.New(nbclient.Config{URL: env.NorthboundURL, Token: env.NorthboundToken, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	view, err := nbclient.New(nbclient.Config{URL: env.NorthboundURL, Token: env.NorthboundViewerToken, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("secrets-%d", time.Now().UnixNano()%100000)
	app := fmt.Sprintf(`{"MLSysOpsApp": {"name": %q, "components": [{"metadata": {"name": "web"},
	  "containers": [{"image": "registry.example.org/web:1", "platform_requirements": {"cpu": {"requests": "250m"}}}]}]}}`, name)
	if _, err := op.Applications().Submit(ctx, []byte(app), nbclient.JSON); err != nil {
		t.Fatalf("submit: %v", err)
	}
	if _, err := view.Applications().Get(ctx, name); err != nil {
		t.Errorf("get: %v", err)
	}
	if _, err := view.Applications().Remove(ctx, name); nbclient.StatusCode(err) != http.StatusForbidden {
		t.Errorf("viewer remove: %v, want 403", err)
	}
	var errorBodies []finding
	for _, token := range []string{env.NorthboundToken + "x", env.NorthboundToken[:len(env.NorthboundToken)-1], "Bearer " + env.NorthboundViewerToken} {
		bad, err := nbclient.New(nbclient.Config{URL: env.NorthboundURL, Token: token, Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		_, err = bad.Applications().Get(ctx, name)
		if code := nbclient.StatusCode(err); code != http.StatusUnauthorized {
			t.Errorf("a wrong token: %v (HTTP %d), want 401", err, code)
		}
		if err != nil {
			errorBodies = append(errorBodies, finding{where: "the API's answer to a wrong token", secret: err.Error()})
		}
	}
	if _, err := op.Applications().Remove(ctx, name); err != nil {
		t.Errorf("remove: %v", err)
	}
	// The agents have handled the submission and its removal once the
	// API no longer knows the application: their logs hold both.
	for {
		_, err := view.Applications().Get(ctx, name)
		if nbclient.IsNotFound(err) {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the removed application %s is still listed: %v", name, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Run("every Redis client is its component's ACL user", func(t *testing.T) { testRedisUsers(t, env) })

	secrets := collectSecrets(t, env, agents.Config.StateDir)
	t.Logf("looking for %d secrets", len(secrets))

	var found []finding
	scan := func(where string, data []byte) {
		for _, s := range secrets {
			if bytes.Contains(data, []byte(s.value)) {
				found = append(found, finding{where: where, secret: s.name})
			}
		}
	}
	for _, b := range errorBodies {
		scan(b.where, []byte(b.secret))
	}

	// Logs: every *.log under the testbed's and the agents' state.
	logs := 0
	for _, dir := range []string{env.StateDir, agents.Config.StateDir} {
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".log") && !strings.Contains(p, string(filepath.Separator)+"logs"+string(filepath.Separator)) {
				return nil
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return nil
			}
			logs++
			scan("log "+p, data)
			return nil
		})
	}
	if logs < 10 {
		t.Errorf("scanned %d log files, want the components' and agents' logs", logs)
	}

	// ConfigMaps of every cluster: the host, Karmada and the members.
	cms := 0
	raw, err := clientcmd.LoadFromFile(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for contextName := range raw.Contexts {
		cs, err := kubernetes.NewForConfig(env.RESTConfig(t, contextName))
		if err != nil {
			t.Fatal(err)
		}
		list, err := cs.CoreV1().ConfigMaps(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list ConfigMaps of %s: %v", contextName, err)
		}
		for _, cm := range list.Items {
			cms++
			where := fmt.Sprintf("ConfigMap %s/%s in %s", cm.Namespace, cm.Name, contextName)
			for k, v := range cm.Data {
				scan(where+" key "+k, []byte(v))
			}
			for k, v := range cm.BinaryData {
				scan(where+" key "+k, v)
			}
			for k, v := range cm.Annotations {
				scan(where+" annotation "+k, []byte(v))
			}
		}
	}
	if cms == 0 {
		t.Error("no ConfigMap scanned")
	}

	// Command lines of every process the testbed and the agents started,
	// and of their descendants.
	pids := startedProcesses(t, env.StateDir, agents.Config.StateDir)
	if len(pids) < 10 {
		t.Errorf("found %d running processes started by the testbed, want its components and agents", len(pids))
	}
	for pid := range pids {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue // gone meanwhile
		}
		scan(fmt.Sprintf("command line of pid %d (%s)", pid, shown(cmdline)), cmdline)
	}
	t.Logf("scanned %d log files, %d ConfigMaps, %d command lines, %d error answers", logs, cms, len(pids), len(errorBodies))

	sort.Slice(found, func(i, j int) bool { return found[i].where < found[j].where })
	for _, f := range found {
		t.Errorf("%s shows %s", f.where, f.secret)
	}
}

// collectSecrets returns the credentials the testbed and the test's agents
// generated: the ones in the testbed's Env and every *.password, *.token
// and secret-key (the S3 server's) file of their state.
func collectSecrets(t *testing.T, env *testbed.Env, agentState string) []secret {
	t.Helper()
	byValue := map[string]string{}
	add := func(name, value string) {
		value = strings.TrimSpace(value)
		if len(value) < minSecret {
			return
		}
		if _, ok := byValue[value]; !ok {
			byValue[value] = name
		}
	}
	add("the Redis password", env.RedisPassword)
	add("the XMPP admin password", env.XMPPAdminPassword)
	add("the northbound operator token", env.NorthboundToken)
	add("the northbound viewer token", env.NorthboundViewerToken)
	for _, dir := range []string{env.StateDir, agentState} {
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			if strings.HasSuffix(p, ".password") || strings.HasSuffix(p, ".token") || filepath.Base(p) == "secret-key" {
				if b, err := os.ReadFile(p); err == nil {
					add(filepath.Base(p), string(b))
				}
			}
			return nil
		})
	}
	if len(byValue) < 6 {
		t.Fatalf("found %d secrets, want at least the Redis, XMPP admin and agent passwords and the API tokens", len(byValue))
	}
	out := make([]secret, 0, len(byValue))
	for v, n := range byValue {
		out = append(out, secret{name: n, value: v})
	}
	return out
}

// startedProcesses returns the pids in the pid files under the state
// folders that still run, and all their descendants.
func startedProcesses(t *testing.T, dirs ...string) map[int]bool {
	t.Helper()
	pids := map[int]bool{}
	for _, dir := range dirs {
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".pid") {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return nil
			}
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
					pids[pid] = true
				}
			}
			return nil
		})
	}
	// Add descendants until no new one appears.
	parent := map[int]int{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		rest := stat[bytes.LastIndexByte(stat, ')')+1:]
		fields := strings.Fields(string(rest))
		if len(fields) > 1 {
			if ppid, err := strconv.Atoi(fields[1]); err == nil {
				parent[pid] = ppid
			}
		}
	}
	for changed := true; changed; {
		changed = false
		for pid, ppid := range parent {
			if pids[ppid] && !pids[pid] {
				pids[pid] = true
				changed = true
			}
		}
	}
	return pids
}

// shown is the start of a command line, for messages.
func shown(cmdline []byte) string {
	s := strings.ReplaceAll(string(bytes.TrimRight(cmdline, "\x00")), "\x00", " ")
	if len(s) > 60 {
		s = s[:60] + "..."
	}
	return s
}
