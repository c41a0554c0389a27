package testenv

import (
	"errors"
	"fmt"
	"net"
	"sync"
)

// maxPortTries bounds the search for a port not handed out before in this process.
const maxPortTries = 50

// handedOut remembers every port FreePort returned in this process, so two environments started
// by the same test binary never get the same port even if the kernel offers it twice. Ports are
// never returned to the set: a test binary uses a few dozen at most.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// FreePort returns a TCP port that is free on 127.0.0.1 right now. Between this call and the
// server binding it another process may take it; Start retries when a server reports "address
// already in use".
func FreePort() (int, error) { return freePort("127.0.0.1:0") }

// freePortAllInterfaces is FreePort for servers that bind every interface (Argo CD's
// application-controller metrics port has no address flag).
func freePortAllInterfaces() (int, error) { return freePort(":0") }

func freePort(addr string) (int, error) {
	for range maxPortTries {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return 0, fmt.Errorf("listen on %s: %w", addr, err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		if err := l.Close(); err != nil {
			return 0, fmt.Errorf("close listener on %s: %w", addr, err)
		}
		handedOut.Lock()
		seen := handedOut.ports[port]
		handedOut.ports[port] = true
		handedOut.Unlock()
		if !seen {
			return port, nil
		}
	}
	return 0, errors.New("find free port: every port offered was already handed out")
}

// FreePorts returns n distinct free loopback ports (FreePort n times).
func FreePorts(n int) ([]int, error) {
	ports := make([]int, n)
	for i := range ports {
		p, err := FreePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	return ports, nil
}
