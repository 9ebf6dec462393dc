package testbed

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestParseProcNet(t *testing.T) {
	// Lines of /proc/net/tcp and tcp6: 127.0.0.1:26000 -> 10.152.0.1:443,
	// and [::ffff:192.0.2.7]:80 -> [2001:db8::1]:8080.
	text := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:6590 0100980A:01BB 01 00000000:00000000 00:00000000 00000000     0        0 4242 1 0000000000000000 20 4 30 10 -1
   1: 0000000000000000FFFF0000070200C0:0050 B80D0120000000000000000001000000:1F90 01 00000000:00000000 00:00000000 00000000     0        0 77 1 0000000000000000 20 4 30 10 -1
`
	got := parseProcNet(text)
	if len(got) != 2 {
		t.Fatalf("%d entries, want 2: %+v", len(got), got)
	}
	for i, want := range []struct{ local, remote string }{
		{"127.0.0.1:26000", "10.152.0.1:443"},
		{"192.0.2.7:80", "[2001:db8::1]:8080"},
	} {
		if got[i].local.String() != want.local || got[i].remote.String() != want.remote {
			t.Errorf("entry %d: %s -> %s, want %s -> %s", i, &got[i].local, &got[i].remote, want.local, want.remote)
		}
	}
	if got[0].inode != 4242 || got[1].inode != 77 {
		t.Errorf("inodes %d, %d", got[0].inode, got[1].inode)
	}
}

// A process's connected socket to an address outside the allowed ranges
// is reported; one inside them, or on loopback, is not. Connecting a UDP
// socket sends nothing, and the peer is one of this machine's own
// addresses.
func TestPeerSockets(t *testing.T) {
	var local net.IP
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			local = n.IP.To4()
			break
		}
	}
	if local == nil {
		t.Fatalf("no IPv4 address but loopback among %v", addrs)
	}
	c, err := net.DialUDP("udp4", nil, &net.UDPAddr{IP: local, Port: 9})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	lo, err := net.Dial("udp4", "127.0.0.1:9")
	if err != nil {
		t.Fatal(err)
	}
	defer lo.Close()
	pidFile := filepath.Join(t.TempDir(), "pids", "me.pid")
	if err := os.MkdirAll(filepath.Dir(pidFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		t.Fatal(err)
	}
	if files := PIDFiles(filepath.Dir(filepath.Dir(pidFile))); len(files) != 1 || files[0] != pidFile {
		t.Fatalf("PIDFiles = %v, want [%s]", files, pidFile)
	}
	peer := net.JoinHostPort(local.String(), "9")
	got, err := PeerSockets([]string{pidFile})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range got {
		if strings.Contains(s.Remote, "127.0.0.1") {
			t.Errorf("loopback reported: %s", s)
		}
		found = found || (s.Remote == peer && s.Process == "me" && s.PID == os.Getpid() && s.Proto == "udp")
	}
	if !found {
		t.Errorf("the socket to %s is not reported: %v", peer, got)
	}
	_, own, _ := net.ParseCIDR(local.String() + "/32")
	if got, err = PeerSockets([]string{pidFile}, own); err != nil {
		t.Fatal(err)
	}
	for _, s := range got {
		if s.Remote == peer {
			t.Errorf("a socket to an allowed range reported: %s", s)
		}
	}
}
