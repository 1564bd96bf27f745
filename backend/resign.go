package backend

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/electkit/election"
)

// termEnding are the errors a Term ends with; a ctx canceled with a cause
// that wraps one of them was canceled because a Term ended.
var termEnding = []error{
	election.ErrResigned,
	election.ErrTransferred,
	election.ErrPreempted,
	election.ErrLeaseExpired,
	election.ErrSessionLost,
	election.ErrUnhealthy,
	election.ErrClosed,
}

// termEnded reports whether err wraps one of the errors a Term ends with
// (ErrResigned, ErrTransferred, ErrPreempted, ErrLeaseExpired,
// ErrSessionLost, ErrUnhealthy, ErrClosed).
func termEnded(err error) bool {
	for _, s := range termEnding {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// ResignContext returns the context a Resign talks to the store with. It
// carries ctx's values and ctx's deadline, and is canceled when ctx is —
// except when ctx is canceled because a Term ended: when context.Cause of
// ctx wraps one of the errors a Term ends with (ErrResigned,
// ErrTransferred, ErrPreempted, ErrLeaseExpired, ErrSessionLost,
// ErrUnhealthy, ErrClosed). That is the ctx of a Term's Context, or one
// derived from it such as the ctx Run gives OnElected: a leader that steps
// down with e.Resign(ctx) cancels ctx itself, when Resign ends the Term
// before it talks to the store. Then the returned context lives on for at
// most bound from that moment (or until ctx's deadline, if sooner), long
// enough for the store's reply; a ctx already canceled that way when
// ResignContext is called gets bound too. A backend passes the Elector's
// lease window (Options.Window) as bound: past it the store has given up
// the lease on its own.
//
// When the returned context ends, context.Cause of it is ctx.Err() if ctx
// ended it, or an error wrapping context.DeadlineExceeded if bound passed:
// what Resign returns when its store request was cut short. The caller
// must call the CancelFunc once Resign is done.
func ResignContext(ctx context.Context, bound time.Duration) (context.Context, context.CancelFunc) {
	base := context.WithoutCancel(ctx)
	stopDeadline := context.CancelFunc(func() {})
	d, hasDeadline := ctx.Deadline()
	if hasDeadline {
		base, stopDeadline = context.WithDeadline(base, d)
	}
	rctx, cancel := context.WithCancelCause(base)
	if err := ctx.Err(); err != nil && !termEnded(context.Cause(ctx)) {
		// Canceled already, not by a Term's end: so is rctx, now (an
		// AfterFunc would cancel it a moment later, after a request
		// may have gone out).
		cancel(err)
		return rctx, func() { cancel(context.Canceled); stopDeadline() }
	}
	var (
		mu      sync.Mutex
		stopped bool
		timer   *time.Timer
	)
	stopWatch := context.AfterFunc(ctx, func() {
		err := ctx.Err()
		if !termEnded(context.Cause(ctx)) {
			if errors.Is(err, context.DeadlineExceeded) && hasDeadline {
				return // the same deadline ends rctx, as DeadlineExceeded
			}
			cancel(err)
			return
		}
		cause := fmt.Errorf("election: the store did not answer within %v of the Term's end: %w", bound, context.DeadlineExceeded)
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			timer = time.AfterFunc(bound, func() { cancel(cause) })
		}
	})
	return rctx, func() {
		stopWatch()
		mu.Lock()
		stopped = true
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel(context.Canceled)
		stopDeadline()
	}
}
