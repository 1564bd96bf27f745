package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
	"github.com/electkit/election/internal/skeleton"
)

// Transfer implements backend.Transferer (election.Transfer documents
// the contract): it finds the target among the waiting candidates, ends
// t, and releases the leadership naming the target as successor in one
// statement that wakes only the target; until a lease window has passed,
// only the target may claim the election. It returns once the target
// leads, or an error wrapping election.ErrTransferFailed when it has not
// within that window.
func (e *Elector) Transfer(ctx context.Context, t *election.Term, to string, fallback election.Fallback) error {
	if err := skeleton.CheckContext(ctx); err != nil {
		return err
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return election.ErrClosed
	}
	c := e.cand
	if c == nil || c.lc == nil || c.lc.Term() != t || t.Err() != nil {
		e.mu.Unlock()
		return fmt.Errorf("%w: postgres election %q: the Term is not this candidate's current one", election.ErrNotLeader, e.name)
	}
	e.mu.Unlock()
	target, err := e.waiting(ctx, to)
	if err != nil {
		return err
	}
	if target == "" {
		err := fmt.Errorf("%w: postgres election %q: %s", election.ErrNoCandidate, e.name, skeleton.NotWaiting(to))
		if fallback == election.StepDown {
			if rerr := e.Resign(ctx); rerr != nil {
				return errors.Join(err, rerr)
			}
		}
		return err
	}
	e.mu.Lock()
	if e.cand != c {
		e.mu.Unlock()
		return fmt.Errorf("%w: postgres election %q: the Term ended meanwhile", election.ErrNotLeader, e.name)
	}
	e.cand = nil
	c.halted = true
	e.mu.Unlock()
	c.halt()
	if !c.lc.End(fmt.Errorf("%w: to %q", election.ErrTransferred, target)) {
		return fmt.Errorf("%w: postgres election %q: %v", election.ErrNotLeader, e.name, t.Err())
	}
	<-c.leadDone
	c.lc.AwaitHooks(backend.HandOverWait)
	e.forget(c.lc)
	// The lease is still the server's: observe before releasing, so the
	// target's claim cannot be missed.
	es := e.lst.subscribe(e.elChan)
	defer e.lst.unsubscribe(es)
	es.awaitReady(ctx, listenWait)
	rctx, cancel := backend.ResignContext(ctx, e.o.Window())
	defer cancel()
	got, err := e.releaseTo(rctx, c.token, target)
	if err != nil {
		e.retryLater("releasing the leadership", func(ctx context.Context) error { return e.release(ctx, c.token, "") })
		return fmt.Errorf("%w: %w", election.ErrTransferFailed, err)
	}
	if got != target {
		return fmt.Errorf("%w: postgres election %q: %q stopped waiting; the next in line leads", election.ErrTransferFailed, e.name, target)
	}
	bound := time.NewTimer(e.o.Window())
	defer bound.Stop()
	for {
		l, _, err := e.readLeader(rctx)
		if err == nil && l.ID == target && l.Token > uint64(c.token) {
			return nil
		}
		select {
		case <-es.C:
		case <-time.After(e.pollEvery()):
		case <-bound.C:
			return fmt.Errorf("%w: postgres election %q: %q did not lead within %v", election.ErrTransferFailed, e.name, target, e.o.Window())
		case <-rctx.Done():
			return e.ctxErr(ctx, rctx.Err())
		}
	}
}

// waiting returns the ID of the waiting candidate to, or of the first in
// line for "", or "" if there is none.
func (e *Elector) waiting(ctx context.Context, to string) (string, error) {
	e.statements.Add(1)
	var id string
	err := e.pool.QueryRow(ctx, "SELECT id FROM "+e.schema+".candidates WHERE name = $1 AND expires > clock_timestamp() "+
		"AND ($2 = '' OR id = $2) ORDER BY priority DESC, arrival LIMIT 1", e.name, to).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", e.ctxErr(ctx, e.wrap("finding the transfer's target", err))
	}
	return id, nil
}

