package inmem

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
	"github.com/electkit/election/internal/clock"
	"github.com/electkit/election/internal/skeleton"
)

// A hand-over moves the leadership to a chosen waiting candidate: a
// Transfer's target, or the candidate that preempts a leader made
// WithPreemption. It is the gate's doing, the same for every algorithm:
// the leader's Term ends first (ErrTransferred, ErrPreempted), the other
// admitted candidates of its batch go back to the gate, and the gate then
// admits the target alone, in a build of the nodes where it ranks first
// (see Cluster.rebuild), so that the algorithm elects it. After its Term
// the batches go on as before.
type handoff struct {
	from     *Elector
	target   *Elector
	cd       *candidacy // the target's candidacy
	deadline time.Time  // the hand-over lapses then unless the target leads

	over chan struct{} // closed when the hand-over lapsed
	why  error         // why it lapsed, set before over is closed
}

var (
	_ backend.Lister     = (*Elector)(nil)
	_ backend.Transferer = (*Elector)(nil)
)

// handoffLocked returns the hand-over under way, dropping one that is
// done: its target led, or left before (withdrew, crashed, closed). Called
// with c.mu held.
func (c *Cluster) handoffLocked() *handoff {
	h := c.handoff
	if h != nil && (h.cd.resolved() || h.target.cand != h.cd) {
		c.handoff = nil
		return nil
	}
	return h
}

// waitingLocked returns the waiting candidates in the order they would
// lead: a hand-over's target first; then those admitted in the current
// batch, in the algorithm's order, (Priority, earlier Join); then those at
// the gate, which form the next batch, in the same order. Called with c.mu
// held.
func (c *Cluster) waitingLocked() []*Elector {
	h := c.handoffLocked()
	var ws []*Elector
	for _, e := range c.members { // in join order
		if e.cand != nil && !e.crashed && !e.closed && (e.cand.state == pending || e.cand.state == admitted) {
			ws = append(ws, e)
		}
	}
	tier := func(e *Elector) int {
		switch {
		case h != nil && e == h.target:
			return 0
		case e.cand.state == admitted:
			return 1
		}
		return 2
	}
	slices.SortStableFunc(ws, func(a, b *Elector) int {
		if d := cmp.Compare(tier(a), tier(b)); d != 0 {
			return d
		}
		return cmp.Compare(b.o.Priority, a.o.Priority)
	})
	return ws
}

// Candidates lists the candidates waiting in the cluster's election (see
// election.Candidates), in the order they would lead under the batch rules
// (see "Priority, preemption and transfer" in the package doc). It is the gate's view, the same on
// every member, partitions or not. It fails with election.ErrClosed after
// Close and election.ErrSessionLost while the member is crashed.
func (e *Elector) Candidates(ctx context.Context) ([]election.Candidate, error) {
	if err := skeleton.CheckContext(ctx); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := e.c
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case e.closed:
		return nil, election.ErrClosed
	case e.crashed:
		return nil, e.downErr()
	}
	ws := c.waitingLocked()
	out := make([]election.Candidate, 0, len(ws))
	for _, w := range ws {
		out = append(out, election.Candidate{ID: w.o.ID, Value: append([]byte(nil), w.o.Value...), Priority: w.o.Priority})
	}
	return out, nil
}

