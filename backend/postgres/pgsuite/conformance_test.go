package pgsuite_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/postgres"
	"github.com/electkit/election/electiontest"
	"github.com/electkit/election/internal/rig/faultproxy"
	"github.com/electkit/election/internal/rig/pgtest"
)

// ttl is the lease of the tests.
const ttl = 2 * time.Second

const patience = 15 * time.Second

// TestMain fails the binary if a goroutine outlives the tests.
func TestMain(m *testing.M) { electiontest.Main(m) }

// newName returns an election name of its own for t.
func newName(t *testing.T) string { return "/elections/" + sanitize(t.Name()) }

func sanitize(s string) string {
	b := []byte(s)
	if len(b) > 160 {
		b = append([]byte("t"), b[len(b)-159:]...)
	}
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			b[i] = '_'
		}
	}
	return string(b)
}

// newPool connects a pool to dsn, closed in t's Cleanup.
func newPool(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 4
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// pgElection is one election of the conformance suite: each candidate has
// its own pool through its own proxy, so that Crash can cut it off
// silently and let its lease lapse, as a dead process's would.
type pgElection struct {
	srv   *pgtest.Server
	name  string
	admin *pgxpool.Pool // another client of the server, for Evict
	mu    sync.Mutex
	px    map[election.Elector]*faultproxy.Proxy
}

func (p *pgElection) Candidate(t *testing.T, opts ...election.Option) election.Elector {
	t.Helper()
	px := faultproxy.New(t, p.srv.Addr)
	pool := newPool(t, p.srv.DSN("", px.Addr))
	t.Cleanup(px.Close) // before the pool's Close (cleanups run last first): a cut connection closes at once
	e, err := postgres.New(pool, p.name, append([]election.Option{election.WithTTL(ttl)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.px[e] = px
	p.mu.Unlock()
	return e
}

func (p *pgElection) Crash(t *testing.T, e election.Elector) {
	p.mu.Lock()
	px := p.px[e]
	p.mu.Unlock()
	px.Cut()
}

// Silence drops the server's replies to e.
func (p *pgElection) Silence(t *testing.T, e election.Elector) func() {
	p.mu.Lock()
	px := p.px[e]
	p.mu.Unlock()
	px.CutReplies()
	return func() {
		px.Heal()
		px.Reset()
	}
}

// Evict deletes the election's row with another connection, as an
// operator's psql does.
func (p *pgElection) Evict(t *testing.T, e election.Elector, term *election.Term) {
	tag, err := p.admin.Exec(context.Background(), "DELETE FROM election.elections WHERE name = $1 AND token = $2", p.name, int64(term.Token()))
	if err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("Evict: DELETE: %v, %v", tag, err)
	}
}

func TestConformance(t *testing.T) {
	srv := pgtest.Start(t)
	admin := newPool(t, srv.DSN("", ""))
	electiontest.Run(t, electiontest.Harness{
		NewElection: func(t *testing.T) electiontest.Election {
			return &pgElection{srv: srv, name: newName(t), admin: admin, px: map[election.Elector]*faultproxy.Proxy{}}
		},
		// The TTL, plus a renewal interval and the claim.
		Failover:  ttl + time.Second,
		Patience:  patience,
		Handover:  time.Second,
		Handovers: 30,
		Named: func(t *testing.T, name string, opts ...election.Option) (election.Elector, error) {
			e, err := postgres.New(newPool(t, srv.DSN("", "")), name, append([]election.Option{election.WithTTL(ttl)}, opts...)...)
			if err != nil {
				return nil, err
			}
			return e, nil
		},
	})
}

// The machine's wall clock steps by hours while a candidate leads: its
// renewals go on, its Term stays valid, nobody else is elected.
func TestWallClockJumps(t *testing.T) {
	srv := pgtest.Start(t)
	name := newName(t)
	electiontest.HoldsThroughClockJumps(t, ttl, patience, func(t *testing.T, opts ...election.Option) election.Elector {
		e, err := postgres.New(newPool(t, srv.DSN("", "")), name, append([]election.Option{election.WithTTL(ttl)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	})
}
