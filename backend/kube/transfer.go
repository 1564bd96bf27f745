package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
	"github.com/electkit/election/internal/clock"
	"github.com/electkit/election/internal/skeleton"
)

var (
	_ backend.Lister     = (*Elector)(nil)
	_ backend.Transferer = (*Elector)(nil)
)

// Transfer implements backend.Transferer (see election.Transfer): it reads
// the waiting candidates, ends t with ErrTransferred, releases the Lease
// with the HandOverAnnotation naming the target (our other candidates
// leave it to the target for one lease window; client-go's candidates do
// not know it and may take the Lease on their next retry), and waits, for at most one
// lease window, until the target holds the Lease.
func (e *Elector) Transfer(ctx context.Context, t *election.Term, to string, fallback election.Fallback) error {
	if err := skeleton.CheckContext(ctx); err != nil {
		return err
	}
	e.mu.Lock()
	ld := e.cur
	closed := e.closed
	e.mu.Unlock()
	switch {
	case closed:
		return election.ErrClosed
	case ld == nil || ld.lc.Term() != t || t.Err() != nil:
		return fmt.Errorf("%w: the Term is not this Elector's valid Term of Lease %s", election.ErrNotLeader, e.lease())
	}
	ws, err := e.list(ctx, e.o.ID)
	if err != nil {
		return err
	}
	target := ""
	for _, w := range ws {
		if to == "" || w.ID == to {
			target = w.ID
			break
		}
	}
	if target == "" {
		err := fmt.Errorf("%w: Lease %s: %s", election.ErrNoCandidate, e.lease(), skeleton.NotWaiting(to))
		if fallback == election.StepDown {
			if rerr := e.Resign(ctx); rerr != nil {
				return errors.Join(err, rerr)
			}
		}
		return err
	}
	e.mu.Lock()
	if e.cur != ld || t.Err() != nil {
		e.mu.Unlock()
		return fmt.Errorf("%w: the Term ended", election.ErrNotLeader)
	}
	e.cur = nil
	e.mu.Unlock()
	ld.lc.End(fmt.Errorf("%w: to %s", election.ErrTransferred, backend.QuoteValue(target)))
	ld.halt()
	<-ld.done
	ld.lc.AwaitHooks(backend.HandOverWait)
	if err := e.handOver(ld, target); err != nil {
		return err
	}
	e.terms.Forget(ld.lc)
	return e.awaitHolder(ctx, target)
}

// awaitHolder waits until id holds the Lease, for at most one lease
// window.
func (e *Elector) awaitHolder(ctx context.Context, id string) error {
	v, stop := e.startView()
	defer stop()
	bound := time.NewTimer(e.o.Window())
	defer bound.Stop()
	start := clock.Now()
	for {
		s, notify := v.get()
		if s.known && s.lease != nil && s.rec.holder == id {
			return nil
		}
		select {
		case <-notify:
		case <-ctx.Done():
			return ctx.Err()
		case <-e.closing:
			return election.ErrClosed
		case <-bound.C:
			return fmt.Errorf("%w: %s did not take Lease %s within %v", election.ErrTransferFailed, backend.QuoteValue(id), e.lease(), clock.Since(start).Round(time.Millisecond))
		}
	}
}

// RequestAnnotation carries a transfer request on the Lease: {"to": ID,
// "token": the leadership's token}. The leader it names by token hands
// the Lease to the candidate as Transfer with KeepLeading does, or drops
// the request with its next renewal when that candidate no longer waits.
const RequestAnnotation = "election.electkit.io/transfer-request"

type requestNote struct {
	To    string `json:"to"`
	Token uint64 `json:"token,string"`
}

var _ backend.TransferRequester = (*Elector)(nil)

