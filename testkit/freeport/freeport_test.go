package freeport

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// holdEnv makes the test binary a process that claims the ports it names (comma-separated),
// prints "held" and keeps them until its standard input closes.
const holdEnv = "FREEPORT_TEST_HOLD"

func TestMain(m *testing.M) {
	if ports := os.Getenv(holdEnv); ports != "" {
		os.Exit(hold(ports))
	}
	os.Exit(m.Run())
}

func hold(ports string) int {
	for _, f := range strings.Split(ports, ",") {
		port, err := strconv.Atoi(f)
		if err != nil || !claim(port) {
			fmt.Printf("cannot claim %q: %v\n", f, err)
			return 1
		}
	}
	fmt.Println("held")
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

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

// TestAPortAnotherProcessHoldsIsNotHandedOut: a port another process claimed is not handed out
// while that process lives, though nothing listens on it yet, and is once it has exited.
func TestAPortAnotherProcessHoldsIsNotHandedOut(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("ports are claimed across processes on Linux only")
	}
	ports := unclaimed(t, 3)
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), fmt.Sprintf("%s=%d,%d", holdEnv, ports[0], ports[1]))
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "held\n" {
		t.Fatalf("the holding process said %q (%v)", line, err)
	}
	if !heldElsewhere(ports[0]) || heldElsewhere(ports[2]) {
		t.Fatalf("held elsewhere: %d %v, %d %v; want true, false", ports[0], heldElsewhere(ports[0]), ports[2], heldElsewhere(ports[2]))
	}

	if got, err := pickFrom("127.0.0.1", cycle(ports)); err != nil || got != ports[2] {
		t.Fatalf("from %v with the first two held by another process: got %d (%v), want %d", ports, got, err, ports[2])
	}
	if got, err := pickFrom("127.0.0.1", cycle(ports[:2])); err == nil {
		t.Fatalf("got port %d, held by another process", got)
	}

	if err := stdin.Close(); err != nil {
		t.Fatal(err)
	}
	if err := child.Wait(); err != nil {
		t.Fatalf("holding process: %v", err)
	}
	if got, err := pickFrom("127.0.0.1", cycle(ports[:1])); err != nil || got != ports[0] {
		t.Fatalf("after the holding process exited: got %d (%v), want %d", got, err, ports[0])
	}
}

// unclaimed returns n distinct ports below the ephemeral range that bind now and that no
// process has claimed (the test packages go test runs beside this one draw from the same span),
// without claiming them.
func unclaimed(t *testing.T, n int) []int {
	t.Helper()
	lo, hi, ok := belowEphemeral()
	if !ok {
		t.Skipf("no ephemeral range known here (%s)", rangeFile)
	}
	var ports []int
	for range 1000 {
		if len(ports) == n {
			return ports
		}
		port := lo + rand.IntN(hi-lo)
		handedOut.Lock()
		mine := handedOut.ports[port]
		handedOut.Unlock()
		if mine || heldElsewhere(port) || slices.Contains(ports, port) {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		_ = l.Close()
		ports = append(ports, port)
	}
	t.Fatalf("found %d of %d free ports", len(ports), n)
	return nil
}

// cycle draws ports in turn, over and over.
func cycle(ports []int) func() int {
	i := 0
	return func() int {
		p := ports[i%len(ports)]
		i++
		return p
	}
}
