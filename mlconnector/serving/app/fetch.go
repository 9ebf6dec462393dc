package app

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mlsysops-go/mlsysops/mlconnector/serving/fetch"
)

// FetchOptions configure `modelserver fetch`. Secrets come from the
// environment or from files, never from flags.
type FetchOptions struct {
	common
	// Manifest is the manifest file; ManifestJSON the manifest itself
	// (MODELSERVER_MANIFEST), for a pod spec without a volume for it.
	Manifest     string
	ManifestJSON string
	// Dest is the directory the artifacts go to.
	Dest string

	// S3Endpoint (MLS_S3_ENDPOINT, AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL),
	// S3Region (AWS_REGION) and S3CAFile reach the object store.
	S3Endpoint string
	S3Region   string
	S3CAFile   string
	// S3CredentialsDir holds files access-key, secret-key and optionally
	// session-token (a mounted Secret; MLS_S3_CREDENTIALS_DIR). Without it
	// the keys come from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
	// AWS_SESSION_TOKEN.
	S3CredentialsDir string
	// CAFile is trusted for https:// artifacts besides the system's roots.
	CAFile string

	Attempts int
	MaxBytes int64
}

// NewFetchOptions returns the defaults with the environment applied.
func NewFetchOptions() *FetchOptions {
	o := &FetchOptions{Attempts: 3}
	o.defaults()
	env(&o.ManifestJSON, "MODELSERVER_MANIFEST")
	env(&o.S3Endpoint, "MLS_S3_ENDPOINT", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
	env(&o.S3Region, "AWS_REGION", "AWS_DEFAULT_REGION")
	env(&o.S3CredentialsDir, "MLS_S3_CREDENTIALS_DIR")
	return o
}

// AddFlags registers the options as flags.
func (o *FetchOptions) AddFlags(fs *pflag.FlagSet) {
	o.common.addFlags(fs)
	fs.StringVar(&o.Manifest, "manifest", o.Manifest, "manifest file: {\"artifacts\": [{\"name\", \"uri\", \"sha256\", \"size\"}]} (or MODELSERVER_MANIFEST holding the JSON)")
	fs.StringVar(&o.Dest, "dest", o.Dest, "directory the artifacts are written to")
	fs.StringVar(&o.S3Endpoint, "s3-endpoint", o.S3Endpoint, "S3 endpoint, http(s)://host:port or host:port (HTTPS); or MLS_S3_ENDPOINT")
	fs.StringVar(&o.S3Region, "s3-region", o.S3Region, "S3 region (or AWS_REGION)")
	fs.StringVar(&o.S3CAFile, "s3-ca-file", o.S3CAFile, "CA bundle (PEM) of the S3 endpoint's certificate")
	fs.StringVar(&o.S3CredentialsDir, "s3-credentials-dir", o.S3CredentialsDir, "directory with files access-key and secret-key (a mounted Secret); default AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY")
	fs.StringVar(&o.CAFile, "ca-file", o.CAFile, "CA bundle (PEM) trusted for https:// artifacts")
	fs.IntVar(&o.Attempts, "attempts", o.Attempts, "tries of a download that fails for another reason than a missing object or a checksum mismatch")
	fs.Int64Var(&o.MaxBytes, "max-bytes", o.MaxBytes, "largest artifact accepted (0: no limit beyond the manifest's sizes)")
}

// Validate reports every problem with the options.
func (o *FetchOptions) Validate() error {
	errs := o.common.validate()
	switch {
	case o.Manifest == "" && o.ManifestJSON == "":
		errs = append(errs, fmt.Errorf("no manifest: set --manifest or MODELSERVER_MANIFEST"))
	case o.Manifest != "" && o.ManifestJSON != "":
		errs = append(errs, fmt.Errorf("--manifest and MODELSERVER_MANIFEST exclude each other"))
	}
	if o.Dest == "" {
		errs = append(errs, fmt.Errorf("--dest is required"))
	}
	if o.Attempts < 1 {
		errs = append(errs, fmt.Errorf("--attempts %d: at least 1", o.Attempts))
	}
	if o.MaxBytes < 0 {
		errs = append(errs, fmt.Errorf("--max-bytes must not be negative"))
	}
	return joined(errs)
}

func (o *FetchOptions) s3Config() (fetch.S3Config, error) {
	c := fetch.S3Config{Endpoint: o.S3Endpoint, Region: o.S3Region, CAFile: o.S3CAFile}
	if o.S3CredentialsDir == "" {
		env(&c.AccessKey, "AWS_ACCESS_KEY_ID")
		env(&c.SecretKey, "AWS_SECRET_ACCESS_KEY")
		env(&c.SessionToken, "AWS_SESSION_TOKEN")
		return c, nil
	}
	read := func(name string, dst *string, required bool) error {
		b, err := os.ReadFile(filepath.Join(o.S3CredentialsDir, name))
		if err != nil {
			if !required && os.IsNotExist(err) {
				return nil
			}
			return fmt.Errorf("S3 credentials: %w", err)
		}
		*dst = strings.TrimSpace(string(b))
		return nil
	}
	for _, f := range []struct {
		name     string
		dst      *string
		required bool
	}{{"access-key", &c.AccessKey, true}, {"secret-key", &c.SecretKey, true}, {"session-token", &c.SessionToken, false}} {
		if err := read(f.name, f.dst, f.required); err != nil {
			return c, err
		}
	}
	return c, nil
}

func newFetchCommand() *cobra.Command {
	o := NewFetchOptions()
	cmd := &cobra.Command{
		Use:   "fetch --manifest FILE --dest DIR",
		Short: "Download a model version's artifacts and verify their sha256 checksums (the init container)",
		Long: `Downloads every artifact of the manifest into --dest and checks its sha256
(and size). URIs: s3://bucket/key, https://..., http://..., file:///path or
/path. S3 credentials come from --s3-credentials-dir or AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY. On failure the reason goes to --termination-log and
starts with "invalid manifest", "artifact missing", "checksum mismatch" or
"download failed".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := o.logger(os.Stderr)
			if err := o.Validate(); err != nil {
				return o.terminate(log, &fetch.Error{Kind: fetch.InvalidManifest, Err: err})
			}
			return o.terminate(log, o.run(cmd, log))
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}

func (o *FetchOptions) run(cmd *cobra.Command, log *slog.Logger) error {
	raw := []byte(o.ManifestJSON)
	if o.Manifest != "" {
		b, err := os.ReadFile(o.Manifest)
		if err != nil {
			return &fetch.Error{Kind: fetch.InvalidManifest, Err: err}
		}
		raw = b
	}
	m, err := fetch.ParseManifest(raw)
	if err != nil {
		return err
	}
	s3, err := o.s3Config()
	if err != nil {
		return &fetch.Error{Kind: fetch.DownloadFailed, Err: err}
	}
	f := fetch.New(fetch.Options{S3: s3, HTTP: fetch.HTTPConfig{CAFile: o.CAFile}, Attempts: o.Attempts,
		MaxBytes: o.MaxBytes, Logger: log})
	if err := f.Fetch(cmd.Context(), m, o.Dest); err != nil {
		return err
	}
	log.Info("artifacts ready", "count", len(m.Artifacts), "dest", o.Dest)
	return nil
}
