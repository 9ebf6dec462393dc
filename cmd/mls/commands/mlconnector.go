package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/mlsysops-go/mlsysops/mlconnector/api"
	mlclient "github.com/mlsysops-go/mlsysops/mlconnector/client"
)

// mlcOptions say how to reach the ML connector: its URL, with the
// northbound API's token.
type mlcOptions struct {
	api     *APIOptions
	streams IOStreams
	url     string
	output  *string
}

func (o *mlcOptions) client() (*mlclient.Client, error) {
	if err := checkOutput(*o.output); err != nil {
		return nil, err
	}
	return mlclient.New(mlclient.Config{URL: o.url, Token: o.api.Token, CAFile: o.api.CAFile, UserAgent: "mls"})
}

func (o *mlcOptions) print(v any, table func(tw *tabwriter.Writer)) error {
	return render(o.streams.Out, *o.output, v, table)
}

// addMLConnectorCommands adds the ML connector's commands to mls ml:
// model, deployment, predict, infer, explain, operations, drift, runtime.
func addMLConnectorCommands(ml *cobra.Command, streams IOStreams, apiOpts *APIOptions, output *string) {
	o := &mlcOptions{api: apiOpts, streams: streams, output: output}
	ml.PersistentFlags().StringVar(&o.url, "mlconnector-url", os.Getenv(mlclient.EnvURL),
		"ML connector URL (default $"+mlclient.EnvURL+", or "+mlclient.DefaultURL+")")
	ml.AddCommand(newModelCommand(o), newDeploymentCommand(o), newPredictCommand(o), newInferCommand(o), newExplainCommand(o),
		newOperationsCommand(o), newDriftCommand(o), newRuntimeCommand(o))
}

// readBody reads a JSON or YAML body from a file (- is standard input)
// and returns it as JSON.
func readBody(o *mlcOptions, path string) ([]byte, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(io.LimitReader(o.streams.In, 64<<20))
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if strings.HasPrefix(strings.TrimSpace(string(b)), "{") || strings.HasPrefix(strings.TrimSpace(string(b)), "[") {
		return b, nil
	}
	j, err := yaml.YAMLToJSON(b)
	if err != nil {
		return nil, fmt.Errorf("%s is neither JSON nor YAML: %w", path, err)
	}
	return j, nil
}

func printModels(tw *tabwriter.Writer, ms []api.Model) {
	fmt.Fprintln(tw, "ID\tNAME\tKIND\tFORMAT\tVERSION\tALIASES\tTAGS\tAGE")
	for _, m := range ms {
		var aliases []string
		for a, v := range m.Aliases {
			aliases = append(aliases, a+"="+strconv.Itoa(v))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", m.ModelID, m.ModelName, m.ModelKind, orDash(m.Format), m.LatestVersion,
			orDash(strings.Join(aliases, ",")), orDash(strings.Join(m.ModelTags, ",")), age(m.CreatedAt))
	}
}

