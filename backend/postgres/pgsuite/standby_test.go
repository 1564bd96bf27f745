package pgsuite_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/postgres"
	"github.com/electkit/election/internal/rig/pgtest"
)

// Failover to a promoted standby: a primary and a hot standby on
// synchronous streaming replication; the candidates' connection strings
// name both with target_session_attrs=read-write. The primary dies
// (immediate shutdown) while a candidate leads and another waits; the
// standby is promoted. No two valid Terms, tokens still rise, the new
// leader's fenced write goes through on the new primary and the old
// leader's is refused.
func TestPromotedStandby(t *testing.T) {
	primary := pgtest.Start(t)
	psql(t, primary, "CREATE TABLE jobs (id int PRIMARY KEY, owner text NOT NULL, token bigint NOT NULL)")
	standby, err := pgtest.NewStandby(primary)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(standby.Remove)
	if err := standby.Start(); err != nil {
		t.Fatal(err)
	}
	if !pgtest.WaitFor(patience, func() bool {
		n, err := primary.PSQL("SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'")
		return err == nil && n == "1"
	}) {
		t.Fatal("the standby does not stream")
	}
	psql(t, primary, "ALTER SYSTEM SET synchronous_standby_names = '*'")
	psql(t, primary, "SELECT pg_reload_conf()")
	if !pgtest.WaitFor(patience, func() bool {
		n, err := primary.PSQL("SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'")
		return err == nil && n == "1"
	}) {
		t.Fatal("the standby is not synchronous")
	}
	dsn := fmt.Sprintf("host=127.0.0.1,127.0.0.1 port=%d,%d user=postgres dbname=postgres sslmode=disable connect_timeout=2 target_session_attrs=read-write",
		primary.Port, standby.Port)
	name := newName(t)
	ts := &terms{t: t}
	newCand := func(id string) (*postgres.Elector, *cand) {
		pool := newPool(t, dsn)
		e, err := postgres.New(pool, name, election.WithID(id), election.WithTTL(3*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e, &cand{Elector: e, pool: pool}
	}
	a, ac := newCand("a")
	b, bc := newCand("b")
	ta := ts.lead(a)
	ctx := context.Background()
	write := func(c *cand, term *election.Term) error {
		cond, args := c.Fence(term, 3)
		_, err := c.pool.Exec(ctx, "INSERT INTO jobs VALUES (1, $1, $2) ON CONFLICT (id) DO UPDATE SET owner = $1, token = $2 WHERE "+cond,
			append([]any{term.Leader().ID, int64(term.Token())}, args...)...)
		return err
	}
	if err := write(ac, ta); err != nil {
		t.Fatalf("the leader's fenced write on the primary: %v", err)
	}
	rb := ts.async(ctx, b)
	waitQueued(t, a, "b")
	if err := primary.Stop("immediate"); err != nil {
		t.Fatal(err)
	}
	if err := standby.Promote(); err != nil {
		t.Fatal(err)
	}
	// a's Term lives on if a renewal reaches the new primary before its
	// deadline, else it lapses; either way a resigns and b leads.
	rctx, cancel := context.WithTimeout(ctx, patience)
	defer cancel()
	_ = a.Resign(rctx)
	tb := await(t, rb, patience, "b on the promoted standby")
	if tb.Token() <= ta.Token() {
		t.Errorf("token on the promoted standby %d, not above %d", tb.Token(), ta.Token())
	}
	if err := write(bc, tb); err != nil {
		t.Fatalf("the new leader's fenced write on the new primary: %v", err)
	}
	if err := write(ac, ta); !postgres.IsFenced(err) {
		t.Errorf("the old leader's write on the new primary = %v, want the fence's error", err)
	}
	if got := psql(t, standby, "SELECT owner FROM jobs WHERE id = 1"); got != "b" {
		t.Errorf("jobs row owner %q, want b", got)
	}
}
