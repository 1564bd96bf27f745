// Package skeleton holds the pieces every Elector of this module is built
// from, so that each exists once: the Campaign gate (one Campaign at a
// time, and Close's signal) and the set of Terms whose hooks may still run.
// Backends of this module import it (backend/etcd, backend/zk,
// backend/inmem, internal/rig/refbackend); it is shipped code, not a test rig.
package skeleton

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
)

// Gate lets one Campaign run at a time, first come first served, and
// carries Close's signal. The zero Gate is open and ready; NewGate makes
// one. A Gate must not be copied once used.
//
// A Gate is four words until something waits on it: a waiting Enter
// makes its own turn, and Closing makes Close's channel. A process may
// hold thousands of Electors, each with its Gate (backend/etcd's hold it
// by value), and most never see two Campaign calls at once.
type Gate struct {
	mu      sync.Mutex
	busy    bool          // a Campaign is in (or Drain shut it)
	closed  bool          // Close has begun
	waiters *gateTurn     // the first of the waiting Enters, in arrival order; Leave hands the gate to it by closing its channel
	closing chan struct{} // made by Closing or Close; closed by Close
}

// A gateTurn is a waiting Enter (or Drain) in a Gate's queue.
type gateTurn struct {
	ch   chan struct{}
	next *gateTurn
}

// NewGate returns an open Gate.
func NewGate() *Gate { return &Gate{} }

// Enter waits for the Campaign before this one to leave. It returns
// ctx.Err() if ctx ends first (or has ended), election.ErrClosed once
// Close has begun, and CheckContext's error for a nil ctx. On nil, the
// caller must Leave.
func (g *Gate) Enter(ctx context.Context) error {
	if err := CheckContext(ctx); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return election.ErrClosed
	}
	if !g.busy {
		g.busy = true
		g.mu.Unlock()
		return nil
	}
	turn := g.queueLocked()
	closing := g.closingLocked()
	g.mu.Unlock()
	var err error
	select {
	case <-turn.ch:
		return nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-closing:
		err = election.ErrClosed
	}
	g.mu.Lock()
	if g.dropLocked(turn) {
		g.mu.Unlock()
		return err
	}
	g.mu.Unlock()
	g.Leave() // handed the gate as it gave up: it goes on to the next
	return err
}

// queueLocked queues a new turn at the end; g.mu is held.
func (g *Gate) queueLocked() *gateTurn {
	turn := &gateTurn{ch: make(chan struct{})}
	p := &g.waiters
	for *p != nil {
		p = &(*p).next
	}
	*p = turn
	return turn
}

// dropLocked removes turn from the queue and reports whether it was
// there (not handed the gate yet); g.mu is held.
func (g *Gate) dropLocked(turn *gateTurn) bool {
	for p := &g.waiters; *p != nil; p = &(*p).next {
		if *p == turn {
			*p = turn.next
			return true
		}
	}
	return false
}

// closingLocked returns the channel Close closes; g.mu is held.
func (g *Gate) closingLocked() chan struct{} {
	if g.closing == nil {
		g.closing = make(chan struct{})
		if g.closed {
			close(g.closing)
		}
	}
	return g.closing
}

// CheckContext refuses a nil ctx: every method that takes one returns this
// error (it wraps election.ErrInvalidOption) instead of panicking later,
// and does nothing else.
func CheckContext(ctx context.Context) error {
	if ctx == nil {
		return &election.OptionError{Field: "ctx", Value: "nil", Reason: "must not be nil; pass context.Background() if there is none"}
	}
	return nil
}

// Leave lets the next Campaign in: the one that has waited longest, if
// any.
func (g *Gate) Leave() {
	g.mu.Lock()
	if turn := g.waiters; turn != nil {
		g.waiters = turn.next
		close(turn.ch) // the gate stays busy: it is the waiter's now
	} else {
		g.busy = false
	}
	g.mu.Unlock()
}

// Close signals Close: Closing is closed and Enter refuses from now on.
// Calling it again does nothing.
func (g *Gate) Close() {
	g.mu.Lock()
	if !g.closed {
		g.closed = true
		if g.closing != nil {
			close(g.closing)
		}
	}
	g.mu.Unlock()
}

