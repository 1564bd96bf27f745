package pgsuite_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/postgres"
	"github.com/electkit/election/internal/rig/pgtest"
)

// A leader is cut off from the server (a pause, a partition) while its
// lease lapses and another candidate takes over; when it comes back and
// writes with its old Term, the database refuses: both in the fence's
// condition form and in a transaction fenced by FenceTx. The new leader's
// fenced writes go through.
func TestFenceRefusesStaleLeader(t *testing.T) {
	srv := pgtest.Start(t)
	name := newName(t)
	ts := &terms{t: t}
	psql(t, srv, "CREATE TABLE jobs (id int PRIMARY KEY, owner text NOT NULL, token bigint NOT NULL)")
	a := candidate(t, srv, name, "", "", election.WithID("a"))
	b := candidate(t, srv, name, "", "", election.WithID("b"))
	ctx := context.Background()
	ta := ts.lead(a)
	write := func(c *cand, term *election.Term) error {
		cond, args := c.Fence(term, 3)
		_, err := c.pool.Exec(ctx, "INSERT INTO jobs VALUES (1, $1, $2) ON CONFLICT (id) DO UPDATE SET owner = $1, token = $2 WHERE "+cond,
			append([]any{term.Leader().ID, int64(term.Token())}, args...)...)
		return err
	}
	if err := write(a, ta); err != nil {
		t.Fatalf("the leader's fenced write: %v", err)
	}
	if err := write(a, ta); err != nil { // the condition is evaluated on the conflicting row
		t.Fatalf("the leader's second fenced write: %v", err)
	}
	rb := ts.async(ctx, b)
	waitQueued(t, a.Elector, "b")
	a.px.Cut()
	tb := await(t, rb, patience, "b after a was cut off")
	waitDone(t, ta, patience, "the cut-off leader")
	a.px.Heal()
	a.px.Reset()

	err := write(a, ta)
	if !postgres.IsFenced(err) {
		t.Errorf("the stale leader's write (condition) = %v, want the fence's error", err)
	}
	err = pgx.BeginFunc(ctx, a.pool, func(tx pgx.Tx) error {
		if err := a.FenceTx(ctx, tx, ta); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "UPDATE jobs SET owner = 'a'")
		return err
	})
	if !errors.Is(err, election.ErrNotLeader) || !postgres.IsFenced(err) {
		t.Errorf("the stale leader's fenced transaction = %v, want ErrNotLeader from the fence", err)
	}
	if err := write(b, tb); err != nil {
		t.Fatalf("the new leader's fenced write: %v", err)
	}
	if got := psql(t, srv, "SELECT owner || ' ' || token FROM jobs WHERE id = 1"); got != "b "+itoa(tb.Token()) {
		t.Errorf("jobs row = %q, want the new leader's", got)
	}
	// A nil Term never passes.
	if err := b.FenceTx(ctx, mustBegin(t, b), nil); !errors.Is(err, election.ErrNotLeader) {
		t.Errorf("FenceTx(nil Term) = %v, want ErrNotLeader", err)
	}
}

func mustBegin(t *testing.T, c *cand) pgx.Tx {
	t.Helper()
	tx, err := c.pool.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(context.Background()) })
	return tx
}

func itoa(u uint64) string {
	b := []byte{}
	for {
		b = append([]byte{byte('0' + u%10)}, b...)
		u /= 10
		if u == 0 {
			return string(b)
		}
	}
}

// A hand-over wakes one waiting candidate, not all of them (P9): twenty
// candidates of one process wait on one listening connection; each of
// five resignations wakes about one, and none polls.
func TestNoHerd(t *testing.T) {
	srv := pgtest.Start(t)
	name := newName(t)
	ts := &terms{t: t}
	pool := newPool(t, srv.DSN("", ""))
	const n = 20
	var es []*postgres.Elector
	for i := range n {
		e, err := postgres.New(pool, name, election.WithID("c"+itoa(uint64(i))), election.WithTTL(30*ttl))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		es = append(es, e)
	}
	ts.lead(es[0])
	chs := map[*postgres.Elector]<-chan result{}
	var ids []string
	for _, e := range es[1:] {
		chs[e] = ts.async(context.Background(), e)
		ids = append(ids, e.ID())
		waitQueued(t, es[0], ids...)
	}
	woken := func() (s int64) {
		for _, e := range es {
			s += e.Stats().Notified + e.Stats().Polled
		}
		return s
	}
	before := woken()
	leader := es[0]
	const handovers = 5
	for i := range handovers {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		if err := leader.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		next := es[i+1]
		lt := await(t, chs[next], 2*patience, "the next in line")
		if lt.Leader().ID != next.ID() {
			t.Fatalf("%s leads, want %s", lt.Leader().ID, next.ID())
		}
		leader = next
	}
	if got := woken() - before; got > 2*handovers {
		t.Errorf("%d hand-overs woke waiting candidates %d times, want about one each", handovers, got)
	}
	var polled int64
	for _, e := range es {
		polled += e.Stats().Polled
	}
	if polled != 0 {
		t.Errorf("candidates polled %d times", polled)
	}
}

// A row an operator wrote by hand that names no valid leader is no
// leader (P8): Leader reports none, and no candidate takes it for one.
func TestGarbageLeaderRow(t *testing.T) {
	srv := pgtest.Start(t)
	name := newName(t)
	a := candidate(t, srv, name, "", "", election.WithID("a"))
	if _, err := a.Candidates(context.Background()); err != nil { // creates the schema
		t.Fatal(err)
	}
	psql(t, srv, "INSERT INTO election.elections (name, token, leader, expires) VALUES ('%s', 7, 'bad id!', now() + interval '1 hour')", name)
	if l, err := a.Leader(context.Background()); !errors.Is(err, election.ErrNoLeader) {
		t.Errorf("Leader with a garbage row = %v, %v; want ErrNoLeader", l, err)
	}
	psql(t, srv, "UPDATE election.elections SET expires = now() - interval '1 second' WHERE name = '%s'", name)
	ta := (&terms{t: t}).lead(a)
	if ta.Token() <= 7 {
		t.Errorf("token %d after the garbage row's 7", ta.Token())
	}
}
