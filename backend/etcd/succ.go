package etcd

import (
	"context"
	"fmt"
	"math/bits"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electkit/election"
	"github.com/electkit/election/internal/record"
)

// This file holds the leader's successor: the candidate whose queue key
// sorts just below the leader's, which is next when nothing is queued
// above the leader's. The leader reads it once it leads, and its watch,
// which runs from the queue's beginning while it leads, keeps it up to
// date: a newcomer between them is the successor from then on, and the
// successor's going makes the leader read again. A release then hands
// over to it in the transaction that deletes the leader's keys (see
// handOverOps): it creates the successor's leadership key, named as the
// successor names it (its arrival), under the successor's lease, and puts
// the successor's mark (markKey) with its record naming that key, as
// Transfer's hand-over does. The successor sees that put on its own watch
// (and, when it watched up to the leadership keys, the leader's key go
// and its own come in the same revision), and leads with no request
// after that event. The candidate behind it, whose watch ends just past
// the successor's queue key, short of the mark, sees nothing: it sleeps
// on, and is the next one's successor in turn. One candidate is woken
// per handover (P9), and the new leader
// makes one read, begun as its Campaign returns: its own successor (and,
// unless it saw its key come, a check of it: checkHandover). A Resign
// while that read is out waits for it (awaitSucc) and hands over to the
// successor it finds.
// A release that cannot hand over (no successor known, a newcomer queued
// between, one queued above the leader, a reservation of an earlier
// version, a pending hand-over) deletes the leader's keys alone, and the
// candidate at the head claims, as after a leader's crash.

// succReads is how many reads of two windows each the leader makes to
// find its successor, once it leads: one, of the candidates that arrived
// within 256 revisions after it. A successor further below is left
// unknown until the watch shows one (a newcomer between), and a release
// without one does not hand over: the head of the queue claims after it.
// A burst of elections started at once makes every leader read as its
// waiters' keys are still being created, and learn of them from the
// watch: a second read there costs every election a request.
const succReads = 1

// windowsBelow returns the starts of the windows below key, a queue key,
// nearest first: window i spans 2^windowBits[i] ranks below the key's
// rank, the last starting at the queue's beginning. As above (windows),
// the arrival windows stop at the first that reaches past the latest
// arrival possible for the key's priority.
func (l layout) windowsBelow(key string, n int) []string {
	hi, lo, ok := l.rank(key)
	if !ok {
		return []string{l.queue()}
	}
	var starts []string
	borrowed := false
	for _, b := range windowBits {
		if len(starts) == n {
			break
		}
		h, lw := hi, lo
		if b < 64 {
			if borrowed {
				continue
			}
			var borrow uint64
			lw, borrow = bits.Sub64(lo, 1<<b, 0)
			h, borrow = bits.Sub64(hi, 0, borrow)
			if borrow != 0 {
				break
			}
			borrowed = lw < 1<<63 // past every arrival a revision can have (^arrival ≥ 2^63)
		} else {
			var borrow uint64
			h, borrow = bits.Sub64(hi, 1<<(b-64), 0)
			if borrow != 0 {
				break
			}
		}
		starts = append(starts, fmt.Sprintf("%s%016x%016x", l.queue(), h, lw))
	}
	return append(starts, l.queue())
}

// succView is a read of the queue just below the leader c's key.
type succView struct {
	rev  int64
	succ *mvccpb.KeyValue // the queue key just below c's, or nil
}

// readSucc reads the candidate just below c, the leader, two windows at a
// time, each range sorted down with a limit of one (etcd reads every key
// of such a range, values and all: the windows bound it), in transactions
// of ranges alone (reads, not logged).
func (e *Elector) readSucc(ctx context.Context, c *candidacy) (succView, error) {
	starts := e.lay.windowsBelow(c.key, 2*succReads)
	hi := c.key
	var rev int64
	for i := 0; i < succReads && hi != e.lay.queue(); i++ {
		w1 := starts[min(2*i, len(starts)-1)]
		w2 := starts[min(2*i+1, len(starts)-1)]
		down := []opOption{withKeysDescending(), withLimit(1)}
		resp, err := e.commit(ctx, true, newTxn().Then(
			opGet(w1, append(down, withRange(hi))...),
			opGet(w2, append(down, withRange(w1))...)))
		if err != nil {
			return succView{}, err
		}
		rev = resp.Header.Revision
		for j, end := range []string{w1, w2} {
			if kvs := resp.Responses[j].GetResponseRange().GetKvs(); len(kvs) > 0 {
				return succView{rev: rev, succ: kvs[0]}, nil
			}
			if end == e.lay.queue() {
				return succView{rev: rev}, nil
			}
		}
		hi = w2
	}
	return succView{rev: rev}, nil // none within the windows read: unknown until the watch shows one
}