// Closing is closed once Close has begun.
func (g *Gate) Closing() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closingLocked()
}

// Drain waits for the Campaign running when Close began, if any, to leave,
// and keeps the gate shut for good. Call it after Close, once.
func (g *Gate) Drain() {
	g.mu.Lock()
	if !g.busy {
		g.busy = true
		g.mu.Unlock()
		return
	}
	turn := g.queueLocked()
	g.mu.Unlock()
	<-turn.ch
}

// Terms is the set of an Elector's Terms whose hooks may still run (their
// lease clocks). A Term is added when it begins and forgotten once it has
// ended and its hooks are done, so an Elector that leads many times does
// not keep every Term it ever had; Close ends the rest and waits for their
// hooks. The zero Terms is empty and ready.
type Terms struct {
	mu  sync.Mutex
	lcs []*backend.LeaseClock
}

// Add adds lc.
func (ts *Terms) Add(lc *backend.LeaseClock) {
	ts.mu.Lock()
	ts.lcs = append(ts.lcs, lc)
	ts.mu.Unlock()
}

// Forget waits for the hooks of lc's Term and drops lc. A nil lc, or one
// whose Term is still valid (left so by a bug), is left alone: Close ends
// it.
func (ts *Terms) Forget(lc *backend.LeaseClock) {
	if lc == nil || lc.Term().Err() == nil {
		return
	}
	lc.Wait()
	ts.mu.Lock()
	if i := slices.Index(ts.lcs, lc); i >= 0 {
		ts.lcs = slices.Delete(ts.lcs, i, i+1)
	}
	ts.mu.Unlock()
}

// Len is the number of Terms held.
func (ts *Terms) Len() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return len(ts.lcs)
}

// EndAll ends every Term held with cause (a Term already ended keeps its
// cause) and waits for their hooks.
func (ts *Terms) EndAll(cause error) {
	ts.mu.Lock()
	lcs := ts.lcs
	ts.lcs = nil
	ts.mu.Unlock()
	for _, lc := range lcs {
		lc.End(cause)
		lc.Wait()
	}
}

// Waiting is what ends a wait of a candidacy besides its ctx: Close, the
// candidacy withdrawn (Stop), and the store taking it (Lost, with LostErr
// saying why). A nil channel never fires. With Lost nil, LostErr alone
// says whether the store took it (nil while it has not): for a backend
// whose candidacy stops when it is lost, so that Stop fires then.
type Waiting struct {
	Closing, Stop, Lost <-chan struct{}
	LostErr             func() error
}

// Interrupted reports why waiting must stop, or nil: election.ErrClosed
// after Close, LostErr() once Lost is closed (or, with Lost nil, once it
// is not nil), election.ErrResigned once
// Stop is, else ctx.Err(); checked in that order.
func (w Waiting) Interrupted(ctx context.Context) error {
	select {
	case <-w.Closing:
		return election.ErrClosed
	default:
	}
	if w.Lost != nil {
		select {
		case <-w.Lost:
			return w.LostErr()
		default:
		}
	} else if w.LostErr != nil {
		if err := w.LostErr(); err != nil {
			return err
		}
	}
	select {
	case <-w.Stop:
		return election.ErrResigned
	default:
	}
	return ctx.Err()
}

// Pause waits d, or less if waiting must stop, and returns Interrupted.
func (w Waiting) Pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-w.Closing:
	case <-w.Stop:
	case <-w.Lost:
	}
	return w.Interrupted(ctx)
}

// EndTerm ends the Term of lc, if any, with cause (election.ErrResigned
// when nil); a Term already ended keeps its cause.
func EndTerm(lc *backend.LeaseClock, cause error) {
	if lc == nil {
		return
	}
	if cause == nil {
		cause = election.ErrResigned
	}
	lc.End(cause)
}

// NotWaiting says why a transfer to the candidate to (the best waiting one
// for "") has no target: for the error wrapping election.ErrNoCandidate.
func NotWaiting(to string) string {
	if to == "" {
		return "no candidate is waiting"
	}
	return strconv.Quote(to) + " is not waiting"
}
