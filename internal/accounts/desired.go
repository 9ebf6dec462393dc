package accounts

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/mlsysops-go/mlsysops/internal/agentconfig"
	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/internal/messaging/provision"
)

// Described returns what the description set asks for: an account per
// agent (the continuum, each cluster, each node), whose password lives in
// passwordDir, and a roster link between each parent and child. extra
// adds accounts given as "jid=password-file".
func Described(set *description.Set, domain, passwordDir string, extra []string) (provision.Desired, map[string]string, error) {
	var d provision.Desired
	files := map[string]string{}
	var errs []error
	add := func(account, file string) {
		if _, dup := files[account]; dup {
			errs = append(errs, fmt.Errorf("account %s described twice", account))
			return
		}
		d.Accounts = append(d.Accounts, account)
		files[account] = file
	}
	agent := func(layer agentconfig.Layer, name string) string {
		j := agentconfig.AgentJID(layer, name, domain)
		add(j, filepath.Join(passwordDir, provision.PasswordFileName(j)))
		return j
	}
	cont := ""
	if set.Continuum != nil {
		cont = agent(agentconfig.LayerContinuum, set.Continuum.Name)
	}
	for _, c := range set.Clusters {
		j := agent(agentconfig.LayerCluster, c.Name)
		if cont != "" {
			d.Links = append(d.Links, [2]string{cont, j})
		}
	}
	for _, n := range set.Nodes {
		// The description loader has checked that the cluster exists.
		d.Links = append(d.Links, [2]string{agentconfig.AgentJID(agentconfig.LayerCluster, n.Spec.ClusterID, domain), agent(agentconfig.LayerNode, n.Name)})
	}
	for _, e := range extra {
		j, file, _ := strings.Cut(e, "=")
		add(j, file)
	}
	if err := errors.Join(errs...); err != nil {
		return provision.Desired{}, nil, err
	}
	return d, files, d.Validate()
}
