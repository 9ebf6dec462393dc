package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mlsysops-go/mlsysops/internal/testbed"
)

// options are the flags every subcommand shares.
type options struct {
	descriptions string
	state        string
	portBase     int
	binDir       string
	purge        bool
	profile      string
	kwokOnly     bool
	xmppNodes    int
}

func (o *options) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.descriptions, "descriptions", testbed.DefaultDescriptions, "folder with continuum/, clusters/ and nodes/ descriptions: one member cluster per cluster file, one KWOK node per node file")
	fs.StringVar(&o.state, "state", testbed.DefaultStateDir, "folder for data, certificates, logs, pid files, the kubeconfig and the env file")
	fs.IntVar(&o.portBase, "port-base", testbed.DefaultPortBase, "first loopback port; the testbed uses ports from here up to port-base+100+10*clusters")
	fs.StringVar(&o.binDir, "bin", "bin", "folder with the binaries `make deps` builds")
	fs.StringVar(&o.profile, "profile", string(testbed.ProfileDefault), "default (quick failure detection, a node agent per node) or scale (thousands of KWOK nodes: slow heartbeats, light member control planes, no node agents, KWOK nodes only)")
	fs.BoolVar(&o.kwokOnly, "kwok-only", false, "no real node (containerd + kubelet): KWOK simulates every node")
	fs.IntVar(&o.xmppNodes, "xmpp-nodes", 0, "ejabberd nodes, joined into one cluster when more than one (at most 4); 0 keeps what the state folder last ran, 1 for a new one")
}

func (o *options) testbed() (*testbed.Testbed, error) {
	return testbed.New(testbed.Options{
		Descriptions: o.descriptions, StateDir: o.state, PortBase: o.portBase, BinDir: o.binDir, Out: os.Stdout, KWOKOnly: o.kwokOnly, XMPPNodes: o.xmppNodes,
		Profile: testbed.Profile(o.profile),
	})
}

func newCommand() *cobra.Command {
	o := &options{}
	root := &cobra.Command{
		Use:           "testbed",
		Short:         "Run a local MLSysOps continuum (Karmada, member clusters with KWOK nodes, ejabberd, Redis)",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	o.addFlags(root.PersistentFlags())
	root.AddCommand(&cobra.Command{
		Use:   "up",
		Short: "Start every component that is not already running and wait until the clusters are Ready",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tb, err := o.testbed()
			if err != nil {
				return err
			}
			_, err = tb.Up(cmd.Context())
			return err
		},
	})
	down := &cobra.Command{
		Use:   "down",
		Short: "Stop every component of the testbed",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tb, err := o.testbed()
			if err != nil {
				return err
			}
			return tb.Down(cmd.Context(), o.purge)
		},
	}
	down.Flags().BoolVar(&o.purge, "purge", false, "also delete the state folder (data, certificates, logs)")
	root.AddCommand(down)
	root.AddCommand(&cobra.Command{
		Use:   "status",
		Short: "Report each component: running, pid, ready; exits 1 unless all are ready",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tb, err := o.testbed()
			if err != nil {
				return err
			}
			st, err := tb.Status(cmd.Context())
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "COMPONENT\tSTATE\tPID\tLOG")
			bad := 0
			for _, s := range st {
				state, pid := "stopped", "-"
				if s.Running {
					state, pid = "ready", fmt.Sprint(s.Pid)
					if !s.Ready {
						state = "not ready: " + s.Detail
					}
				}
				if !s.Ready {
					bad++
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", s.Name, state, pid, s.LogFile)
			}
			w.Flush()
			if bad > 0 {
				return fmt.Errorf("%d of %d components not ready", bad, len(st))
			}
			return nil
		},
	})
	root.AddCommand(newBenchCommand(o))
	root.AddCommand(newFirstAppCommand(o))
	root.AddCommand(newGenCommand())
	root.AddCommand(newScaleBenchCommand(o))
	root.AddCommand(newAdmissionCommand())
	root.AddCommand(newKwokletCommand())
	return root
}

