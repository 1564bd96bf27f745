package electiontest

import (
	"context"
	"testing"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/internal/clock"
	"github.com/electkit/election/internal/rig/clocktest"
)

// ClockJumps are the wall-clock steps HoldsThroughClockJumps takes while a
// candidate leads, one after another.
var ClockJumps = []time.Duration{time.Hour, -3 * time.Hour, 24 * time.Hour, -24*time.Hour + 2*time.Hour}

// NewCandidate makes a candidate of the election under test with opts added
// (at least an ID, the TTL and an after-renewal hook).
type NewCandidate func(t *testing.T, opts ...election.Option) election.Elector

// HoldsThroughClockJumps checks a backend against steps of the machine's
// wall clock (NTP, an operator, a VM restored from a snapshot): with the
// clock the library's lease clock reads replaced by one whose wall time
// jumps by hours (ClockJumps) while its monotonic time runs on, a leader
// keeps its Term through its renewals, no other candidate is elected
// meanwhile, and a Resign still hands over (P3 under clock steps). It
// covers any backend whose Terms come from backend.NewTerm; a backend
// that reads the wall clock itself for a deadline fails it. Run it
// outside testing/synctest (a bubble's fake clock has no monotonic
// reading to keep), and not in parallel with other tests of the process:
// the replaced clock is process-wide. ttl is the candidates' TTL;
// patience bounds every wait.
func HoldsThroughClockJumps(t *testing.T, ttl, patience time.Duration, newCandidate NewCandidate) {
	t.Helper()
	j, err := clocktest.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(clock.Set(j.Now))
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(len(ClockJumps)+4)*patience)
	defer cancel()

	renewals := make(chan election.Renewal, 64)
	a := newCandidate(t, election.WithID("a"), election.WithTTL(ttl), election.WithAfterRenew(func(r election.Renewal) {
		select {
		case renewals <- r:
		default:
		}
	}))
	term, err := a.Campaign(ctx)
	if err != nil {
		t.Fatalf("a: Campaign: %v", err)
	}
	b := newCandidate(t, election.WithID("b"), election.WithTTL(ttl))
	type won struct {
		t   *election.Term
		err error
	}
	bWon := make(chan won, 1)
	go func() {
		t, err := b.Campaign(ctx)
		bWon <- won{t, err}
	}()

	for i, step := range ClockJumps {
		j.Jump(step)
		// Two successful renewals sent after the step: the Term's deadline
		// moved on from send times whose wall reading jumped.
		for ok := 0; ok < 2; {
			select {
			case r := <-renewals:
				if r.Err != nil {
					t.Fatalf("jump %d (%v, wall now %v off): renewal failed: %v", i, step, j.Offset(), r.Err)
				}
				if left := time.Until(r.Deadline); left > ttl {
					t.Fatalf("jump %d (%v): deadline %v ahead, more than the TTL %v", i, step, left, ttl)
				}
				ok++
			case <-term.Done():
				t.Fatalf("jump %d (%v, wall now %v off): the Term ended: %v", i, step, j.Offset(), term.Err())
			case w := <-bWon:
				t.Fatalf("jump %d (%v): b's Campaign returned while a leads: %v, %v", i, step, w.t, w.err)
			case <-time.After(patience):
				t.Fatalf("jump %d (%v): no renewal within %v", i, step, patience)
			}
		}
		if err := term.Err(); err != nil {
			t.Fatalf("jump %d (%v): Err = %v", i, step, err)
		}
	}

	if err := a.Resign(ctx); err != nil {
		t.Fatalf("a: Resign: %v", err)
	}
	select {
	case w := <-bWon:
		if w.err != nil {
			t.Fatalf("b: Campaign after a resigned: %v", w.err)
		}
		if w.t.Token() <= term.Token() {
			t.Fatalf("b's token %d not above a's %d", w.t.Token(), term.Token())
		}
	case <-time.After(patience):
		t.Fatalf("b did not lead within %v of a's Resign", patience)
	}
}
