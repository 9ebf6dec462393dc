package deployer

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/xeipuuv/gojsonschema"
	"sigs.k8s.io/yaml"
)

// TestDockerCompose checks docker-compose.yaml against the Compose
// Specification's schema, and that it runs the services of external mode
// under their names, publishing their ports, with the password variables
// the deployer reads.
func TestDockerCompose(t *testing.T) {
	raw, err := os.ReadFile("../../docker-compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	schema, err := os.ReadFile("testdata/compose-spec.json")
	if err != nil {
		t.Fatal(err)
	}
	res, err := gojsonschema.Validate(gojsonschema.NewBytesLoader(schema), gojsonschema.NewBytesLoader(doc))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range res.Errors() {
		t.Errorf("docker-compose.yaml: %s: %s", e.Field(), e.Description())
	}

	var compose struct {
		Services map[string]struct {
			Ports       []string          `json:"ports"`
			Environment map[string]string `json:"environment"`
			Command     []string          `json:"command"`
			Healthcheck struct {
				Test []string `json:"test"`
			} `json:"healthcheck"`
		} `json:"services"`
	}
	if err := yaml.Unmarshal(raw, &compose); err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	// No password on a command line: compose substitutes ${VAR} into the
	// container's arguments (where every process on the host can read
	// them), while $$VAR is left to the container's shell, which takes it
	// from the environment.
	hostVar := regexp.MustCompile(`(^|[^$])\$\{?[A-Z_]*(PASSWORD|SECRET|TOKEN|KEY)`)
	for name, svc := range compose.Services {
		for _, a := range append(append([]string(nil), svc.Command...), svc.Healthcheck.Test...) {
			if hostVar.MatchString(a) || strings.Contains(a, "--requirepass") || strings.Contains(a, "redis-cli -a") {
				t.Errorf("service %s puts a secret on a command line: %q", name, a)
			}
		}
	}
	for _, s := range ExternalServices {
		svc, ok := compose.Services[s.Name]
		if !ok {
			t.Errorf("docker-compose.yaml has no service %s", s.Name)
			continue
		}
		published := map[int]bool{}
		for _, p := range svc.Ports {
			parts := strings.Split(p, ":")
			n, _ := strconv.Atoi(parts[len(parts)-1])
			published[n] = true
			if len(parts) != 3 || parts[0] != "127.0.0.1" {
				t.Errorf("%s publishes %q: want loopback only, 127.0.0.1:HOST:CONTAINER", s.Name, p)
			}
		}
		for port := range s.Ports {
			if !published[port] {
				t.Errorf("%s does not publish port %d (%s)", s.Name, port, s.Ports[port])
			}
		}
		// The password comes from the variable the deployer reads, and
		// compose refuses to start without it.
		env := s.PasswordEnv
		if s.ServiceEnv != "" {
			// The service starts with a one-time password and never
			// sees the deployer's.
			env = s.ServiceEnv
			for k, v := range svc.Environment {
				if strings.Contains(v, s.PasswordEnv) {
					t.Errorf("service %s gets $%s in %s: it must only see $%s", s.Name, s.PasswordEnv, k, s.ServiceEnv)
				}
			}
		}
		if !regexp.MustCompile(fmt.Sprintf(`\$\{%s:\?`, env)).MatchString(text) {
			t.Errorf("docker-compose.yaml does not require ${%s:?...}", env)
		}
	}
}
