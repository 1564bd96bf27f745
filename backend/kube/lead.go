package kube

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
	"github.com/electkit/election/internal/clock"
)

// lead is the leader's goroutine: it renews the Lease every renewEvery
// (after the before-renewal hook), and follows the Lease's watch so that
// another client's change (a delete, another holder, a shorter
// leaseDurationSeconds) ends the Term at once. A Term that ends by itself
// (its deadline, an unhealthy hook) releases the Lease if it is still
// ours.
func (e *Elector) lead(ld *leadership) {
	defer close(ld.done)
	defer ld.stopV()
	term := ld.lc.Term()
	every := e.renewEvery()
	timer := time.NewTimer(every)
	defer timer.Stop()
	var preempt <-chan time.Time
	if e.o.PreemptAfter > 0 {
		t := time.NewTicker(max(min(every, e.o.PreemptAfter/4), 10*time.Millisecond))
		defer t.Stop()
		preempt = t.C
	}
	seen := map[string]time.Time{} // waiting candidates of higher priority: since when
	dropped := ""                  // a transfer request whose target no longer waits
	for {
		s, notify := ld.v.get()
		if err := e.judge(ld, s); err != nil {
			ld.lc.End(err)
			return
		}
		if to, raw := transferRequest(s, ld.token); to != "" && raw != dropped {
			if e.honour(ld, to) {
				e.terms.Forget(ld.lc)
				return
			}
			dropped = raw
		}
		select {
		case <-ld.ctx.Done():
			return // Resign or Close: they release
		case <-term.Done():
			if err := term.Err(); !errors.Is(err, election.ErrResigned) && !errors.Is(err, election.ErrClosed) && !errors.Is(err, election.ErrTransferred) {
				e.releaseLapsed(ld) // Resign, Close and Transfer release themselves
			}
			return
		case <-notify:
		case <-preempt:
			if w, ok := e.preemptor(ld, seen); ok {
				ld.lc.End(errPreempted(w))
				ld.lc.AwaitHooks(backend.HandOverWait)
				_ = e.handOver(ld, w.ID)
				e.terms.Forget(ld.lc)
				return
			}
		case <-timer.C:
			if err := ld.lc.BeforeRenew(); err != nil {
				e.releaseLapsed(ld)
				return
			}
			sent := clock.Now()
			err := e.renew(ld, sent)
			ld.lc.Renewed(sent, err)
			var lost *lostError
			if errors.As(err, &lost) {
				ld.lc.End(err)
				return
			}
			if err != nil {
				timer.Reset(every / 4)
			} else {
				timer.Reset(every)
			}
		}
	}
}

// lostError is the error of a Term whose Lease another client took,
// changed or deleted.
type lostError struct {
	lease, why string
}

func (l *lostError) Error() string {
	return fmt.Sprintf("%v: Lease %s %s", election.ErrSessionLost, l.lease, l.why)
}

func (l *lostError) Unwrap() error { return election.ErrSessionLost }

// judge checks a state of the Lease newer than the leader's last write:
// the Lease must still be held by this candidate with this Term's token
// and a leaseDurationSeconds no shorter than the TTL, or the Term ends
// (another client deleted the Lease, took it, or edited it so that other
// candidates may take over sooner). A newer version that is still ours
// (an edit of a label, of renewTime) becomes the one the next renewal is
// conditional on.
func (e *Elector) judge(ld *leadership, s state) error {
	if !s.known {
		return nil
	}
	mine, err := readLease(ld.current())
	if err != nil {
		return err
	}
	switch {
	case s.lease == nil:
		return &lostError{e.lease(), "was deleted"}
	case s.bad != nil:
		return &lostError{e.lease(), "was changed by another client: " + s.bad.Error()}
	case s.rec.version <= mine.version:
		return nil // the leader's own write, or older
	}
	if why := e.stillOurs(ld, s.rec); why != "" {
		return &lostError{e.lease(), why}
	}
	ld.adopt(s.lease, s.rec.version)
	return nil
}

// stillOurs says why the record r is not this leadership's, or "".
func (e *Elector) stillOurs(ld *leadership, r record) string {
	n, ok := r.ours()
	switch {
	case r.holder != e.o.ID:
		return fmt.Sprintf("is held by %s now", backend.QuoteValue(r.holder))
	case !ok || n.Token != ld.token:
		return "was changed by another client (its annotation " + Annotation + " no longer names this Term)"
	case r.duration < e.o.TTL:
		return fmt.Sprintf("had its leaseDurationSeconds cut to %v by another client, below the TTL %v", r.duration, e.o.TTL)
	}
	return ""
}

