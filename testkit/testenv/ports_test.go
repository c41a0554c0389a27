package testenv

import (
	"net"
	"strconv"
	"testing"
)

func TestFreePortsAreDistinctAndBindable(t *testing.T) {
	ports, err := FreePorts(20)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("bind free port %d: %v", p, err)
		}
		_ = l.Close()
	}
}

func TestFreePortAllInterfacesIsBindableEverywhere(t *testing.T) {
	p, err := freePortAllInterfaces()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", ":"+strconv.Itoa(p))
	if err != nil {
		t.Fatalf("bind port %d on all interfaces: %v", p, err)
	}
	_ = l.Close()
}
