// Package ours measures this module's own store backends, backend/etcd and
// backend/zk, through the benchmarks' one shape of a library (peer).
package ours

import (
	"context"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/etcd"
	"github.com/electkit/election/backend/zk"
	"github.com/electkit/election/bench/internal/conns"
	"github.com/electkit/election/bench/internal/peer"
	"github.com/electkit/election/internal/mono"
)

// NewEtcd returns backend/etcd against the etcd cluster at endpoints, its
// candidates connected as o says.
func NewEtcd(endpoints []string, o conns.Options) peer.Library {
	return &library{name: "backend/etcd", d: conns.NewEtcd(endpoints, o)}
}

// NewZK returns backend/zk against the ZooKeeper servers, its candidates
// connected as o says; a candidate's session timeout is its ttl.
func NewZK(servers []string, o conns.Options) peer.Library {
	return &library{name: "backend/zk", d: conns.NewZK(servers, o), zk: true}
}

type library struct {
	name string
	d    *conns.Dialer
	zk   bool
}

func (l *library) Name() string { return l.name }

func (l *library) NewCandidate(ctx context.Context, name, id string, ttl time.Duration) (peer.Candidate, error) {
	e, c, err := l.open(name, id, ttl)
	if err != nil {
		return nil, err
	}
	return &candidate{e: e, c: c}, nil
}

// open makes an Elector of the election name on a connection of its own,
// with opts after its ID and TTL.
func (l *library) open(name, id string, ttl time.Duration, opts ...election.Option) (election.Elector, *conns.Conn, error) {
	c, err := l.d.Get(ttl)
	if err != nil {
		return nil, nil, err
	}
	opts = append([]election.Option{election.WithID(id), election.WithTTL(ttl)}, opts...)
	var e election.Elector
	if l.zk {
		e, err = zk.New(c.ZK, name, opts...)
	} else {
		e, err = etcd.New(c.Etcd, name, opts...)
	}
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return e, c, nil
}

// Registered counts the candidates' queue keys (etcd: under name/_c/) or
// nodes (zk) of the election.
func (l *library) Registered(ctx context.Context, name string) (int, error) {
	if !l.zk {
		name += "/_c"
	}
	return l.d.Registered(ctx, name)
}

func (l *library) Counts() peer.Counts { return l.d.Counts() }

// Connect dials the library's shared clients (conns.Options.Pool) now,
// before any candidate asks for one.
func (l *library) Connect(ttl time.Duration) error { return l.d.Fill(ttl) }

func (l *library) Close() error { return l.d.Close() }

type candidate struct {
	e       election.Elector
	c       *conns.Conn
	shared  bool // c is its process's: the process closes it
	crashed bool
}

func (c *candidate) Campaign(ctx context.Context) (int64, error) {
	_, err := c.e.Campaign(ctx)
	return mono.Now(), err
}

func (c *candidate) Release(ctx context.Context) (int64, error) {
	t := mono.Now()
	return t, c.e.Resign(ctx)
}

func (c *candidate) Crash() (int64, error) {
	c.crashed = true
	return c.c.Cut()
}

func (c *candidate) Counts() peer.Counts { return c.c.Counts() }

func (c *candidate) Close() error {
	if c.crashed { // its connection first: the Elector's Close then fails fast
		c.c.Close()
		return c.e.Close()
	}
	err := c.e.Close()
	if !c.shared {
		c.c.Close()
	}
	return err
}

// NewProcess opens a connection and, on etcd, a Session of ttl on it that
// every candidate of the process shares; on ZooKeeper the connection is
// the session.
func (l *library) NewProcess(ctx context.Context, ttl time.Duration) (peer.Process, error) {
	c, err := l.d.Get(ttl)
	if err != nil {
		return nil, err
	}
	p := &process{c: c}
	if !l.zk {
		if p.s, err = etcd.NewSession(ctx, c.Etcd, election.WithTTL(ttl)); err != nil {
			c.Close()
			return nil, err
		}
	}
	return p, nil
}

type process struct {
	c *conns.Conn
	s *etcd.Session // nil on ZooKeeper
}

func (p *process) NewCandidate(_ context.Context, name, id string) (peer.Candidate, error) {
	var e election.Elector
	var err error
	if p.s == nil {
		e, err = zk.New(p.c.ZK, name, election.WithID(id))
	} else {
		e, err = etcd.NewWithSession(p.s, name, election.WithID(id))
	}
	if err != nil {
		return nil, err
	}
	return &candidate{e: e, c: p.c, shared: true}, nil
}

func (p *process) Counts() peer.Counts { return p.c.Counts() }

func (p *process) Close() error {
	var err error
	if p.s != nil {
		err = p.s.Close()
	}
	p.c.Close()
	return err
}

// NewElector makes an Elector of the election name on a connection of its
// own, with the given options after its ID and TTL; done closes both. The
// transfer scenario uses it, for what peer.Candidate does not carry
// (Terms, priorities, Transfer).
func (l *library) NewElector(_ context.Context, name, id string, ttl time.Duration, opts ...election.Option) (election.Elector, func(), error) {
	e, c, err := l.open(name, id, ttl, opts...)
	if err != nil {
		return nil, nil, err
	}
	return e, func() { e.Close(); c.Close() }, nil
}
