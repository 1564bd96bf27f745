// Package faultproxy is a TCP proxy on loopback for fault injection between
// a client and a server (ZooKeeper or etcd): cut both ways, cut replies
// only, reset connections, refuse new ones. A test rig: tests, the demo
// and the fault harness use it; shipped code never does.
package faultproxy

import (
	"net"
	"sync"
	"sync/atomic"
)

// TB is the part of testing.TB New uses.
type TB interface {
	Helper()
	Cleanup(func())
	Fatalf(format string, args ...any)
}

// Proxy is a TCP proxy on 127.0.0.1 in front of one server, for fault
// injection between a client and the ensemble:
//   - Cut drops every byte in both directions, silently, as a network
//     partition does: no connection is closed, so the client notices only
//     by its own timeouts and the server expires the session.
//   - CutReplies drops only the server's bytes: requests arrive and are
//     carried out, their replies are lost.
//   - Reset closes every connection open now (the client reconnects).
//   - Refuse makes new connections fail at once.
type Proxy struct {
	Addr string // where clients connect: 127.0.0.1:port
	To   string // the server's address

	l       net.Listener
	tx, rx  atomic.Bool // drop client→server, server→client bytes
	refuse  atomic.Bool
	mu      sync.Mutex
	conns   map[net.Conn]bool
	closed  bool
	workers sync.WaitGroup
}

// New starts a proxy in front of the server at to, closed in tb's
// Cleanup.
func New(tb TB, to string) *Proxy {
	tb.Helper()
	p, err := Start(to)
	if err != nil {
		tb.Fatalf("faultproxy: proxy to %s: %v", to, err)
		return nil
	}
	tb.Cleanup(p.Close)
	return p
}

// Start starts a proxy in front of the server at to.
func Start(to string) (*Proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{Addr: l.Addr().String(), To: to, l: l, conns: map[net.Conn]bool{}}
	p.workers.Add(1)
	go p.accept()
	return p, nil
}

func (p *Proxy) accept() {
	defer p.workers.Done()
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		if p.refuse.Load() {
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.To)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c, s) {
			return
		}
		p.workers.Add(2)
		go p.pipe(s, c, &p.tx)
		go p.pipe(c, s, &p.rx)
	}
}

func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		p.conns[c] = true
	}
	return true
}

// pipe copies from src to dst, dropping bytes while drop is set; when
// either side ends, it closes both.
func (p *Proxy) pipe(dst, src net.Conn, drop *atomic.Bool) {
	defer p.workers.Done()
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 && !drop.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	src.Close()
	dst.Close()
	p.mu.Lock()
	delete(p.conns, src)
	delete(p.conns, dst)
	p.mu.Unlock()
}

// Cut drops every byte in both directions until Heal.
func (p *Proxy) Cut() { p.tx.Store(true); p.rx.Store(true) }

// CutReplies drops the server's bytes until Heal.
func (p *Proxy) CutReplies() { p.rx.Store(true) }

// Heal forwards bytes in both directions again and accepts connections.
func (p *Proxy) Heal() { p.tx.Store(false); p.rx.Store(false); p.refuse.Store(false) }

// Refuse closes new connections at once until Heal.
func (p *Proxy) Refuse() { p.refuse.Store(true) }

// Reset closes every connection open now.
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

// Close stops the proxy and closes its connections. Safe to call twice.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	p.l.Close()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.workers.Wait()
}
