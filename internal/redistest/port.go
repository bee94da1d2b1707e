package redistest

import (
	"net"
	"testing"
)

// freePorts returns n distinct TCP ports of 127.0.0.1 that were free a
// moment ago. The listeners are held open until all n ports are known, so the
// ports differ from one another, then closed. Another process may take a port
// before the caller binds it; callers retry with new ports when that happens.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, 0, n)
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("redistest: finding a free port: %v", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}
