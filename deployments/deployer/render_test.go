package deployer

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/mlsysops-go/mlsysops/deployments/charts"
)

var update = flag.Bool("update", false, "rewrite the golden files and deployments/manifests")

func noEnv(string) (string, bool) { return "", false }

// renderFile renders both charts as `render --part all` prints them. With
// briefCRDs the CRDs' specs are left out (TestChartCRDs checks them).
func renderFile(t *testing.T, o *Options, briefCRDs bool) []byte {
	t.Helper()
	r, err := Render(context.Background(), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if briefCRDs {
		for _, obj := range r.Karmada {
			if obj.GetKind() == "CustomResourceDefinition" {
				obj.Object["spec"] = "(crds/" + obj.GetName() + ")"
			}
		}
	}
	var b bytes.Buffer
	b.WriteString("# Karmada host cluster (context karmada-host)\n")
	if err := charts.Encode(&b, r.Host); err != nil {
		t.Fatal(err)
	}
	b.WriteString("# Karmada API (context karmada-apiserver)\n")
	if err := charts.Encode(&b, r.Karmada); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func golden(t *testing.T, file string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test ./deployments/deployer -update)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s is stale (go test ./deployments/deployer -update) (-want +got):\n%s", file, diff)
	}
}

// renderModes are the options of the golden renderings, by service mode.
func renderModes() map[string]func(o *Options) {
	return map[string]func(o *Options){
		"bundled": func(o *Options) {
			o.KarmadaHostIP = "192.0.2.10"
		},
		"external": func(o *Options) {
			o.Services = ModeExternal
			o.XMPPServer, o.XMPPCAFile = "xmpp.example.org:5222", "testdata/xmpp-ca.crt"
			o.EjabberdAPI = "https://xmpp.example.org:5443/api"
			o.RedisAddress, o.PostgresAddress = "redis.example.org:6379", "postgres.example.org:5432"
			o.S3Endpoint = "https://s3.example.org"
			o.Registry, o.Tag, o.XMPPDomain = "registry.example.org:5000", "v9.9.9", "continuum.example.org"
			o.HostValues, o.KarmadaValues = []string{"testdata/host-values.yaml"}, []string{"testdata/karmada-values.yaml"}
		},
	}
}

// TestRenderGolden renders the test descriptions in both service modes.
func TestRenderGolden(t *testing.T) {
	for name, set := range renderModes() {
		t.Run(name, func(t *testing.T) {
			o := NewOptionsFromEnv(noEnv)
			o.Descriptions = "testdata/descriptions"
			set(o)
			golden(t, filepath.Join("testdata", name+".output.yaml"), renderFile(t, o, true))
		})
	}
}

// TestManifests keeps deployments/manifests, the plain manifests for
// GitOps, rendered from this repository's descriptions.
func TestManifests(t *testing.T) {
	o := NewOptionsFromEnv(noEnv)
	o.Descriptions = "../../descriptions"
	o.KarmadaHostIP = "192.0.2.10"
	got := renderFile(t, o, false)
	head := "# MLSysOps manifests for GitOps, rendered from descriptions/ with bundled\n" +
		"# services and KARMADA_HOST_IP=192.0.2.10:\n" +
		"#   go run ./deployments render --descriptions descriptions --karmada-host-ip 192.0.2.10\n" +
		"# Render your own the same way. The Secrets and the XMPP CA are not here:\n" +
		"# docs/install.md says what they hold (install creates them).\n"
	golden(t, "../manifests/mlsysops.yaml", append([]byte(head), got...))
}

// TestRenderedNoSecret checks that nothing secret is rendered: no Secret
// holds data and no password, token or key appears in any object.
func TestRenderedNoSecret(t *testing.T) {
	o := NewOptionsFromEnv(noEnv)
	o.Descriptions = "testdata/descriptions"
	o.KarmadaHostIP = "192.0.2.10"
	r, err := Render(context.Background(), o, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, obj := range append(r.Host, r.Karmada...) {
		if obj.GetKind() == "Secret" {
			if _, ok := obj.Object["data"]; ok {
				t.Errorf("Secret %s has data in the manifests", obj.GetName())
			}
			if _, ok := obj.Object["stringData"]; ok {
				t.Errorf("Secret %s has stringData in the manifests", obj.GetName())
			}
		}
		var b bytes.Buffer
		if err := charts.Encode(&b, []*unstructured.Unstructured{obj}); err != nil {
			t.Fatal(err)
		}
		for _, word := range []string{"requirepass secret", "NODE_PASSWORD", "BEGIN PRIVATE KEY", "BEGIN EC PRIVATE KEY"} {
			if strings.Contains(b.String(), word) {
				t.Errorf("%s %s: contains %q", obj.GetKind(), obj.GetName(), word)
			}
		}
	}
}