// noteSucc applies ev, an event of a queue key below c's while c leads, to
// c's successor, and reports whether c must read it again (it went).
func (e *Elector) noteSucc(c *candidacy, ev *clientv3.Event) (reread bool) {
	kv := ev.Kv
	k := string(kv.Key)
	e.mu.Lock()
	defer e.mu.Unlock()
	cur := c.succ
	switch {
	case ev.Type == clientv3.EventTypeDelete:
		if cur != nil && k == string(cur.Key) {
			c.succ = nil
			return true
		}
	case cur != nil && k == string(cur.Key):
		c.succ = kv // put again: the release compares its lease and record
	case kv.Lease != 0 && kv.CreateRevision == kv.ModRevision && (cur == nil || k > string(cur.Key)):
		if lease, err := e.lay.queueLease(k); err == nil && lease == kv.Lease {
			c.succ = kv // a newcomer between c and its successor
		}
	}
	return false
}

// handOverOps returns what c's release adds to its transaction to hand
// over to its successor, succ: a transaction that, if succ's key is still
// the one c knows (created, last put and leased as c read it), nothing is
// queued between them or above c's key, c's leadership key (lkey, created
// at token) leads with nothing after it and no hand-over of an earlier
// version is pending, creates succ's leadership key under succ's lease,
// named for its arrival, with its record, and puts succ's mark saying
// that it heads the queue. c's own keys go in the same transaction
// (release), whatever this one does. ok is false if succ's key or record
// is not this package's.
//
// The Compares stay off the ranges where the election's past piles up:
// etcd keeps a deleted key in its index until the history is compacted,
// and a range Compare visits every key of its range, deleted or not.
// Each handover leaves the old leader's queue key above the new leader
// and its leadership key before the new one, so a Compare over the whole
// queue above c, or over every leadership key, costs one more key per
// handover until a compaction (BENCHMARKS.md). Neither range needs the
// check:
//   - Leadership keys before lkey: while lkey exists, only c's own
//     hand-overs create a leadership key (a claim needs none there), each
//     in the transaction that deletes lkey. So lkey by its create
//     revision, and nothing after it, say that c leads alone.
//   - The queue above c, of c's priority (headed): c headed the queue
//     when its Term began, and while its leadership key exists a create
//     refuses a key that would sort above c's with c's priority (a
//     newcomer's arrival is older than the revision c's leadership key is
//     named for: etcd.go, the create's Compares). Only a higher priority
//     can queue above c, so the range compared begins at the next
//     priority. A Term a Transfer or a preemption began may have
//     candidates of its priority above it: that release compares the
//     whole queue above c, and, if one is there, hands over to no one
//     (the head of the queue claims).
//
// Keys put there by another hand, which no candidate of this package
// makes, are not candidates (a leadership key of no candidacy, a queue
// key of c's priority above c's): c's hand-over passes over them, as c's
// guard does while it leads.
func (e *Elector) handOverOps(c *candidacy, lkey string, token int64, headed bool, succ *mvccpb.KeyValue) (op *pb.RequestOp, ok bool) {
	skey := string(succ.Key)
	name, err := e.lay.handedKey(skey)
	if err != nil {
		return nil, false
	}
	if lease, err := e.lay.queueLease(skey); err != nil || succ.Lease == 0 || lease != succ.Lease {
		// Put again by another hand, under another lease or none: the key
		// made for it would be named for one lease and held by another.
		return nil, false
	}
	ld, err := record.Decode(succ.Value)
	if err != nil {
		return nil, false
	}
	to := election.Options{ID: ld.ID, Priority: ld.Priority}
	rec := string(record.EncodeLeader(to, ld.Value, skey))
	above := past(c.key)
	if headed {
		above = e.lay.priorityEnd(c.key)
	}
	return opTxn([]*pb.Compare{
		// succ's key is as read: a put again (another lease or value), or
		// a delete and a create, would have moved its mod revision.
		cmpMod(skey, succ.ModRevision),
		emptyIn(past(skey), c.key),
		emptyIn(above, e.lay.queueEnd()),
		// c's leadership key leads: it exists at c's token, and nothing
		// sorts after it (a reservation, or the key made for succ).
		cmpCreate(lkey, token),
		emptyIn(after(lkey), e.lay.leadEnd()),
		cmpCreate(e.lay.transfer(), 0),
	}, []*pb.RequestOp{opPut(name, rec, withLease(succ.Lease)), e.markOp(skey, to, ld.Value, name, succ.Lease, true)}, nil), true
}

