// Package clock is where the library reads the time for every deadline and
// term decision. Readings come from time.Now, so they carry the monotonic
// clock, and the library only compares readings with each other (Before,
// Sub, Until): a step of the wall clock — NTP, an operator, a VM restored
// from a snapshot — moves no deadline. Tests replace Now with a clock whose
// wall time jumps while its monotonic time does not (package clocktest) to
// show it.
package clock

import (
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

// Set makes Now call f until the returned restore function is called. Tests
// only.
func Set(f func() time.Time) (restore func()) {
	old := now.Swap(&f)
	return func() { now.Store(old) }
}
