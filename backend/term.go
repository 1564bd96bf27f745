package backend

import (
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/internal/termbridge"
)

// NewTerm starts a Term for leader l whose lease was last confirmed by a
// request sent at sent (a time.Now reading, so that it carries the monotonic
// clock), and returns it with the LeaseClock that drives it. Its deadline
// is sent + o.Window(). If that has already passed, the Term is returned
// already ended with election.ErrLeaseExpired: a backend must check Err
// before handing it out. A sent in the future counts as now. o must have
// passed Validate (election.NewOptions does it); its hooks, Events and
// Logger serve the Term.
func NewTerm(o election.Options, l election.Leader, sent time.Time) (*election.Term, *LeaseClock) {
	newTerm := termbridge.NewTerm.(func(election.Options, election.Leader, time.Time) (*election.Term, termbridge.Clock))
	t, c := newTerm(o, l, sent)
	return t, &LeaseClock{t: t, c: c}
}

// LeaseClock is the backend's side of a Term: it turns renewal attempts into
// the Term's deadline, runs the renewal hooks and the Events, and ends the
// Term. Every backend uses it, so that one piece of code decides how long
// a leader may act: a backend never computes a deadline of its own.
//
// A backend calls, for each renewal while leading: BeforeRenew (and skips
// the renewal if it returns an error), then sends the request, then Renewed
// with the send time and the outcome. It calls End when it learns the
// leadership is over (resigned, session lost, preempted, transferred,
// closed), and Wait before its Close returns. A LeaseClock comes from
// NewTerm; its methods are safe for concurrent use.
type LeaseClock struct {
	t *election.Term
	c termbridge.Clock
}

// Term returns the Term this clock drives.
func (c *LeaseClock) Term() *election.Term { return c.t }

// BeforeRenew runs the before-renewal hook (election.WithBeforeRenew) and
// waits for it, or for the end of the Term. It returns nil if the renewal
// may be sent; otherwise the Term has ended and the error is why. A hook
// that fails or panics ends the Term with election.ErrUnhealthy.
func (c *LeaseClock) BeforeRenew() error { return c.c.BeforeRenew() }

// Renewed records a renewal attempt sent at sent (a time.Now reading taken
// just before the request left) with its outcome: nil if the store confirmed
// the lease. A success moves the deadline to sent + Window, unless the
// deadline has already passed: a late reply never revives a lapsed Term
// (it ends the Term with election.ErrLeaseExpired). A failure leaves the
// deadline as it is; the backend retries or calls End. Renewed returns the
// deadline after the attempt. The after-renewal hook gets every attempt
// recorded while the Term is valid, including the late reply that finds
// the deadline passed; attempts recorded after the Term ended are ignored.
// A send time in the future counts as now.
func (c *LeaseClock) Renewed(sent time.Time, err error) time.Time { return c.c.Renewed(sent, err) }

// RenewedAt is Renewed for an attempt whose reply (or failure) came at
// replied, some time before this call: a renewal that several Terms
// share (one lease under many leaderships), which each takes in its
// turn. The renewal's Latency, as the hooks and Events see it, is
// replied − sent, not the time until this call; the deadline is decided
// as by Renewed, at this call.
func (c *LeaseClock) RenewedAt(sent, replied time.Time, err error) time.Time {
	return c.c.RenewedAt(sent, replied, err)
}

// End ends the Term with cause (wrapping one of election's sentinel
// errors) unless it has already ended. It reports whether this call ended
// it.
func (c *LeaseClock) End(cause error) bool { return c.c.End(cause) }

// Wait waits until the Term has ended and its hooks and Events calls have
// returned.
func (c *LeaseClock) Wait() { c.c.Wait() }

// AwaitHooks waits, for at most d, until the ended Term's hooks and Events
// calls have all returned, and reports whether they had. A backend calls it
// after End and before it hands the leadership on (with d = HandOverWait),
// so that what the old Term's Events.Ended reports (a demotion, to a log or
// a monitor) happens before the next leader can begin. It must not be
// called from a hook.
func (c *LeaseClock) AwaitHooks(d time.Duration) bool { return c.c.AwaitHooks(d) }

// HandOverWait bounds how long a backend that hands a leadership on
// (Transfer, preemption) waits, after ending the Term, for its renewal
// hooks and its Events to return before the hand-over is sent
// (LeaseClock.AwaitHooks).
const HandOverWait = 100 * time.Millisecond