func newModelCommand(o *mlcOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "model", Short: "Register models and their files, versions and aliases (ML connector)", Args: cobra.NoArgs}
	var path string
	add := &cobra.Command{
		Use: "add --path FILE", Short: "Register a model described in JSON or YAML (upstream's MLModelCreate fields)",
		Example: "  mls ml model add --path iris.json", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			body, err := readBody(o, path)
			if err != nil {
				return err
			}
			m, err := c.CreateModelRaw(cmd.Context(), body)
			if err != nil {
				return err
			}
			return o.print(m, func(tw *tabwriter.Writer) { printModels(tw, []api.Model{m}) })
		},
	}
	add.Flags().StringVar(&path, "path", "", "model description (JSON or YAML; - for standard input)")
	_ = add.MarkFlagRequired("path")

	var f mlclient.ModelFilter
	list := &cobra.Command{
		Use: "list", Short: "List models (filter by kind, name, tags)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			p, err := c.Models(cmd.Context(), f)
			if err != nil {
				return err
			}
			return o.print(p, func(tw *tabwriter.Writer) {
				printModels(tw, p.Items)
				if p.Continue != "" {
					fmt.Fprintf(tw, "(more: --continue %s)\n", p.Continue)
				}
			})
		},
	}
	list.Flags().StringVar(&f.Kind, "kind", "", "only models of this kind")
	list.Flags().StringVar(&f.Name, "name", "", "only models of this name")
	list.Flags().StringSliceVar(&f.Tags, "tag", nil, "only models with any of these tags")
	list.Flags().IntVar(&f.Limit, "limit", 0, "page size")
	list.Flags().StringVar(&f.Continue, "continue", "", "continue token of the previous page")

	one := func(use, short string, run func(ctx context.Context, c *mlclient.Client, args []string) (any, func(*tabwriter.Writer), error), nargs int) *cobra.Command {
		return &cobra.Command{Use: use, Short: short, Args: cobra.ExactArgs(nargs), RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			v, table, err := run(cmd.Context(), c, args)
			if err != nil {
				return err
			}
			return o.print(v, table)
		}}
	}
	get := one("get MODEL_ID", "Show a model", func(ctx context.Context, c *mlclient.Client, args []string) (any, func(*tabwriter.Writer), error) {
		m, err := c.Model(ctx, args[0])
		return m, func(tw *tabwriter.Writer) { printModel(tw, m) }, err
	}, 1)
	var patchPath string
	patch := &cobra.Command{
		Use: "patch MODEL_ID --path FILE", Short: "Change a model's description (a JSON merge patch)", Args: cobra.ExactArgs(1),
		Example: `  echo '{"modeltags": ["prod"]}' | mls ml model patch $MODEL --path -`,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			body, err := readBody(o, patchPath)
			if err != nil {
				return err
			}
			m, err := c.PatchModel(cmd.Context(), args[0], body)
			if err != nil {
				return err
			}
			return o.print(m, func(tw *tabwriter.Writer) { printModel(tw, m) })
		},
	}
	patch.Flags().StringVar(&patchPath, "path", "", "the patch (JSON or YAML; - for standard input)")
	_ = patch.MarkFlagRequired("path")
	del := one("delete MODEL_ID", "Delete a model with its versions and files", func(ctx context.Context, c *mlclient.Client, args []string) (any, func(*tabwriter.Writer), error) {
		err := c.DeleteModel(ctx, args[0])
		msg := api.Message{Message: "model " + args[0] + " deleted with its files"}
		return msg, func(tw *tabwriter.Writer) { fmt.Fprintln(tw, msg.Message) }, err
	}, 1)

	var kind, format, name string
	upload := &cobra.Command{
		Use: "upload MODEL_ID FILE --kind model|data|code|env", Short: "Upload a file; a model file makes a new version",
		Example: "  mls ml model upload $MODEL iris.onnx --kind model\n  mls ml model upload $MODEL train.csv --kind data",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			f, err := os.Open(args[1])
			if err != nil {
				return err
			}
			defer f.Close()
			n := name
			if n == "" {
				n = filepath.Base(args[1])
			}
			up, err := c.Upload(cmd.Context(), args[0], kind, n, f, format)
			if err != nil {
				return err
			}
			return o.print(up, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "%s\t%s revision %d\t%d bytes\tsha256 %s\n", up.ID, up.Kind, up.Revision, up.Size, up.SHA256)
				if up.Version != nil {
					fmt.Fprintf(tw, "version %d (%s)\n", up.Version.Version, up.Version.Format)
				}
			})
		},
	}
	upload.Flags().StringVar(&kind, "kind", "model", "kind of file: model, data, code or env")
	upload.Flags().StringVar(&format, "format", "", "format of a model file (onnx, lightgbm, xgboost; default from the file)")
	upload.Flags().StringVar(&name, "name", "", "file name to record (default the file's)")

	files := one("files MODEL_ID", "List a model's files", func(ctx context.Context, c *mlclient.Client, args []string) (any, func(*tabwriter.Writer), error) {
		fs, err := c.Files(ctx, args[0])
		return fs, func(tw *tabwriter.Writer) {
			fmt.Fprintln(tw, "ID\tKIND\tREVISION\tNAME\tSIZE\tSHA256\tAGE")
			for _, f := range fs {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\t%s\n", f.ID, f.Kind, f.Revision, f.FileName, f.Size, f.SHA256[:12]+"…", age(f.CreatedAt))
			}
		}, err
	}, 1)
	var outFile string
	download := &cobra.Command{
		Use: "download MODEL_ID FILE_ID -f OUT", Short: "Download a file", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			b, err := c.Download(cmd.Context(), args[0], args[1])
			if err != nil {
				return err
			}
			if outFile == "" || outFile == "-" {
				_, err = o.streams.Out.Write(b)
				return err
			}
			return os.WriteFile(outFile, b, 0o644)
		},
	}
	download.Flags().StringVarP(&outFile, "file", "f", "", "where to write it (default standard output)")
	versions := one("versions MODEL_ID", "List a model's versions", func(ctx context.Context, c *mlclient.Client, args []string) (any, func(*tabwriter.Writer), error) {
		vs, err := c.Versions(ctx, args[0])
		return vs, func(tw *tabwriter.Writer) {
			fmt.Fprintln(tw, "VERSION\tFORMAT\tFILE\tSIZE\tALIASES\tAGE")
			for _, v := range vs {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\n", v.Version, v.Format, v.Artifact.FileName, v.Artifact.Size, orDash(strings.Join(v.Aliases, ",")), age(v.CreatedAt))
			}
		}, err
	}, 1)
	alias := one("alias MODEL_ID ALIAS VERSION", "Point an alias (production, staging) at a version", func(ctx context.Context, c *mlclient.Client, args []string) (any, func(*tabwriter.Writer), error) {
		n, err := strconv.Atoi(args[2])
		if err != nil {
			return nil, nil, fmt.Errorf("VERSION %q: a number", args[2])
		}
		v, err := c.SetAlias(ctx, args[0], args[1], n)
		return v, func(tw *tabwriter.Writer) { fmt.Fprintf(tw, "%s -> version %d\n", args[1], v.Version) }, err
	}, 3)
	unalias := one("unalias MODEL_ID ALIAS", "Remove an alias", func(ctx context.Context, c *mlclient.Client, args []string) (any, func(*tabwriter.Writer), error) {
		err := c.DeleteAlias(ctx, args[0], args[1])
		msg := api.Message{Message: "alias " + args[1] + " removed"}
		return msg, func(tw *tabwriter.Writer) { fmt.Fprintln(tw, msg.Message) }, err
	}, 2)
	cmd.AddCommand(add, list, get, patch, del, upload, files, download, versions, alias, unalias)
	return cmd
}