// RequestTransfer implements backend.TransferRequester (see
// election.RequestTransfer): it reads the Lease and the waiting
// candidates, writes the request on the Lease (an update conditional on
// its resourceVersion, retried over the leader's renewals), and waits,
// for at most two lease windows of the Lease's duration, until the
// target holds the Lease. A Lease held by a candidate that is not of this
// backend (client-go's) cannot honour it: ErrTransferFailed at once.
func (e *Elector) RequestTransfer(ctx context.Context, to string) (election.Leader, error) {
	if err := skeleton.CheckContext(ctx); err != nil {
		return election.Leader{}, err
	}
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return election.Leader{}, election.ErrClosed
	}
	for {
		l, err := e.leases.Leases(e.ns).Get(ctx, e.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return election.Leader{}, fmt.Errorf("%w: Lease %s does not exist", election.ErrNoLeader, e.lease())
		}
		if err != nil {
			return election.Leader{}, e.requestErr(ctx, "reading", err)
		}
		r, err := readLease(l)
		if err != nil {
			return election.Leader{}, err
		}
		if r.holder == "" {
			return election.Leader{}, fmt.Errorf("%w: Lease %s is released", election.ErrNoLeader, e.lease())
		}
		n, ok := r.ours()
		if !ok {
			return election.Leader{}, fmt.Errorf("%w: Lease %s is held by %s, which is not a candidate of this backend", election.ErrTransferFailed, e.lease(), backend.QuoteValue(r.holder))
		}
		ws, err := e.list(ctx, r.holder)
		if err != nil {
			return election.Leader{}, err
		}
		target := ""
		for _, w := range ws {
			if to == "" || w.ID == to {
				target = w.ID
				break
			}
		}
		if target == "" {
			return election.Leader{}, fmt.Errorf("%w: Lease %s: %s", election.ErrNoCandidate, e.lease(), skeleton.NotWaiting(to))
		}
		raw, _ := json.Marshal(requestNote{To: target, Token: n.Token})
		upd := l.DeepCopy()
		upd.Annotations[RequestAnnotation] = string(raw)
		_, err = e.leases.Leases(e.ns).Update(ctx, upd, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			continue // a renewal came between: read again
		}
		if err != nil {
			return election.Leader{}, e.requestErr(ctx, "requesting a transfer on", err)
		}
		bound := 2 * (r.duration - e.o.Margin)
		return e.awaitLeader(ctx, target, bound)
	}
}

// awaitLeader waits, for at most bound, until id holds the Lease with a
// token of ours, and returns that leadership.
func (e *Elector) awaitLeader(ctx context.Context, id string, bound time.Duration) (election.Leader, error) {
	v, stop := e.startView()
	defer stop()
	timer := time.NewTimer(bound)
	defer timer.Stop()
	for {
		s, notify := v.get()
		if s.known && s.lease != nil && s.rec.holder == id {
			if l, err := s.rec.leader(); err == nil && l.Token != 0 {
				return l, nil
			}
		}
		select {
		case <-notify:
		case <-ctx.Done():
			return election.Leader{}, ctx.Err()
		case <-e.closing:
			return election.Leader{}, election.ErrClosed
		case <-timer.C:
			return election.Leader{}, fmt.Errorf("%w: %s did not take Lease %s within %v", election.ErrTransferFailed, backend.QuoteValue(id), e.lease(), bound)
		}
	}
}

// transferRequest is the target of a transfer request on s for the
// leadership of token, or "".
func transferRequest(s state, token uint64) (string, string) {
	if s.lease == nil {
		return "", ""
	}
	raw, ok := s.lease.Annotations[RequestAnnotation]
	if !ok {
		return "", ""
	}
	var n requestNote
	if json.Unmarshal([]byte(raw), &n) != nil || n.Token != token {
		return "", raw
	}
	return n.To, raw
}

// honour hands the leadership to the target of a transfer request, from
// the leader's goroutine, if it still waits; it reports whether it did.
func (e *Elector) honour(ld *leadership, to string) bool {
	ctx, cancel := context.WithDeadline(ld.ctx, ld.lc.Term().Deadline())
	ws, err := e.list(ctx, e.o.ID)
	cancel()
	if err != nil || !slices.ContainsFunc(ws, func(w waiting) bool { return w.ID == to }) {
		return false // the next renewal drops the request
	}
	ld.lc.End(fmt.Errorf("%w: to %s, as requested", election.ErrTransferred, backend.QuoteValue(to)))
	ld.lc.AwaitHooks(backend.HandOverWait)
	_ = e.handOver(ld, to)
	return true
}
