package pgsuite_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/internal/rig/pgtest"
)

// The server restarts (fast: connections closed after a checkpoint;
// immediate: the processes quit, the next start recovers from the WAL)
// while a candidate leads and another waits: no two valid Terms, tokens
// still increase, and the election goes on with the same clients.
func TestServerRestart(t *testing.T) {
	for _, mode := range []string{"fast", "immediate"} {
		t.Run(mode, func(t *testing.T) {
			srv := pgtest.Start(t)
			name := newName(t)
			ts := &terms{t: t}
			a := candidate(t, srv, name, "", "", election.WithID("a"), election.WithTTL(3*time.Second))
			b := candidate(t, srv, name, "", "", election.WithID("b"), election.WithTTL(3*time.Second))
			ta := ts.lead(a)
			rb := ts.async(context.Background(), b)
			waitQueued(t, a.Elector, "b")
			if err := srv.Restart(mode); err != nil {
				t.Fatal(err)
			}
			// a's Term survives if a renewal reached the restarted server
			// before its deadline, else it lapses; b leads only after.
			ctx, cancel := context.WithTimeout(context.Background(), patience)
			defer cancel()
			_ = a.Resign(ctx)
			tb := await(t, rb, patience, "b after the restart")
			if tb.Token() <= ta.Token() {
				t.Errorf("token after the restart %d, not above %d", tb.Token(), ta.Token())
			}
			ra := ts.async(context.Background(), a)
			waitQueued(t, b.Elector, "a")
			if err := b.Resign(ctx); err != nil {
				t.Errorf("Resign after the restart: %v", err)
			}
			ta2 := await(t, ra, patience, "a campaigning again after the restart")
			if ta2.Token() <= tb.Token() {
				t.Errorf("token %d, not above %d", ta2.Token(), tb.Token())
			}
		})
	}
}

