package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
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
	resp, err := e.send(ctx, newTxn().Then(
		opGet(e.lay.queue(), withRange(e.lay.queueEnd()), withKeysDescending()),
		opGet(e.lay.leader(), withRange(e.lay.leadEnd()), withLimit(1)),
	))
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
// in one transaction (handOver), after which the target leads.
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
		err := fmt.Errorf("%w: transfer of %s's leadership of %s: %s", election.ErrNoCandidate, e.o.ID, e.Name(), skeleton.NotWaiting(to))
		if fallback == election.StepDown {
			return errors.Join(err, e.Resign(ctx))
		}
		return err
	}
	return e.handOver(ctx, c, w.kv, w.ld.ID, fmt.Errorf("%w to %s", election.ErrTransferred, w.ld.ID))
}

// handOver ends c's Term with cause (P3: before any request), then hands
// the leadership to the candidate whose queue key is target in one
// transaction, guarded by c's leadership and the target's queue key: it
// deletes c's leadership key and queue key and any reservation, creates
// the target's leadership key (layout.handedKey) under the target's lease
// — its create revision is the target's token — and puts the target's
// queue key again, under its lease, with its record naming that key: the
// event of that put on the target's own watch tells the target it leads,
// with no request after it. A target that had reserved the leadership
// after c's leads on the deletion of c's key alone, as after a release.
// The target leads once the transaction has committed; it is not
// withdrawn (the target may lead already: only its lease's end or its
// release take the key).
func (e *Elector) handOver(ctx context.Context, c *candidacy, target *mvccpb.KeyValue, id string, cause error) error {
	e.mu.Lock()
	if e.cand != c {
		e.mu.Unlock()
		return fmt.Errorf("%w: %s's Term ended before the hand-over", election.ErrNotLeader, e.o.ID)
	}
	e.cand = nil
	e.keepPending(c)
	token, lc, next := c.token, c.lc, c.reserved()
	e.mu.Unlock()
	e.end(c, cause)
	if lc != nil {
		lc.AwaitHooks(backend.HandOverWait) // the old Term's Observer.Ended before the next leader
	}
	tkey := string(target.Key)
	failed := func(err error) error {
		e.releaseLater(c, false) // the normal order: the keys go as after Resign
		return fmt.Errorf("%w: handing over to %s: %w", election.ErrTransferFailed, id, err)
	}
	ld, err := record.Decode(target.Value)
	if err != nil {
		return failed(fmt.Errorf("queue key %s: %v", tkey, err))
	}
	lkey, err := e.lay.handedKey(tkey)
	if err != nil {
		return failed(fmt.Errorf("queue key %s: %v", tkey, err))
	}
	to := election.Options{ID: ld.ID, Priority: ld.Priority}
	rec := string(record.EncodeLeader(to, ld.Value, tkey))
	touch := opPut(tkey, "", withIgnoreValue(), withIgnoreLease())
	// The target's hand-over mark, naming the leadership key the
	// transaction creates for it: the event of this put tells the target
	// it leads.
	mark := e.markOp(tkey, to, ld.Value, lkey, target.Lease, false)
	put := opPut(lkey, rec, withLease(target.Lease))
	var resp *clientv3.TxnResponse
	// c's view of the reservation after it (next) may be behind: a
	// transaction that fails on it alone reads the reservation in its
	// Else and is made again, a few times at most.
	own := e.lkeyOf(c) // c's leadership key
	for try := 0; ; try++ {
		cmps := []*pb.Compare{
			cmpCreate(own, token), // c leads (see handOverOps: no Compare over the leadership keys before c's)
			cmpCreate(tkey, target.CreateRevision),
			cmpLease(tkey, target.Lease),
			cmpCreate(e.lay.transfer(), 0),
		}
		ops := []*pb.RequestOp{opDelete(own), opDelete(c.key), opDelete(e.lay.markKey(c.key))}
		switch {
		case next.key == tkey:
			// The target reserved after c: it leads on the deletion of
			// c's key; the touch of its queue key wakes the one behind it.
			cmps = append(cmps, emptyIn(after(own), next.lkey), cmpLease(next.lkey, next.lease), emptyIn(after(next.lkey), e.lay.leadEnd()))
			ops = append(ops, touch)
		case next.lkey != "":
			// Another candidate's reservation goes: the target leads next.
			cmps = append(cmps, emptyIn(after(own), next.lkey), emptyIn(after(next.lkey), e.lay.leadEnd()))
			ops = append(ops, opDelete(next.lkey), put, mark)
		default:
			cmps = append(cmps, emptyIn(after(own), e.lay.leadEnd()))
			ops = append(ops, put, mark)
		}
		resp, err = e.send(ctx, newTxn().If(cmps...).Then(ops...).Else(e.lay.leadersOp()))
		if err != nil {
			return failed(e.storeErr(ctx, "handing over", err))
		}
		if resp.Succeeded {
			break
		}
		// c's view of the reservation was behind, if c's key is still
		// the first and the one after it is not the one c knew of: try
		// again with what the Else read.
		kvs := resp.Responses[0].GetResponseRange().GetKvs()
		seen := nextUp{}
		if len(kvs) > 1 {
			seen = nextUp{key: record.Key(kvs[1].Value), lease: kvs[1].Lease, lkey: string(kvs[1].Key)}
		}
		if try == 2 || len(kvs) == 0 || kvs[0].CreateRevision != token || seen.lkey == next.lkey {
			return failed(fmt.Errorf("%s left, or the leadership was lost, just before the hand-over; the next leader comes from the normal order", id))
		}
		next = seen
	}
	e.mu.Lock()
	c.keyGone = true // a private lease, emptied, is revoked later (release)
	e.mu.Unlock()
	return nil
}

