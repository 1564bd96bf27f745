package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
	"github.com/electkit/election/internal/clock"
)

// keep renews the lease of c's leadership every third of the lease
// window, and at once when the election's row is changed by anyone but a
// renewal (a notification on the election's channel: an operator's
// UPDATE, DELETE or TRUNCATE), until the Term ends. A Term that ends on
// its own (lapsed, lost, unhealthy) is released here; a preempting
// candidate is handed the leadership here.
func (e *Elector) keep(c *candidacy) {
	defer e.wg.Done()
	defer close(c.leadDone)
	lc := c.lc
	term := lc.Term()
	es := e.lst.subscribe(e.elChan)
	as := e.lst.subscribe(e.allChan)
	defer e.lst.unsubscribe(es)
	defer e.lst.unsubscribe(as)
	ready := es.ready // once listening, one renewal covers what came before
	next := e.pollEvery()
	for {
		timer := time.NewTimer(next)
		select {
		case <-term.Done():
			timer.Stop()
			e.afterTerm(c)
			return
		case <-timer.C:
		case <-es.C:
		case <-as.C:
		case <-ready:
			ready = nil
		}
		timer.Stop()
		next = e.pollEvery()
		if err := lc.BeforeRenew(); err != nil {
			continue // the Term has ended
		}
		sent := clock.Now()
		ctx, cancel := context.WithDeadline(term.Context(), term.Deadline())
		r, err := e.renew(ctx, c.token)
		cancel()
		switch {
		case err != nil:
			lc.Renewed(sent, err)
			if permanent(err) {
				lc.End(fmt.Errorf("%w: %w", election.ErrSessionLost, err))
			} else {
				next = retryDelay
			}
		case r.state == "ok":
			lc.Renewed(sent, nil)
			if r.preemptMS != nil {
				next = min(next, time.Duration(*r.preemptMS*float64(time.Millisecond))+time.Millisecond)
			}
			if r.requestTo != nil && c.serving.CompareAndSwap(false, true) {
				// Transfer waits for this goroutine to return: serve it on
				// another.
				to := *r.requestTo
				e.wg.Add(1)
				go func() {
					defer e.wg.Done()
					e.serveRequest(c, term, to)
				}()
			}
		case r.state == "lost":
			err := fmt.Errorf("%w: postgres election %q: %w (token %d; another client deleted, truncated or rewrote it)", election.ErrSessionLost, e.name, errLost, c.token)
			lc.Renewed(sent, err)
			lc.End(err)
		case r.state == "expired":
			err := fmt.Errorf("%w: postgres election %q: the lease of token %d lapsed on the server's clock", election.ErrLeaseExpired, e.name, c.token)
			lc.Renewed(sent, err)
			lc.End(err)
		case r.state == "preempt" && r.successor != nil:
			lc.Renewed(sent, nil)
			to := *r.successor
			if lc.End(fmt.Errorf("%w: by %q, of higher priority, waiting longer than %v", election.ErrPreempted, to, e.o.PreemptAfter)) {
				lc.AwaitHooks(backend.HandOverWait)
				ctx, cancel := context.WithTimeout(e.bg, e.o.Window())
				if _, err := e.releaseTo(ctx, c.token, to); err != nil {
					e.log.Warn("postgres election: handing the leadership to the preempting candidate failed; it lapses with its lease", "election", e.name, "to", to, "err", err)
				}
				cancel()
			}
		default:
			lc.Renewed(sent, fmt.Errorf("postgres election %q: renewal answered %q", e.name, r.state))
		}
	}
}

// afterTerm releases a leadership whose Term ended on its own, so that the
// next in line need not wait for the lease. Resign, Close and Transfer
// release their own; a preempted leader has handed over already.
func (e *Elector) afterTerm(c *candidacy) {
	cause := c.lc.Term().Err()
	for _, own := range []error{election.ErrResigned, election.ErrClosed, election.ErrTransferred, election.ErrPreempted} {
		if errors.Is(cause, own) {
			return
		}
	}
	if errors.Is(cause, errLost) {
		return // not ours any more
	}
	ctx, cancel := context.WithTimeout(e.bg, e.o.Window())
	defer cancel()
	if err := e.release(ctx, c.token, ""); err != nil && !permanent(err) {
		e.retryLater("releasing an ended leadership", func(ctx context.Context) error { return e.release(ctx, c.token, "") })
	}
}
