package stack

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// heldFor is how long a read through a silenced proxy is given to show that nothing passes.
const heldFor = 300 * time.Millisecond

// A silenced proxy closes nothing and lets nothing through, either way, for connections open
// before and opened during the silence; Heal delivers what was held. A cut proxy closes.
func TestProxySilenceHoldsAndHealDelivers(t *testing.T) {
	p, err := NewProxy("127.0.0.1:0", echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	before := dial(t, p.Addr())
	roundTrip(t, before, "a")

	p.Silence()
	send(t, before, "b")
	during := dial(t, p.Addr()) // accepted, and waits
	send(t, during, "c")
	for _, c := range []*conn{before, during} {
		_ = c.SetReadDeadline(time.Now().Add(heldFor))
		if line, err := c.r.ReadString('\n'); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("through a silenced proxy: read %q, %v; want nothing and the connection open", line, err)
		}
	}

	p.Heal()
	for c, want := range map[*conn]string{before: "b\n", during: "c\n"} {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if line, err := c.r.ReadString('\n'); err != nil || line != want {
			t.Errorf("after Heal: read %q, %v; want the held %q", line, err, want)
		}
	}

	p.Cut()
	_ = before.SetReadDeadline(time.Now().Add(10 * time.Second))
	if line, err := before.r.ReadString('\n'); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("through a cut proxy: read %q, %v; want the connection closed (EOF or a reset)", line, err)
	}
}

type conn struct {
	net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, addr string) *conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &conn{Conn: c, r: bufio.NewReader(c)}
}

func send(t *testing.T, c *conn, s string) {
	t.Helper()
	if _, err := io.WriteString(c, s+"\n"); err != nil {
		t.Fatalf("write: %v", err)
	}
}

func roundTrip(t *testing.T, c *conn, s string) {
	t.Helper()
	send(t, c, s)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if line, err := c.r.ReadString('\n'); err != nil || line != s+"\n" {
		t.Fatalf("echo: %q, %v; want %q", line, err, s)
	}
}

// echoServer answers every line with itself.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}
