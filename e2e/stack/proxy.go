package stack

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// proxyDialTimeout bounds one dial of a backend; a backend that does not answer is skipped.
const proxyDialTimeout = 500 * time.Millisecond

// Proxy forwards TCP connections from a loopback port to the first of its backends that accepts
// them, starting with the one after the backend the previous connection went to (round robin
// with failover). A test partitions what lies behind a Proxy in one of two ways: Cut closes
// every forwarded connection and refuses new ones (accepted and closed at once, as a firewall
// that rejects); Silence lets nothing through but closes nothing, as a network that drops
// packets (a link down, a node gone dark): connections stay open with their bytes held, new
// ones are accepted and wait, and neither end learns of it but by its own timeouts. Heal ends
// either: held bytes and connections go through, as TCP's retransmissions would deliver them
// after a short partition.
type Proxy struct {
	ln       net.Listener
	backends []string

	mu    sync.Mutex
	next  int
	cut   bool
	open  chan struct{} // closed while traffic passes; open while silenced
	conns map[net.Conn]struct{}
	done  chan struct{}
	wg    sync.WaitGroup
}

// NewProxy listens on addr (127.0.0.1:0 for a free port) and forwards to backends.
func NewProxy(addr string, backends ...string) (*Proxy, error) {
	if len(backends) == 0 {
		return nil, errors.New("proxy: no backend")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("proxy: listen on %s: %w", addr, err)
	}
	open := make(chan struct{})
	close(open)
	p := &Proxy{ln: ln, backends: backends, open: open, conns: map[net.Conn]struct{}{}, done: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address the proxy listens on.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every connection through the proxy and refuses new ones until Heal.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
}

// Silence holds every byte of every connection through the proxy, and every new connection,
// until Heal; it closes nothing.
func (p *Proxy) Silence() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
		p.open = make(chan struct{})
	default: // silenced already
	}
}

// Heal ends Cut and Silence: connections go through again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
	select {
	case <-p.open:
	default:
		close(p.open)
	}
}

// pass waits while the proxy is silenced; false when it was closed meanwhile.
func (p *Proxy) pass() bool {
	p.mu.Lock()
	open := p.open
	p.mu.Unlock()
	select {
	case <-open:
		return true
	case <-p.done:
		return false
	}
}

// Close stops listening and closes every connection.
func (p *Proxy) Close() {
	select {
	case <-p.done:
		return
	default:
	}
	close(p.done)
	_ = p.ln.Close()
	p.Cut()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			select {
			case <-p.done:
				return
			default:
			}
			time.Sleep(10 * time.Millisecond) // a transient accept error (file descriptors)
			continue
		}
		p.mu.Lock()
		refused := p.cut
		start := p.next
		p.next = (p.next + 1) % len(p.backends)
		p.mu.Unlock()
		if refused {
			_ = c.Close()
			continue
		}
		p.wg.Add(1)
		go p.forward(c, start)
	}
}

// forward connects c to the first backend that answers, from start on, and copies both ways
// until either side closes.
func (p *Proxy) forward(c net.Conn, start int) {
	defer p.wg.Done()
	if !p.pass() {
		_ = c.Close()
		return
	}
	var b net.Conn
	for i := range p.backends {
		var err error
		if b, err = net.DialTimeout("tcp", p.backends[(start+i)%len(p.backends)], proxyDialTimeout); err == nil {
			break
		}
	}
	if b == nil {
		_ = c.Close()
		return
	}
	if !p.track(c, b) {
		return
	}
	defer p.untrack(c, b)
	var wg sync.WaitGroup
	wg.Add(2)
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			// What was read, and the end of the connection, wait out a silence.
			if !p.pass() {
				break
			}
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		// One direction ended: end both, so neither side waits on a half-open connection.
		_ = dst.Close()
		_ = src.Close()
	}
	go pipe(b, c)
	go pipe(c, b)
	wg.Wait()
}

// track records a forwarded pair; it refuses (and closes) it when the proxy was cut meanwhile.
func (p *Proxy) track(c, b net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		_ = c.Close()
		_ = b.Close()
		return false
	}
	p.conns[c], p.conns[b] = struct{}{}, struct{}{}
	return true
}

func (p *Proxy) untrack(c, b net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
	delete(p.conns, b)
}
