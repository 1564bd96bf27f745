package pgsuite_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/postgres"
	"github.com/electkit/election/internal/rig/faultproxy"
	"github.com/electkit/election/internal/rig/pgtest"
)

// cand is a candidate of the backend's own tests: an Elector on a pool of
// its own, through a proxy, closed in t's Cleanup.
type cand struct {
	*postgres.Elector
	px   *faultproxy.Proxy
	pool *pgxpool.Pool
}

// candidate makes a candidate of election name connecting as user ("" is
// the superuser), with extra key=value connection settings.
func candidate(t *testing.T, srv *pgtest.Server, name, user, extra string, opts ...election.Option) *cand {
	t.Helper()
	px := faultproxy.New(t, srv.Addr)
	pool := newPool(t, srv.DSN(user, px.Addr)+" "+extra)
	t.Cleanup(px.Close)
	e, err := postgres.New(pool, name, append([]election.Option{election.WithTTL(ttl)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return &cand{e, px, pool}
}

type result struct {
	term *election.Term
	err  error
}

// terms checks, at each Term handed out, that every earlier Term of the
// election has ended (P1, P3) and that tokens increase (P2).
type terms struct {
	t  *testing.T
	mu sync.Mutex
	ts []*election.Term
}

func (ts *terms) campaign(ctx context.Context, e election.Elector) (*election.Term, error) {
	t, err := e.Campaign(ctx)
	if err != nil {
		return nil, err
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for _, o := range ts.ts {
		if o == t {
			return t, nil
		}
		if o.Err() == nil {
			ts.t.Errorf("two valid Terms: %v handed out while %v is valid", t, o)
		}
		if o.Token() >= t.Token() {
			ts.t.Errorf("token did not increase: %v after %v", t, o)
		}
	}
	ts.ts = append(ts.ts, t)
	return t, nil
}

func (ts *terms) async(ctx context.Context, e election.Elector) <-chan result {
	ch := make(chan result, 1)
	go func() {
		t, err := ts.campaign(ctx, e)
		ch <- result{t, err}
	}()
	return ch
}

func (ts *terms) lead(e election.Elector) *election.Term {
	ts.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	t, err := ts.campaign(ctx, e)
	if err != nil {
		ts.t.Fatalf("Campaign: %v", err)
	}
	return t
}

func await(t *testing.T, ch <-chan result, d time.Duration, what string) *election.Term {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("%s: %v", what, r.err)
		}
		return r.term
	case <-time.After(d):
		t.Fatalf("%s: no result within %v", what, d)
		return nil
	}
}

func waitDone(t *testing.T, term *election.Term, d time.Duration, what string) {
	t.Helper()
	select {
	case <-term.Done():
	case <-time.After(d):
		t.Fatalf("%s: Term %v not Done within %v", what, term, d)
	}
}

// waitQueued waits until the election's waiting candidates are ids, in
// that order (a read every 10 ms: the queue sends no event).
func waitQueued(t *testing.T, e *postgres.Elector, ids ...string) {
	t.Helper()
	ok := pgtest.WaitFor(patience, func() bool {
		cs, err := e.Candidates(context.Background())
		if err != nil || len(cs) != len(ids) {
			return false
		}
		for i := range cs {
			if cs[i].ID != ids[i] {
				return false
			}
		}
		return true
	})
	if !ok {
		cs, err := e.Candidates(context.Background())
		t.Fatalf("waiting candidates %v (%v), want %v", cs, err, ids)
	}
}

func psql(t *testing.T, srv *pgtest.Server, format string, args ...any) string {
	t.Helper()
	out, err := srv.PSQL(fmt.Sprintf(format, args...))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func isAny(err error, targets ...error) bool {
	for _, target := range targets {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
