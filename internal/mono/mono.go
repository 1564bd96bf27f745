// Package mono reads CLOCK_MONOTONIC, the clock Go's monotonic readings
// come from, as nanoseconds: one clock for every process on the machine
// (Java's System.nanoTime reads it too on Linux), so instants taken in
// different processes can be subtracted. The fault harness's histories,
// elect's command guard and the benchmark peers use it; the library does
// not (it compares time.Time readings; see internal/clock).
package mono

import (
	"time"

	"golang.org/x/sys/unix"
)

// Now reads CLOCK_MONOTONIC in nanoseconds.
func Now() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return time.Now().UnixNano() // not reached on Linux
	}
	return ts.Nano()
}

// Of converts a time.Time on this process's clock (a Term's Deadline, say)
// to a Now instant, never early: it reads Now, then time.Until(t), then
// Now again, and counts from the second reading. A process preempted
// between the readings would shift the instant late by the gap, so the
// conversion is retried (up to 10 times, keeping the tightest) until the
// readings lie within OfError.
func Of(t time.Time) int64 {
	var best, bestGap int64 = 0, -1
	for range 10 {
		m0 := Now()
		d := time.Until(t)
		m1 := Now()
		if gap := m1 - m0; bestGap < 0 || gap < bestGap {
			best, bestGap = m1+int64(d), gap
		}
		if bestGap <= int64(OfError) {
			break
		}
	}
	return best
}

// OfError is the error Of aims for: its result is at most this much later
// than the instant t, never earlier.
const OfError = time.Millisecond

// OfEarly converts t to a Now instant, never late: Now is read before
// time.Until(t), so the result is early by the time between the readings.
// For a deadline that must not be overrun (a command killed before its
// leadership ends).
func OfEarly(t time.Time) int64 { return Now() + int64(time.Until(t)) }

// Time converts a Now instant to a time.Time on this process's clock,
// never late.
func Time(ns int64) time.Time {
	now := time.Now()
	return now.Add(time.Duration(ns - Now()))
}
