// Package clock is where the library reads the time for every deadline and
// term decision (Now, Until, Since: the lease clock, the backends' renewal
// and hold timers), and its one interruptible sleep. Readings come from
// time.Now, so they carry the monotonic clock, and the library only compares readings with each other (Before,
// Sub, Until): a step of the wall clock — NTP, an operator, a VM restored
// from a snapshot — moves no deadline. Tests replace Now with a clock whose
// wall time jumps while its monotonic time does not (package clocktest) to
// show it; the fault harness replaces it with one that runs fast or slow.
package clock

import (
	"context"
	"sync/atomic"
	"time"
)

var now atomic.Pointer[func() time.Time]

// Now is time.Now, or the clock a test set.
func Now() time.Time {
	if f := now.Load(); f != nil {
		return (*f)()
	}
	return time.Now()
}

// Set makes Now call f until the returned restore function is called: for
// tests, and for the fault harness's candidate processes, whose clock runs
// at a rate the harness sets. Never in a program of the library's users.
func Set(f func() time.Time) (restore func()) {
	old := now.Swap(&f)
	return func() { now.Store(old) }
}

// Until is t.Sub(Now()): the time.Until of the library's clock.
func Until(t time.Time) time.Duration { return t.Sub(Now()) }

// Since is Now().Sub(t): the time.Since of the library's clock.
func Since(t time.Time) time.Duration { return Now().Sub(t) }

// Sleep waits d, or until ctx ends; it reports whether d elapsed. A
// duration needs no reading of the clock: a timer runs on the monotonic
// clock.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
