package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
	"github.com/electkit/election/internal/record"
	"github.com/electkit/election/internal/skeleton"
)

var (
	_ backend.Lister     = (*Elector)(nil)
	_ backend.Transferer = (*Elector)(nil)
)

// waiter is a waiting candidate as read from the queue.
type waiter struct {
	kv *mvccpb.KeyValue
	ld election.Leader
}

// readQueue reads the whole queue, values and all, and returns its
// waiting candidates in the order they would lead: the leader's own
// queue key, keys without a lease and keys that are not this package's
// are left out. It costs the whole queue on the server (a sorted range):
// Candidates and Transfer use it, never a registration or a handover.
func (e *Elector) readQueue(ctx context.Context) ([]waiter, error) {
	resp, err := e.cli.Txn(ctx).Then(
		clientv3.OpGet(e.lay.queue, clientv3.WithRange(e.lay.queueEnd), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend)),
		clientv3.OpGet(e.lay.leader, clientv3.WithRange(e.lay.leadEnd), clientv3.WithLimit(1)),
	).Commit()
	if err != nil {
		return nil, err
	}
	leaderKey := ""
	if kvs := resp.Responses[1].GetResponseRange().GetKvs(); len(kvs) > 0 {
		leaderKey = record.Key(kvs[0].Value)
	}
	var ws []waiter
	for _, kv := range resp.Responses[0].GetResponseRange().GetKvs() {
		if string(kv.Key) == leaderKey || kv.Lease == 0 {
			continue
		}
		if lease, err := e.lay.queueLease(string(kv.Key)); err != nil || lease != kv.Lease {
			continue
		}
		ld, err := record.Decode(kv.Value)
		if err != nil {
			continue
		}
		ws = append(ws, waiter{kv: kv, ld: ld})
	}
	return ws, nil
}

// Candidates lists the candidates waiting in the election, in the order
// they would lead (see election.Candidates), with one read of the whole
// queue: one range request of the queue keys.
func (e *Elector) Candidates(ctx context.Context) ([]election.Candidate, error) {
	if err := skeleton.CheckContext(ctx); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if e.isClosed() {
		return nil, election.ErrClosed
	}
	ws, err := e.readQueue(ctx)
	if err != nil {
		return nil, e.storeErr(ctx, "reading the queue", err)
	}
	out := make([]election.Candidate, 0, len(ws))
	for _, w := range ws {
		out = append(out, election.Candidate{ID: w.ld.ID, Value: w.ld.Value, Priority: w.ld.Priority})
	}
	return out, nil
}

func (e *Elector) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// target reads the queue (readQueue) and returns the waiting candidate a
// transfer from c to the ID to ("" for the best) goes to, if there is one.
func (e *Elector) target(ctx context.Context, c *candidacy, to string) (waiter, bool, error) {
	ws, err := e.readQueue(ctx)
	if err != nil {
		return waiter{}, false, err
	}
	i := slices.IndexFunc(ws, func(w waiter) bool { return string(w.kv.Key) != c.key && (to == "" || w.ld.ID == to) })
	if i < 0 {
		return waiter{}, false, nil
	}
	return ws[i], true, nil
}

// leading returns the current candidacy if t is its valid Term.
func (e *Elector) leading(t *election.Term) (*candidacy, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, election.ErrClosed
	}
	c := e.cand
	if c == nil || c.lc == nil || c.lc.Term() != t || t.Err() != nil {
		return nil, fmt.Errorf("%w: %s does not lead with %v", election.ErrNotLeader, e.o.ID, t)
	}
	return c, nil
}

