package commands

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/mlsysops-go/mlsysops/northbound/client"
)

// APIOptions say how to reach the northbound API; they are the root's
// persistent flags, with the environment as defaults.
type APIOptions struct {
	// URL of the API (MLS_API_URL, or MLS_API_IP and MLS_API_PORT).
	URL string
	// Token is the bearer token (MLS_TOKEN).
	Token string
	// CAFile verifies an https API (MLS_CA_FILE).
	CAFile string
	// Timeout bounds one request.
	Timeout time.Duration
}

// AddFlags registers the API flags.
func (o *APIOptions) AddFlags(fs *pflag.FlagSet) {
	env := client.FromEnv()
	fs.StringVar(&o.URL, "api-url", env.URL, "northbound API URL (default $"+client.EnvURL+", or http://$"+client.EnvIP+":$"+client.EnvPort+", or "+client.DefaultURL+")")
	fs.StringVar(&o.Token, "token", env.Token, "bearer token (default $"+client.EnvToken+")")
	fs.StringVar(&o.CAFile, "ca-file", env.CAFile, "CA certificate of an https API (default $"+client.EnvCA+")")
	fs.DurationVar(&o.Timeout, "timeout", 60*time.Second, "time limit of one API request")
}

// Client returns an API client.
func (o *APIOptions) Client() (*client.Client, error) {
	return client.New(client.Config{URL: o.URL, Token: o.Token, CAFile: o.CAFile, Timeout: o.Timeout, UserAgent: "mls"})
}

// Output formats of API commands.
const (
	outputTable = "table"
	outputJSON  = "json"
	outputYAML  = "yaml"
)

// outputFlag adds -o to an API command group.
func outputFlag(fs *pflag.FlagSet, dst *string) {
	fs.StringVarP(dst, "output", "o", outputTable, "output format: table, json or yaml")
}

func checkOutput(o string) error {
	switch o {
	case outputTable, outputJSON, outputYAML:
		return nil
	}
	return fmt.Errorf("--output must be table, json or yaml, not %q", o)
}

// render writes v as JSON or YAML, or calls table for the table form.
func render(w io.Writer, output string, v any, table func(tw *tabwriter.Writer)) error {
	switch output {
	case outputJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case outputYAML:
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	table(tw)
	return tw.Flush()
}

// readDescription reads --path or fetches --uri (on this side: the server
// fetches nothing) and tells its content type.
func readDescription(ctx context.Context, path, uri string) ([]byte, string, error) {
	switch {
	case path != "" && uri != "":
		return nil, "", fmt.Errorf("give --path or --uri, not both")
	case path != "":
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, "", fmt.Errorf("read the description: %w", err)
		}
		return b, contentTypeOf(path, b), nil
	case uri != "":
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, uri, nil)
		if err != nil {
			return nil, "", fmt.Errorf("--uri %q: %w", uri, err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, "", fmt.Errorf("fetch %s: %w", uri, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, "", fmt.Errorf("fetch %s: HTTP %d", uri, resp.StatusCode)
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
		if err != nil {
			return nil, "", fmt.Errorf("fetch %s: %w", uri, err)
		}
		return b, contentTypeOf(uri, b), nil
	}
	return nil, "", fmt.Errorf("give the description with --path FILE or --uri URL")
}

func contentTypeOf(name string, b []byte) string {
	if strings.EqualFold(filepath.Ext(name), ".json") || strings.HasPrefix(strings.TrimSpace(string(b)), "{") {
		return client.JSON
	}
	return client.YAML
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func age(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := time.Since(t).Round(time.Second)
	switch {
	case d < time.Minute:
		return d.String()
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// completeIDs completes application or ML deployment ids from the API.
func completeIDs(api *APIOptions, ml bool) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, err := api.Client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), 3*time.Second)
		defer cancel()
		coll := c.Applications()
		if ml {
			coll = c.MLDeployments()
		}
		items, err := coll.ListAll(ctx)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for _, it := range items {
			if strings.HasPrefix(it.ID, prefix) {
				out = append(out, it.ID+"\t"+it.Phase)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
