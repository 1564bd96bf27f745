// Package pg holds the PostgreSQL elections of the benchmarks: ours
// (backend/postgres) and the election hand-rolled on a session-level
// advisory lock that services write first (pg_try_advisory_lock polled by
// every candidate on a connection of its own). Each candidate reaches the
// server through a proxy of its own, so that Crash can cut it off.
package pg

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/postgres"
	"github.com/electkit/election/bench/internal/peer"
	"github.com/electkit/election/internal/mono"
	"github.com/electkit/election/internal/rig/faultproxy"
)

// DSN makes the connection string of a candidate reaching the server
// through addr.
type DSN func(addr string) string

// Ours is backend/postgres: each candidate on a pool of its own (at most
// two connections, and the listening one) through its own proxy.
type Ours struct {
	Addr string // the server's
	DSN  DSN
}

func (o *Ours) Name() string { return "backend/postgres" }
func (o *Ours) Close() error { return nil }

func (o *Ours) NewCandidate(ctx context.Context, name, id string, ttl time.Duration) (peer.Candidate, error) {
	px, err := faultproxy.Start(o.Addr)
	if err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(o.DSN(px.Addr))
	if err != nil {
		px.Close()
		return nil, err
	}
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		px.Close()
		return nil, err
	}
	e, err := postgres.New(pool, name, election.WithID(id), election.WithTTL(ttl))
	if err != nil {
		pool.Close()
		px.Close()
		return nil, err
	}
	return &ours{e: e, pool: pool, px: px}, nil
}

type ours struct {
	e    *postgres.Elector
	pool *pgxpool.Pool
	px   *faultproxy.Proxy
	mu   sync.Mutex
	term *election.Term
}

func (c *ours) Campaign(ctx context.Context) (int64, error) {
	t, err := c.e.Campaign(ctx)
	at := mono.Now()
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	c.term = t
	c.mu.Unlock()
	return at, nil
}

func (c *ours) Release(ctx context.Context) (int64, error) {
	at := mono.Now()
	return at, c.e.Resign(ctx)
}

func (c *ours) Crash() (int64, error) {
	at := mono.Now()
	c.px.Cut()
	return at, nil
}

func (c *ours) Close() error {
	c.px.Close() // a cut candidate's connections close at once
	err := c.e.Close()
	c.pool.Close()
	return err
}

// Statements is what the candidate sent.
func (c *ours) Statements() int64 { return c.e.Stats().Statements }

// Advisory is the election on a session-level advisory lock: every
// candidate holds a connection of its own (the lock is the session's) and
// polls pg_try_advisory_lock every Poll; the leader pings its connection
// every TTL/3 to notice losing it. The server's idle_session_timeout of
// the TTL ends a silent leader's session, and with it the lock: without it
// a leader cut off by the network would hold the lock until TCP gives up
// (hours with the default keepalives).
type Advisory struct {
	Addr string
	DSN  DSN
	Poll time.Duration
}

func (a *Advisory) Name() string { return "pg_try_advisory_lock (naive)" }
func (a *Advisory) Close() error { return nil }

func (a *Advisory) NewCandidate(ctx context.Context, name, id string, ttl time.Duration) (peer.Candidate, error) {
	px, err := faultproxy.Start(a.Addr)
	if err != nil {
		return nil, err
	}
	cfg, err := pgx.ParseConfig(a.DSN(px.Addr))
	if err != nil {
		px.Close()
		return nil, err
	}
	cfg.RuntimeParams["idle_session_timeout"] = fmt.Sprint(ttl.Milliseconds())
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		px.Close()
		return nil, err
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	stop, cancel := context.WithCancel(context.Background())
	return &advisory{conn: conn, px: px, key: int64(h.Sum64()), poll: a.Poll, ttl: ttl, stop: stop, cancel: cancel}, nil
}

type advisory struct {
	conn *pgx.Conn
	px   *faultproxy.Proxy
	key  int64
	poll time.Duration
	ttl  time.Duration

	// Close cancels stop and waits for a Campaign in flight: the
	// connection is not safe for concurrent use.
	stop        context.Context
	cancel      context.CancelFunc
	campaigning sync.WaitGroup

	mu         sync.Mutex
	statements int64
	stopPing   chan struct{}
	pingDone   chan struct{}
}

func (c *advisory) Campaign(ctx context.Context) (int64, error) {
	c.campaigning.Add(1)
	defer c.campaigning.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-c.stop.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		var ok bool
		c.mu.Lock()
		c.statements++
		err := c.conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", c.key).Scan(&ok)
		c.mu.Unlock()
		at := mono.Now()
		if err != nil {
			return 0, err
		}
		if ok {
			c.stopPing, c.pingDone = make(chan struct{}), make(chan struct{})
			go c.ping(c.stopPing, c.pingDone)
			return at, nil
		}
		select {
		case <-time.After(c.poll):
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// ping keeps the leader's session from idling out and notices its loss.
func (c *advisory) ping(stop, done chan struct{}) {
	defer close(done)
	for {
		select {
		case <-stop:
			return
		case <-time.After(c.ttl / 3):
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.ttl/3)
		c.mu.Lock()
		c.statements++
		_, err := c.conn.Exec(ctx, "SELECT 1")
		c.mu.Unlock()
		cancel()
		if err != nil {
			return
		}
	}
}

func (c *advisory) Release(ctx context.Context) (int64, error) {
	at := mono.Now()
	if c.stopPing != nil {
		close(c.stopPing)
		<-c.pingDone
		c.stopPing = nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.statements++
	var ok bool
	err := c.conn.QueryRow(ctx, "SELECT pg_advisory_unlock($1)", c.key).Scan(&ok)
	if err == nil && !ok {
		err = errors.New("advisory: the lock was not held")
	}
	return at, err
}

func (c *advisory) Crash() (int64, error) {
	at := mono.Now()
	c.px.Cut()
	return at, nil
}

func (c *advisory) Close() error {
	c.cancel()
	c.px.Close()
	c.campaigning.Wait()
	if c.stopPing != nil {
		close(c.stopPing)
		<-c.pingDone
		c.stopPing = nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return c.conn.Close(ctx)
}

// Statements is what the candidate sent.
func (c *advisory) Statements() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.statements
}

// Statements is implemented by both elections' candidates.
type Statements interface{ Statements() int64 }

var (
	_ Statements = (*ours)(nil)
	_ Statements = (*advisory)(nil)
)
