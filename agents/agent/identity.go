package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/mlsysops-go/mlsysops/internal/agentconfig"
	"github.com/mlsysops-go/mlsysops/internal/description/generic"
)

// AgentJID returns the bare JID of an agent (see agentconfig.AgentJID).
func AgentJID(layer agentconfig.Layer, name, domain string) string {
	return agentconfig.AgentJID(layer, name, domain)
}

// ContinuumName finds the continuum agent's name: the one description in
// the folder's continuum/ (or top-level) files.
func ContinuumName(dir string) (string, error) {
	var found []string
	for _, pattern := range []string{filepath.Join(dir, "continuum", "*.y*ml"), filepath.Join(dir, "*.y*ml")} {
		files, _ := filepath.Glob(pattern)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil || !strings.Contains(string(b), "MLSysOpsContinuum") {
				continue
			}
			if _, err := generic.LoadOwn(filepath.Dir(f), strings.TrimSuffix(filepath.Base(f), filepath.Ext(f)), generic.KindContinuum); err != nil {
				continue
			}
			found = append(found, strings.TrimSuffix(filepath.Base(f), filepath.Ext(f)))
		}
	}
	sort.Strings(found)
	switch len(found) {
	case 0:
		return "", fmt.Errorf("no continuum description in %s; name the continuum agent with --continuum-name", dir)
	case 1:
		return found[0], nil
	}
	return "", fmt.Errorf("several continuum descriptions in %s (%s); name the continuum agent with --continuum-name", dir, strings.Join(found, ", "))
}
