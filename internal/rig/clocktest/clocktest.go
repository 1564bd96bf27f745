// Package clocktest provides a clock whose wall time jumps while its
// monotonic time runs on, as a machine's clock does when NTP or an operator
// steps it.
package clocktest

import (
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"
)

// Jumping reads time.Now and moves the wall part of each reading by the
// current offset, leaving its monotonic part alone. Comparisons of two of
// its readings (Before, Sub, Until) therefore ignore the jumps, exactly as
// they ignore a real step of the machine's clock; anything that looks at the
// wall part (Unix, Round(0), formatting, a reading without a monotonic part)
// sees them.
type Jumping struct {
	offset atomic.Int64
}

// New returns a Jumping clock with offset zero, after checking that this Go
// runtime lays out time.Time as the construction assumes.
func New() (*Jumping, error) {
	t := time.Now()
	j := withWall(t, time.Hour)
	if d := j.Sub(t); d != 0 {
		return nil, fmt.Errorf("clocktest: a wall jump moved the monotonic reading by %v", d)
	}
	if d := j.Round(0).Sub(t.Round(0)); d != time.Hour {
		return nil, fmt.Errorf("clocktest: a wall jump of 1h moved the wall reading by %v", d)
	}
	return &Jumping{}, nil
}

// Now is time.Now with its wall part moved by the offset.
func (j *Jumping) Now() time.Time { return withWall(time.Now(), time.Duration(j.offset.Load())) }

// Jump moves the wall clock by d (negative: backwards); the monotonic clock
// does not move.
func (j *Jumping) Jump(d time.Duration) { j.offset.Add(int64(d)) }

// Offset is the sum of the jumps so far.
func (j *Jumping) Offset() time.Duration { return time.Duration(j.offset.Load()) }

// withWall returns t with its wall reading moved by d and its monotonic
// reading unchanged. t.Add moves both; the monotonic reading (the second
// word of a time.Time that has one) is then put back.
func withWall(t time.Time, d time.Duration) time.Time {
	j := t.Add(d)
	type layout struct {
		wall uint64
		ext  int64
		loc  *time.Location
	}
	if unsafe.Sizeof(t) != unsafe.Sizeof(layout{}) {
		return j // caught by New's check
	}
	(*layout)(unsafe.Pointer(&j)).ext = (*layout)(unsafe.Pointer(&t)).ext
	return j
}