// checkHandover reads whether c's leadership key, made for c by a
// hand-over (or found its own by a read), is the one c leads with at
// token, once c's Term has begun: a read-only transaction of two Compares
// (and a count, to make it linearizable).
// If it is not — a queue record naming a key that was never created at
// token, which no hand-over of this package writes, or a key deleted
// since — c's Term ends at once, and checkHandover reports false. If the
// read fails, renewals stop counting and the guard begins by reading the
// key again (rewatch), as after a broken watch.
func (f *follower) checkHandover(token int64) bool {
	e, c := f.e, f.c
	e.mu.Lock()
	lkey := e.lkeyOf(c)
	e.mu.Unlock()
	// The count-only read makes the transaction linearizable: etcd serves
	// one of Compares alone from the member it reaches, which may not
	// have applied the hand-over yet. As the read of the successor
	// (startSuccRead), it is not canceled when c ends as its Term begins
	// (clientv3 logs a warning for a request canceled in flight), and ends
	// within one lease window.
	ctx, cancel := context.WithTimeout(context.Background(), e.o.Window())
	defer cancel()
	resp, err := e.commit(ctx, true, newTxn().
		If(cmpCreate(lkey, token), cmpLease(lkey, int64(c.s.lease))).
		Then(opGet(lkey, withCountOnly())))
	switch {
	case err != nil:
		if c.ctx().Err() == nil {
			e.o.Logger.Warn("etcd election: checking the leadership key of a hand-over failed; the guard reads it again before renewals count", "key", lkey, "token", token, "err", err)
		}
		// Fail closed: a key that never existed sends the watch no
		// event. Renewals stop counting, and the guard opens its watch
		// again with a read of the key (rewatch), retried until it
		// works or the Term runs out.
		c.watched.Store(false)
		f.closeWatch()
	case !resp.Succeeded:
		e.oust(c, fmt.Errorf("%w: leader key %s is not the one created at token %d under lease %016x: deleted since, or never created by a hand-over",
			election.ErrSessionLost, lkey, token, uint64(c.s.lease)))
		return false
	}
	return true
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
	resp, err := e.commit(c.ctx(), true, newTxn().If(
		e.lay.noLeader(),
		cmpCreate(c.key, c.rev),
		cmpLease(c.key, int64(s.lease)),
		cmpValue(e.lay.transfer(), c.key),
	).Then(e.leaderPut(c), opDelete(e.lay.transfer())).
		Else(e.nearOps(c, f.fromKey())...))
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
	cmps := []*pb.Compare{cmpMod(e.lay.transfer(), kv.ModRevision)}
	if named := string(kv.Value); strings.HasPrefix(named, e.lay.queue()) {
		cmps = append(cmps, cmpCreate(named, 0))
	}
	resp, err := e.commit(c.ctx(), true, newTxn().If(cmps...).Then(opDelete(e.lay.transfer())))
	if err != nil {
		f.failed("deleting a stale hand-over key", err)
		return false
	}
	if resp.Succeeded {
		e.o.Logger.Warn("etcd election: deleted a hand-over key whose target is gone", "key", e.lay.transfer(), "target", string(kv.Value))
	}
	return resp.Succeeded
}
