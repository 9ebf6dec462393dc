package policy

import (
	"fmt"
	"sort"
	"time"

	"go.starlark.net/starlark"

	"github.com/mlsysops-go/mlsysops/internal/agentconfig"
)

// Scope says what a policy instance is for.
type Scope string

// Policy scopes.
const (
	// ScopeApplication policies get one instance per application.
	ScopeApplication Scope = "application"
	// ScopeGlobal policies get one instance that sees every application.
	ScopeGlobal Scope = "global"
)

// Config is what a policy's initialize() declares.
type Config struct {
	// Scope is application or global.
	Scope Scope
	// AnalyzeInterval is how often analyze runs; zero means once. It is
	// read from context["configuration"]["analyze_interval"] (or
	// context["analyze_interval"]) after every call, so a policy may
	// change it at run time.
	AnalyzeInterval time.Duration
	// Metrics are the telemetry metrics the policy reads
	// (telemetry.metrics).
	Metrics []string
	// ScrapeInterval is the sampling interval the policy asks for
	// (telemetry.system_scrape_interval); zero when it asks for none.
	ScrapeInterval time.Duration
	// Mechanisms are the mechanisms the policy plans for.
	Mechanisms []string
	// Core policies keep the system working (initial placement); the
	// scheduler never discards their plans.
	Core bool
}

// parseConfig reads the configuration from a context dict; problems are
// listed with their keys.
func parseConfig(ctx *starlark.Dict) (Config, []string) {
	var c Config
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	get := func(d *starlark.Dict, key string) (starlark.Value, bool) {
		v, found, _ := d.Get(starlark.String(key))
		return v, found && v != starlark.None
	}

	if v, ok := get(ctx, "scope"); !ok {
		bad(`scope: required: "application" or "global"`)
	} else if s, isStr := v.(starlark.String); !isStr || (Scope(s) != ScopeApplication && Scope(s) != ScopeGlobal) {
		bad(`scope: want "application" or "global", got %s`, v.String())
	} else {
		c.Scope = Scope(s)
	}

	interval, key, found := starlark.Value(nil), "", false
	if conf, ok := get(ctx, "configuration"); ok {
		d, isDict := conf.(*starlark.Dict)
		if !isDict {
			bad("configuration: want a dict, got %s", conf.Type())
		} else if v, ok := get(d, "analyze_interval"); ok {
			interval, key, found = v, "configuration.analyze_interval", true
		}
	}
	if !found {
		if v, ok := get(ctx, "analyze_interval"); ok {
			interval, key, found = v, "analyze_interval", true
		}
	}
	if !found {
		bad(`configuration.analyze_interval: required, e.g. "10s" ("0" runs analyze once)`)
	} else if d, err := parseDuration(interval); err != nil {
		bad("%s: %v", key, err)
	} else {
		c.AnalyzeInterval = d
	}

	if tel, ok := get(ctx, "telemetry"); ok {
		d, isDict := tel.(*starlark.Dict)
		if !isDict {
			bad("telemetry: want a dict with metrics and system_scrape_interval, got %s", tel.Type())
		} else {
			if v, ok := get(d, "metrics"); ok {
				names, err := stringList(v)
				if err != nil {
					bad("telemetry.metrics: %v", err)
				}
				c.Metrics = names
			}
			if v, ok := get(d, "system_scrape_interval"); ok {
				iv, err := parseDuration(v)
				if err != nil {
					bad("telemetry.system_scrape_interval: %v", err)
				}
				c.ScrapeInterval = iv
			}
		}
	}
	if v, ok := get(ctx, "mechanisms"); ok {
		names, err := stringList(v)
		if err != nil {
			bad("mechanisms: %v", err)
		}
		c.Mechanisms = names
	}
	if v, ok := get(ctx, "core"); ok {
		b, isBool := v.(starlark.Bool)
		if !isBool {
			bad("core: want True or False, got %s", v.String())
		}
		c.Core = bool(b)
	}
	return c, problems
}

// analyzeInterval re-reads the interval from a context after a call.
func analyzeInterval(ctx *starlark.Dict) (time.Duration, bool, error) {
	if conf, found, _ := ctx.Get(starlark.String("configuration")); found {
		if d, ok := conf.(*starlark.Dict); ok {
			if v, found, _ := d.Get(starlark.String("analyze_interval")); found && v != starlark.None {
				iv, err := parseDuration(v)
				if err != nil {
					return 0, true, fmt.Errorf("configuration.analyze_interval: %v", err)
				}
				return iv, true, nil
			}
		}
	}
	if v, found, _ := ctx.Get(starlark.String("analyze_interval")); found && v != starlark.None {
		iv, err := parseDuration(v)
		if err != nil {
			return 0, true, fmt.Errorf("analyze_interval: %v", err)
		}
		return iv, true, nil
	}
	return 0, false, nil
}

func parseDuration(v starlark.Value) (time.Duration, error) {
	g, err := FromStarlark(v)
	if err != nil {
		return 0, err
	}
	return agentconfig.ParseInterval(g)
}

func stringList(v starlark.Value) ([]string, error) {
	it, ok := v.(starlark.Iterable)
	if !ok {
		return nil, fmt.Errorf("want a list of strings, got %s", v.Type())
	}
	iter := it.Iterate()
	defer iter.Done()
	var out []string
	var e starlark.Value
	for i := 0; iter.Next(&e); i++ {
		s, ok := e.(starlark.String)
		if !ok {
			return nil, fmt.Errorf("[%d]: want a string, got %s", i, e.String())
		}
		out = append(out, string(s))
	}
	if _, isDict := v.(*starlark.Dict); isDict {
		return nil, fmt.Errorf("want a list of strings, got dict")
	}
	sort.Strings(out)
	return out, nil
}
