package election

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/electkit/election/internal/clock"
	"github.com/electkit/election/internal/termbridge"
)

// Package backend builds Terms and checks IDs through termbridge, so that
// a Term's fields and the lease clock stay unexported here.
func init() {
	termbridge.NewTerm = func(o Options, l Leader, sent time.Time) (*Term, termbridge.Clock) {
		return newTerm(o, l, sent)
	}
	termbridge.ValidateID = validateID
}

// Term is one leadership, from Campaign's return until Done is closed.
//
// A Term is valid until its Deadline, a point on this process's monotonic
// clock computed from the send time of the latest successful lease renewal:
//
//	deadline = sent + TTL/(1+Drift) − Margin
//
// Counting from the send time (never from the reply's arrival) and shrinking
// the TTL by the clock-rate bound makes the deadline fall before the store
// can have expired the lease, so no other candidate can be elected while the
// Term is valid. When the deadline passes with no newer successful renewal,
// the Term ends with ErrLeaseExpired; it also ends when the candidate
// resigns (ErrResigned), closes (ErrClosed), loses its session
// (ErrSessionLost), is preempted (ErrPreempted), hands its leadership on
// (ErrTransferred), or its before-renewal hook fails (ErrUnhealthy). A Term
// never becomes valid again.
//
// Renewal hooks (WithBeforeRenew, WithAfterRenew) run one at a time, in the
// order of the attempts, on a goroutine of the Term's lease clock, never on
// the backend's renewal loop. A renewal waits for its before-renewal hook,
// but never past the deadline: at the deadline the Term ends whatever a hook
// is doing, and the hook's ctx (the Term's context) is canceled. A hook that
// panics (either hook) ends the Term with ErrUnhealthy carrying the panic
// value. Because hooks share one goroutine, a slow after-renewal hook delays
// the next before-renewal hook and so the next renewal: keep hooks short.
// Hooks must return once their ctx is done: Close waits for a running hook,
// so a hook must not call Close (it may call Resign).
type Term struct {
	leader Leader
	window time.Duration
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu       sync.Mutex
	deadline time.Time
	ended    bool
	timer    *time.Timer
	onEnd    func() // called under mu when the Term ends (Events.Ended)
}

// Leader describes this leadership. The returned Value is a copy.
func (t *Term) Leader() Leader {
	l := t.leader
	l.Value = append([]byte(nil), l.Value...)
	return l
}

// Token is the fencing token of this leadership: strictly increasing across
// the election's leaderships. Pass it to every resource the leader writes.
func (t *Term) Token() uint64 { return t.leader.Token }

// Window is how long the Term stays valid after the send time of a
// successful renewal: TTL/(1+Drift) − Margin of the Elector's options.
func (t *Term) Window() time.Duration { return t.window }

// Done is closed when the leadership ends or may have ended.
func (t *Term) Done() <-chan struct{} { return t.ctx.Done() }

// Err is nil while the Term is valid; afterwards why it ended (errors.Is-able
// against the package's sentinels). It reads the clock: once the deadline
// has passed it reports ErrLeaseExpired even if the deadline timer has not
// run yet, and ends the Term then.
func (t *Term) Err() error {
	if err := context.Cause(t.ctx); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.ended && !clock.Now().Before(t.deadline) {
		t.endLocked(ErrLeaseExpired)
	}
	return context.Cause(t.ctx)
}

// Context is canceled exactly when Done closes (Done is its Done channel);
// context.Cause of it is Err.
func (t *Term) Context() context.Context { return t.ctx }

// Deadline is the local time until which the leadership is guaranteed,
// unless it ends earlier. It moves forward with each successful renewal.
func (t *Term) Deadline() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.deadline
}

// String formats the Term for logs.
func (t *Term) String() string {
	return fmt.Sprintf("term %s", t.leader)
}

// leaseClock is the backend's side of a Term; package backend exports it
// as LeaseClock, whose methods these are (see the doc comments there).
type leaseClock struct {
	t      *Term
	before BeforeRenewFunc
	after  AfterRenewFunc
	obs    *Events
	log    *slog.Logger // nil: none

	// Hook queue, guarded by t.mu. The hook goroutine exists only if a hook
	// is set; hooksDone is closed when it has exited.
	queue     []func()
	wake      chan struct{}
	hooksDone chan struct{}
}

