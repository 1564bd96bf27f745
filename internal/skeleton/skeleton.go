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

// Gate lets one Campaign run at a time and carries Close's signal. The
// zero Gate is not usable; make one with NewGate.
type Gate struct {
	sem     chan struct{}
	closing chan struct{}
	once    sync.Once
}

// NewGate returns an open Gate.
func NewGate() *Gate {
	return &Gate{sem: make(chan struct{}, 1), closing: make(chan struct{})}
}

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
	select {
	case g.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-g.closing:
		return election.ErrClosed
	}
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

// Leave lets the next Campaign in.
func (g *Gate) Leave() { <-g.sem }

// Close signals Close: Closing is closed and Enter refuses from now on.
// Calling it again does nothing.
func (g *Gate) Close() { g.once.Do(func() { close(g.closing) }) }

// Closing is closed once Close has begun.
func (g *Gate) Closing() <-chan struct{} { return g.closing }

// Drain waits for the Campaign running when Close began, if any, to leave,
// and keeps the gate shut for good. Call it after Close, once.
func (g *Gate) Drain() { g.sem <- struct{}{} }

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
// saying why). A nil channel never fires.
type Waiting struct {
	Closing, Stop, Lost <-chan struct{}
	LostErr             func() error
}

// Interrupted reports why waiting must stop, or nil: election.ErrClosed
// after Close, LostErr() once Lost is closed, election.ErrResigned once
// Stop is, else ctx.Err(); checked in that order.
func (w Waiting) Interrupted(ctx context.Context) error {
	select {
	case <-w.Closing:
		return election.ErrClosed
	default:
	}
	select {
	case <-w.Lost:
		return w.LostErr()
	default:
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