// renew sends one renewal, conditional on the version last written or
// adopted, and reports its outcome: nil when the Lease is renewed, a
// *lostError when it is not ours any more.
func (e *Elector) renew(ld *leadership, sent time.Time) error {
	term := ld.lc.Term()
	ctx, cancel := context.WithDeadline(ld.ctx, term.Deadline())
	defer cancel()
	cur := ld.current()
	upd, err := withRecord(cur, e.o.ID, e.seconds, cur.Spec.AcquireTime, microNow(sent), *cur.Spec.LeaseTransitions, mustNote(cur), "")
	if err != nil {
		return err
	}
	got, err := e.leases.Leases(e.ns).Update(ctx, upd, metav1.UpdateOptions{})
	switch {
	case err == nil:
		r, rerr := readLease(got)
		if rerr != nil {
			return rerr
		}
		ld.adopt(got, r.version)
		return nil
	case apierrors.IsNotFound(err):
		return &lostError{e.lease(), "was deleted"}
	case fatal(err):
		// Retrying cannot mend it (the candidate's RBAC no longer lets it
		// update the Lease, say): end the Term now rather than at its
		// deadline.
		return &lostError{e.lease(), "cannot be renewed: " + err.Error()}
	case !apierrors.IsConflict(err):
		return fmt.Errorf("kube election: renewing Lease %s: %w", e.lease(), err)
	}
	// Another client wrote the Lease: read it, to tell an edit that left
	// it ours from a loss.
	l, gerr := e.leases.Leases(e.ns).Get(ctx, e.name, metav1.GetOptions{})
	if apierrors.IsNotFound(gerr) {
		return &lostError{e.lease(), "was deleted"}
	}
	if gerr != nil {
		return fmt.Errorf("kube election: renewing Lease %s: %w (and reading it: %w)", e.lease(), err, gerr)
	}
	r, rerr := readLease(l)
	if rerr != nil {
		return &lostError{e.lease(), "was changed by another client: " + rerr.Error()}
	}
	if why := e.stillOurs(ld, r); why != "" {
		return &lostError{e.lease(), why}
	}
	ld.adopt(l, r.version)
	return fmt.Errorf("kube election: renewing Lease %s: %w", e.lease(), err)
}

// mustNote is the Annotation of l, a Lease this leadership wrote.
func mustNote(l *coordinationv1.Lease) *termNote {
	r, err := readLease(l)
	if err != nil || r.note == nil {
		return nil
	}
	return r.note
}

// releaseLapsed releases the Lease of a Term that ended by itself, within
// one lease window.
func (e *Elector) releaseLapsed(ld *leadership) {
	ctx, cancel := context.WithTimeout(e.bg, e.o.Window())
	defer cancel()
	if err := e.release(ctx, ld, e.successor(ctx)); err != nil && e.bg.Err() == nil {
		e.log.Warn("kube election: releasing the Lease after the Term ended failed; it lapses after its duration", "lease", e.lease(), "err", err)
	}
}

// release gives the Lease up as client-go's ReleaseOnCancel does: no
// holder, leaseDurationSeconds 1, acquireTime and renewTime now, the
// transitions kept; and this backend's annotation removed; the
// HandOverAnnotation names to, the candidate a transfer or a preemption
// hands it to (our other candidates leave it to that one for a lease
// window). Each write is
// conditional on a version that is still this leadership's: a Lease that
// is no longer ours is left alone.
func (e *Elector) release(ctx context.Context, ld *leadership, to string) error {
	l := ld.current()
	for {
		r, err := readLease(l)
		if err != nil {
			return err
		}
		if e.stillOurs(ld, r) != "" {
			return nil
		}
		now := microNow(clock.Now())
		rel, err := withRecord(l, "", 1, now, now, r.transitions, nil, to)
		if err != nil {
			return err
		}
		_, err = e.leases.Leases(e.ns).Update(ctx, rel, metav1.UpdateOptions{})
		switch {
		case err == nil, apierrors.IsNotFound(err):
			return nil
		case !apierrors.IsConflict(err):
			return e.requestErr(ctx, "releasing", err)
		}
		if l, err = e.leases.Leases(e.ns).Get(ctx, e.name, metav1.GetOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				return nil
			}
			return e.requestErr(ctx, "releasing", err)
		}
	}
}

// preemptor reads the waiting candidates and returns the best one of
// strictly higher priority than the leader's that has waited
// PreemptAfter without a break (seen keeps since when each was seen).
func (e *Elector) preemptor(ld *leadership, seen map[string]time.Time) (waiting, bool) {
	ctx, cancel := context.WithDeadline(ld.ctx, ld.lc.Term().Deadline())
	defer cancel()
	ws, err := e.list(ctx, e.o.ID)
	if err != nil {
		return waiting{}, false
	}
	now := clock.Now()
	live := map[string]bool{}
	var best *waiting
	for i, w := range ws {
		if w.Priority <= e.o.Priority {
			continue
		}
		key := w.ID + "@" + strconv.FormatUint(w.since, 10)
		live[key] = true
		if _, ok := seen[key]; !ok {
			seen[key] = now
		}
		if best == nil && now.Sub(seen[key]) >= e.o.PreemptAfter {
			best = &ws[i]
		}
	}
	for k := range seen {
		if !live[k] {
			delete(seen, k) // a break in its wait: the hold-off starts again
		}
	}
	if best == nil {
		return waiting{}, false
	}
	return *best, true
}

// handOver releases the Lease of an ended leadership to the candidate to,
// within one lease window. The Elector leaves the election, as after
// Resign.
func (e *Elector) handOver(ld *leadership, to string) error {
	e.mu.Lock()
	if e.cur == ld {
		e.cur = nil
	}
	e.mu.Unlock()
	ctx, cancel := context.WithTimeout(e.bg, e.o.Window())
	defer cancel()
	err := e.release(ctx, ld, to)
	if err != nil && e.bg.Err() == nil {
		e.log.Warn("kube election: handing the Lease over failed; it lapses after its duration", "lease", e.lease(), "to", to, "err", err)
	}
	return err
}
