package mape

import "testing"

func TestVersions(t *testing.T) {
	var v Versions
	for i, c := range []struct {
		id, version string
		forget      bool
		want        bool
	}{
		{id: "a", version: "u1/1", want: true},
		{id: "a", version: "u1/1", want: false},
		{id: "b", version: "u2/1", want: true},
		{id: "a", version: "u1/2", want: true},
		{id: "a", version: "u1/2", want: false},
		{id: "a", forget: true},
		{id: "a", version: "u1/2", want: true},
	} {
		if c.forget {
			v.Forget(c.id)
			continue
		}
		if got := v.Changed(c.id, c.version); got != c.want {
			t.Errorf("step %d: Changed(%s, %s) = %v, want %v", i, c.id, c.version, got, c.want)
		}
	}
}