// Transfer hands t's leadership on (see election.Transfer). It reads the
// queue to find the target (one read of the whole queue), then hands over
// in one transaction — deleting the leader key and its own queue key,
// putting N/_t, which names the target's queue key, under the target's
// lease — and watches the leader key until the target has created it.
func (e *Elector) Transfer(ctx context.Context, t *election.Term, to string, fallback election.Fallback) error {
	if err := skeleton.CheckContext(ctx); err != nil {
		return err
	}
	c, err := e.leading(t)
	if err != nil {
		return err
	}
	w, ok, err := e.target(ctx, c, to)
	if err != nil {
		return e.storeErr(ctx, "reading the queue for a transfer", err)
	}
	if !ok {
		err := fmt.Errorf("%w: transfer of %s's leadership of %s: %s", election.ErrNoCandidate, e.o.ID, e.name, skeleton.NotWaiting(to))
		if fallback == election.StepDown {
			return errors.Join(err, e.Resign(ctx))
		}
		return err
	}
	return e.handOver(ctx, c, w.kv, w.ld.ID, fmt.Errorf("%w to %s", election.ErrTransferred, w.ld.ID))
}

// handOver ends c's Term with cause (P3: before any request), then, in one
// transaction guarded by c's leadership and the target's queue key,
// deletes the leader key and c's queue key, names the target in the
// hand-over key under the target's lease, and touches the target's key so
// that its watch wakes it. Then it waits for the target to lead.
func (e *Elector) handOver(ctx context.Context, c *candidacy, target *mvccpb.KeyValue, id string, cause error) error {
	e.mu.Lock()
	if e.cand != c {
		e.mu.Unlock()
		return fmt.Errorf("%w: %s's Term ended before the hand-over", election.ErrNotLeader, e.o.ID)
	}
	e.cand = nil
	if !slices.Contains(e.pending, c) && !e.closed {
		e.pending = append(e.pending, c)
	}
	token, lc := c.token, c.lc
	e.mu.Unlock()
	e.end(c, cause)
	if lc != nil {
		lc.AwaitHooks(backend.HandOverWait) // the old Term's Observer.Ended before the next leader
	}
	tkey := string(target.Key)
	resp, err := e.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(c.lkey), "=", token),
		clientv3.Compare(clientv3.CreateRevision(tkey), "=", target.CreateRevision),
		clientv3.Compare(clientv3.LeaseValue(tkey), "=", target.Lease),
	).Then(
		clientv3.OpDelete(e.lay.leader, clientv3.WithRange(e.lay.leadEnd)), // c's, and a reservation
		clientv3.OpDelete(c.key),
		clientv3.OpPut(e.lay.transfer, tkey, clientv3.WithLease(clientv3.LeaseID(target.Lease))),
		clientv3.OpPut(tkey, "", clientv3.WithIgnoreValue(), clientv3.WithIgnoreLease()),
	).Commit()
	if err != nil || !resp.Succeeded {
		e.releaseLater(c, false) // the normal order: the keys go as after Resign
		if err != nil {
			return fmt.Errorf("%w: handing over to %s: %w", election.ErrTransferFailed, id, e.storeErr(ctx, "handing over", err))
		}
		return fmt.Errorf("%w: %s left, or the leadership was lost, just before the hand-over; the next leader comes from the normal order", election.ErrTransferFailed, id)
	}
	e.mu.Lock()
	c.keyGone = true // a private lease, emptied, is revoked later (release)
	e.mu.Unlock()
	return e.awaitTakeover(ctx, tkey, id, resp.Header.Revision)
}

