package inmem

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
	"github.com/electkit/election/classic"
	"github.com/electkit/election/internal/clock"
	"github.com/electkit/election/internal/skeleton"
	"github.com/electkit/election/internal/watch"
)

// Elector is one member of a Cluster: an election.Elector whose leadership
// comes from the cluster's algorithm. Make one with Cluster.Join. It
// can list its election's candidates (election.Candidates) and transfer
// its leadership (election.Transfer); see "Priority, preemption and
// transfer" in the package doc.
type Elector struct {
	c       *Cluster
	num     int // member number: join order, never reused
	o       election.Options
	board   *watch.Board    // the leader this member believes in
	gate    *skeleton.Gate  // one Campaign at a time; Close's signal
	closing <-chan struct{} // gate.Closing()
	wg      sync.WaitGroup

	// Guarded by c.mu.
	closed  bool
	crashed bool
	cand    *candidacy
	term    *termState // the Term handed out, until its end is accounted for
	runner  *runner    // nil while crashed or closed
	node    classic.Node
	gen     *generation // node's generation
}

var _ election.Elector = (*Elector)(nil)

type candState uint8

const (
	pending  candState = iota + 1 // waiting at the gate
	admitted                      // eligible in the algorithm, not leading yet
	leading                       // holds a Term
)

// candidacy is one Campaign's stand for election, from Campaign until its
// Term ends or it is withdrawn.
type candidacy struct {
	state candState
	since time.Time     // when the Campaign began: how long it has waited (preemption's hold-off)
	done  chan struct{} // closed when it leads (term) or failed (err)
	term  *termState
	err   error
}

func newCandidacy() *candidacy {
	return &candidacy{state: pending, since: clock.Now(), done: make(chan struct{})}
}

// resolved reports whether cd's Campaign has its outcome (it led or failed).
func (cd *candidacy) resolved() bool {
	select {
	case <-cd.done:
		return true
	default:
		return false
	}
}

// resolveLocked settles what Campaign returns, once. Called with c.mu held.
func (cd *candidacy) resolveLocked(ts *termState, err error) {
	select {
	case <-cd.done:
		return
	default:
	}
	cd.term, cd.err = ts, err
	close(cd.done)
}

// termState is a Term with its lease clock.
type termState struct {
	term  *election.Term
	lc    *backend.LeaseClock
	epoch uint64
}

// ID returns the member's ID (election.WithID).
func (e *Elector) ID() string { return e.o.ID }

// Options returns the options the Elector was made with (election.Run
// reports its campaigns to their Events). Their Value is a copy.
func (e *Elector) Options() election.Options {
	o := e.o
	o.Value = append([]byte(nil), o.Value...)
	return o
}

func (e *Elector) downErr() error {
	return fmt.Errorf("%w: %s: %w", election.ErrSessionLost, e.o.ID, errDown)
}

// Campaign implements election.Elector. The member waits at the cluster's
// gate until the election is idle, then stands for election with the
// candidates that waited with it; the algorithm elects the best of them by
// (Priority, earlier Join). Campaign returns when the algorithm has made
// this member leader and the leadership is confirmed: a peer accepted it
// (or no peer is up to), and every peer has answered or had the failure
// detector's timeout to. If ctx ends first, the candidacy is withdrawn and
// ctx.Err() returned. While the member is crashed it fails with
// election.ErrSessionLost.
func (e *Elector) Campaign(ctx context.Context) (*election.Term, error) {
	if err := e.gate.Enter(ctx); err != nil {
		return nil, err
	}
	defer e.gate.Leave()

	c := e.c
	c.mu.Lock()
	switch {
	case e.closed:
		c.mu.Unlock()
		return nil, election.ErrClosed
	case e.crashed:
		c.mu.Unlock()
		return nil, e.downErr()
	case e.cand != nil && e.cand.term != nil && e.cand.term.term.Err() == nil:
		t := e.cand.term.term
		c.mu.Unlock()
		return t, nil // already leading
	}
	cd := newCandidacy()
	e.cand = cd
	c.mu.Unlock()
	c.wakeController()

	select {
	case <-cd.done:
	case <-ctx.Done():
		e.withdraw(cd)
		return nil, ctx.Err()
	}
	if cd.err != nil {
		return nil, cd.err
	}
	if err := cd.term.term.Err(); err != nil {
		return nil, err // ended as it began (Close, Resign, expiry)
	}
	return cd.term.term, nil
}

// withdraw ends cd after its Campaign's ctx ended; a Term it won meanwhile
// is resigned.
func (e *Elector) withdraw(cd *candidacy) {
	c := e.c
	c.ops.Lock()
	c.mu.Lock()
	mine := e.cand == cd
	if mine {
		e.cand = nil
	}
	cd.resolveLocked(nil, context.Canceled)
	r := e.runner
	c.mu.Unlock()
	if mine {
		e.stepDown(r, cd.term, election.ErrResigned)
	}
	c.ops.Unlock()
	c.wakeController()
}

// stepDown ends ts (if any) with cause, tells the peers, and makes the
// member's node stop standing for election. Called with c.ops held, e.cand
// already cleared.
func (e *Elector) stepDown(r *runner, ts *termState, cause error) {
	if ts != nil {
		ts.lc.End(cause)
	}
	if r != nil {
		r.call(func() { r.stepDown(ts, true) })
	}
}

