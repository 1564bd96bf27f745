package election

import (
	"errors"
	"testing"
	"time"

	"github.com/electkit/election/internal/clock"
	"github.com/electkit/election/internal/rig/clocktest"
)

// jumpingClock installs a clock whose wall time jumps while its monotonic
// time does not, for the rest of the test.
func jumpingClock(t *testing.T) *clocktest.Jumping {
	t.Helper()
	j, err := clocktest.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(clock.Set(j.Now))
	return j
}

// The fixture itself: a jump is visible to anything that reads the wall
// clock and invisible to comparisons of readings. If it were not, the tests
// below would prove nothing.
func TestJumpingClockMovesOnlyTheWall(t *testing.T) {
	j := jumpingClock(t)
	before := clock.Now()
	j.Jump(time.Hour)
	after := clock.Now()
	if d := after.Sub(before); d < 0 || d > time.Minute {
		t.Fatalf("a wall jump of 1h changed the monotonic difference: %v", d)
	}
	if d := after.Round(0).Sub(before.Round(0)); d < time.Hour {
		t.Fatalf("a wall jump of 1h is not in the wall readings: %v", d)
	}
}

// The wall clock steps back by an hour right after the lease was confirmed.
// A deadline kept in wall time would leave the Term valid for an hour more
// (while the store expires the lease after its TTL): the Term must end at
// its deadline on the monotonic clock.
func TestWallClockStepBackDoesNotExtendTerm(t *testing.T) {
	j := jumpingClock(t)
	o := mustOptions(t, WithTTL(time.Second))
	j.Jump(time.Hour)
	sent := clock.Now()
	term, c := newTerm(o, testLeader, sent)
	defer c.End(ErrClosed)
	if err := term.Err(); err != nil {
		t.Fatalf("Term ended at once: %v", err)
	}
	j.Jump(-2 * time.Hour)
	if got := term.Deadline().Sub(sent); got != o.Window() {
		t.Fatalf("deadline %v after the send time on the monotonic clock, want the window %v", got, o.Window())
	}
	select {
	case <-term.Done():
	case <-time.After(30 * time.Second):
		t.Fatalf("the Term outlived its %v window by 30s after the wall clock stepped back an hour", o.Window())
	}
	if err := term.Err(); !errors.Is(err, ErrLeaseExpired) {
		t.Fatalf("Err = %v, want ErrLeaseExpired", err)
	}
	// A renewal sent after the step (its wall time an hour before the
	// first send) cannot revive the Term.
	c.Renewed(clock.Now(), nil)
	if err := term.Err(); !errors.Is(err, ErrLeaseExpired) {
		t.Fatalf("after a late renewal Err = %v, want ErrLeaseExpired", err)
	}
}

// The wall clock steps forward by an hour while leading. A deadline kept in
// wall time would end the Term at once, and a renewal whose send time reads
// an hour later would be taken as late: the Term must stay valid and
// renewals must go on moving its deadline by exactly one window from their
// send time.
func TestWallClockStepForwardDoesNotEndTerm(t *testing.T) {
	j := jumpingClock(t)
	o := mustOptions(t, WithTTL(time.Minute))
	term, c := newTerm(o, testLeader, clock.Now())
	defer c.End(ErrClosed)
	for i, step := range []time.Duration{time.Hour, 24 * time.Hour, -30 * time.Hour, 10 * time.Minute} {
		j.Jump(step)
		if err := term.Err(); err != nil {
			t.Fatalf("jump %d (%v): Term ended: %v", i, step, err)
		}
		sent := clock.Now()
		d := c.Renewed(sent, nil)
		if got := d.Sub(sent); got != o.Window() {
			t.Fatalf("jump %d (%v): renewal moved the deadline to %v after its send time, want %v", i, step, got, o.Window())
		}
		if left := time.Until(term.Deadline()); left <= 0 || left > o.Window() {
			t.Fatalf("jump %d (%v): %v left until the deadline, want within (0, %v]", i, step, left, o.Window())
		}
		if err := term.Err(); err != nil {
			t.Fatalf("jump %d (%v): Term ended after a renewal: %v", i, step, err)
		}
	}
	if isDone(term.Done()) {
		t.Fatal("Term done after wall-clock steps alone")
	}
}