// awaitTakeover watches the leader key and the hand-over key from after
// the hand-over at rev until the target, whose queue key is tkey, creates
// the leader key (nil), the hand-over key goes without it (the target
// left), or one lease window or ctx ends: then the hand-over key is
// deleted (guarded by its revision), and the normal order resumes.
func (e *Elector) awaitTakeover(ctx context.Context, tkey, id string, rev int64) error {
	bound := e.o.Window()
	wctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	stop := context.AfterFunc(e.bg, cancel)
	defer stop()
	ch := e.cli.Watch(clientv3.WithRequireLeader(wctx), e.lay.leader, clientv3.WithRange(after(e.lay.transfer)), clientv3.WithRev(rev+1))
	why := fmt.Errorf("%w: %s did not lead within %v; the hand-over lapsed and the next leader comes from the normal order", election.ErrTransferFailed, id, bound)
watching:
	for wr := range ch {
		if wr.Err() != nil || wr.Canceled {
			break
		}
		gone := false
		for _, ev := range wr.Events {
			switch k := string(ev.Kv.Key); {
			case strings.HasPrefix(k, e.lay.leader):
				if ev.Type == clientv3.EventTypePut && record.Key(ev.Kv.Value) == tkey {
					return nil
				}
			case k == e.lay.transfer:
				gone = gone || ev.Type == clientv3.EventTypeDelete
			}
		}
		if gone {
			why = fmt.Errorf("%w: %s left before it led; the next leader comes from the normal order", election.ErrTransferFailed, id)
			break watching
		}
	}
	// Withdraw the hand-over if it is still there, then look once more:
	// the target may have led just now.
	lctx, lcancel := context.WithTimeout(e.bg, e.o.Window())
	defer lcancel()
	resp, err := e.cli.Txn(lctx).
		If(clientv3.Compare(clientv3.ModRevision(e.lay.transfer), "=", rev)).
		Then(clientv3.OpDelete(e.lay.transfer), e.lay.leadersOp()).
		Else(e.lay.leadersOp()).Commit()
	if err == nil {
		rs := resp.Responses
		if kvs := rs[len(rs)-1].GetResponseRange().GetKvs(); len(kvs) > 0 && record.Key(kvs[0].Value) == tkey {
			return nil
		}
	} else {
		e.log.Warn("etcd election: withdrawing a lapsed hand-over failed; it goes with its target's lease or candidacy", "key", e.lay.transfer, "target", tkey, "err", err)
	}
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case e.bg.Err() != nil:
		return election.ErrClosed
	}
	return why
}

// claimHandoff creates the leader key for c as the target of a pending
// hand-over: if the leader key is absent, c's key is its own and the
// hand-over key names it; the hand-over key goes in the same transaction.
// Like claim, it returns the view of its Else if it fails.
func (f *follower) claimHandoff() (*view, int64, time.Time, error) {
	e, c, s := f.e, f.c, f.c.s
	e.reads.Add(1)
	sent, err := f.renewed()
	if err != nil {
		return nil, 0, time.Time{}, err
	}
	resp, err := e.commit(c.ctx, true, e.cli.Txn(c.ctx).If(
		e.lay.noLeader(),
		clientv3.Compare(clientv3.CreateRevision(c.key), "=", c.rev),
		clientv3.Compare(clientv3.LeaseValue(c.key), "=", s.lease),
		clientv3.Compare(clientv3.Value(e.lay.transfer), "=", c.key),
	).Then(e.leaderPut(c), clientv3.OpDelete(e.lay.transfer)).
		Else(e.nearOps(c, f.from)...))
	if err != nil {
		return nil, 0, sent, err
	}
	if resp.Succeeded {
		return nil, resp.Header.Revision, sent, nil
	}
	return f.nearOrLook(resp.Header.Revision, resp.Responses)
}

// dropStaleTransfer deletes the hand-over key kv if the queue key it names
// is gone (its candidacy ended without taking it) or it names none: it
// would otherwise hold the election until its lease ends, which, on a
// shared Session, may be never. It reports whether it did.
func (f *follower) dropStaleTransfer(kv *mvccpb.KeyValue) bool {
	e, c := f.e, f.c
	cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(e.lay.transfer), "=", kv.ModRevision)}
	if named := string(kv.Value); strings.HasPrefix(named, e.lay.queue) {
		cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(named), "=", 0))
	}
	resp, err := e.commit(c.ctx, true, e.cli.Txn(c.ctx).If(cmps...).Then(clientv3.OpDelete(e.lay.transfer)))
	if err != nil {
		f.failed("deleting a stale hand-over key", err)
		return false
	}
	if resp.Succeeded {
		e.log.Warn("etcd election: deleted a hand-over key whose target is gone", "key", e.lay.transfer, "target", string(kv.Value))
	}
	return resp.Succeeded
}
