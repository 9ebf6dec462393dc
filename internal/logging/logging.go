// Package logging builds the slog logger every MLSysOps component writes
// with, from its --log-format and --log-level.
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// New returns a JSON (the default) or text logger at level; an unknown
// level logs at info.
func New(w io.Writer, format, level string) *slog.Logger {
	lvl, err := ParseLevel(level)
	if err != nil {
		lvl = slog.LevelInfo
	}
	ho := &slog.HandlerOptions{Level: lvl}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, ho))
	}
	return slog.New(slog.NewJSONHandler(w, ho))
}

// ParseLevel reads debug, info, warn or error, and the upstream agents'
// warning, critical and test; empty is info.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "", "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error", "critical", "test":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("unknown level %q (debug, info, warn, error)", s)
}

// CheckFormat reports an unknown format.
func CheckFormat(format string) error {
	if format != "json" && format != "text" {
		return fmt.Errorf("want json or text, got %q", format)
	}
	return nil
}

// CheckFlags returns a problem for each of --log-format and --log-level
// that New would not take as given.
func CheckFlags(format, level string) []error {
	var errs []error
	switch level {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("--log-level %q: want debug, info, warn or error", level))
	}
	switch format {
	case "json", "text":
	default:
		errs = append(errs, fmt.Errorf("--log-format %q: want json or text", format))
	}
	return errs
}
