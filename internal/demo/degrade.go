package demo

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// Degrader keeps the degradation settings by node and applies those of
// its own node. It is safe for concurrent use.
type Degrader struct {
	node string

	mu       sync.Mutex
	settings map[string]Setting
}

// NewDegrader returns a degrader for the process on node with the initial
// settings.
func NewDegrader(node string, initial map[string]Setting) *Degrader {
	d := &Degrader{node: node, settings: map[string]Setting{}}
	for n, s := range initial {
		d.Set(n, s)
	}
	return d
}

// Set records node's setting; a zero setting removes it.
func (d *Degrader) Set(node string, s Setting) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s.Zero() {
		delete(d.settings, node)
		return
	}
	d.settings[node] = s
}

// Effective is the setting of the process's own node.
func (d *Degrader) Effective() Setting {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.settings[d.node]
}

// Settings returns every setting by node.
func (d *Degrader) Settings() map[string]Setting {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]Setting, len(d.settings))
	for n, s := range d.settings {
		out[n] = s
	}
	return out
}

// Apply degrades one message: it burns CPU, then sleeps, as the own
// node's setting says. It returns early when done closes.
func (d *Degrader) Apply(done <-chan struct{}) {
	s := d.Effective()
	if s.Burn > 0 {
		burn(s.Burn)
	}
	if s.Latency > 0 {
		t := time.NewTimer(s.Latency)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
		}
	}
}

// burn keeps a CPU busy for d.
func burn(d time.Duration) {
	end := time.Now().Add(d)
	x := 1.0
	for time.Now().Before(end) {
		for i := 0; i < 1000; i++ {
			x = x*1.0000001 + 1e-9
		}
	}
	sink = x
}

// sink keeps the burn loop from being optimised away.
var sink float64

// degradeState is the body of GET and PUT /degrade.
type degradeState struct {
	// Node is this process's node.
	Node string `json:"node"`
	// Effective is the setting applied here.
	Effective settingJSON `json:"effective"`
	// Settings are every node's.
	Settings map[string]settingJSON `json:"settings"`
}

// degradeRequest is the body of PUT /degrade.
type degradeRequest struct {
	// Node the setting is for; "" means this process's node.
	Node string `json:"node"`
	// Latency and Burn are durations ("200ms"); empty is zero.
	Latency string `json:"latency"`
	Burn    string `json:"burn"`
}

type settingJSON struct {
	Latency string `json:"latency"`
	Burn    string `json:"burn"`
}

func toJSON(s Setting) settingJSON {
	return settingJSON{Latency: s.Latency.String(), Burn: s.Burn.String()}
}

func (d *Degrader) state() degradeState {
	out := degradeState{Node: d.node, Effective: toJSON(d.Effective()), Settings: map[string]settingJSON{}}
	for n, s := range d.Settings() {
		out.Settings[n] = toJSON(s)
	}
	return out
}

// ServeHTTP answers GET /degrade with the settings and PUT /degrade
// {"node", "latency", "burn"} by setting node's (this node's when node is
// empty); a bad body is a 400 that lists every problem.
func (d *Degrader) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
	case http.MethodPut, http.MethodPost:
		var req degradeRequest
		dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			http.Error(w, "body: want {\"node\": NAME, \"latency\": \"200ms\", \"burn\": \"0s\"}: "+err.Error(), http.StatusBadRequest)
			return
		}
		var problems []error
		lat, err := parseDuration(req.Latency)
		if err != nil {
			problems = append(problems, fmt.Errorf("latency: %w", err))
		}
		b, err := parseDuration(req.Burn)
		if err != nil {
			problems = append(problems, fmt.Errorf("burn: %w", err))
		}
		if len(problems) > 0 {
			http.Error(w, errors.Join(problems...).Error(), http.StatusBadRequest)
			return
		}
		node := req.Node
		if node == "" {
			node = d.node
		}
		d.Set(node, Setting{Latency: lat, Burn: b})
	default:
		w.Header().Set("Allow", "GET, PUT, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	st := d.state()
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(st)
}
