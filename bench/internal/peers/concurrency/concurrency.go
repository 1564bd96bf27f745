// Package concurrency measures etcd's own election recipe,
// go.etcd.io/etcd/client/v3/concurrency.Election, each candidate with a
// Session whose lease has the candidate's TTL. Release is Resign.
package concurrency

import (
	"context"
	"fmt"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/electkit/election/bench/internal/conns"
	"github.com/electkit/election/bench/internal/peer"
	"github.com/electkit/election/internal/mono"
)

// Name is the library's name in reports.
const Name = "concurrency.Election"

// New returns concurrency.Election against the etcd cluster at endpoints.
func New(endpoints []string, o conns.Options) peer.Library {
	return &library{d: conns.NewEtcd(endpoints, o)}
}

type library struct {
	d *conns.Dialer
}

func (l *library) Name() string { return Name }

func (l *library) NewCandidate(ctx context.Context, name, id string, ttl time.Duration) (peer.Candidate, error) {
	c, err := l.d.Get(ttl)
	if err != nil {
		return nil, err
	}
	secs := int((ttl + time.Second - 1) / time.Second)
	s, err := concurrency.NewSession(c.Etcd, concurrency.WithTTL(secs), concurrency.WithContext(context.Background()))
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("concurrency: session: %w", err)
	}
	return &candidate{s: s, e: concurrency.NewElection(s, name), c: c, id: id}, nil
}

// Registered counts the candidates' keys under name + "/".
func (l *library) Registered(ctx context.Context, name string) (int, error) {
	return l.d.Registered(ctx, name)
}

func (l *library) Counts() peer.Counts { return l.d.Counts() }

func (l *library) Close() error { return l.d.Close() }

type candidate struct {
	s       *concurrency.Session
	e       *concurrency.Election
	c       *conns.Conn
	id      string
	crashed bool
}

func (c *candidate) Campaign(ctx context.Context) (int64, error) {
	err := c.e.Campaign(ctx, c.id)
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
	if c.crashed || !c.c.Shared {
		// Its own client: closing it ends the session's keepalive; the
		// lease is left to expire (or was revoked below when not crashed).
		if !c.crashed {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, _ = c.s.Client().Revoke(ctx, c.s.Lease())
			cancel()
		}
		c.s.Orphan()
		c.c.Close()
		return nil
	}
	return c.s.Close()
}

// NewProcess opens a client and one concurrency.Session of ttl on it that
// every candidate of the process shares.
func (l *library) NewProcess(ctx context.Context, ttl time.Duration) (peer.Process, error) {
	c, err := l.d.Get(ttl)
	if err != nil {
		return nil, err
	}
	secs := int((ttl + time.Second - 1) / time.Second)
	s, err := concurrency.NewSession(c.Etcd, concurrency.WithTTL(secs), concurrency.WithContext(context.Background()))
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("concurrency: session: %w", err)
	}
	return &process{c: c, s: s}, nil
}

type process struct {
	c *conns.Conn
	s *concurrency.Session
}

func (p *process) NewCandidate(_ context.Context, name, id string) (peer.Candidate, error) {
	return &sessionCandidate{candidate{e: concurrency.NewElection(p.s, name), id: id}}, nil
}

func (p *process) Counts() peer.Counts { return p.c.Counts() }

func (p *process) Close() error {
	err := p.s.Close()
	p.c.Close()
	return err
}

// sessionCandidate is a candidate on its process's shared Session: its
// Campaign and Release are a candidate's; it cannot crash alone, and the
// Session's Close revokes its keys.
type sessionCandidate struct{ candidate }

func (c *sessionCandidate) Crash() (int64, error) {
	return 0, fmt.Errorf("concurrency: a candidate on a shared session cannot crash alone")
}

func (c *sessionCandidate) Counts() peer.Counts { return peer.Counts{} } // the process counts

func (c *sessionCandidate) Close() error { return nil }