// Transfer hands t's leadership on (call it through election.Transfer). t
// must be the member's valid Term. The target is the waiting candidate
// named to, or the first of Candidates when to is ""; if there is none, the
// error wraps election.ErrNoCandidate and, with election.StepDown, the
// member resigns. Otherwise t ends with an error wrapping
// election.ErrTransferred, the member leaves the election (as after
// Resign), and the gate admits the target alone: the algorithm elects it,
// with a higher token, and Transfer returns nil once its Campaign has its
// Term. If the target leaves first (Resign, Close, Crash, its Campaign's
// ctx), Transfer fails with election.ErrTransferFailed; if it has not led
// within t's lease window, or ctx ends, or the member is closed, the
// hand-over lapses (the target goes back to the gate, in its place) and the
// next leader comes from the normal order.
func (e *Elector) Transfer(ctx context.Context, t *election.Term, to string, fallback election.Fallback) error {
	if err := skeleton.CheckContext(ctx); err != nil {
		return err
	}
	c := e.c
	c.ops.Lock()
	c.mu.Lock()
	switch {
	case e.closed:
		c.mu.Unlock()
		c.ops.Unlock()
		return election.ErrClosed
	case e.crashed:
		c.mu.Unlock()
		c.ops.Unlock()
		return e.downErr()
	}
	cd := e.cand
	if t == nil || cd == nil || cd.state != leading || cd.term == nil || cd.term.term != t || e.term != cd.term || t.Err() != nil {
		c.mu.Unlock()
		c.ops.Unlock()
		return fmt.Errorf("%w: %s does not lead with %v", election.ErrNotLeader, e.o.ID, t)
	}
	var target *Elector
	for _, w := range c.waitingLocked() {
		if to == "" || w.o.ID == to {
			target = w
			break
		}
	}
	if target == nil {
		c.mu.Unlock()
		what := skeleton.NotWaiting(to)
		err := fmt.Errorf("%w: transfer from %s: %s", election.ErrNoCandidate, e.o.ID, what)
		if fallback == election.StepDown {
			if rerr := e.resign(); rerr != nil {
				err = fmt.Errorf("%w (and resigning: %w)", err, rerr)
			}
			c.ops.Unlock()
			c.wakeController()
			return err
		}
		c.ops.Unlock()
		return err
	}
	if h := c.handoffLocked(); h != nil {
		// Only with two leaders at once, on two sides of a partition.
		c.mu.Unlock()
		c.ops.Unlock()
		return fmt.Errorf("inmem: %s cannot transfer while a hand-over from %s to %s is under way", e.o.ID, h.from.o.ID, h.target.o.ID)
	}
	h := c.handOverLocked(e, target, fmt.Errorf("%w to %s", election.ErrTransferred, target.o.ID))
	c.ops.Unlock()

	select {
	case <-h.cd.done:
	case <-h.over:
	case <-ctx.Done():
	case <-e.closing:
	}
	if err := h.outcome(); err != errPending {
		return err
	}
	why := ctx.Err()
	if why == nil {
		why = election.ErrClosed
	}
	c.ops.Lock()
	c.lapse(h, why)
	c.ops.Unlock()
	if err := h.outcome(); err != errPending {
		return err
	}
	return why
}

// errPending is handoff.outcome's "not yet".
var errPending = errors.New("inmem: hand-over pending")

// outcome is nil once h's target led, its error once it lapsed or the
// target left, and errPending before.
func (h *handoff) outcome() error {
	if h.cd.resolved() {
		if h.cd.err == nil {
			return nil
		}
		return fmt.Errorf("%w: %s left before leading: %w", election.ErrTransferFailed, h.target.o.ID, h.cd.err)
	}
	select {
	case <-h.over:
		return h.why
	default:
		return errPending
	}
}

// transferBound is how long a hand-over's target has to lead: one lease
// window of the old leader's, plus the failure detector's timeout — a new
// leader's Term is handed out once every member has answered its
// confirmation or been taken for dead, so a crashed member, which never
// answers, costs that timeout.
func (c *Cluster) transferBound(from *Elector) time.Duration {
	return from.o.Window() + c.cfg.timing.FailureTimeout()
}

