package mape

import (
	"context"
	"sync"
)

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

// Hand hands application id to e when version is not the one last handed
// over, building its description with describe only then; a failed hand
// is tried again at the next call.
func (v *Versions) Hand(ctx context.Context, e *Engine, id, version string, describe func() map[string]any) error {
	if !v.Changed(id, version) {
		return nil
	}
	if err := e.SetApplication(ctx, Application{ID: id, Description: describe()}); err != nil {
		v.Forget(id)
		return err
	}
	return nil
}

// Remove takes application id from e and forgets its version.
func (v *Versions) Remove(e *Engine, id string) {
	v.Forget(id)
	e.RemoveApplication(id)
}