func printModel(tw *tabwriter.Writer, m api.Model) {
	printModels(tw, []api.Model{m})
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "FEATURE\tTYPE\tKIND")
	for _, f := range m.FeatureList {
		kind := "input"
		if f.Kind == api.FeatureTarget {
			kind = "target"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", f.FeatureName, f.Type, kind)
	}
	if on, method := m.DriftDetection.Enabled(); on {
		fmt.Fprintf(tw, "\ndrift detection on (method %d)\n", method)
	}
}

func printDeployments(tw *tabwriter.Writer, ds []api.Deployment) {
	fmt.Fprintln(tw, "ID\tMODEL\tVERSION\tOWNER\tPHASE\tREASON\tENDPOINT\tAGE")
	for _, d := range ds {
		ep := "-"
		if d.Endpoint != nil {
			ep = d.Endpoint.Cluster + " " + orDash(d.Endpoint.ExternalAddress)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", d.DeploymentID, d.ModelID, d.ModelVersion, d.OwnerID, d.Phase, orDash(d.Reason), ep, age(d.CreatedAt))
	}
}

func printDeployment(tw *tabwriter.Writer, d api.Deployment) {
	printDeployments(tw, []api.Deployment{d})
	if d.Message != "" {
		fmt.Fprintf(tw, "\n%s\n", d.Message)
	}
	if e := d.Endpoint; e != nil {
		fmt.Fprintf(tw, "\nendpoint: %s (cluster %s, Service %s/%s, external %s)\n", e.URL, e.Cluster, e.Namespace, e.Service, orDash(e.ExternalAddress))
	}
	if len(d.Pods) > 0 {
		fmt.Fprintln(tw, "\nPOD\tNODE\tVERSION\tSTAGE\tMESSAGE")
		for _, p := range d.Pods {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", p.Name, orDash(p.Node), p.ModelVersion, p.Stage, p.Message)
		}
	}
}

func newDeploymentCommand(o *mlcOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "deployment", Aliases: []string{"deploy"}, Short: "Deploy model versions and follow them (ML connector)", Args: cobra.NoArgs}
	var spec api.DeploymentSpec
	var version string
	var gpus int32
	var gpuModel string
	var gpuMem int64
	var wait time.Duration
	create := &cobra.Command{
		Use:   "create --model MODEL_ID --owner OWNER",
		Short: "Deploy a model version (latest, a number or an alias)",
		Example: "  mls ml deployment create --model $MODEL --owner alice --version production --gpus 1 --wait 10m\n" +
			"  mls ml deployment create --model $MODEL --owner alice --cluster cloud-1 --layer cloud --cpu 1 --memory 1Gi",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			spec.Version = api.VersionRef(version)
			if gpus > 0 || gpuModel != "" || gpuMem > 0 {
				spec.Resources.GPU = &api.GPU{Count: gpus, Model: gpuModel, MinMemoryGB: gpuMem}
			}
			d, err := c.CreateDeployment(cmd.Context(), spec)
			if err != nil {
				return err
			}
			if wait > 0 {
				if d, err = waitReady(cmd.Context(), o, c, d.DeploymentID, wait); err != nil {
					return err
				}
			}
			return o.print(d, func(tw *tabwriter.Writer) { printDeployment(tw, d) })
		},
	}
	fs := create.Flags()
	fs.StringVar(&spec.DeploymentID, "id", "", "deployment id (a DNS label; default generated)")
	fs.StringVar(&spec.ModelID, "model", "", "model id")
	fs.StringVar(&spec.OwnerID, "owner", "", "owner of the deployment and its operations")
	fs.StringVar(&version, "version", "", "version: a number, an alias or latest (default latest)")
	fs.StringVar(&spec.Placement.ClusterID, "cluster", "", "member cluster to run in (default any)")
	fs.StringVar(&spec.Placement.Node, "node", "", "node to run on (default any)")
	fs.StringVar(&spec.Placement.Continuum, "layer", "", "continuum layer: cloud, edge_infrastructure, edge, far_edge")
	fs.Int32Var(&spec.Replicas, "replicas", 1, "replicas of the model server")
	fs.StringVar(&spec.Resources.CPU, "cpu", "", "CPU per replica (default 250m)")
	fs.StringVar(&spec.Resources.Memory, "memory", "", "memory per replica (default from the model's size)")
	fs.Int32Var(&gpus, "gpus", 0, "GPUs per replica")
	fs.StringVar(&gpuModel, "gpu-model", "", "GPU product (nvidia.com/gpu.product, e.g. NVIDIA-L4)")
	fs.Int64Var(&gpuMem, "gpu-memory", 0, "least memory of one GPU, in GB (the model's own size counts too)")
	fs.StringVar(&spec.Runtime, "runtime", "", "serving runtime (default the one for the version's format)")
	fs.StringVar(&spec.Image, "image", "", "serving image replacing the runtime's")
	fs.DurationVar(&wait, "wait", 0, "wait until Ready (or Failed) for up to this long")
	_ = create.MarkFlagRequired("model")
	_ = create.MarkFlagRequired("owner")

	var owner, model string
	list := &cobra.Command{
		Use: "list", Short: "List deployments", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			p, err := c.Deployments(cmd.Context(), owner, model, 0, "")
			if err != nil {
				return err
			}
			return o.print(p, func(tw *tabwriter.Writer) { printDeployments(tw, p.Items) })
		},
	}
	list.Flags().StringVar(&owner, "owner", "", "only this owner's")
	list.Flags().StringVar(&model, "model", "", "only this model's")
	get := &cobra.Command{
		Use: "get DEPLOYMENT", Short: "Show a deployment: phase, reason, pods, endpoint", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			if wait > 0 {
				d, err := waitReady(cmd.Context(), o, c, args[0], wait)
				if err != nil {
					return err
				}
				return o.print(d, func(tw *tabwriter.Writer) { printDeployment(tw, d) })
			}
			d, err := c.Deployment(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return o.print(d, func(tw *tabwriter.Writer) { printDeployment(tw, d) })
		},
	}
	get.Flags().DurationVar(&wait, "wait", 0, "wait until Ready (or Failed) for up to this long")
	patchCmd := func(use, short string, build func(args []string) (map[string]any, error)) *cobra.Command {
		return &cobra.Command{Use: use, Short: short, Args: cobra.ExactArgs(2), RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			patch, err := build(args)
			if err != nil {
				return err
			}
			d, err := c.PatchDeployment(cmd.Context(), args[0], patch)
			if err != nil {
				return err
			}
			return o.print(d, func(tw *tabwriter.Writer) { printDeployment(tw, d) })
		}}
	}
	setVersion := patchCmd("set-version DEPLOYMENT VERSION", "Move a deployment to another version (a number, an alias or latest); it rolls without downtime",
		func(args []string) (map[string]any, error) { return map[string]any{"version": args[1]}, nil })
	scale := patchCmd("scale DEPLOYMENT REPLICAS", "Change the number of replicas", func(args []string) (map[string]any, error) {
		n, err := strconv.Atoi(args[1])
		if err != nil {
			return nil, fmt.Errorf("REPLICAS %q: a number", args[1])
		}
		return map[string]any{"replicas": n}, nil
	})
	del := &cobra.Command{
		Use: "delete DEPLOYMENT", Short: "Remove a deployment with everything it created", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			if err := c.DeleteDeployment(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(o.streams.Out, "deployment %s is being removed\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(create, list, get, setVersion, scale, del)
	return cmd
}

// waitReady polls a deployment until it is Ready or Failed, printing each
// phase change to standard error.
func waitReady(ctx context.Context, o *mlcOptions, c *mlclient.Client, id string, timeout time.Duration) (api.Deployment, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := ""
	for {
		d, err := c.Deployment(ctx, id)
		if err != nil {
			return d, err
		}
		if now := d.Phase + " " + d.Reason + " " + d.Message; now != last {
			fmt.Fprintf(o.streams.ErrOut, "%s %s %s\n", d.Phase, orDash(d.Reason), d.Message)
			last = now
		}
		switch d.Phase {
		case api.PhaseReady:
			if d.Reason == "" {
				return d, nil
			}
		case api.PhaseFailed:
			// The agents place an unschedulable deployment as soon as
			// capacity allows: keep waiting for that.
			if d.Reason != api.ReasonUnschedulable {
				return d, fmt.Errorf("deployment %s failed: %s: %s", id, d.Reason, d.Message)
			}
		}
		select {
		case <-ctx.Done():
			return d, fmt.Errorf("deployment %s is still %s after %s: %s %s", id, d.Phase, timeout, d.Reason, d.Message)
		case <-time.After(time.Second):
		}
	}
}

func newPredictCommand(o *mlcOptions) *cobra.Command {
	var data, path string
	var explain bool
	cmd := &cobra.Command{
		Use:   "predict DEPLOYMENT --data JSON",
		Short: "Predict: {feature: value} for one row, or a list of them",
		Example: `  mls ml predict iris --data '{"sepal_length": 5.1, "sepal_width": 3.5, "petal_length": 1.4, "petal_width": 0.2}'
  mls ml predict iris --path rows.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			raw, err := dataArg(o, data, path)
			if err != nil {
				return err
			}
			p, err := c.Predict(cmd.Context(), args[0], api.PredictRequest{Data: raw, Explanation: explain})
			if err != nil {
				return err
			}
			return o.print(p, func(tw *tabwriter.Writer) {
				b, _ := json.Marshal(p.Inference)
				fmt.Fprintf(tw, "%s\t(version %d, %.1f ms, operation %d)\n", b, p.ModelVersion, p.LatencyMS, p.OperationID)
				if p.Explanation != nil {
					printExplanation(tw, *p.Explanation)
				}
			})
		},
	}
	cmd.Flags().StringVar(&data, "data", "", "the input: JSON object of feature values, or a list of them")
	cmd.Flags().StringVar(&path, "path", "", "file with the input (JSON; - for standard input)")
	cmd.Flags().BoolVar(&explain, "explain", false, "add the Shapley values of the row")
	return cmd
}

func dataArg(o *mlcOptions, data, path string) (json.RawMessage, error) {
	switch {
	case data != "" && path != "":
		return nil, fmt.Errorf("give --data or --path, not both")
	case data != "":
		if !json.Valid([]byte(data)) {
			return nil, fmt.Errorf("--data is not JSON")
		}
		return json.RawMessage(data), nil
	case path != "":
		return readBody(o, path)
	}
	return nil, fmt.Errorf("give the input with --data JSON or --path FILE")
}

func printExplanation(tw *tabwriter.Writer, e api.Explanation) {
	fmt.Fprintf(tw, "FEATURE\tSHAPLEY VALUE\t(%s, %s)\n", e.Output, e.Method)
	for i, f := range e.Features {
		fmt.Fprintf(tw, "%s\t%.6g\n", f, e.SimpleOutput[f])
		_ = i
	}
	fmt.Fprintf(tw, "base value\t%.6g\nprediction\t%.6g\n", e.SimpleOutput["base_value"], e.SimpleOutput["F(x)"])
}

func newInferCommand(o *mlcOptions) *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use: "infer DEPLOYMENT --path REQUEST.json", Short: "Send an Open Inference Protocol v2 request through the connector", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := mlclient.New(mlclient.Config{URL: o.url, Token: o.api.Token, CAFile: o.api.CAFile, UserAgent: "mls"})
			if err != nil {
				return err
			}
			body, err := readBody(o, path)
			if err != nil {
				return err
			}
			out, err := c.Infer(cmd.Context(), args[0], body)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(o.streams.Out, string(out))
			return err
		},
	}
	cmd.Flags().StringVar(&path, "path", "", "the OIP inference request (JSON; - for standard input)")
	_ = cmd.MarkFlagRequired("path")
	return cmd
}

func newExplainCommand(o *mlcOptions) *cobra.Command {
	var data, path string
	var req api.ExplainRequest
	cmd := &cobra.Command{
		Use: "explain DEPLOYMENT --data JSON", Short: "Shapley values of one row's prediction", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			if req.Data, err = dataArg(o, data, path); err != nil {
				return err
			}
			e, err := c.Explain(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			return o.print(e, func(tw *tabwriter.Writer) { printExplanation(tw, e) })
		},
	}
	cmd.Flags().StringVar(&data, "data", "", "the row: JSON object of feature values")
	cmd.Flags().StringVar(&path, "path", "", "file with the row (JSON; - for standard input)")
	cmd.Flags().StringVar(&req.Method, "method", "", "auto, exact or sampling")
	cmd.Flags().StringVar(&req.Output, "output", "", "output to explain (default the probabilities or the prediction)")
	return cmd
}

func newOperationsCommand(o *mlcOptions) *cobra.Command {
	var owner, deployment, cont string
	var limit int
	cmd := &cobra.Command{
		Use: "operations", Short: "List the predictions served (by owner and deployment, newest first)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			p, err := c.Operations(cmd.Context(), owner, deployment, limit, cont)
			if err != nil {
				return err
			}
			return o.print(p, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "ID\tDEPLOYMENT\tVERSION\tOWNER\tLATENCY\tINPUT\tRESULT\tAGE")
				for _, op := range p.Items {
					fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%.1fms\t%s\t%s\t%s\n", op.OperationID, op.DeploymentID, op.ModelVersion, op.OwnerID, op.LatencyMS,
						short(string(op.Data)), short(firstOf(string(op.Result), op.Error)), age(op.Timestamp))
				}
				if p.Continue != "" {
					fmt.Fprintf(tw, "(more: --continue %s)\n", p.Continue)
				}
			})
		},
	}
	cmd.Flags().StringVar(&owner, "owner", "", "only this owner's")
	cmd.Flags().StringVar(&deployment, "deployment", "", "only this deployment's")
	cmd.Flags().IntVar(&limit, "limit", 0, "page size")
	cmd.Flags().StringVar(&cont, "continue", "", "continue token of the previous page")
	return cmd
}

func short(s string) string {
	if len(s) > 40 {
		return s[:37] + "..."
	}
	return orDash(s)
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func newDriftCommand(o *mlcOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "drift", Short: "Check and follow a model's data drift", Args: cobra.NoArgs}
	printResults := func(tw *tabwriter.Writer, rs []api.DriftResult) {
		fmt.Fprintln(tw, "FEATURE\tTYPE\tMETHOD\tSTATISTIC\tP-VALUE\tDRIFT\tTIME")
		for _, r := range rs {
			p := "-"
			if r.PValue != nil {
				p = strconv.FormatFloat(*r.PValue, 'g', 6, 64)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%.6g\t%s\t%v\t%s\n", r.Feature, r.Type, r.Method, r.Statistic, p, r.Drift, r.Timestamp.Format(time.RFC3339))
		}
	}
	check := &cobra.Command{
		Use: "check MODEL_ID", Short: "Compare the recent inputs with the training data now", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			run, err := c.RunDrift(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return o.print(run, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "%d of %d features drift (%d inputs against %d training rows)\n\n", run.Drifting, len(run.Results), run.SampleSize, run.ReferenceSize)
				printResults(tw, run.Results)
			})
		},
	}
	results := &cobra.Command{
		Use: "results MODEL_ID", Short: "Stored results, newest first", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			p, err := c.DriftResults(cmd.Context(), args[0], 0, "")
			if err != nil {
				return err
			}
			return o.print(p, func(tw *tabwriter.Writer) { printResults(tw, p.Items) })
		},
	}
	var out string
	chart := &cobra.Command{
		Use: "chart MODEL_ID -f chart.png", Short: "Draw each feature's statistic over time (PNG)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			b, err := c.DriftChart(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if err := os.WriteFile(out, b, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(o.streams.ErrOut, "wrote %s (%d bytes)\n", out, len(b))
			return nil
		},
	}
	chart.Flags().StringVarP(&out, "file", "f", "drift.png", "where to write the PNG")
	cmd.AddCommand(check, results, chart)
	return cmd
}

func newRuntimeCommand(o *mlcOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "runtime", Short: "Serving runtimes: which image serves which model format", Args: cobra.NoArgs}
	list := &cobra.Command{
		Use: "list", Short: "List the runtimes", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			rs, err := c.Runtimes(cmd.Context())
			if err != nil {
				return err
			}
			return o.print(rs, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "NAME\tFORMATS\tIMAGE\tPORT\tBUILT-IN")
				for _, r := range rs {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%v\n", r.Name, strings.Join(r.Formats, ","), r.Image, r.Port, r.BuiltIn)
				}
			})
		},
	}
	var rt api.Runtime
	put := &cobra.Command{
		Use: "put NAME --image IMAGE --formats F1,F2 --port PORT", Short: "Register or replace a runtime (an image serving the Open Inference Protocol v2)",
		Example: `  mls ml runtime put llama --image registry.example.org/llama-oip:1 --formats gguf --port 9000 --arg=--model --arg={model_file}`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			rt.Name = args[0]
			out, err := c.PutRuntime(cmd.Context(), rt)
			if err != nil {
				return err
			}
			return o.print(out, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "runtime %s serves %s with %s\n", out.Name, strings.Join(out.Formats, ","), out.Image)
			})
		},
	}
	put.Flags().StringVar(&rt.Image, "image", "", "serving image")
	put.Flags().StringSliceVar(&rt.Formats, "formats", nil, "model formats it serves")
	put.Flags().Int32Var(&rt.Port, "port", 8080, "port it serves on")
	put.Flags().StringArrayVar(&rt.Args, "arg", nil, "an argument of the serving container (repeat); {model_file}, {model_dir}, {model_name}, {model_version}, {format} and {port} are replaced")
	del := &cobra.Command{
		Use: "delete NAME", Short: "Remove a registered runtime", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			if err := c.DeleteRuntime(cmd.Context(), args[0]); err != nil {
				return err
			}
			fmt.Fprintf(o.streams.Out, "runtime %s removed\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(list, put, del)
	return cmd
}
