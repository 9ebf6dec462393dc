package agentconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sort"

	"sigs.k8s.io/yaml"
)

// LoadFile reads the YAML file at path onto o; see ParseFile.
func (o *Options) LoadFile(path string) ([]Warning, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read agent configuration: %w", err)
	}
	return o.ParseFile(path, data)
}

// ParseFile decodes an agent configuration file in the upstream format and
// sets the options it names, leaving the others unchanged. Keys the Go
// agent does not know, or knows but does not use, produce warnings. Values
// of the wrong type are errors: the returned *Error lists every one with
// its key path, and o is then partly updated.
func (o *Options) ParseFile(source string, data []byte) ([]Warning, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return []Warning{{Source: source, Message: "file is empty; using defaults"}}, nil
	}
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, &Error{Source: source, Problems: []Problem{{Message: fmt.Sprintf("not valid YAML: %v", err)}}}
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, &Error{Source: source, Problems: []Problem{{Message: fmt.Sprintf("not valid YAML: %v", err)}}}
	}
	if doc == nil {
		return []Warning{{Source: source, Message: "file is empty; using defaults"}}, nil
	}
	top, ok := doc.(map[string]any)
	if !ok {
		return nil, &Error{Source: source, Problems: []Problem{{Message: fmt.Sprintf("want a map of options at the top level, got %s", describe(doc))}}}
	}

	byKey := map[string]setting{}
	for _, s := range o.settings() {
		byKey[s.key] = s
	}
	keys := make([]string, 0, len(top))
	for k := range top {
		keys = append(keys, k)
	}
	sort.Strings(keys)

	var warnings []Warning
	var problems []Problem
	for _, k := range keys {
		v := top[k]
		if s, ok := byKey[k]; ok {
			problems = append(problems, s.fromFile(v)...)
			continue
		}
		if k == "behaviours" {
			b, ps := parseBehaviours(v)
			problems = append(problems, ps...)
			if len(ps) == 0 {
				o.Behaviours = b
			}
			continue
		}
		if why, ok := ignoredKeys[k]; ok {
			warnings = append(warnings, Warning{Source: source, Key: k, Message: "upstream key ignored: " + why})
			continue
		}
		warnings = append(warnings, Warning{Source: source, Key: k, Message: "unknown key ignored"})
	}
	warnings = append(warnings, o.tidy(source)...)
	return warnings, newError(source, problems)
}

// tidy drops the empty mechanism names upstream files contain
// (mechanisms: [""]) and warns about keys that are accepted but unused.
func (o *Options) tidy(source string) []Warning {
	var ws []Warning
	if o.Mechanisms != nil {
		kept := make([]string, 0, len(o.Mechanisms))
		for i, m := range o.Mechanisms {
			if m == "" {
				ws = append(ws, Warning{Source: source, Key: fmt.Sprintf("mechanisms[%d]", i), Message: "empty mechanism name ignored"})
				continue
			}
			kept = append(kept, m)
		}
		o.Mechanisms = kept
	}
	if o.MechanismsDirectory != "" {
		ws = append(ws, Warning{Source: source, Key: "mechanisms_directory", Message: "ignored: mechanisms are built into the agent and enabled by name with mechanisms"})
	}
	return ws
}

func parseBehaviours(v any) (map[string]Behaviour, []Problem) {
	if v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, []Problem{{Key: "behaviours", Message: "want a map from behaviour name to {enabled: true|false, ...}, got " + describe(v)}}
	}
	out := make(map[string]Behaviour, len(m))
	var ps []Problem
	for name, raw := range m {
		key := "behaviours." + name
		b := Behaviour{Enabled: true}
		switch x := raw.(type) {
		case nil:
		case bool:
			b.Enabled = x
		case map[string]any:
			for pk, pv := range x {
				if pk == "enabled" {
					en, ok := pv.(bool)
					if !ok {
						ps = append(ps, Problem{Key: key + ".enabled", Message: "want a boolean (true or false), got " + describe(pv)})
						continue
					}
					b.Enabled = en
					continue
				}
				if b.Params == nil {
					b.Params = map[string]any{}
				}
				b.Params[pk] = plain(pv)
			}
		default:
			ps = append(ps, Problem{Key: key, Message: "want {enabled: true|false, ...}, got " + describe(raw)})
			continue
		}
		out[name] = b
	}
	return out, ps
}

// plain turns json.Numbers into int64 or float64 so that behaviour
// parameters are ordinary Go values.
func plain(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = plain(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = plain(e)
		}
		return out
	default:
		return v
	}
}
