package accounts

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mlsysops-go/mlsysops/internal/agentconfig"
	"github.com/mlsysops-go/mlsysops/internal/description"
	"github.com/mlsysops-go/mlsysops/internal/messaging/provision"
)

func TestDescribed(t *testing.T) {
	const dom = "@d"
	// The valid descriptions with every layer's agents.
	everyAgent := provision.Desired{
		Accounts: []string{"cont.continuum" + dom, "c1.cluster" + dom, "n1" + dom, "n2" + dom, "northbound" + dom},
		Links:    [][2]string{{"cont.continuum" + dom, "c1.cluster" + dom}, {"c1.cluster" + dom, "n1" + dom}, {"c1.cluster" + dom, "n2" + dom}},
	}
	everyAgentFiles := map[string]string{
		"cont.continuum" + dom: "/pki/xmpp-cont.continuum_at_d.password",
		"c1.cluster" + dom:     "/pki/xmpp-c1.cluster_at_d.password",
		"n1" + dom:             "/pki/xmpp-n1_at_d.password",
		"n2" + dom:             "/pki/xmpp-n2_at_d.password",
		"northbound" + dom:     "/pki/northbound.password",
	}
	cases := map[string]struct {
		dir       string
		layers    []agentconfig.Layer
		want      provision.Desired
		wantFiles map[string]string
	}{
		"valid": {
			dir:       "testdata/valid",
			want:      everyAgent,
			wantFiles: everyAgentFiles,
		},
		"every layer named": {
			dir:       "testdata/valid",
			layers:    agentconfig.Layers,
			want:      everyAgent,
			wantFiles: everyAgentFiles,
		},
		// No node agents run: no node accounts, no links to them.
		"continuum and clusters": {
			dir:    "testdata/valid",
			layers: []agentconfig.Layer{agentconfig.LayerContinuum, agentconfig.LayerCluster},
			want: provision.Desired{
				Accounts: []string{"cont.continuum" + dom, "c1.cluster" + dom, "northbound" + dom},
				Links:    [][2]string{{"cont.continuum" + dom, "c1.cluster" + dom}},
			},
			wantFiles: map[string]string{
				"cont.continuum" + dom: "/pki/xmpp-cont.continuum_at_d.password",
				"c1.cluster" + dom:     "/pki/xmpp-c1.cluster_at_d.password",
				"northbound" + dom:     "/pki/northbound.password",
			},
		},
		// Node agents without their cluster agent's account: accounts,
		// no link to a parent that has none.
		"nodes only": {
			dir:    "testdata/valid",
			layers: []agentconfig.Layer{agentconfig.LayerNode},
			want: provision.Desired{
				Accounts: []string{"n1" + dom, "n2" + dom, "northbound" + dom},
			},
			wantFiles: map[string]string{
				"n1" + dom:         "/pki/xmpp-n1_at_d.password",
				"n2" + dom:         "/pki/xmpp-n2_at_d.password",
				"northbound" + dom: "/pki/northbound.password",
			},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			set, err := description.LoadDir(c.dir)
			if err != nil {
				t.Fatal(err)
			}
			d, files, err := Described(set, "d", "/pki", []string{"northbound@d=/pki/northbound.password"}, c.layers)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, d); diff != "" {
				t.Errorf("desired (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(c.wantFiles, files); diff != "" {
				t.Errorf("password files (-want +got):\n%s", diff)
			}
		})
	}
}
