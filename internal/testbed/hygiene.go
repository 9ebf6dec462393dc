package testbed

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/mlsysops-go/mlsysops/internal/testbed/proc"
)

// Nothing a testbed runs may send a packet off the machine. The address
// plan blackholes the testbed's range (netPlan); PeerSockets and
// OutsideAddrs let a test check what the processes actually do and which
// addresses the clusters actually hand out.

// PIDFiles returns the pid files of the processes a state folder holds:
// components and agents (pids/), and the services that keep theirs with
// their data.
func PIDFiles(stateDir string) []string {
	files, _ := filepath.Glob(filepath.Join(stateDir, "pids", "*.pid"))
	for _, f := range []string{"redis/redis.pid", "postgres/postgres.pid", "s3/s3.pid", "ejabberd/ejabberd.pid"} {
		if _, err := os.Stat(filepath.Join(stateDir, f)); err == nil {
			files = append(files, filepath.Join(stateDir, f))
		}
	}
	more, _ := filepath.Glob(filepath.Join(stateDir, "ejabberd-nodes", "*", "ejabberd.pid"))
	return append(files, more...)
}

// Socket is one connected socket of a process.
type Socket struct {
	// Process is the pid file's name (without .pid) and pid.
	Process string
	PID     int
	// Proto is tcp, tcp6, udp or udp6; Local and Remote are ip:port.
	Proto, Local, Remote string
}

func (s Socket) String() string {
	return fmt.Sprintf("%s (pid %d) %s %s -> %s", s.Process, s.PID, s.Proto, s.Local, s.Remote)
}

// PeerSockets returns the sockets with a remote address (connected, or
// connecting) of the processes the pid files name and their descendants
// whose remote address is in none of allowed: what would leave through
// the default route if nothing stopped it. Loopback is always allowed.
// The processes must be in this process's network namespace.
func PeerSockets(pidFiles []string, allowed ...*net.IPNet) ([]Socket, error) {
	owner := map[uint64]Socket{} // socket inode -> process
	for _, f := range pidFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			continue
		}
		name := strings.TrimSuffix(filepath.Base(f), ".pid")
		if name == "ejabberd" || name == "postgres" || name == "redis" || name == "s3" {
			name = filepath.Base(filepath.Dir(f))
		}
		for _, p := range append([]int{pid}, proc.Descendants(pid)...) {
			fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p))
			for _, fd := range fds {
				l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", p, fd.Name()))
				if err != nil {
					continue
				}
				if v, ok := strings.CutPrefix(l, "socket:["); ok {
					if ino, err := strconv.ParseUint(strings.TrimSuffix(v, "]"), 10, 64); err == nil {
						owner[ino] = Socket{Process: name, PID: p}
					}
				}
			}
		}
	}
	var out []Socket
	for _, proto := range []string{"tcp", "tcp6", "udp", "udp6"} {
		b, err := os.ReadFile("/proc/net/" + proto)
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			return nil, err
		}
		for _, e := range parseProcNet(string(b)) {
			s, mine := owner[e.inode]
			if !mine || e.remote.IP.IsUnspecified() || e.remote.IP.IsLoopback() {
				continue
			}
			ok := false
			for _, n := range allowed {
				ok = ok || n.Contains(e.remote.IP)
			}
			if ok {
				continue
			}
			s.Proto, s.Local, s.Remote = proto, e.local.String(), e.remote.String()
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}

// procNetEntry is one line of /proc/net/{tcp,udp}[6].
type procNetEntry struct {
	local, remote net.TCPAddr
	inode         uint64
}

// parseProcNet reads the socket table of /proc/net/tcp and its kin:
// addresses are hex, each 32-bit word in the host's (little-endian)
// order.
func parseProcNet(text string) []procNetEntry {
	var out []procNetEntry
	for i, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if i == 0 || len(f) < 10 {
			continue
		}
		local, err1 := parseHexAddr(f[1])
		remote, err2 := parseHexAddr(f[2])
		ino, err3 := strconv.ParseUint(f[9], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		out = append(out, procNetEntry{local: local, remote: remote, inode: ino})
	}
	return out
}

func parseHexAddr(s string) (net.TCPAddr, error) {
	ipHex, portHex, ok := strings.Cut(s, ":")
	if !ok {
		return net.TCPAddr{}, fmt.Errorf("address %q", s)
	}
	raw, err := hex.DecodeString(ipHex)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return net.TCPAddr{}, fmt.Errorf("address %q", s)
	}
	port, err := strconv.ParseUint(portHex, 16, 16)
	if err != nil {
		return net.TCPAddr{}, fmt.Errorf("port %q", s)
	}
	ip := make(net.IP, len(raw))
	for w := 0; w < len(raw); w += 4 {
		binary.BigEndian.PutUint32(ip[w:], binary.LittleEndian.Uint32(raw[w:]))
	}
	if v4 := ip.To4(); v4 != nil {
		ip = v4
	}
	return net.TCPAddr{IP: ip, Port: int(port)}, nil
}