var _ backend.TransferRequester = (*Elector)(nil)

// RequestTransfer implements backend.TransferRequester (election.
// RequestTransfer documents the contract): it writes the request into the
// election's row, naming the current leadership's token, in one statement
// whose trigger notifies the leader; the leader honours it as Transfer
// with KeepLeading does, or answers in the row why it cannot. It returns
// the new leader once it leads, and gives up after two lease windows.
func (e *Elector) RequestTransfer(ctx context.Context, to string) (election.Leader, error) {
	cur, err := e.Leader(ctx)
	if err != nil {
		return election.Leader{}, err
	}
	if cur.ID == to {
		return cur, nil
	}
	es := e.lst.subscribe(e.elChan)
	defer e.lst.unsubscribe(es)
	es.awaitReady(ctx, listenWait)
	e.statements.Add(1)
	var ok bool
	if err := e.pool.QueryRow(ctx, "SELECT "+e.schema+".request_transfer($1, $2, $3)", e.name, int64(cur.Token), to).Scan(&ok); err != nil {
		return election.Leader{}, e.ctxErr(ctx, e.wrap("requesting a transfer", err))
	}
	if !ok {
		return election.Leader{}, fmt.Errorf("%w: postgres election %q: %s no longer leads", election.ErrTransferFailed, e.name, cur)
	}
	bound := 2 * e.o.Window()
	octx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	for {
		e.statements.Add(1)
		var (
			answer *string
			none   *bool
		)
		err := e.pool.QueryRow(octx, "SELECT request_error, request_none FROM "+e.schema+".elections WHERE name = $1 AND request_token = $2",
			e.name, int64(cur.Token)).Scan(&answer, &none)
		if err == nil && answer != nil {
			if none != nil && *none {
				return election.Leader{}, fmt.Errorf("%w: %s answered: %s", election.ErrNoCandidate, cur, *answer)
			}
			return election.Leader{}, fmt.Errorf("%w: %s answered: %s", election.ErrTransferFailed, cur, *answer)
		}
		if l, _, err := e.readLeader(octx); err == nil && !l.IsZero() && l.Token != cur.Token {
			if to != "" && l.ID != to {
				return l, fmt.Errorf("%w: %s leads now, not %s", election.ErrTransferFailed, l, to)
			}
			return l, nil
		}
		select {
		case <-es.C:
		case <-time.After(e.pollEvery()):
		case <-octx.Done():
			if ctx.Err() != nil {
				return election.Leader{}, ctx.Err()
			}
			return election.Leader{}, fmt.Errorf("%w: %s did not hand over within %v", election.ErrTransferFailed, cur, bound)
		case <-e.closing:
			return election.Leader{}, election.ErrClosed
		}
	}
}

// serveRequest honours a transfer request to to ("" for the first in
// line) of leadership term, as Transfer with KeepLeading; a request it
// cannot honour is answered in the election's row.
func (e *Elector) serveRequest(c *candidacy, t *election.Term, to string) {
	defer c.serving.Store(false)
	ctx, cancel := context.WithTimeout(e.bg, 2*e.o.Window())
	defer cancel()
	e.log.Info("postgres election: transferring the leadership as requested", "election", e.name, "to", to)
	err := e.Transfer(ctx, t, to, election.KeepLeading)
	if err == nil || (!errors.Is(err, election.ErrNoCandidate) && t.Err() != nil) {
		if err != nil {
			e.log.Warn("postgres election: a requested transfer failed; the normal order resumes", "election", e.name, "to", to, "err", err)
		}
		return
	}
	e.statements.Add(1)
	if _, aerr := e.pool.Exec(ctx, "SELECT "+e.schema+".answer_transfer($1, $2, $3, $4)", e.name, c.token, err.Error(), errors.Is(err, election.ErrNoCandidate)); aerr != nil {
		e.log.Warn("postgres election: answering a transfer request failed", "election", e.name, "err", aerr)
	}
}
