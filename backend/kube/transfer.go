package kube

import (
	"context"
	"errors"
	"fmt"
	"time"

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
