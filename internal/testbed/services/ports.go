package services

import (
	"net"
	"strconv"
	"testing"
)

// freePort returns a loopback TCP port that was free a moment ago, with the
// nine following ports free as well (ejabberd uses a small range).
func freePort(t testing.TB) int {
	t.Helper()
	for i := 0; i < 50; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if p+10 < 65535 && rangeFree(p, 10) {
			return p
		}
	}
	t.Fatal("no free port range")
	return 0
}

func rangeFree(p, n int) bool {
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p+i)))
		if err != nil {
			return false
		}
		l.Close()
	}
	return true
}
