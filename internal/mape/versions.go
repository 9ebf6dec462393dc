package mape

import "sync"

// Versions remembers which version of each application was last handed
// to an engine (SetApplication), so that a controller that sees the same
// version again at every pass skips building its description: the
// conversion of a spec to policy data, for nothing the engine would keep.
// The zero value is ready to use.
type Versions struct {
	mu sync.Mutex
	m  map[string]string
}

// Changed reports whether version differs from the one recorded for id,
// and records it.
func (v *Versions) Changed(id, version string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.m == nil {
		v.m = map[string]string{}
	}
	if v.m[id] == version {
		return false
	}
	v.m[id] = version
	return true
}

// Forget drops id: its next version is handed over whatever it is.
func (v *Versions) Forget(id string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.m, id)
}