// newKwokletCommand runs the kwoklet of one member cluster (see
// internal/testbed/kwoklet); the testbed starts it.
func newKwokletCommand() *cobra.Command {
	var o testbed.KwokletOptions
	cmd := &cobra.Command{
		Use:    "kwoklet",
		Short:  "Run the MLSysOps agent pods of a cluster's KWOK nodes as processes",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return testbed.RunKwoklet(cmd.Context(), o, os.Stderr)
		},
	}
	cmd.Flags().StringVar(&o.Cluster, "cluster", "", "member cluster")
	cmd.Flags().StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig of the testbed")
	cmd.Flags().StringVar(&o.Context, "context", "", "context of the member cluster")
	cmd.Flags().StringVar(&o.StateDir, "state", "", "the kwoklet's folder")
	cmd.Flags().StringVar(&o.NodesFile, "nodes", "", "the KWOK nodes' namespaces (written by the testbed)")
	cmd.Flags().StringVar(&o.BinDir, "bin-dir", "bin", "the testbed's bin folder")
	return cmd
}

// newAdmissionCommand runs the testbed's admission webhook (see
// internal/testbed/admission.go); the testbed starts it.
func newAdmissionCommand() *cobra.Command {
	var listen, cert, key, manifest string
	cmd := &cobra.Command{
		Use:    "admission",
		Short:  "Serve the webhook that keeps pods of images the real nodes lack on KWOK nodes",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
			return testbed.RunAdmission(cmd.Context(), listen, cert, key, manifest, log)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:16032", "address to serve HTTPS on")
	cmd.Flags().StringVar(&cert, "cert", "", "serving certificate")
	cmd.Flags().StringVar(&key, "key", "", "serving key")
	cmd.Flags().StringVar(&manifest, "images-manifest", "bin/images/images.json", "the images every real node has (`make images` writes it)")
	return cmd
}

// newBenchCommand measures the testbed: time to ready from a clean state
// (binaries already built), time to ready when everything is reused, and
// resident memory per component. It prints the figures and stops the
// testbed it started.
func newBenchCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "bench",
		Short: "Measure the testbed's time to ready and memory (uses its own state folder; purged first)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			tb, err := testbed.New(testbed.Options{Descriptions: o.descriptions, StateDir: o.state, PortBase: o.portBase, BinDir: o.binDir})
			if err != nil {
				return err
			}
			if err := tb.Down(ctx, true); err != nil {
				return err
			}
			defer tb.Down(context.Background(), true)
			start := time.Now()
			env, err := tb.Up(ctx)
			if err != nil {
				return err
			}
			cold := time.Since(start)
			// Each real node's time to Ready in the cold up (the warm up
			// below measures reused nodes).
			readyIn := tb.RealNodeReadyTimes()
			// The first application after start-up, at once, as a user
			// following the README would.
			first, err := firstApp(ctx, env, filepath.Join(filepath.Dir(o.descriptions), "examples", "apps", "gpu-inference.yaml"), "llm-inference")
			if err != nil {
				return fmt.Errorf("first application: %w", err)
			}
			printFirstApp("llm-inference", first)
			// Let start-up transients settle before reading memory.
			time.Sleep(10 * time.Second)
			mem, err := tb.Memory()
			if err != nil {
				return err
			}
			start = time.Now()
			if _, err := tb.Up(ctx); err != nil {
				return err
			}
			warm := time.Since(start)
			sort.Slice(mem, func(i, j int) bool { return mem[i].RSSBytes > mem[j].RSSBytes })
			var total int64
			w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "COMPONENT\tRSS MiB")
			for _, m := range mem {
				total += m.RSSBytes
				fmt.Fprintf(w, "%s\t%.1f\n", m.Name, float64(m.RSSBytes)/(1<<20))
			}
			w.Flush()
			// Go's benchmark format, so that the tools reading `go test
			// -bench` output (make bench's bench/results.json) read this too.
			fmt.Printf("BenchmarkTestbed/clusters=%d,nodes=%d,real-nodes=%d \t1\t%.1f cold-up-s\t%.1f warm-up-s\t%.0f RSS-MiB\t%d processes\n",
				len(env.Clusters), len(env.Nodes), len(env.RealNodes), cold.Seconds(), warm.Seconds(), float64(total)/(1<<20), len(mem))
			return benchRealNodes(ctx, tb, env, mem, readyIn)
		},
	}
}