// handOverLocked starts a hand-over from from, which leads, to target,
// which waits: it sends the other admitted candidates of the batch back
// to the gate (their nodes stop standing), ends from's Term with cause and
// takes from out of the election (as Resign does), and leaves the target
// to the gate. Called with c.ops and c.mu held; it releases c.mu.
func (c *Cluster) handOverLocked(from, target *Elector, cause error) *handoff {
	h := &handoff{from: from, target: target, cd: target.cand,
		deadline: clock.Now().Add(c.transferBound(from)), over: make(chan struct{})}
	c.handoff = h
	var rs []*runner
	for _, e := range c.members {
		if e.cand != nil && e.cand.state == admitted {
			e.cand.state = pending
			if e.runner != nil {
				rs = append(rs, e.runner)
			}
		}
	}
	ts := from.cand.term
	from.cand = nil
	r := from.runner
	c.mu.Unlock()
	// First the others stop standing, then the leader steps down: the
	// algorithm's own election that follows finds no one to elect.
	for _, x := range rs {
		x.call(func() { x.stepDown(nil, false) })
	}
	from.stepDown(r, ts, cause)
	c.wakeController()
	return h
}

// lapse ends hand-over h whose target has not led: the target goes back
// to the gate (its node stops standing if it was admitted), and the next
// batch forms as usual. Called with c.ops held.
func (c *Cluster) lapse(h *handoff, why error) {
	c.mu.Lock()
	if c.handoff != h {
		c.mu.Unlock()
		return
	}
	c.handoff = nil
	if h.cd.resolved() {
		c.mu.Unlock()
		return // it led, or left
	}
	h.why = why
	close(h.over)
	var r *runner
	if h.target.cand == h.cd && h.cd.state == admitted {
		h.cd.state = pending
		r = h.target.runner
	}
	c.mu.Unlock()
	if r != nil {
		r.call(func() { r.stepDown(nil, false) })
	}
	c.wakeController()
}

// watchHandovers lapses a hand-over whose target has not led by its
// deadline, and preempts a leader made WithPreemption for the best waiting
// candidate once that one has waited the hold-off, if it has a strictly
// higher Priority. It returns when it needs to look again (zero: only when
// woken). Called by the controller with c.ops held.
func (c *Cluster) watchHandovers() time.Time {
	now := clock.Now()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return time.Time{}
	}
	if h := c.handoffLocked(); h != nil {
		c.mu.Unlock()
		if now.Before(h.deadline) {
			return h.deadline
		}
		c.lapse(h, fmt.Errorf("%w: %s did not lead within %v", election.ErrTransferFailed, h.target.o.ID, c.transferBound(h.from)))
		return time.Time{} // lapse woke the controller: it looks again
	}
	var next time.Time
	for _, l := range c.members {
		ts := l.term
		if ts == nil || l.o.PreemptAfter <= 0 || l.crashed || l.closed || l.cand == nil || l.cand.term != ts || ts.term.Err() != nil {
			continue
		}
		ch := c.challengerLocked(l)
		if ch == nil {
			continue
		}
		at := ch.cand.since.Add(l.o.PreemptAfter)
		if now.Before(at) {
			if next.IsZero() || at.Before(next) {
				next = at
			}
			continue
		}
		h := c.handOverLocked(l, ch, fmt.Errorf("%w: %s (priority %d, %s's %d) waited %v",
			election.ErrPreempted, ch.o.ID, ch.o.Priority, l.o.ID, l.o.Priority, l.o.PreemptAfter))
		return h.deadline
	}
	c.mu.Unlock()
	return next
}

// challengerLocked returns the best waiting candidate by (Priority,
// earlier Join), the one the algorithm would elect among them all, if its
// Priority is strictly higher than leader's. Called with c.mu held.
func (c *Cluster) challengerLocked(leader *Elector) *Elector {
	var best *Elector
	for _, e := range c.members { // in join order: the first of equals is best
		if e.cand == nil || e.crashed || e.closed || (e.cand.state != pending && e.cand.state != admitted) {
			continue
		}
		if best == nil || e.o.Priority > best.o.Priority {
			best = e
		}
	}
	if best == nil || best.o.Priority <= leader.o.Priority {
		return nil
	}
	return best
}
