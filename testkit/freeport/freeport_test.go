package freeport

import (
	"net"
	"strconv"
	"testing"
)

// TestPortsAreFreeDistinctAndOutsideTheEphemeralRange: every port binds, none is handed out
// twice, and on Linux none lies where the kernel picks ports for port-0 listeners and outgoing
// connections, so a listener opened after the pick cannot take it.
func TestPortsAreFreeDistinctAndOutsideTheEphemeralRange(t *testing.T) {
	lo, hi, ok := belowEphemeral()
	seen := map[int]bool{}
	for range 100 {
		port, err := Loopback()
		if err != nil {
			t.Fatal(err)
		}
		if seen[port] {
			t.Fatalf("port %d handed out twice", port)
		}
		seen[port] = true
		if ok && (port < lo || port >= hi) {
			t.Fatalf("port %d outside [%d, %d), below the ephemeral range", port, lo, hi)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("port %d does not bind: %v", port, err)
		}
		_ = l.Close()
	}
	if !ok {
		t.Logf("no ephemeral range known here (%s): ports came from the kernel", rangeFile)
	}
}

// TestAllInterfacesBindsEveryInterface: the port binds on every interface.
func TestAllInterfacesBindsEveryInterface(t *testing.T) {
	port, err := AllInterfaces()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		t.Fatalf("port %d does not bind on every interface: %v", port, err)
	}
	_ = l.Close()
}
