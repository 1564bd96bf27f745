package harness

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/electkit/election/internal/clock"
	"github.com/electkit/election/internal/mono"
)

// skewClock is the clock a candidate process gives the library (through
// internal/clock, the one clock the library reads for every deadline):
// real time at a rate the harness sets while the process runs, for the
// clock-fast and clock-slow faults. At rate 1 it is the real clock. Its
// readings are time.Now readings moved by Add, so they carry the monotonic
// clock as the library requires.
type skewClock struct {
	mu   sync.Mutex
	segs []skewSeg // one per rate set, oldest first; the last one runs now
}

// skewSeg is the clock from one rate change on.
type skewSeg struct {
	real time.Time // time.Now when the rate was set
	mono int64     // mono.Now at the same instant
	at   time.Time // the clock's reading then
	rate float64
}

func newSkewClock() *skewClock {
	now := time.Now()
	return &skewClock{segs: []skewSeg{{real: now, mono: mono.Now(), at: now, rate: 1}}}
}

// Now reads the clock.
func (c *skewClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.segs[len(c.segs)-1]
	return s.at.Add(time.Duration(float64(time.Since(s.real)) * s.rate))
}

// setRate makes the clock run at rate × real time from now on.
func (c *skewClock) setRate(rate float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now, m := time.Now(), mono.Now()
	last := c.segs[len(c.segs)-1]
	at := last.at.Add(time.Duration(float64(now.Sub(last.real)) * last.rate))
	c.segs = append(c.segs, skewSeg{real: now, mono: m, at: at, rate: rate})
}

// monoOf converts a reading of this clock (a Term's deadline, a renewal's
// instant) to the mono.Now instant at which the clock reads t: through the
// rates set so far, and the current one for an instant still to come. The
// register's checkers judge real instants, so every instant a candidate
// reports goes through here: mono.Of would take a deadline counted on a
// slow clock for an earlier real instant than the one the library acts on.
func (c *skewClock) monoOf(t time.Time) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := len(c.segs) - 1
	for i > 0 && t.Before(c.segs[i].at) {
		i--
	}
	s := c.segs[i]
	return s.mono + int64(float64(t.Sub(s.at))/s.rate)
}

// install makes c the library's clock in this process; the returned
// function restores the real one.
func (c *skewClock) install() (restore func()) { return clock.Set(c.Now) }

// controlRate is the command a candidate process reads on its control
// stream (its stdin): "rate R" runs its clock at R × real time.
const controlRate = "rate"

// readControl applies each command read from r until it ends; changed is
// called after each rate change.
func readControl(r io.Reader, c *skewClock, log io.Writer, changed func()) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if f[0] != controlRate || len(f) != 2 {
			fmt.Fprintf(log, "control: %q is not a command (want %s R)\n", sc.Text(), controlRate)
			continue
		}
		rate, err := strconv.ParseFloat(f[1], 64)
		if err != nil || !(rate >= minRate && rate <= maxRate) {
			fmt.Fprintf(log, "control: rate %q is not a number in [%g, %g]\n", f[1], minRate, maxRate)
			continue
		}
		c.setRate(rate)
		fmt.Fprintf(log, "control: clock at %g × real time\n", rate)
		changed()
	}
}

// The rates a clock fault may set: a clock that stops or runs backwards is
// not a rate fault.
const (
	minRate = 0.1
	maxRate = 10.0
)