// pg_terminate_backend ends every connection of both candidates (the
// pools' and the listening ones): the leader's Term survives on a new
// connection, the listening connections come back, and a hand-over still
// wakes the waiter through its listener, not its timers.
func TestTerminateBackends(t *testing.T) {
	srv := pgtest.Start(t)
	name := newName(t)
	ts := &terms{t: t}
	renewed := make(chan election.Renewal, 100)
	a := candidate(t, srv, name, "", "application_name=cand_a", election.WithID("a"), election.WithTTL(3*time.Second),
		election.WithAfterRenew(func(r election.Renewal) {
			select {
			case renewed <- r:
			default:
			}
		}))
	// The waiter's TTL is long, so that its fallback poll (a third of it)
	// cannot come between the release and its notification: the test is
	// of what wakes it.
	b := candidate(t, srv, name, "", "application_name=cand_b", election.WithID("b"), election.WithTTL(30*time.Second))
	ta := ts.lead(a)
	rb := ts.async(context.Background(), b)
	waitQueued(t, a.Elector, "b")
	out := psql(t, srv, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name IN ('cand_a', 'cand_b')")
	killed := time.Now()
	t.Logf("terminated %s backends", out)
	// A renewal sent after the kill succeeds: the Term lives on.
	for ok := false; !ok; {
		select {
		case r := <-renewed:
			ok = r.Err == nil && r.Sent.After(killed)
		case <-ta.Done():
			t.Fatalf("the leader's Term ended: %v", ta.Err())
		case <-time.After(patience):
			t.Fatal("no successful renewal after the backends were terminated")
		}
	}
	if !pgtest.WaitFor(patience, func() bool { return b.Stats().ListenerDrops > 0 }) {
		t.Fatal("the waiter's listener never saw its connection drop")
	}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	// The waiter's listener must be back before a notification can reach it.
	if !pgtest.WaitFor(patience, func() bool {
		n, err := srv.PSQL("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'cand_b' AND query LIKE 'LISTEN%'")
		return err == nil && n != "0"
	}) {
		t.Fatal("the waiter's listener did not LISTEN again")
	}
	before := b.Stats()
	if err := a.Resign(ctx); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	resigned := time.Now()
	await(t, rb, patience, "b after a resigned")
	if d := time.Since(resigned); d > time.Second {
		t.Errorf("hand-over after the kill took %v", d)
	}
	// Woken by the listener, not by its timers: the release's
	// notification, or, when the read the listener's return woke it for
	// reached the server after the release, that wake (the LISTEN above
	// shows before the waiter has read the election again).
	if after := b.Stats(); after.Polled != before.Polled || after.Timed != before.Timed {
		t.Errorf("the waiter was woken by its timers, not by the listener, after its listener came back: %+v then %+v", before, after)
	}
}

// An operator's statements on the election's tables: the leader whose
// row they take away learns it from the trigger's notification, not from
// its next renewal (its TTL is long), the waiter leads, and tokens keep
// increasing.
func TestOperatorEdits(t *testing.T) {
	srv := pgtest.Start(t)
	long := 30 * time.Second // renewals and heartbeats every ~10 s: only notifications are fast
	for _, tc := range []struct {
		name, sql string
		ends      []error
		waiter    time.Duration // how soon the waiter leads
	}{
		{"DeleteRow", "DELETE FROM election.elections WHERE name = '%s'", []error{election.ErrSessionLost}, 5 * time.Second},
		{"Truncate", "TRUNCATE election.elections", []error{election.ErrSessionLost}, 5 * time.Second},
		// The leader's check and the waiter's claim race: the Term ends as
		// lapsed, or as lost if the claim came first.
		{"UpdateExpires", "UPDATE election.elections SET expires = now() - interval '1 second' WHERE name = '%s'", []error{election.ErrLeaseExpired, election.ErrSessionLost}, 5 * time.Second},
		// The row now names a leadership nobody holds: it lapses with its
		// lease (the leader's TTL is 3 s here).
		{"UpdateToken", "UPDATE election.elections SET token = token + 1000 WHERE name = '%s'", []error{election.ErrSessionLost}, 10 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := newName(t)
			ts := &terms{t: t}
			attl := long
			if tc.name == "UpdateToken" {
				attl = 3 * time.Second
			}
			a := candidate(t, srv, name, "", "", election.WithID("a"), election.WithTTL(attl))
			b := candidate(t, srv, name, "", "", election.WithID("b"), election.WithTTL(long))
			ta := ts.lead(a)
			// The old Term may be valid for a moment when the next is
			// handed out (one operator's statement, two readers): the
			// check is that it ends at once, and the fence.
			rb := make(chan result, 1)
			go func() {
				tb, err := b.Campaign(context.Background())
				rb <- result{tb, err}
			}()
			waitQueued(t, a.Elector, "b")
			psql(t, srv, "%s", strings.ReplaceAll(tc.sql, "%s", name))
			waitDone(t, ta, 5*time.Second, "the leader after "+tc.name)
			if !isAny(ta.Err(), tc.ends...) {
				t.Errorf("Term ended with %v, want one of %v", ta.Err(), tc.ends)
			}
			tb := await(t, rb, tc.waiter, "the waiter after "+tc.name)
			if tb.Token() <= ta.Token() {
				t.Errorf("token %d after %s, not above %d", tb.Token(), tc.name, ta.Token())
			}
		})
	}
	t.Run("DeleteWaiter", func(t *testing.T) {
		name := newName(t)
		ts := &terms{t: t}
		a := candidate(t, srv, name, "", "", election.WithID("a"), election.WithTTL(long))
		b := candidate(t, srv, name, "", "", election.WithID("b"), election.WithTTL(long))
		ta := ts.lead(a)
		rb := ts.async(context.Background(), b)
		waitQueued(t, a.Elector, "b")
		psql(t, srv, "DELETE FROM election.candidates WHERE name = '%s'", name)
		waitQueued(t, a.Elector, "b") // queued again at once, not at its heartbeat
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		if err := a.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		tb := await(t, rb, 2*time.Second, "the waiter whose row was deleted")
		if tb.Token() <= ta.Token() {
			t.Errorf("token %d, not above %d", tb.Token(), ta.Token())
		}
	})
}

