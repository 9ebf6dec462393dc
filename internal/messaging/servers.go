package messaging

import (
	"hash/fnv"
	"sync"
)

// servers is the client's list of c2s addresses, the nodes of one ejabberd
// cluster, and which of them the client uses.
//
// Each client starts at an address chosen by a hash of its JID and
// resource, so that a fleet of agents spreads over the nodes. It stays on
// its address while sessions there end for passing reasons, and moves to
// the next one when a connection attempt fails or a session ends with the
// server going away; after a whole round of failed attempts the caller
// backs off.
type servers struct {
	mu    sync.Mutex
	addrs []string
	cur   int
	// failed counts the connection attempts that failed in a row.
	failed int
}

func newServers(addrs []string, identity string) *servers {
	s := &servers{addrs: addrs}
	if len(addrs) > 1 {
		h := fnv.New32a()
		_, _ = h.Write([]byte(identity))
		s.cur = int(h.Sum32() % uint32(len(addrs)))
	}
	return s
}

// current is the address the next connection attempt goes to.
func (s *servers) current() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addrs[s.cur]
}

// several reports whether there is another address to move to.
func (s *servers) several() bool { return len(s.addrs) > 1 }

// connectFailed moves to the next address after a failed connection
// attempt; it reports whether every address failed since the last
// established session (then the caller backs off before the next round).
func (s *servers) connectFailed() (roundDone bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur = (s.cur + 1) % len(s.addrs)
	s.failed++
	if s.failed >= len(s.addrs) {
		s.failed = 0
		return true
	}
	return false
}

// connected records an established session.
func (s *servers) connected() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failed = 0
}

// moveOn goes to the next address after a session ended because its server
// went away (a crash or a shutdown).
func (s *servers) moveOn() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur = (s.cur + 1) % len(s.addrs)
}
