package logging

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestParseLevel(t *testing.T) {
	cases := map[string]slog.Level{"debug": slog.LevelDebug, "": slog.LevelInfo, "INFO": slog.LevelInfo,
		"warning": slog.LevelWarn, "warn": slog.LevelWarn, "critical": slog.LevelError, "error": slog.LevelError}
	for in, want := range cases {
		if got, err := ParseLevel(in); err != nil || got != want {
			t.Errorf("ParseLevel(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseLevel("loud"); err == nil {
		t.Error("ParseLevel(loud) accepted")
	}
}

func TestNew(t *testing.T) {
	var b bytes.Buffer
	New(&b, "text", "warn").Info("hidden")
	New(&b, "text", "warn").Warn("shown", "k", "v")
	if s := b.String(); strings.Contains(s, "hidden") || !strings.Contains(s, "msg=shown k=v") {
		t.Errorf("text logger wrote %q", s)
	}
	b.Reset()
	New(&b, "json", "bogus").Info("x")
	if !strings.HasPrefix(b.String(), "{") {
		t.Errorf("json logger wrote %q", b.String())
	}
	if CheckFormat("json") != nil || CheckFormat("text") != nil || CheckFormat("xml") == nil {
		t.Error("CheckFormat")
	}
}