// Resign implements election.Elector: the Term (if any) ends with
// election.ErrResigned before Resign returns, the peers stop showing this
// leader at once, and the node stops standing for election, which starts
// an election at once among the other admitted candidates (or admits the
// waiting ones, if none is left). Nothing of it waits on the network, so
// Resign does all of it even when ctx is already done, and returns nil
// (a nil ctx alone is refused, and nothing done). It does not wait for a renewal hook that is running (a hook may call
// Resign); Close does.
func (e *Elector) Resign(ctx context.Context) error {
	if err := skeleton.CheckContext(ctx); err != nil {
		return err
	}
	c := e.c
	c.ops.Lock()
	err := e.resign()
	c.ops.Unlock()
	c.wakeController()
	return err
}

// resign is Resign with c.ops held.
func (e *Elector) resign() error {
	c := e.c
	c.mu.Lock()
	if e.closed {
		c.mu.Unlock()
		return election.ErrClosed
	}
	cd := e.cand
	e.cand = nil
	r := e.runner
	if cd != nil {
		cd.resolveLocked(nil, fmt.Errorf("%w: %s resigned while campaigning", election.ErrResigned, e.o.ID))
	}
	c.mu.Unlock()
	if cd != nil {
		e.stepDown(r, cd.term, election.ErrResigned)
	}
	return nil
}

// Leader implements election.Elector: the leader this member believes in.
// A member shows a leader once that leader asked it to confirm its
// leadership and the member's node agreed, and stops when its node names
// another or none, when the leader resigns, or when the leader has not
// renewed for its lease window. While crashed it fails with
// election.ErrSessionLost.
func (e *Elector) Leader(ctx context.Context) (election.Leader, error) {
	if err := skeleton.CheckContext(ctx); err != nil {
		return election.Leader{}, err
	}
	if err := ctx.Err(); err != nil {
		return election.Leader{}, err
	}
	e.c.mu.Lock()
	closed, crashed := e.closed, e.crashed
	e.c.mu.Unlock()
	switch {
	case closed:
		return election.Leader{}, election.ErrClosed
	case crashed:
		return election.Leader{}, e.downErr()
	}
	l, _ := e.board.Get()
	if l.IsZero() {
		return l, election.ErrNoLeader
	}
	l.Value = append([]byte(nil), l.Value...)
	return l, nil
}

// Observe implements election.Elector, with the member's belief as Leader
// describes it. A crashed member's stream stays open and silent until it
// recovers.
func (e *Elector) Observe(ctx context.Context) <-chan election.Leader {
	e.c.mu.Lock()
	defer e.c.mu.Unlock()
	if e.closed || ctx == nil {
		ch := make(chan election.Leader)
		close(ch)
		return ch
	}
	return e.board.Stream(ctx, e.closing, &e.wg)
}

// Close implements election.Elector: it resigns (the Term ends with
// election.ErrClosed), withdraws a waiting Campaign (which returns
// election.ErrClosed), and the member leaves the cluster: its node stops,
// as if crashed, until the cluster next rebuilds its nodes without it.
// Close waits for every goroutine of the member. Safe to call twice.
func (e *Elector) Close() error {
	c := e.c
	c.ops.Lock()
	c.mu.Lock()
	if e.closed {
		c.mu.Unlock()
		c.ops.Unlock()
		return nil
	}
	e.closed = true
	e.gate.Close()
	cd := e.cand
	e.cand = nil
	r := e.runner
	e.runner = nil
	for i, m := range c.members {
		if m == e {
			c.members = append(c.members[:i:i], c.members[i+1:]...)
			break
		}
	}
	if cd != nil {
		cd.resolveLocked(nil, election.ErrClosed)
	}
	c.mu.Unlock()
	if cd != nil {
		e.stepDown(r, cd.term, election.ErrClosed)
	}
	c.net.detach(e.num)
	if r != nil {
		r.halt()
	}
	c.ops.Unlock()
	c.wakeController()
	e.wg.Wait() // lease loop (and its hooks), Observe streams
	return nil
}

// leaseLoop drives one Term: every RenewInterval it runs the before-renewal
// hook and asks the runner for a renewal round; when the Term ends it
// accounts for it. It belongs to the Elector's wg.
func (e *Elector) leaseLoop(ts *termState) {
	defer e.wg.Done()
	c := e.c
	tick := time.NewTicker(c.cfg.timing.RenewInterval())
	defer tick.Stop()
	for {
		select {
		case <-ts.term.Done():
			e.termEnded(ts)
			ts.lc.Wait()
			return
		case <-tick.C:
		}
		c.mu.Lock()
		r := e.runner
		c.mu.Unlock()
		if r == nil {
			continue // crashed: nothing renews; the Term lapses
		}
		if ts.lc.BeforeRenew() != nil {
			continue // ended: Done is next
		}
		r.post(func() { r.renew(ts) })
	}
}

// termEnded accounts for the end of ts: the candidacy is over, the node
// stops standing (unless Resign or Close did that already) and the gate
// may open.
func (e *Elector) termEnded(ts *termState) {
	c := e.c
	c.mu.Lock()
	if e.term == ts {
		e.term = nil
	}
	if e.cand != nil && e.cand.term == ts {
		e.cand = nil
	}
	r := e.runner
	c.mu.Unlock()
	cause := context.Cause(ts.term.Context())
	if r != nil && !errors.Is(cause, election.ErrResigned) && !errors.Is(cause, election.ErrClosed) &&
		!errors.Is(cause, election.ErrTransferred) {
		// Preempted by the algorithm: the peers know better than we do.
		// Preempted by the gate (handOver): it told them already.
		tell := !errors.Is(cause, election.ErrPreempted)
		r.post(func() { r.stepDown(ts, tell) })
	}
	c.wakeController()
}
