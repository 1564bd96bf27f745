package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
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
	links map[election.Elector]*zkLink
}

// zkLink is a candidate's cuttable dialer and the connection dialed
// through it.
type zkLink struct {
	demoLink
	conn *gozk.Conn
}

func openZK(ctx context.Context, cfg demoConfig) (demoBackend, error) {
	d := &zkDemo{servers: cfg.Servers, ttl: cfg.TTL, links: map[election.Elector]*zkLink{},
		path: fmt.Sprintf("/elect/demo-%d", time.Now().UnixNano())}
	// One connection first, to fail early and clearly when nothing answers.
	probe := &zkLink{}
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

func (d *zkDemo) Candidate(ctx context.Context, id string, opts ...election.Option) (election.Elector, error) {
	l := &zkLink{}
	conn, err := l.connect(ctx, d.servers, d.ttl)
	if err != nil {
		return nil, err
	}
	// The TTL is the session timeout the server granted conn.
	e, err := zk.New(conn, d.path, append([]election.Option{election.WithID(id)}, opts...)...)
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

func (l *zkLink) connect(ctx context.Context, servers []string, ttl time.Duration) (*gozk.Conn, error) {
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
