package harness

import (
	"strings"
	"testing"
	"time"
)

// A reading of the skewed clock d ahead converts to the real instant
// d/rate ahead, in whichever segment it falls; instants before a rate
// change convert at the rate then.
func TestSkewClockMonoOf(t *testing.T) {
	c := newSkewClock()
	c.setRate(0.5)
	t0 := c.Now()
	if got, want := c.monoOf(t0.Add(time.Second))-c.monoOf(t0), int64(2*time.Second); got != want {
		t.Errorf("at rate 0.5, 1s of the clock is %v of real time; want %v", time.Duration(got), time.Duration(want))
	}
	c.setRate(2)
	t1 := c.Now()
	if !t1.After(t0) {
		t.Fatalf("the clock went back: %v then %v", t0, t1)
	}
	if got, want := c.monoOf(t1.Add(time.Second))-c.monoOf(t1), int64(time.Second/2); got != want {
		t.Errorf("at rate 2, 1s of the clock is %v of real time; want %v", time.Duration(got), time.Duration(want))
	}
	// t0 lies in the rate-0.5 segment: its conversion does not change
	// when the rate does.
	seg := c.segs[1]
	if got, want := c.monoOf(t0), seg.mono+int64(float64(t0.Sub(seg.at))/0.5); got != want {
		t.Errorf("monoOf(t0) = %d after the rate changed; want %d (its own segment's)", got, want)
	}
}

// The control stream sets rates and refuses what is not a rate in
// bounds, naming it.
func TestReadControl(t *testing.T) {
	c := newSkewClock()
	var log strings.Builder
	changes := 0
	readControl(strings.NewReader("rate 0.9\nspeed 2\nrate 0\nrate x\n\nrate 1.1\n"), c, &log, func() { changes++ })
	if changes != 2 || len(c.segs) != 3 {
		t.Fatalf("%d changes, %d segments; want 2 and 3:\n%s", changes, len(c.segs), log.String())
	}
	if c.segs[1].rate != 0.9 || c.segs[2].rate != 1.1 {
		t.Errorf("rates %v, %v; want 0.9, 1.1", c.segs[1].rate, c.segs[2].rate)
	}
	for _, bad := range []string{`"speed 2"`, `rate "0"`, `rate "x"`} {
		if !strings.Contains(log.String(), bad) {
			t.Errorf("the log does not name %s:\n%s", bad, log.String())
		}
	}
}
