package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mlsysops-go/mlsysops/internal/images"
)

// Options are the command's flags.
type Options struct {
	// Out is the output directory (OCI layout, archive, manifest).
	Out string
	// Only limits the build to these catalog entries.
	Only []string
	// Push is a registry (host[:port][/path]) to push the images to.
	Push string
	// Insecure allows a plain-HTTP registry.
	Insecure bool
	// Version overrides `git describe --tags --always --dirty`.
	Version string
	// CACertificates is the CA bundle put into every image.
	CACertificates string
}

// AddFlags registers the options' flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Out, "out", "bin/images", "output directory: oci/ (OCI layout), images.tar (the layout as one tar, for `ctr images import`) and images.json")
	fs.StringSliceVar(&o.Only, "only", nil, "build only these images (default: all of the catalog)")
	fs.StringVar(&o.Push, "push", "", "also push every image as REGISTRY/mlsysops/<name>:<version>, e.g. registry.example.org:5000 (credentials from ~/.docker/config.json)")
	fs.BoolVar(&o.Insecure, "insecure", false, "talk plain HTTP to the --push registry")
	fs.StringVar(&o.Version, "version", "", "image tag and org.opencontainers.image.version (default: git describe --tags --always --dirty)")
	fs.StringVar(&o.CACertificates, "ca-certificates", images.DefaultCACertificates, "CA bundle copied into every image")
}

// Validate reports every problem with the options.
func (o *Options) Validate() error {
	var errs []error
	if o.Out == "" {
		errs = append(errs, errors.New("--out: must not be empty"))
	}
	if _, err := images.Lookup(o.Only...); err != nil {
		errs = append(errs, fmt.Errorf("--only: %w", err))
	}
	if o.Insecure && o.Push == "" {
		errs = append(errs, errors.New("--insecure: only with --push"))
	}
	return errors.Join(errs...)
}

func newCommand() *cobra.Command {
	o := &Options{}
	cmd := &cobra.Command{
		Use:   "images [--out DIR] [--only NAME,...] [--push REGISTRY]",
		Short: "Build the project's container images (static binaries, linux/amd64 and linux/arm64, one index each)",
		Long: `Builds every image of the catalog (internal/images.Catalog) in Go: the binary,
a base layer with CA certificates and the nonroot user (65532), no shell, fixed
timestamps (the commit's time), OCI labels with the version. Names:
mlsysops/<name>:<version> (docker.io/mlsysops/<name>:<version> in full), the
pause image mlsysops/pause:` + images.PauseTag + `; with --push REGISTRY, REGISTRY/mlsysops/<name>:<version>.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return o.run(cmd.Context())
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func (o *Options) run(ctx context.Context) error {
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	list, err := images.Lookup(o.Only...)
	if err != nil {
		return err
	}
	opts := images.Options{Root: root, Images: list, Version: o.Version, CACertificates: o.CACertificates, Log: os.Stdout}
	if opts.Version == "" {
		g, err := images.GitInfo(ctx, root)
		if err != nil {
			return err
		}
		opts.Version, opts.Revision, opts.Created = g.Version, g.Revision, g.Created
	}
	built, err := images.Build(ctx, opts)
	if err != nil {
		return err
	}
	if err := images.Write(o.Out, opts.Version, built); err != nil {
		return err
	}
	fmt.Printf("wrote %s (%s, %s, %s)\n", o.Out, filepath.Join(o.Out, images.LayoutDir), filepath.Join(o.Out, images.ArchiveFile), filepath.Join(o.Out, images.ManifestFile))
	if o.Push != "" {
		if _, err := images.Push(ctx, o.Push, opts.Version, built, o.Insecure, os.Stdout); err != nil {
			return err
		}
	}
	return nil
}

func run(ctx context.Context, cmd *cobra.Command) int {
	cmd.SetContext(ctx)
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		return 1
	}
	return 0
}
