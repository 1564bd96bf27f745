package main

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/zk"
)

// zkDemo runs the story on a ZooKeeper the user runs: one connection per
// candidate, each through a dialer the demo can cut, so that a crash is the
// connection going silent without closing its session, which then expires.
type zkDemo struct {
	servers []string
	ttl     time.Duration
	path    string

	mu    sync.Mutex
	links map[election.Elector]*demoLink
}

func openZK(ctx context.Context, cfg demoConfig) (demoBackend, error) {
	d := &zkDemo{servers: cfg.Servers, ttl: cfg.TTL, links: map[election.Elector]*demoLink{},
		path: fmt.Sprintf("/elect/demo-%d", time.Now().UnixNano())}
	// One connection first, to fail early and clearly when nothing answers.
	probe := &demoLink{}
	conn, err := probe.connect(ctx, d.servers, d.ttl)
	if err != nil {
		return nil, err
	}
	conn.Close()
	return d, nil
}

func (d *zkDemo) Name() string { return "zk" }

func (d *zkDemo) Describe() string {
	return fmt.Sprintf("ZooKeeper at %s, election path %s, session timeout %v", strings.Join(d.servers, ","), d.path, d.ttl)
}

func (d *zkDemo) Candidate(ctx context.Context, id string) (election.Elector, error) {
	l := &demoLink{}
	conn, err := l.connect(ctx, d.servers, d.ttl)
	if err != nil {
		return nil, err
	}
	e, err := zk.New(conn, d.path, election.WithID(id), election.WithTTL(d.ttl))
	if err != nil {
		conn.Close()
		return nil, err
	}
	l.conn = conn
	d.mu.Lock()
	d.links[e] = l
	d.mu.Unlock()
	return e, nil
}

func (d *zkDemo) Crash(e election.Elector) error {
	d.mu.Lock()
	l, ok := d.links[e]
	d.mu.Unlock()
	if !ok {
		return fmt.Errorf("zk demo: %T is not a candidate of this demo", e)
	}
	l.cut()
	return nil
}

func (d *zkDemo) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, l := range d.links {
		l.cut() // a crashed or closed candidate's connection: nothing left to say
		l.conn.Close()
	}
	d.links = nil
	return nil
}

// demoLink dials a candidate's connections and can cut them: the open one
// closes and new ones fail, so the session expires on the server.
type demoLink struct {
	conn *gozk.Conn
	dead atomic.Bool
	mu   sync.Mutex
	nc   []net.Conn
}

func (l *demoLink) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	if l.dead.Load() {
		return nil, fmt.Errorf("crashed")
	}
	c, err := net.DialTimeout(network, addr, timeout)
	if err == nil {
		l.mu.Lock()
		l.nc = append(l.nc, c)
		l.mu.Unlock()
	}
	return c, err
}

func (l *demoLink) cut() {
	l.dead.Store(true)
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range l.nc {
		c.Close()
	}
}

func (l *demoLink) connect(ctx context.Context, servers []string, ttl time.Duration) (*gozk.Conn, error) {
	conn, ev, err := gozk.Connect(servers, ttl, gozk.WithDialer(l.dial), gozk.WithLogger(quietZK{}), gozk.WithLogInfo(false))
	if err != nil {
		return nil, err
	}
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		select {
		case e := <-ev:
			if e.State == gozk.StateHasSession {
				go func() {
					for range ev {
					}
				}()
				return conn, nil
			}
		case <-ctx.Done():
			conn.Close()
			return nil, ctx.Err()
		case <-deadline.C:
			conn.Close()
			return nil, fmt.Errorf("no ZooKeeper session at %s within 10s", strings.Join(servers, ","))
		}
	}
}

type quietZK struct{}

func (quietZK) Printf(string, ...any) {}
