// Package lograte keeps a repeated log line from flooding the log: at most
// one line per interval, with the count of those left out carried by the
// next one.
package lograte

import (
	"sync"
	"time"
)

// Limiter admits one line per interval. Its zero value admits the first
// line at once. Safe for concurrent use.
type Limiter struct {
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// Allow reports whether a line may be logged at now, no line having been
// admitted in the every before it; when it may, left is how many lines
// were refused since the last one admitted. A refused line is counted.
func (l *Limiter) Allow(now time.Time, every time.Duration) (left int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() && now.Sub(l.last) < every {
		l.suppressed++
		return 0, false
	}
	left = l.suppressed
	l.last, l.suppressed = now, 0
	return left, true
}
