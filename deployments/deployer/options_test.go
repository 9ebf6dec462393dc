package deployer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestOptionsValidate(t *testing.T) {
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	external := func(o *Options) {
		o.Services = ModeExternal
		o.XMPPServer, o.RedisAddress, o.PostgresAddress = "x:5222", "r:6379", "p:5432"
		o.EjabberdAPI = "https://x:5443/api"
		o.EjabberdAdminPasswordFile, o.RedisPasswordFile, o.PostgresPasswordFile = pwFile, pwFile, pwFile
		o.RedisUserPasswordFiles = map[string]string{"continuum-agent": pwFile, "cluster-agent": pwFile, "northbound": pwFile}
	}
	cases := map[string]struct {
		env  map[string]string
		set  func(*Options)
		want []string // substrings of the error, in any order; none: valid
	}{
		"bundled": {env: map[string]string{"KARMADA_HOST_IP": "192.0.2.1"}},
		"bundled without host IP": {
			want: []string{"--karmada-host-ip ($KARMADA_HOST_IP): required with bundled services"},
		},
		"bundled with external flags": {
			env:  map[string]string{"KARMADA_HOST_IP": "192.0.2.1"},
			set:  func(o *Options) { o.RedisAddress = "r:1" },
			want: []string{"--redis-address: only with --services=external"},
		},
		"external":            {set: external},
		"propagation binding": {env: map[string]string{"KARMADA_HOST_IP": "192.0.2.1"}, set: func(o *Options) { o.Propagation = "binding" }},
		"unknown propagation": {
			env:  map[string]string{"KARMADA_HOST_IP": "192.0.2.1"},
			set:  func(o *Options) { o.Propagation = "policy" },
			want: []string{`--propagation: want binding or work, got "policy"`},
		},
		"external, passwords from the environment": {
			env: map[string]string{"REDIS_PASSWORD": "a", "POSTGRES_PASSWORD": "b", "EJABBERD_ADMIN_PASSWORD": "c"},
			set: func(o *Options) {
				external(o)
				o.EjabberdAdminPasswordFile, o.RedisPasswordFile, o.PostgresPasswordFile = "", "", ""
			},
		},
		"external, an ejabberd cluster": {set: func(o *Options) { external(o); o.XMPPServer = "x-0:5222, x-1:5222" }},
		"external, a bad cluster node": {
			set:  func(o *Options) { external(o); o.XMPPServer = "x-0:5222,x-1" },
			want: []string{`--xmpp-server: want host:port, got "x-1"`},
		},
		"external, everything missing": {
			set: func(o *Options) { o.Services = ModeExternal },
			want: []string{
				"--xmpp-server: required", "--redis-address: required", "--postgres-address: required", "--ejabberd-api: required",
				"--redis-password-file: give the file, or set $REDIS_PASSWORD",
				"--postgres-password-file: give the file, or set $POSTGRES_PASSWORD",
				"--ejabberd-admin-password-file: give the file, or set $EJABBERD_ADMIN_PASSWORD",
				"--redis-user-password-file continuum-agent=FILE: required with --services=external",
				"--redis-user-password-file cluster-agent=FILE: required with --services=external",
				"--redis-user-password-file northbound=FILE: required with --services=external",
			},
		},
		"external, a Redis user of no component and one empty": {
			set: func(o *Options) {
				external(o)
				o.RedisUserPasswordFiles["node-agent"] = pwFile
				o.RedisUserPasswordFiles["northbound"] = filepath.Join(dir, "none")
			},
			want: []string{
				"--redis-user-password-file node-agent: no component of that name (want continuum-agent, cluster-agent, northbound)",
				"--redis-user-password-file northbound: open ",
			},
		},
		"bundled with Redis users": {
			env:  map[string]string{"KARMADA_HOST_IP": "192.0.2.1"},
			set:  func(o *Options) { o.RedisUserPasswordFiles = map[string]string{"northbound": pwFile} },
			want: []string{"--redis-user-password-file: only with --services=external"},
		},
		"external with S3": {
			set: func(o *Options) {
				external(o)
				o.S3Endpoint, o.S3AccessKeyFile, o.S3SecretKeyFile = "http://s3:7070", pwFile, pwFile
			},
		},
		"external with S3 keys from the environment": {
			env: map[string]string{"AWS_ACCESS_KEY_ID": "a", "AWS_SECRET_ACCESS_KEY": "b"},
			set: func(o *Options) {
				external(o)
				o.S3Endpoint = "https://s3.example.org"
			},
		},
		"external with a bad S3 endpoint and no keys": {
			set: func(o *Options) {
				external(o)
				o.S3Endpoint = "s3.example.org/bucket"
			},
			want: []string{
				"--s3-endpoint: want http(s)://host:port",
				"--s3-access-key-file: give the file, or set $AWS_ACCESS_KEY_ID",
				"--s3-secret-key-file: give the file, or set $AWS_SECRET_ACCESS_KEY",
			},
		},
		"bundled with an S3 endpoint": {
			env:  map[string]string{"KARMADA_HOST_IP": "192.0.2.1"},
			set:  func(o *Options) { o.S3Endpoint = "http://s3:7070" },
			want: []string{"--s3-endpoint: only with --services=external"},
		},
		"one kubeconfig of two": {
			env:  map[string]string{"KARMADA_HOST_KUBECONFIG": "/x", "KARMADA_HOST_IP": "192.0.2.1"},
			want: []string{"--host-kubeconfig and --karmada-kubeconfig"},
		},
		"bad values": {
			env: map[string]string{"KARMADA_HOST_IP": "not-an-ip"},
			set: func(o *Options) {
				o.Services, o.PullPolicy, o.Tag, o.Timeout = "cloud", "Sometimes", "a:b", 0
				o.KarmadaAPIServer = "http://karmada"
			},
			want: []string{
				"--karmada-host-ip ($KARMADA_HOST_IP): \"not-an-ip\" is not an IP address", "--services: want bundled or external",
				"--pull-policy: want Always, IfNotPresent or Never", "--tag: \"a:b\" is not an image tag", "--timeout: must be positive",
				"--karmada-api-server: want an https:// URL",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := NewOptionsFromEnv(func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if tc.set != nil {
				tc.set(o)
			}
			err := o.Validate(true, true)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			lines := strings.Split(err.Error(), "\n")
			var missing []string
			for _, w := range tc.want {
				found := false
				for _, l := range lines {
					if strings.Contains(l, w) {
						found = true
					}
				}
				if !found {
					missing = append(missing, w)
				}
			}
			if len(missing) > 0 || len(lines) != len(tc.want) {
				t.Errorf("error lines:\n%s\nmissing: %q (want %d lines)", err, missing, len(tc.want))
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Error("the error shows a password")
			}
		})
	}
}

func TestConfigMapFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", "A")
	write("README", "notes")
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.yaml", filepath.Join(dir, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	got, err := ConfigMapFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	// As kubectl create configmap --from-file=DIR: regular files only.
	if diff := cmp.Diff(map[string]string{"a.yaml": "A", "README": "notes"}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	write("bad name.yaml", "x")
	write("bin.yaml", "\xff\xfe")
	_, err = ConfigMapFiles(dir)
	if err == nil || !strings.Contains(err.Error(), "bad name.yaml: the file name is not a valid ConfigMap key") || !strings.Contains(err.Error(), "bin.yaml: not UTF-8 text") {
		t.Errorf("err = %v, want both problems", err)
	}
	if got, err := ConfigMapFiles(filepath.Join(dir, "missing")); err != nil || len(got) != 0 {
		t.Errorf("missing folder: %v %v", got, err)
	}
}

func TestNewPlanRefusesBadDescriptions(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"continuum/c.yaml": "MLSysOpsContinuum:\n  continuum_id: c\n  clusters: [k]\n",
		"clusters/k.yaml":  "MLSysOpsCluster:\n  cluster_id: k\n  nodes: [n]\n",
		"nodes/n.yaml":     "MLSysOpsNode:\n  name: n\n  cluster_id: k\n  continuum_layer: moon\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	o := NewOptionsFromEnv(noEnv)
	o.Descriptions = dir
	_, err := NewPlan(o)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{filepath.Join(dir, "nodes/n.yaml") + ": MLSysOpsNode.continuum_layer", "MLSysOpsNode.environment: Required value"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestAgentSecretKey(t *testing.T) {
	for _, jid := range []string{"edge-1@mlsysops.local", "edge-1.cluster@mlsysops.local", "c.continuum@example.org"} {
		k := AgentSecretKey(jid)
		if back, ok := JIDOfKey(k); !ok || back != jid {
			t.Errorf("%s -> %s -> %s %v", jid, k, back, ok)
		}
	}
	if _, ok := JIDOfKey("password"); ok {
		t.Error("password is not an account key")
	}
}
