package policy

import (
	"fmt"
	"sort"
	"time"

	"go.starlark.net/starlark"

	"github.com/mlsysops-go/mlsysops/internal/telemetry"
)

// TelemetryView is what policies can read of the agent's telemetry;
// *telemetry.Store implements it.
type TelemetryView interface {
	Latest(name string, match telemetry.Labels) (telemetry.Point, bool)
	Range(name string, match telemetry.Labels, since time.Time) []telemetry.Point
	Select(name string, match telemetry.Labels, since time.Time) []telemetry.Series
	Names() []string
}

var _ TelemetryView = (*telemetry.Store)(nil)

// telemetryValue is the Starlark "telemetry" argument. It is immutable and
// safe to share between threads.
type telemetryValue struct {
	view TelemetryView
	now  func() time.Time
}

var (
	_ starlark.HasAttrs = (*telemetryValue)(nil)
	_ starlark.Mapping  = (*telemetryValue)(nil)
)

func (t *telemetryValue) String() string        { return "<telemetry>" }
func (t *telemetryValue) Type() string          { return "telemetry" }
func (t *telemetryValue) Freeze()               {}
func (t *telemetryValue) Truth() starlark.Bool  { return starlark.True }
func (t *telemetryValue) Hash() (uint32, error) { return 0, fmt.Errorf("unhashable: telemetry") }

// AttrNames implements starlark.HasAttrs.
func (t *telemetryValue) AttrNames() []string {
	return []string{"latest", "metrics", "query", "select"}
}

// Attr implements starlark.HasAttrs.
func (t *telemetryValue) Attr(name string) (starlark.Value, error) {
	switch name {
	case "latest":
		return starlark.NewBuiltin("telemetry.latest", t.latest), nil
	case "query":
		return starlark.NewBuiltin("telemetry.query", t.query), nil
	case "select":
		return starlark.NewBuiltin("telemetry.select", t.selectSeries), nil
	case "metrics":
		return starlark.NewBuiltin("telemetry.metrics", t.metrics), nil
	}
	return nil, nil
}

// Get implements starlark.Mapping: telemetry["node_load1"] is the latest
// value or None.
func (t *telemetryValue) Get(k starlark.Value) (starlark.Value, bool, error) {
	name, ok := k.(starlark.String)
	if !ok {
		return nil, false, fmt.Errorf("telemetry[%s]: want a metric name", k.String())
	}
	if p, ok := t.lookup(string(name), nil); ok {
		return starlark.Float(p.Value), true, nil
	}
	return starlark.None, true, nil
}

func (t *telemetryValue) lookup(name string, labels telemetry.Labels) (telemetry.Point, bool) {
	if t.view == nil {
		return telemetry.Point{}, false
	}
	return t.view.Latest(name, labels)
}

func labelsArg(v starlark.Value) (telemetry.Labels, error) {
	if v == nil || v == starlark.None {
		return nil, nil
	}
	d, ok := v.(*starlark.Dict)
	if !ok {
		return nil, fmt.Errorf("labels: want a dict of strings, got %s", v.Type())
	}
	out := telemetry.Labels{}
	for _, item := range d.Items() {
		k, kok := item[0].(starlark.String)
		val, vok := item[1].(starlark.String)
		if !kok || !vok {
			return nil, fmt.Errorf("labels: want a dict of strings, got %s: %s", item[0].String(), item[1].String())
		}
		out[string(k)] = string(val)
	}
	return out, nil
}

func (t *telemetryValue) latest(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name string
	var def, labels starlark.Value = starlark.None, starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "name", &name, "default?", &def, "labels?", &labels); err != nil {
		return nil, err
	}
	l, err := labelsArg(labels)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", b.Name(), err)
	}
	if p, ok := t.lookup(name, l); ok {
		return starlark.Float(p.Value), nil
	}
	return def, nil
}

func (t *telemetryValue) query(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name string
	var seconds starlark.Value = starlark.MakeInt(60)
	var labels starlark.Value = starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "name", &name, "seconds?", &seconds, "labels?", &labels); err != nil {
		return nil, err
	}
	secs, ok := starlark.AsFloat(seconds)
	if !ok || secs < 0 {
		return nil, fmt.Errorf("%s: seconds: want a non-negative number, got %s", b.Name(), seconds.String())
	}
	l, err := labelsArg(labels)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", b.Name(), err)
	}
	if t.view == nil {
		return starlark.NewList(nil), nil
	}
	since := t.now().Add(-time.Duration(secs * float64(time.Second)))
	points := t.view.Range(name, l, since)
	out := make([]starlark.Value, len(points))
	for i, p := range points {
		out[i] = starlark.Tuple{starlark.Float(float64(p.Time.UnixNano()) / 1e9), starlark.Float(p.Value)}
	}
	return starlark.NewList(out), nil
}

func (t *telemetryValue) selectSeries(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name string
	var labels starlark.Value = starlark.None
	if err := starlark.UnpackArgs(b.Name(), args, kwargs, "name", &name, "labels?", &labels); err != nil {
		return nil, err
	}
	l, err := labelsArg(labels)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", b.Name(), err)
	}
	if t.view == nil {
		return starlark.NewList(nil), nil
	}
	var out []starlark.Value
	for _, s := range t.view.Select(name, l, time.Time{}) {
		if len(s.Points) == 0 {
			continue
		}
		ld := starlark.NewDict(len(s.Labels))
		keys := make([]string, 0, len(s.Labels))
		for k := range s.Labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			_ = ld.SetKey(starlark.String(k), starlark.String(s.Labels[k]))
		}
		last := s.Points[len(s.Points)-1]
		d := starlark.NewDict(3)
		_ = d.SetKey(starlark.String("labels"), ld)
		_ = d.SetKey(starlark.String("time"), starlark.Float(float64(last.Time.UnixNano())/1e9))
		_ = d.SetKey(starlark.String("value"), starlark.Float(last.Value))
		out = append(out, d)
	}
	return starlark.NewList(out), nil
}

func (t *telemetryValue) metrics(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if err := starlark.UnpackArgs(b.Name(), args, kwargs); err != nil {
		return nil, err
	}
	if t.view == nil {
		return starlark.NewList(nil), nil
	}
	names := t.view.Names()
	out := make([]starlark.Value, len(names))
	for i, n := range names {
		out[i] = starlark.String(n)
	}
	return starlark.NewList(out), nil
}
