// Package app is the model server's command line: `modelserver serve`
// serves one model over the Open Inference Protocol (package server), and
// `modelserver fetch` is the init container that downloads and verifies the
// model's artifacts (package fetch). Both write why they failed to the
// container's termination message (--termination-log).
package app

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Version is the server's version, set at build time with -ldflags -X.
var Version = "dev"

// NewCommand returns the modelserver command with its subcommands.
func NewCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "modelserver",
		Short:         "Serve a model over the Open Inference Protocol v2, or fetch its artifacts",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServeCommand(), newFetchCommand())
	return root
}

// common options of both subcommands.
type common struct {
	// TerminationLog receives the reason of a failure (Kubernetes shows it
	// in the container's status).
	TerminationLog string
	LogLevel       string
	LogFormat      string
}

func (c *common) defaults() {
	c.TerminationLog = "/dev/termination-log"
	c.LogLevel, c.LogFormat = "info", "json"
}

func (c *common) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.TerminationLog, "termination-log", c.TerminationLog, "file that receives the reason of a failure (empty: none)")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", c.LogFormat, "json or text")
}

func (c *common) validate() []error {
	var errs []error
	var l slog.Level
	if err := l.UnmarshalText([]byte(c.LogLevel)); err != nil {
		errs = append(errs, fmt.Errorf("--log-level %q: want debug, info, warn or error", c.LogLevel))
	}
	if c.LogFormat != "json" && c.LogFormat != "text" {
		errs = append(errs, fmt.Errorf("--log-format %q: want json or text", c.LogFormat))
	}
	return errs
}

func (c *common) logger(w io.Writer) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(c.LogLevel))
	opts := &slog.HandlerOptions{Level: l}
	if c.LogFormat == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// terminate writes err to the termination log (at most 4096 bytes, the
// most Kubernetes keeps) and returns it. A missing log directory is not an
// error: outside Kubernetes there is none.
func (c *common) terminate(log *slog.Logger, err error) error {
	if err == nil || c.TerminationLog == "" {
		return err
	}
	if _, statErr := os.Stat(filepath.Dir(c.TerminationLog)); statErr != nil {
		return err
	}
	msg := err.Error()
	if len(msg) > 4096 {
		msg = msg[:4093] + "..."
	}
	if werr := os.WriteFile(c.TerminationLog, []byte(msg), 0o644); werr != nil {
		log.Warn("cannot write the termination message", "path", c.TerminationLog, "error", werr)
	}
	return err
}

func env(dst *string, keys ...string) {
	for _, k := range keys {
		if v := os.Getenv(k); v != "" {
			*dst = v
			return
		}
	}
}

func joined(errs []error) error { return errors.Join(errs...) }
