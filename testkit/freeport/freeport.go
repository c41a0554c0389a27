// Package freeport hands tests TCP ports to give a server on its command line.
//
// Asking the kernel for port 0 and closing the listener returns a port from the ephemeral
// range, which the kernel hands out again: to the next listener on port 0 in the same process
// (an httptest server started after the port was picked) or as the source port of an outgoing
// connection. The server then fails to bind, or worse, a test talks to the wrong server. So on
// Linux the ports come from just below the ephemeral range, where the kernel never picks one by
// itself; only another program naming the port explicitly can take it. Each port is handed out
// at most once per process, and on Linux to one process at a time on the machine: the test
// processes go test runs side by side draw from the same span, and a port one of them picked is
// free until the server it starts binds it (a kube-apiserver takes seconds). A process claims a
// port with a lock on that byte of a file every process opens (lockPort); the kernel drops its
// locks when it exits.
package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

const (
	// span is how many ports below the ephemeral range are drawn from.
	span = 12000
	// lowest is the lowest port drawn, above the well-known and most registered ones.
	lowest = 10000
	// tries bounds the search for a port that binds and was not handed out before.
	tries = 200
	// rangeFile holds the kernel's ephemeral range, "low<TAB>high".
	rangeFile = "/proc/sys/net/ipv4/ip_local_port_range"
)

var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// Loopback returns a port free on 127.0.0.1 right now.
func Loopback() (int, error) { return pick("127.0.0.1") }

// AllInterfaces returns a port free on every interface right now, for servers that bind them
// all.
func AllInterfaces() (int, error) { return pick("") }

func pick(host string) (int, error) {
	draw := func() int { return 0 }
	if lo, hi, ok := belowEphemeral(); ok {
		draw = func() int { return lo + rand.IntN(hi-lo) }
	}
	return pickFrom(host, draw)
}

// pickFrom tries the ports draw returns (0: one the kernel picks) until one binds and is
// claimed.
func pickFrom(host string, draw func() int) (int, error) {
	for range tries {
		port := draw()
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			if port != 0 {
				continue // taken: draw again
			}
			return 0, fmt.Errorf("listen on %s: %w", net.JoinHostPort(host, "0"), err)
		}
		port = l.Addr().(*net.TCPAddr).Port
		if err := l.Close(); err != nil {
			return 0, fmt.Errorf("close listener on port %d: %w", port, err)
		}
		if claim(port) {
			return port, nil
		}
	}
	return 0, errors.New("find a free port: every port tried was taken or already handed out")
}

// claim hands port out unless this process did before or another process holds it.
func claim(port int) bool {
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.ports[port] || !lockPort(port) {
		return false
	}
	handedOut.ports[port] = true
	return true
}

// belowEphemeral returns [lo, hi): the span of ports just below the kernel's ephemeral range.
// ok is false where the range is unknown (not Linux) or leaves no room; then ports come from
// the kernel.
func belowEphemeral() (lo, hi int, ok bool) {
	b, err := os.ReadFile(rangeFile)
	if err != nil {
		return 0, 0, false
	}
	fields := strings.Fields(string(b))
	if len(fields) != 2 {
		return 0, 0, false
	}
	low, err := strconv.Atoi(fields[0])
	if err != nil {
		return 0, 0, false
	}
	hi, lo = low, max(low-span, lowest)
	if hi-lo < 1000 {
		return 0, 0, false
	}
	return lo, hi, true
}