// noHooks is the hooksDone of every leaseClock without hooks: closed.
var noHooks = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// warn logs msg through the Options' Logger, if there is one.
func (c *leaseClock) warn(msg string, args ...any) {
	if c.log != nil {
		c.log.Warn(msg, args...)
	}
}

// newTerm is backend.NewTerm: it starts a Term for leader l whose lease
// was last confirmed by a request sent at sent.
func newTerm(o Options, l Leader, sent time.Time) (*Term, *leaseClock) {
	ctx, cancel := context.WithCancelCause(context.Background())
	l.Value = append([]byte(nil), l.Value...)
	sent = clampSent(sent, clock.Now())
	t := &Term{leader: l, window: o.Window(), ctx: ctx, cancel: cancel, deadline: sent.Add(o.Window())}
	c := &leaseClock{t: t, before: o.BeforeRenew, after: o.AfterRenew, obs: o.Events, log: o.Logger}
	if c.before != nil || c.after != nil || c.obs != nil {
		c.hooksDone = make(chan struct{})
		c.wake = make(chan struct{}, 1)
		go c.hookLoop()
	} else {
		c.hooksDone = noHooks // a Term without hooks holds no channel of its own for them
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	d := clock.Until(t.deadline)
	if d <= 0 {
		t.endLocked(ErrLeaseExpired)
		return t, c
	}
	t.timer = time.AfterFunc(d, c.expire)
	if obs := c.obs; obs != nil {
		if obs.Elected != nil {
			ld, deadline := t.Leader(), t.deadline
			c.enqueueLocked(func() { c.observe("Elected", func() { obs.Elected(ld, deadline) }) })
		}
		if obs.Ended != nil {
			t.onEnd = func() {
				ld, cause := t.Leader(), context.Cause(t.ctx)
				c.enqueueLocked(func() { c.observe("Ended", func() { obs.Ended(ld, cause) }) })
			}
		}
	}
	return t, c
}

// observe calls one of the Events' functions, logging a panic.
func (c *leaseClock) observe(name string, f func()) {
	_ = c.callHook("Events."+name, func() error { f(); return nil })
}

// Term returns the Term this clock drives.
func (c *leaseClock) Term() *Term { return c.t }

// BeforeRenew runs the before-renewal hook and waits for it, or for the end
// of the Term. It returns nil if the renewal may be sent; otherwise the
// Term has ended and the error is why.
func (c *leaseClock) BeforeRenew() error {
	if err := c.t.Err(); err != nil || c.before == nil {
		return err
	}
	res := make(chan error, 1)
	c.enqueue(func() {
		if c.t.Err() != nil { // the Term ended while the call was queued
			res <- nil
			return
		}
		res <- c.callHook("before-renewal", func() error { return c.before(c.t.ctx, c.t) })
	})
	select {
	case err := <-res:
		if err != nil {
			c.End(fmt.Errorf("%w: %w", ErrUnhealthy, err))
		}
	case <-c.t.ctx.Done():
	}
	return c.t.Err()
}

// Renewed records a renewal attempt sent at sent (a time.Now reading taken
// just before the request left) with its outcome: nil if the store confirmed
// the lease. A success moves the deadline to sent + Window, unless the
// deadline has already passed: a late reply never revives a lapsed Term. A
// failure leaves the deadline as it is; the backend retries or calls End.
// It returns the deadline after the attempt. The after-renewal hook gets
// every attempt recorded while the Term is valid, including the late reply
// that finds the deadline passed; attempts recorded after the Term ended
// are ignored. A send time in the future counts as now.
func (c *leaseClock) Renewed(sent time.Time, err error) time.Time {
	return c.RenewedAt(sent, time.Time{}, err)
}

// RenewedAt is Renewed for an attempt answered at replied (the zero time:
// now), before the call: the Latency reported is replied − sent. A reply
// time in the future counts as now, one before sent as sent.
func (c *leaseClock) RenewedAt(sent, replied time.Time, err error) time.Time {
	now := clock.Now()
	t := c.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return t.deadline
	}
	sent = clampSent(sent, now)
	if replied.IsZero() {
		replied = now
	}
	replied = clampSent(replied, now)
	if replied.Before(sent) {
		replied = sent
	}
	late := !now.Before(t.deadline)
	slack := t.deadline.Sub(sent)
	switch {
	case err != nil:
	case late:
		err = fmt.Errorf("%w: the reply came at or after the deadline", ErrLeaseExpired)
	default:
		if d := sent.Add(t.window); d.After(t.deadline) {
			t.deadline = d
		}
	}
	r := Renewal{Leader: t.Leader(), Sent: sent, Latency: replied.Sub(sent), Err: err, Deadline: t.deadline}
	if c.after != nil {
		// Queued before a late reply ends the Term: the hook loop drains
		// the queue before it exits, so the attempt that lost the lease is
		// reported too.
		c.enqueueLocked(func() {
			if err := c.callHook("after-renewal", func() error { c.after(r); return nil }); err != nil {
				c.End(fmt.Errorf("%w: %w", ErrUnhealthy, err))
			}
		})
	}
	if obs := c.obs; obs != nil && obs.Renewed != nil {
		c.enqueueLocked(func() { c.observe("Renewed", func() { obs.Renewed(r, slack) }) })
	}
	if late {
		t.endLocked(ErrLeaseExpired)
	}
	return t.deadline
}

