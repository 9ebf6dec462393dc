package deployer

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/mlsysops-go/mlsysops/deployments/charts"
)

// NewCommand returns the deployer's command: install (the default),
// upgrade, rotate-passwords, uninstall, status and render.
func NewCommand(ctx context.Context, out io.Writer) *cobra.Command {
	o := NewOptions()
	root := &cobra.Command{
		Use:   "deployments",
		Short: "Install MLSysOps on a Karmada federation (go run ./deployments)",
		Long: `Installs MLSysOps on the Karmada federation you run: the continuum agent, the
northbound API and (bundled) ejabberd, Redis and PostgreSQL on the Karmada host
cluster; the mlsysops.eu CRDs, the cluster and node agent DaemonSets, their
descriptions, configuration, identities and roles in the Karmada API, which
propagates them to every member cluster, including clusters that join later.

Clusters: $KARMADA_HOST_KUBECONFIG and $KARMADA_API_KUBECONFIG, or $KUBECONFIG
with the contexts karmada-host and karmada-apiserver. The descriptions are
checked before anything is written. A second run changes nothing and says so.

Without a command, install.

` + externalHelp(),
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runInstall(cmd.Context(), o, out, false)
		},
	}
	o.AddFlags(root.PersistentFlags())
	root.SetContext(ctx)
	root.AddCommand(
		&cobra.Command{
			Use:   "install",
			Short: "Install or update MLSysOps, stage by stage, waiting for every workload to be ready",
			RunE: func(cmd *cobra.Command, _ []string) error {
				return runInstall(cmd.Context(), o, out, false)
			},
		},
		&cobra.Command{
			Use:   "upgrade",
			Short: "Roll every agent to a new image (--tag), showing the rollout in every cluster",
			RunE: func(cmd *cobra.Command, _ []string) error {
				return runInstall(cmd.Context(), o, out, true)
			},
		},
		&cobra.Command{
			Use:   "rotate-passwords",
			Short: "Give every agent's XMPP account (and the API's) a new password, without downtime: Secrets, accounts reconciler, ejabberd, then the agents one node at a time",
			RunE: func(cmd *cobra.Command, _ []string) error {
				if err := o.Validate(true, true); err != nil {
					return err
				}
				_, err := New(o, out).RotatePasswords(cmd.Context())
				return err
			},
		},
		&cobra.Command{
			Use:   "uninstall",
			Short: "Remove what install wrote, in the host, the Karmada API and every member (applications stay unless --purge)",
			RunE: func(cmd *cobra.Command, _ []string) error {
				if err := o.Validate(true, false); err != nil {
					return err
				}
				return New(o, out).Uninstall(cmd.Context())
			},
		},
		&cobra.Command{
			Use:   "status",
			Short: "What is installed, and the readiness of every workload in every cluster",
			RunE: func(cmd *cobra.Command, _ []string) error {
				if err := o.Validate(true, false); err != nil {
					return err
				}
				return New(o, io.Discard).Status(cmd.Context(), out)
			},
		},
		newRenderCommand(o, out),
	)
	return root
}

func runInstall(ctx context.Context, o *Options, out io.Writer, upgrade bool) error {
	if err := o.Validate(true, true); err != nil {
		return err
	}
	d := New(o, out)
	var rep *Report
	var err error
	if upgrade {
		rep, err = d.Upgrade(ctx)
	} else {
		rep, err = d.Install(ctx)
	}
	if err != nil {
		return err
	}
	if !o.DryRun && rep.Count(Created) > 0 {
		fmt.Fprintf(out, "The northbound API's operator token is in the Secret %s/%s of the host cluster:\n  kubectl --context karmada-host -n %s get secret %s -o jsonpath='{.data.tokens}' | base64 -d\n",
			Namespace, SecretNorthboundToken, Namespace, SecretNorthboundToken)
	}
	return nil
}

func newRenderCommand(o *Options, out io.Writer) *cobra.Command {
	part := "all"
	cmd := &cobra.Command{
		Use:   "render",
		Short: "Print the manifests (no Secrets: create those with install, or yourself)",
		Long: `Prints the manifests install applies, for GitOps: --part host for the Karmada
host cluster, karmada for the Karmada API, all for both (host first). Secrets
are not printed; install creates them, or see docs/install.md for their keys.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(false, true); err != nil && o.Services == ModeBundled {
				return err
			}
			r, err := Render(cmd.Context(), o, nil)
			if err != nil {
				return err
			}
			switch part {
			case "host":
				return charts.Encode(out, r.Host)
			case "karmada":
				return charts.Encode(out, r.Karmada)
			case "all":
				fmt.Fprintln(out, "# Karmada host cluster (context karmada-host)")
				if err := charts.Encode(out, r.Host); err != nil {
					return err
				}
				fmt.Fprintln(out, "# Karmada API (context karmada-apiserver)")
				return charts.Encode(out, r.Karmada)
			}
			return errors.New("--part: want host, karmada or all")
		},
	}
	cmd.Flags().StringVar(&part, "part", part, "host, karmada or all")
	return cmd
}
