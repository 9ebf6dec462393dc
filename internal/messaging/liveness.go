package messaging

import (
	"fmt"
	"sort"
	"sync"
	"time"
)

// PeerEvent reports that a parent or child came online or went away.
type PeerEvent struct {
	Peer   string
	Role   Role
	Online bool
	// Reason says what triggered the change: "presence", "message",
	// "heartbeat", "presence unavailable" or "silent for 6s".
	Reason string
	Time   time.Time

	// first is set when the peer is seen for the first time.
	first bool
}

// PeerState is the current liveness of one tracked peer.
type PeerState struct {
	Peer     string
	Role     Role
	Online   bool
	LastSeen time.Time
	// Since is when Online last changed.
	Since time.Time
}

type peerLive struct {
	role      Role
	online    bool
	lastSeen  time.Time
	since     time.Time
	resources map[string]bool
	// confirmBy, when set, is when a peer that was online before our
	// reconnect must have shown up again (peers without heartbeats).
	confirmBy time.Time
	// probeBy, when set, is when a silent child that the server still
	// shows connected must have answered the ping sent to it.
	probeBy time.Time
}

// probe asks a silent child whose session the server still shows up
// whether it is there: a ping to one of its resources.
type probe struct {
	Peer     string
	Resource string
}

// tracker follows the liveness of the parent and the children. Children
// must show a sign of life (heartbeat, message or presence) at least every
// timeout; the parent is followed through presence and traffic only, since
// it sends no heartbeats.
//
// A child silent for the timeout whose session the server still shows
// available is pinged before it counts as gone, and gets a second timeout
// to answer: heartbeats late behind a busy server or parent (a thousand
// children logging in at once) then do not take children down and back up,
// each change costing its parent writes that load the machine further. A
// child whose process ended is reported at once by its session's
// unavailable presence; a hung one, whose socket the server keeps, after
// two timeouts.
type tracker struct {
	mu      sync.Mutex
	timeout time.Duration
	peers   map[string]*peerLive
	paused  bool
}

func newTracker(timeout time.Duration) *tracker {
	return &tracker{timeout: timeout, peers: map[string]*peerLive{}, paused: true}
}

// track starts following peer with role; a no-op when already tracked.
func (t *tracker) track(peer string, role Role) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.peers[peer]; p != nil {
		p.role = role
		return
	}
	t.peers[peer] = &peerLive{role: role, resources: map[string]bool{}}
}

// untrack stops following peer.
func (t *tracker) untrack(peer string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.peers, peer)
}

// seen records a sign of life.
func (t *tracker) seen(peer, reason string, now time.Time) *PeerEvent {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.seenLocked(peer, reason, now)
}

func (t *tracker) seenLocked(peer, reason string, now time.Time) *PeerEvent {
	p := t.peers[peer]
	if p == nil {
		return nil
	}
	p.lastSeen = now
	p.confirmBy, p.probeBy = time.Time{}, time.Time{}
	if p.online {
		return nil
	}
	first := p.since.IsZero()
	p.online, p.since = true, now
	return &PeerEvent{Peer: peer, Role: p.role, Online: true, Reason: reason, Time: now, first: first}
}

// presence records an available or unavailable presence of one resource.
func (t *tracker) presence(peer, resource string, available bool, now time.Time) *PeerEvent {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.peers[peer]
	if p == nil {
		return nil
	}
	if available {
		p.resources[resource] = true
		return t.seenLocked(peer, "presence", now)
	}
	delete(p.resources, resource)
	if len(p.resources) > 0 || !p.online {
		return nil
	}
	return t.goneLocked(p, peer, "presence unavailable", now)
}

func (t *tracker) goneLocked(p *peerLive, peer, reason string, now time.Time) *PeerEvent {
	p.online, p.since = false, now
	p.confirmBy, p.probeBy = time.Time{}, time.Time{}
	clear(p.resources)
	return &PeerEvent{Peer: peer, Role: p.role, Online: false, Reason: reason, Time: now}
}

// check reports children silent for longer than the timeout, and returns
// the silent children to ping first (see tracker).
func (t *tracker) check(now time.Time) ([]PeerEvent, []probe) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.paused {
		return nil, nil
	}
	var evs []PeerEvent
	var probes []probe
	for peer, p := range t.peers {
		switch {
		case !p.online:
		case p.role == RoleChild && now.Sub(p.lastSeen) > t.timeout:
			if p.probeBy.IsZero() && len(p.resources) > 0 {
				p.probeBy = now.Add(t.timeout)
				probes = append(probes, probe{Peer: peer, Resource: anyKey(p.resources)})
				continue
			}
			if !p.probeBy.IsZero() && !now.After(p.probeBy) {
				continue
			}
			reason := fmt.Sprintf("silent for %v", now.Sub(p.lastSeen).Round(time.Millisecond))
			if !p.probeBy.IsZero() {
				reason += ", ping unanswered"
			}
			evs = append(evs, *t.goneLocked(p, peer, reason, now))
		case !p.confirmBy.IsZero() && now.After(p.confirmBy):
			evs = append(evs, *t.goneLocked(p, peer, "not seen since our reconnect", now))
		}
	}
	return evs, probes
}

// unreachable reports a probed child gone at once when the server answers
// for it that it is not connected (its unavailable presence was missed).
func (t *tracker) unreachable(peer string, now time.Time) *PeerEvent {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.peers[peer]
	if p == nil || !p.online || p.probeBy.IsZero() {
		return nil
	}
	return t.goneLocked(p, peer, fmt.Sprintf("silent for %v, not connected", now.Sub(p.lastSeen).Round(time.Millisecond)), now)
}

func anyKey(m map[string]bool) string {
	for k := range m {
		return k
	}
	return ""
}

// pause stops timeouts while our own connection is down: silence then says
// nothing about the peers.
func (t *tracker) pause() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.paused = true
}

// resume restarts timeouts after we reconnected. The server sends the
// current presence of every roster contact again, so resources start empty,
// and every peer gets a full timeout to show up.
func (t *tracker) resume(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.paused = false
	for _, p := range t.peers {
		clear(p.resources)
		p.probeBy = time.Time{}
		if p.online {
			p.lastSeen = now
			if p.role != RoleChild {
				p.confirmBy = now.Add(t.timeout)
			}
		}
	}
}

func (t *tracker) states() []PeerState {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]PeerState, 0, len(t.peers))
	for peer, p := range t.peers {
		out = append(out, PeerState{Peer: peer, Role: p.role, Online: p.online, LastSeen: p.lastSeen, Since: p.since})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Peer < out[j].Peer })
	return out
}