// markOp puts the hand-over mark of the candidate whose queue key is
// tkey, under its lease, with its record naming lkey, the leadership key
// the same transaction creates for it (Options to and value are the
// record's), and head: the candidate heads the queue (a release to the
// candidate next in line; see candidacy.headed). The event of this put, on the candidate's own watch, tells
// it that it leads, whatever the end of its watch: it may have watched
// only up to the queue key of the candidate that leads now, which it did
// not know leads. The watch of the candidate behind it ends short of the
// mark: it sleeps on (P9).
func (e *Elector) markOp(tkey string, to election.Options, value []byte, lkey string, lease int64, head bool) *pb.RequestOp {
	return opPut(e.lay.markKey(tkey), string(record.EncodeMark(to, value, lkey, head)), withLease(lease))
}

// succRead is a read of the leader's successor in flight (guard): its
// outcome, and the events of the queue below the leader's key that came
// while it was out, which apply after its view.
type succRead struct {
	done chan struct{} // closed once sv and err are set
	sv   succView
	err  error
	evs  []*clientv3.Event
	over bool // more events came than evs keeps: read again
}

// maxSuccEvents bounds the events a read of the successor keeps while it
// is out.
const maxSuccEvents = 64

// succReadsOut holds the reads of a successor that are out, by candidacy,
// from startSuccRead until the guard has applied or dropped them: a
// Resign that comes while its leader's is out waits for it (awaitSucc).
// A map beside the candidacies rather than a field of each: a read is out
// for a round trip after a Term begins, and a process may hold thousands
// of leaders.
var succReadsOut sync.Map // *candidacy → *succRead

// startSuccRead starts a read of c's successor in a goroutine of its own,
// counted in e.wg (f's goroutine counts there already). The read is not
// canceled when c ends (a Resign just after the Term began): a request
// canceled in flight makes clientv3 log a warning, and this one is a
// read that returns in a round trip. It ends within one lease window
// however the store answers, within the bound Close waits for releases.
func (f *follower) startSuccRead() *succRead {
	e, c := f.e, f.c
	rd := &succRead{done: make(chan struct{})}
	succReadsOut.Store(c, rd)
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), e.o.Window())
		defer cancel()
		rd.sv, rd.err = e.readSucc(ctx, c)
		close(rd.done)
	}()
	return rd
}

// note keeps ev, an event of the queue below the leader's key, for after
// the read.
func (rd *succRead) note(ev *clientv3.Event) {
	if len(rd.evs) == maxSuccEvents {
		rd.over = true
		return
	}
	rd.evs = append(rd.evs, ev)
}

// endSuccRead applies rd, done: c's successor as read, then the events
// that came meanwhile. It reports whether the read failed while c goes
// on: the guard reads again after a pause. Until then c.succ stays as it
// was: a release that finds it stale hands over to no one (handOverOps'
// compares fail), and the head of the queue claims, as after a crash.
func (f *follower) endSuccRead(rd *succRead) (retry bool) {
	e, c := f.e, f.c
	if rd.err != nil {
		succReadsOut.Delete(c)
		if c.ctx().Err() != nil {
			return false
		}
		e.retryLog(c, "reading the candidate next in line", rd.err)
		return true
	}
	// Under e.mu, with the read's entry dropped in the same hold: a
	// Resign's awaitSucc keeps the read's successor only while the
	// entry is there, never over what the guard has applied since.
	e.mu.Lock()
	c.succ = rd.sv.succ
	succReadsOut.Delete(c)
	e.mu.Unlock()
	f.succRev = rd.sv.rev
	for _, ev := range rd.evs {
		if ev.Kv.ModRevision > f.succRev && e.noteSucc(c, ev) {
			f.needSucc = true
		}
	}
	if rd.over {
		f.needSucc = true
	}
	return false
}

// awaitSucc waits, for at most releaseWait or until ctx ends, for the read
// of the successor of e's leader if it is still out (a Resign just after
// the Term began, which the read began before), and keeps the successor
// it found if the leader knows none, so that the release hands over to it.
// Without one, the release deletes the leader's keys alone and the head of
// the queue claims: a round trip more. The successor as read may be stale
// by the release (events the guard has not applied yet): the hand-over's
// Compares refuse it then (handOverOps), and the keys go alone.
func (e *Elector) awaitSucc(ctx context.Context) {
	e.mu.Lock()
	c := e.cand
	known := c == nil || c.lc == nil || c.succ != nil
	e.mu.Unlock()
	if known {
		return
	}
	v, ok := succReadsOut.Load(c)
	if !ok {
		return
	}
	rd := v.(*succRead)
	t := time.NewTimer(releaseWait)
	defer t.Stop()
	select {
	case <-rd.done:
	case <-t.C:
		return
	case <-ctx.Done():
		return
	}
	if rd.err != nil {
		return
	}
	e.mu.Lock()
	if v, ok := succReadsOut.Load(c); ok && v == rd {
		c.succ = rd.sv.succ // the guard applies it, and the events since, after
	}
	e.mu.Unlock()
}
