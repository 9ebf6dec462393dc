package accounts

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mlsysops-go/mlsysops/internal/agentconfig"
	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/internal/messaging/provision"
)

// Described returns what the description set asks for: an account per
// agent of the given layers (the continuum, each cluster, each node; nil
// is all three), whose password lives in passwordDir, and a roster link
// between each parent and child that both have one. extra adds accounts
// given as "jid=password-file".
func Described(set *description.Set, domain, passwordDir string, extra []string, layers []agentconfig.Layer) (provision.Desired, map[string]string, error) {
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
	kept := func(layer agentconfig.Layer) bool { return len(layers) == 0 || slices.Contains(layers, layer) }
	// agent adds the account of an agent of a kept layer and returns its
	// JID; "" for a layer left out.
	agent := func(layer agentconfig.Layer, name string) string {
		if !kept(layer) {
			return ""
		}
		j := agentconfig.AgentJID(layer, name, domain)
		add(j, filepath.Join(passwordDir, provision.PasswordFileName(j)))
		return j
	}
	link := func(parent, child string) {
		if parent != "" && child != "" {
			d.Links = append(d.Links, [2]string{parent, child})
		}
	}
	cont := ""
	if set.Continuum != nil {
		cont = agent(agentconfig.LayerContinuum, set.Continuum.Name)
	}
	clusters := map[string]string{}
	for _, c := range set.Clusters {
		clusters[c.Name] = agent(agentconfig.LayerCluster, c.Name)
		link(cont, clusters[c.Name])
	}
	for _, n := range set.Nodes {
		// The description loader has checked that the cluster exists.
		link(clusters[n.Spec.ClusterID], agent(agentconfig.LayerNode, n.Name))
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
