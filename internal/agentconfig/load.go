package agentconfig

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/spf13/pflag"
)

// LookupEnv reads an environment variable; os.LookupEnv in production.
type LookupEnv func(key string) (string, bool)

// Load builds the options of an agent from, in increasing precedence, the
// defaults, the configuration file, MLSYSOPS_* environment variables and
// the flags in args. The file is --config, else $CONFIG_PATH, else
// <install-path>/config/<node-name>-config.yaml if it exists, else
// ./config.yaml if it exists; a file named explicitly must exist.
//
// The options are validated. The error, if any, is an *Error listing every
// problem; the warnings are worth logging either way.
func Load(args []string, env LookupEnv) (*Options, []Warning, error) {
	if env == nil {
		env = os.LookupEnv
	}
	// A first pass over the flags finds the identity and the file.
	first := NewOptions()
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	fs.SetOutput(discard{})
	first.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, nil, &Error{Source: "flags", Problems: []Problem{{Message: err.Error()}}}
	}

	o := NewOptions()
	o.InstallPath = pick(fs, "install-path", first.InstallPath, env, "MLSYSOPS_INSTALL_PATH")
	o.NodeName = pick(fs, "node-name", first.NodeName, env, "NODE_NAME")
	if o.NodeName == "" {
		if h, err := os.Hostname(); err == nil {
			o.NodeName = h
		}
	}
	if o.InstallPath != "" {
		o.PolicyDirectory = filepath.Join(o.InstallPath, "policies")
	}
	file, explicit := pick(fs, "config", first.ConfigFile, env, "CONFIG_PATH"), true
	if file == "" {
		explicit = false
		for _, candidate := range []string{filepath.Join(o.InstallPath, "config", o.NodeName+"-config.yaml"), "config.yaml"} {
			if _, err := os.Stat(candidate); err == nil {
				file = candidate
				break
			}
		}
	}

	var warnings []Warning
	var problems []Problem
	if file != "" {
		o.ConfigFile = file
		ws, err := o.LoadFile(file)
		warnings = append(warnings, ws...)
		var cfgErr *Error
		switch {
		case errors.As(err, &cfgErr):
			for _, p := range cfgErr.Problems {
				p.Key = joinKey(file, p.Key)
				problems = append(problems, p)
			}
		case err != nil && (explicit || !errors.Is(err, os.ErrNotExist)):
			problems = append(problems, Problem{Key: file, Message: err.Error()})
		}
	}

	// The environment overrides the file.
	for _, s := range o.settings() {
		text, ok := env(s.env())
		if !ok {
			continue
		}
		if err := s.fromEnv(text); err != nil {
			problems = append(problems, Problem{Key: "env " + s.env(), Message: err.Error()})
		}
	}

	// Flags given on the command line override everything. A fresh flag
	// set whose defaults are the current values changes only those.
	again := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	again.SetOutput(discard{})
	o.AddFlags(again)
	if err := again.Parse(args); err != nil {
		problems = append(problems, Problem{Key: "flags", Message: err.Error()})
	}
	o.ConfigFile = file
	o.dropEmptyMechanisms()

	if len(problems) > 0 {
		sort.SliceStable(problems, func(i, j int) bool { return problems[i].Key < problems[j].Key })
		return o, warnings, &Error{Source: "configuration", Problems: problems}
	}
	return o, warnings, o.Validate()
}

// dropEmptyMechanisms drops empty mechanism names given through the
// environment or flags (the file's are dropped with a warning by tidy).
func (o *Options) dropEmptyMechanisms() {
	if o.Mechanisms == nil {
		return
	}
	kept := make([]string, 0, len(o.Mechanisms))
	for _, m := range o.Mechanisms {
		if m != "" {
			kept = append(kept, m)
		}
	}
	o.Mechanisms = kept
}

// pick returns the flag's value when it was given, else the environment
// variable's, else the flag's default.
func pick(fs *pflag.FlagSet, flag, value string, env LookupEnv, key string) string {
	if fs.Changed(flag) {
		return value
	}
	if v, ok := env(key); ok && v != "" {
		return v
	}
	return value
}

func joinKey(file, key string) string {
	if key == "" {
		return file
	}
	return fmt.Sprintf("%s: %s", file, key)
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