// clampSent takes a send time in the future as now: a deadline never
// counts from a moment the request cannot have left. (A send time must be
// a time.Now reading so that it carries the monotonic clock; one without,
// from Round(0), UTC() or decoding, would let a wall-clock step move the
// deadline. It cannot be refused: synctest's fake time has no monotonic
// reading either.)
func clampSent(sent, now time.Time) time.Time {
	if sent.After(now) {
		return now
	}
	return sent
}

// End ends the Term with cause (wrapping one of the package's sentinels)
// unless it has already ended. It reports whether this call ended it.
func (c *leaseClock) End(cause error) bool {
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	if c.t.ended {
		return false
	}
	c.t.endLocked(cause)
	return true
}

// Wait waits until the Term has ended and its hooks have returned.
func (c *leaseClock) Wait() {
	<-c.t.ctx.Done()
	<-c.hooksDone
}

// AwaitHooks waits, for at most d, until the ended Term's hooks and
// Events calls have all returned, and reports whether they had. A backend
// calls it after End and before it hands the leadership on, so that what
// the old Term's Events.Ended reports (a demotion, to a log or a monitor)
// happens before the next leader can begin. It must not be called from a
// hook.
func (c *leaseClock) AwaitHooks(d time.Duration) bool {
	select {
	case <-c.hooksDone:
		return true
	default:
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.hooksDone:
		return true
	case <-t.C:
		return false
	}
}

func (t *Term) endLocked(cause error) {
	t.ended = true
	if t.timer != nil {
		t.timer.Stop()
	}
	t.cancel(cause)
	if t.onEnd != nil {
		t.onEnd()
	}
}

// expire runs on the deadline timer. A renewal may have moved the deadline
// since the timer was set; then it sets itself again.
func (c *leaseClock) expire() {
	t := c.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return
	}
	if d := clock.Until(t.deadline); d > 0 {
		t.timer.Reset(d)
		return
	}
	c.t.endLocked(ErrLeaseExpired)
}

func (c *leaseClock) enqueue(f func()) {
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	c.enqueueLocked(f)
}

func (c *leaseClock) enqueueLocked(f func()) {
	c.queue = append(c.queue, f)
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// hookLoop runs queued hook calls one at a time until the Term has ended and
// the queue is empty.
func (c *leaseClock) hookLoop() {
	defer close(c.hooksDone)
	t := c.t
	for {
		t.mu.Lock()
		q, ended := c.queue, t.ended
		c.queue = nil
		t.mu.Unlock()
		for _, f := range q {
			f()
		}
		if len(q) > 0 {
			continue
		}
		if ended {
			return
		}
		select {
		case <-c.wake:
		case <-t.ctx.Done():
		}
	}
}

// callHook runs a user hook, turning a panic into an error.
func (c *leaseClock) callHook(name string, f func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			c.warn("election: "+name+" hook panicked", "term", c.t.String(), "panic", v, "stack", string(debug.Stack()))
			err = fmt.Errorf("%s hook panicked: %v", name, v)
		}
	}()
	return f()
}