// REVOKE of the electing role's rights: the leader's next renewal is
// refused and its Term ends at once with an error that says so; a
// candidate of that role cannot campaign, and says why; another role's
// candidate leads once the lease has lapsed.
func TestRevoke(t *testing.T) {
	srv := pgtest.Start(t)
	name := newName(t)
	ts := &terms{t: t}
	b := candidate(t, srv, name, "", "", election.WithID("b"))
	if _, err := b.Candidates(context.Background()); err != nil { // creates the schema
		t.Fatal(err)
	}
	psql(t, srv, `CREATE ROLE elector LOGIN; GRANT USAGE ON SCHEMA election TO elector;
		GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA election TO elector;
		GRANT USAGE ON ALL SEQUENCES IN SCHEMA election TO elector`)
	a := candidate(t, srv, name, "elector", "", election.WithID("a"))
	c := candidate(t, srv, name, "elector", "", election.WithID("c"))
	ta := ts.lead(a)
	rb := ts.async(context.Background(), b)
	waitQueued(t, a.Elector, "b")
	psql(t, srv, "REVOKE ALL ON ALL TABLES IN SCHEMA election FROM elector")
	waitDone(t, ta, ttl, "the leader whose rights were revoked")
	if err := ta.Err(); !errors.Is(err, election.ErrSessionLost) || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("Term ended with %v, want ErrSessionLost saying permission denied", err)
	}
	tb := await(t, rb, patience, "the other role's candidate")
	if tb.Token() <= ta.Token() {
		t.Errorf("token %d, not above %d", tb.Token(), ta.Token())
	}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	start := time.Now()
	if _, err := c.Campaign(ctx); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Errorf("Campaign of the revoked role = %v, want an error saying permission denied", err)
	} else if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Campaign of the revoked role took %v to fail", d)
	}
}

// statement_timeout and lock_timeout of the leader's connections while an
// operator's transaction holds the election's row: every renewal is
// canceled by the server, each cancellation reaches the after-renewal
// hook, the Term ends at its deadline (never later), and once the
// operator's transaction ends the waiter leads.
func TestStatementTimeouts(t *testing.T) {
	srv := pgtest.Start(t)
	admin := newPool(t, srv.DSN("", ""))
	for _, tc := range []struct{ name, setting, says string }{
		{"StatementTimeout", "statement_timeout=300", "statement timeout"},
		{"LockTimeout", "lock_timeout=300", "lock"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := newName(t)
			ts := &terms{t: t}
			var (
				mu   sync.Mutex
				errs []error
			)
			a := candidate(t, srv, name, "", "options='-c "+tc.setting+"'", election.WithID("a"),
				election.WithAfterRenew(func(r election.Renewal) {
					if r.Err != nil {
						mu.Lock()
						errs = append(errs, r.Err)
						mu.Unlock()
					}
				}))
			b := candidate(t, srv, name, "", "", election.WithID("b"))
			ta := ts.lead(a)
			rb := ts.async(context.Background(), b)
			waitQueued(t, a.Elector, "b")
			ctx := context.Background()
			tx, err := admin.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, "SELECT * FROM election.elections WHERE name = $1 FOR UPDATE", name); err != nil {
				t.Fatal(err)
			}
			waitDone(t, ta, ttl+time.Second, "the leader whose renewals are canceled")
			if late := time.Since(ta.Deadline()); late > 100*time.Millisecond {
				t.Errorf("Term seen Done %v after its deadline", late)
			}
			if !errors.Is(ta.Err(), election.ErrLeaseExpired) {
				t.Errorf("Term ended with %v, want ErrLeaseExpired", ta.Err())
			}
			mu.Lock()
			found := false
			for _, err := range errs {
				found = found || strings.Contains(err.Error(), tc.says)
			}
			if !found {
				t.Errorf("the after-renewal hook saw %v, none saying %q", errs, tc.says)
			}
			mu.Unlock()
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			tb := await(t, rb, patience, "the waiter once the operator's transaction ended")
			if tb.Token() <= ta.Token() {
				t.Errorf("token %d, not above %d", tb.Token(), ta.Token())
			}
		})
	}
}
