package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
	"github.com/electkit/election/internal/record"
)

// A candidacy's goroutine (follow) keeps one watch, on the range from its
// own queue key up to what it waits for:
//
//   - a waiter with candidates ahead watches up to the key just ahead of
//     it, or, when that key heads the queue, up to the leader key;
//   - the head of the queue, and the leader, watch up to the leader key.
//
// So the watch sees its own key's deletion or change (another client's
// hand: an etcdctl del, a deleted prefix, a revoked lease, a re-put
// without the lease), the departure of the key ahead, a newcomer that
// sorts between them (the one candidate it displaces, P9), and the leader
// key's. A handover — the leader deletes the leader key and its queue key
// in one transaction, or its lease expires and takes both — wakes the one
// candidate whose range holds them, which tries to create the leader key
// at once; the others sleep on.
//
// The watch starts at the revision after the read it follows from, and is
// kept while the range stays the same, so the candidate that heads the
// queue goes on watching, without a gap, from before it creates the leader
// key until its leadership ends. Fail-closed rule: a renewal extends the
// Term only if that watch was live both when the renewal was sent and when
// its reply came (renewLoop); when it breaks, it is opened again at the
// current revision and the keys are read and checked under it before it
// counts again.

// errUnwatched makes a renewal not count: the candidacy's watch did not
// cover its keys throughout it.
var errUnwatched = errors.New("etcd election: the candidate's keys were not watched throughout the renewal; it does not extend the term")

// oldLayoutPoll is how often a candidate that would lead looks again while
// a key of the previous layout (a leased key named the prefix plus 16 hex
// digits) may still be a leader of the election.
const oldLayoutPoll = 500 * time.Millisecond

// view is one read of the queue around a candidacy.
type view struct {
	rev   int64
	own   *mvccpb.KeyValue   // the candidacy's queue key (keys only), or nil
	above []*mvccpb.KeyValue // up to two keys just above where the read began (keys only)
	// last: above came from the last window, up to the queue's end, so
	// one key alone there heads the queue.
	last     bool
	leader   *mvccpb.KeyValue // the leader key, or nil
	old      *mvccpb.KeyValue // a leased key of the previous layout, or nil
	transfer *mvccpb.KeyValue // a pending hand-over's key, or nil
}

// lookOps reads c's key, the two keys just above from (the windows of
// aboveOp), the leader key and the first key of each range a key of the
// previous layout would be in.
func (e *Elector) lookOps(c *candidacy, from string, serializable bool) []clientv3.Op {
	opts := func(o ...clientv3.OpOption) []clientv3.OpOption {
		if serializable {
			o = append(o, clientv3.WithSerializable())
		}
		return o
	}
	return []clientv3.Op{
		clientv3.OpGet(c.key, opts()...),
		e.lay.aboveOp(from, serializable),
		clientv3.OpGet(e.lay.leader, opts()...),
		clientv3.OpGet(e.lay.prefix+"0", opts(clientv3.WithRange(e.lay.prefix+":"), clientv3.WithLimit(1))...),
		clientv3.OpGet(e.lay.prefix+"a", opts(clientv3.WithRange(e.lay.prefix+"g"), clientv3.WithLimit(1))...),
		clientv3.OpGet(e.lay.transfer, opts()...),
	}
}

// nearOps reads c's key, up to two keys of the first window above from,
// and the leader key: what a write carries (a read of every window is a
// read-only look's, or the claim's).
func (e *Elector) nearOps(c *candidacy, from string) []clientv3.Op {
	return []clientv3.Op{
		clientv3.OpGet(c.key),
		clientv3.OpGet(from, clientv3.WithRange(e.lay.firstWindow(from)), clientv3.WithLimit(2)),
		clientv3.OpGet(e.lay.leader),
		clientv3.OpGet(e.lay.transfer),
	}
}

// nearView reads the responses of nearOps(c, from). Its above holds keys
// of the first window only: empty, it says nothing of the windows beyond
// unless the first is the last.
func (e *Elector) nearView(rev int64, rs []*pb.ResponseOp, from string) *view {
	v := &view{rev: rev, last: e.lay.firstWindow(from) == e.lay.queueEnd}
	if kvs := rs[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
		v.own = kvs[0]
	}
	v.above = rs[1].GetResponseRange().GetKvs()
	if kvs := rs[2].GetResponseRange().GetKvs(); len(kvs) > 0 {
		v.leader = kvs[0]
	}
	if kvs := rs[3].GetResponseRange().GetKvs(); len(kvs) > 0 {
		v.transfer = kvs[0]
	}
	return v
}

// parseView reads the responses of lookOps(c, from, …).
func (e *Elector) parseView(rev int64, rs []*pb.ResponseOp, from string) *view {
	get := func(i int) []*mvccpb.KeyValue { return rs[i].GetResponseRange().GetKvs() }
	v := &view{rev: rev}
	v.above, v.last = readAbove(rs[1], len(e.lay.windows(from)))
	if kvs := get(0); len(kvs) > 0 {
		v.own = kvs[0]
	}
	if kvs := get(2); len(kvs) > 0 {
		v.leader = kvs[0]
	}
	if kvs := get(5); len(kvs) > 0 {
		v.transfer = kvs[0]
	}
	for _, i := range []int{3, 4} {
		for _, kv := range get(i) {
			if e.oldLayout(kv) {
				v.old = kv
			}
		}
	}
	return v
}

// oldLayout reports whether kv is a candidate key of the layout before
// this one: the prefix plus 16 lower-case hex digits, under a lease. Such
// a candidate of an older version of this package may lead by that
// layout's rules, so while one heads its range no candidate creates the
// leader key.
func (e *Elector) oldLayout(kv *mvccpb.KeyValue) bool {
	s, ok := strings.CutPrefix(string(kv.Key), e.lay.prefix)
	if !ok || len(s) != 16 || kv.Lease == 0 || s != strings.ToLower(s) {
		return false
	}
	_, err := strconv.ParseUint(s, 16, 64)
	return err == nil
}

// look reads the queue above from. Right after the watch reported a
// deletion at revision floor > 0, a serializable read is tried first and
// used only if the member that answered had applied the deletion;
// otherwise it is done again, linearizably. What it decides is checked
// again by the transaction that creates the leader key, so a read of a
// committed state at or after the deletion is enough, and spares a round
// of Raft heartbeats (ReadIndex) on the handover's path.
func (e *Elector) look(ctx context.Context, c *candidacy, from string, floor int64) (*view, error) {
	for lagged := false; ; {
		if !lagged {
			e.reads.Add(1)
		}
		lagged = false
		resp, err := e.commit(ctx, true, e.cli.Txn(ctx).Then(e.lookOps(c, from, floor > 0)...))
		if err != nil {
			return nil, err
		}
		if floor > 0 && resp.Header.Revision < floor {
			floor, lagged = 0, true // that member lags behind the deletion: read linearizably
			continue
		}
		return e.parseView(resp.Header.Revision, resp.Responses, from), nil
	}
}

// rangeWatch is a candidacy's watch on [its key, end).
type rangeWatch struct {
	end     string
	skip    string // a key of the range whose changes do not concern c, or ""
	ch      clientv3.WatchChan
	cancel  context.CancelFunc
	created bool
	// ahead, when the range ends just past the key ahead of c (not at the
	// leader key): the candidates' keys in the range, which the watch's
	// events keep up to date. A candidate queued between c and the key
	// ahead (one that read the same arrival, or of higher priority) joins
	// it without waking c: in a queue filling up, the one just ahead
	// changes often, and c need not read the queue again each time. The
	// watch then narrows to the new nearest key (narrow), so that only
	// the going of the key c waits on reaches c.
	ahead []string
}

// stillAhead applies ev to w.ahead and reports whether it leaves c
// waiting as before: a candidate's key created in the range, or one of
// several keys ahead deleted. Anything else wakes c, as before.
func (w *rangeWatch) stillAhead(lay layout, ev *clientv3.Event) bool {
	if w.ahead == nil {
		return false
	}
	kv := ev.Kv
	k := string(kv.Key)
	i := slices.Index(w.ahead, k)
	switch {
	case ev.Type == clientv3.EventTypePut && kv.CreateRevision == kv.ModRevision && kv.Lease != 0:
		if lease, err := lay.queueLease(k); err == nil && lease == kv.Lease {
			if i < 0 {
				w.ahead = append(w.ahead, k)
			}
			return true
		}
	case ev.Type == clientv3.EventTypeDelete && i >= 0 && len(w.ahead) > 1:
		w.ahead = slices.Delete(w.ahead, i, i+1)
		return true
	}
	return false
}

// follower is the state of a candidacy's goroutine.
type follower struct {
	e      *Elector
	c      *candidacy
	w      *rangeWatch
	from   string // where the read of the queue above c begins: past keys without a lease
	floor  int64  // the revision of a deletion the next read must have seen
	warned map[string]bool
	// touched: c's own key was put again with its value and lease kept —
	// a leader handing over to c touches it so that c's watch wakes it.
	touched bool
	// retry: the pauses before trying again after a failed request or a
	// broken watch; reset once a request or watch works.
	retry *backoff.ExponentialBackOff
}

// follow runs candidacy c from its first view until it ends: waiting,
// leading (it creates the leader key and starts the Term), then guarding
// its keys.
//
// A token > 0 says that c's create made it leader (start), its Term
// counting from sent.
func (e *Elector) follow(c *candidacy, v *view, token int64, sent time.Time) {
	defer e.wg.Done()
	f := &follower{e: e, c: c, from: after(c.key), warned: map[string]bool{}, retry: retryBackoff(maxRetryWait)}
	if v == nil {
		f.floor = c.rev // a serializable read that has seen c's key will do
	}
	defer f.closeWatch()
	if token == 0 {
		var ok bool
		if token, sent, ok = f.waitTurn(v); !ok {
			return
		}
	}
	if !f.elect(token, sent) {
		return
	}
	f.guard(token)
}

func (f *follower) closeWatch() {
	if f.w != nil {
		f.w.cancel()
		f.w = nil
	}
}

// watch makes the watch cover [c's key, end) from rev on, keeping the one
// it has if it covers that range already.
func (f *follower) watch(end string, rev int64) {
	f.watchSkipping(end, "", rev)
}

// watchSkipping is watch, with the changes of key skip ignored.
func (f *follower) watchSkipping(end, skip string, rev int64) {
	if f.w != nil && f.w.end == end && f.w.skip == skip {
		return
	}
	f.closeWatch()
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(f.c.ctx))
	f.w = &rangeWatch{end: end, skip: skip, cancel: cancel,
		ch: f.e.cli.Watch(ctx, f.c.key, clientv3.WithRange(end), clientv3.WithRev(rev), clientv3.WithCreatedNotify())}
}

// waitTurn waits until c heads the queue with no leader, and creates the
// leader key. It returns the token and the send time of the renewal the
// Term counts from, or false if the candidacy ended.
func (f *follower) waitTurn(v *view) (token int64, sent time.Time, ok bool) {
	e, c := f.e, f.c
	claim, handoff := false, false
	for c.ctx.Err() == nil {
		if claim || handoff {
			try := f.claim
			if handoff {
				try = f.claimHandoff
			}
			claim, handoff = false, false
			nv, token, sent, err := try()
			if err == nil {
				f.retry.Reset()
			}
			switch {
			case err != nil:
				if f.failed("creating the leader key", err) {
					return 0, time.Time{}, false
				}
				continue
			case nv == nil:
				return token, sent, true
			}
			v = nv
		}
		if v == nil {
			nv, err := e.look(c.ctx, c, f.from, f.floor)
			f.floor = 0
			if err != nil {
				if f.failed("reading the queue", err) {
					return 0, time.Time{}, false
				}
				continue
			}
			f.retry.Reset()
			v = nv
		}
		if err := e.checkOwn(c, v.own); err != nil {
			e.oust(c, err)
			return 0, time.Time{}, false
		}
		if l := v.leader; l != nil && l.Lease == int64(c.s.lease) && record.Key(l.Value) == c.key && record.ID(l.Value) == e.o.ID {
			// The leader key is c's own: a claim (or a create that
			// claimed) whose reply was lost. c leads.
			sent, err := f.renewed()
			if err != nil {
				if f.failed("renewing the lease", err) {
					return 0, time.Time{}, false
				}
				continue
			}
			return l.CreateRevision, sent, true
		}
		if t := v.transfer; t != nil && t.Lease == int64(c.s.lease) && string(t.Value) == c.key && v.leader == nil {
			handoff = true // the leader handed over to c
			continue
		}
		if len(v.above) > 0 && v.above[0].Lease == 0 {
			// A key without a lease never expires: waiting for it would
			// block the election for good. Read on past it.
			f.warn(v.above[0], "skipping a key without a lease in the election's queue; it never leads")
			f.from, v = after(string(v.above[0].Key)), nil
			continue
		}
		poll := time.Duration(0)
		switch {
		case len(v.above) > 0:
			ahead, skip := string(v.above[0].Key), ""
			end := after(ahead)
			leads := v.leader != nil && record.Key(v.leader.Value) == ahead
			switch {
			case leads && len(v.above) > 1 && v.above[1].Lease != 0:
				// The key ahead is the leader's, with a waiter above it: a
				// candidate that queued beside the leader as it led from
				// its create (the same arrival) sorts ahead. That waiter,
				// not the leader, is next before c: the leader's going is
				// its (or the head's) to act on, not c's.
				ahead, skip = string(v.above[1].Key), ahead
				end = after(ahead)
			case len(v.above) == 1 && v.last || leads:
				ahead, end = "", after(e.lay.leader) // the key ahead heads the queue (or leads): its leader key too
			}
			f.watchSkipping(end, skip, v.rev+1)
			f.w.ahead = nil
			if ahead != "" {
				f.w.ahead = []string{ahead}
			}
		case v.old != nil:
			f.warn(v.old, "a candidate key of the previous key layout may lead this election; waiting until it is gone")
			f.watch(after(e.lay.leader), v.rev+1)
			poll = oldLayoutPoll
		case v.leader != nil && v.leader.Lease == 0:
			f.deleteUnleasedLeader(v.leader)
			v = nil
			continue
		case v.leader != nil:
			f.watch(after(e.lay.leader), v.rev+1)
		case v.transfer != nil && v.transfer.Lease == 0:
			f.deleteUnleased(e.lay.transfer, v.transfer, "a hand-over key")
			v = nil
			continue
		case v.transfer != nil:
			// A hand-over to another candidate is pending: only its
			// target may lead. Wait for the key to go (claimed, lapsed,
			// or with the target's lease), unless its target is gone.
			if f.dropStaleTransfer(v.transfer) {
				v = nil
				continue
			}
			f.watch(after(e.lay.transfer), v.rev+1)
		default:
			claim = true
			continue
		}
		var err error
		claim, err = f.wait(v.rev, poll)
		if err != nil {
			e.oust(c, err)
			return 0, time.Time{}, false
		}
		if f.touched {
			f.touched, claim, handoff = false, false, true
		}
		v, f.from = nil, after(c.key)
	}
	return 0, time.Time{}, false
}

// wait follows the watch until a key of the range other than c's changed
// after rev, the poll ran out, the watch broke (f.w is nil then), or the
// candidacy ended. It reports whether a key was deleted: the key ahead, or
// the leader key, is gone, so c may well head the queue with no leader
// now, and tries to lead at once (the attempt reads the queue again if
// not). A change of c's own key is returned as the error that ends the
// candidacy.
func (f *follower) wait(rev int64, poll time.Duration) (deleted bool, err error) {
	defer f.c.waiting.Store(false)
	f.c.waiting.Store(f.w.created)
	var tc <-chan time.Time
	if poll > 0 {
		t := time.NewTimer(poll)
		defer t.Stop()
		tc = t.C
	}
	for {
		select {
		case <-f.c.ctx.Done():
			return false, nil
		case <-tc:
			return false, nil
		case wr, ok := <-f.w.ch:
			if !ok || wr.Err() != nil || wr.Canceled {
				f.closeWatch()
				// The queue is read again, and the watch opened again,
				// after a pause: a watch that breaks as it opens (no
				// leader in the cluster, a member going away) must not
				// make every waiter read the queue as fast as it can.
				f.e.pause(f.c.ctx, f.c, f.retry.NextBackOff()) //nolint:errcheck // the loop checks the candidacy
				return false, nil
			}
			if wr.Created {
				f.w.created = true
				f.c.waiting.Store(true)
			}
			changed, last := false, int64(0)
			for _, ev := range wr.Events {
				kv := ev.Kv
				if kv.ModRevision <= rev {
					continue
				}
				last = max(last, kv.ModRevision)
				if string(kv.Key) == f.c.key {
					if err := f.e.ownEvent(f.c, ev); err != nil {
						return false, err
					}
					f.touched, changed = true, true // a hand-over to c, most likely
					continue
				}
				if string(kv.Key) == f.w.skip {
					continue
				}
				if ev.Type == clientv3.EventTypePut && kv.CreateRevision != kv.ModRevision && kv.Lease != 0 {
					continue // a key put again under its lease: the order is the same
				}
				if f.w.stillAhead(f.e.lay, ev) {
					continue
				}
				changed = true
				if ev.Type == clientv3.EventTypeDelete {
					f.floor = max(f.floor, kv.ModRevision)
					deleted = true
				}
			}
			if changed {
				return deleted, nil
			}
			f.narrow(last)
		}
	}
}

// narrow moves the watch's end to just past the nearest key ahead of c
// once candidates have been queued between c and the key it waited on
// (their creates, seen up to rev, left it asleep): the range holds again
// the one key c waits on, and the going of a key further ahead (the
// leader's, at a handover) no longer reaches c, which is not next. It
// costs a watch, not a read of the queue.
func (f *follower) narrow(rev int64) {
	w := f.w
	if w == nil || len(w.ahead) < 2 || rev == 0 {
		return
	}
	near := slices.Min(w.ahead)
	skip := w.skip
	if skip > near {
		skip = "" // past the new range's end
	}
	f.watchSkipping(after(near), skip, rev+1)
	f.w.ahead = []string{near}
	f.c.waiting.Store(false) // until the new watch is created
}

// claim creates the leader key if it is absent, c's key is still its own
// under its lease, and nothing is queued above c (past keys without a
// lease): one transaction, whose Else reads the queue again. It returns
// that view if the leader key was not created, else the token and the
// send time of the session's last confirmed renewal — etcd keeps the
// lease, and so the leader key, at least TTL after it received it. If
// that renewal is more than half a lease window old, one is sent first.
func (f *follower) claim() (*view, int64, time.Time, error) {
	e, c, s := f.e, f.c, f.c.s
	e.reads.Add(1)
	sent, err := f.renewed()
	if err != nil {
		return nil, 0, time.Time{}, err
	}
	put := e.leaderPut(c)
	ownCmps := []clientv3.Cmp{
		clientv3.Compare(clientv3.CreateRevision(e.lay.leader), "=", 0),
		clientv3.Compare(clientv3.CreateRevision(c.key), "=", c.rev),
		clientv3.Compare(clientv3.LeaseValue(c.key), "=", s.lease),
		clientv3.Compare(clientv3.CreateRevision(e.lay.transfer), "=", 0),
	}
	if f.w != nil && (f.w.end == after(e.lay.leader) || f.w.end == after(e.lay.transfer)) {
		// c watched up to the leader key: it heads the queue, or the key
		// ahead did and has gone (a handover). Nothing is expected above,
		// so one Compare over the rest of the queue checks it (a range
		// Compare reads every key of its range: cheap while empty), and
		// the Else reads only the first window (a write carries every
		// branch, and etcd logs slow ones whole).
		resp, err := e.commit(c.ctx, true, e.cli.Txn(c.ctx).
			If(append(ownCmps, emptyIn(f.from, e.lay.queueEnd))...).
			Then(put).
			Else(e.nearOps(c, f.from)...))
		if err != nil {
			return nil, 0, sent, err
		}
		if resp.Succeeded {
			return nil, resp.Header.Revision, sent, nil
		}
		return f.nearOrLook(resp.Header.Revision, resp.Responses)
	}
	// Nothing queued above c: checked window by window (layout.nested),
	// each window's check running only if the one below was empty.
	nothingAbove := e.lay.nested(f.from,
		func() []clientv3.Op { return []clientv3.Op{put} },
		func(lo, hi string) []clientv3.Op {
			return []clientv3.Op{clientv3.OpGet(lo, clientv3.WithRange(hi), clientv3.WithLimit(2))}
		})
	resp, err := e.commit(c.ctx, true, e.cli.Txn(c.ctx).
		If(ownCmps...).
		Then(nothingAbove).
		Else(e.nearOps(c, f.from)...))
	if err != nil {
		return nil, 0, sent, err
	}
	if !resp.Succeeded {
		// The leader key exists or c's key changed.
		return f.nearOrLook(resp.Header.Revision, resp.Responses)
	}
	rs, claimed, depth := walkNested(resp.Responses[0])
	if !claimed {
		// A window above c is not empty: at this revision c's key is its
		// own (the transaction compared it) and no one leads.
		v := &view{rev: resp.Header.Revision, own: &mvccpb.KeyValue{Key: []byte(c.key), CreateRevision: c.rev, Lease: int64(s.lease)}}
		if len(rs) > 0 {
			v.above = rs[0].GetResponseRange().GetKvs()
		}
		v.last = depth == len(e.lay.windows(f.from))-1
		return v, 0, sent, nil
	}
	return nil, resp.Header.Revision, sent, nil
}

// leaderPut creates the leader key for c (in a transaction that checks
// it is absent).
func (e *Elector) leaderPut(c *candidacy) clientv3.Op {
	return clientv3.OpPut(e.lay.leader, c.leaderRec, clientv3.WithLease(c.s.lease))
}

// renewed returns the send time of the session's last confirmed renewal,
// renewing first if that is more than half a lease window old: what a
// Term that begins now counts from.
func (f *follower) renewed() (time.Time, error) {
	s := f.c.s
	if sent, ok := s.fresh(f.e.o.Window()); ok {
		return sent, nil
	}
	if _, err := s.renew(f.c.ctx); err != nil {
		return time.Time{}, err
	}
	return s.lastRenewed(), nil
}

// nearOrLook returns the view of a failed claim's Else (nearOps) at rev,
// or, when its first window is empty but not the last and c's key is
// still there, a look at every window: a waiter that took "nothing in the
// first window" for "nothing above" would watch up to the leader key and
// wake at every handover.
func (f *follower) nearOrLook(rev int64, rs []*pb.ResponseOp) (*view, int64, time.Time, error) {
	v := f.e.nearView(rev, rs, f.from)
	if v.own != nil && len(v.above) == 0 && !v.last {
		var err error
		if v, err = f.e.look(f.c.ctx, f.c, f.from, rev); err != nil {
			return nil, 0, time.Time{}, err
		}
	}
	return v, 0, time.Time{}, nil
}

// deleteUnleasedLeader deletes a leader key without a lease: this package
// never writes one, it never expires, and it would block the election for
// good.
func (f *follower) deleteUnleasedLeader(kv *mvccpb.KeyValue) {
	f.deleteUnleased(f.e.lay.leader, kv, "a leader key")
}

// deleteUnleased deletes key, read as kv, which has no lease (see
// deleteUnleasedLeader). The delete is guarded by the key's revision, so
// a key put again meanwhile stays.
func (f *follower) deleteUnleased(key string, kv *mvccpb.KeyValue, what string) {
	e := f.e
	e.log.Warn("etcd election: deleting "+what+" without a lease; this package never writes one", "key", string(kv.Key), "mod_revision", kv.ModRevision)
	_, err := e.commit(f.c.ctx, true, e.cli.Txn(f.c.ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision), clientv3.Compare(clientv3.LeaseValue(key), "=", 0)).
		Then(clientv3.OpDelete(key)))
	if err != nil {
		f.failed("deleting "+what+" without a lease", err)
	}
}

// failed handles a failed request of the candidacy: a lost session or a
// final error ends it (true); anything else is logged and waited out.
func (f *follower) failed(what string, err error) bool {
	e, c := f.e, f.c
	if c.ctx.Err() != nil {
		return true
	}
	if errors.Is(err, election.ErrSessionLost) {
		e.lose(c, err)
		return true
	}
	if e.isFinal(err) {
		e.lose(c, e.finalErr(what+" for "+c.key, err))
		return true
	}
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		// etcd no longer knows the lease: the session, and every
		// candidacy on it, is lost.
		c.s.end(fmt.Errorf("%w: etcd session lease %016x expired or was revoked", election.ErrSessionLost, uint64(c.s.lease)))
		e.lose(c, fmt.Errorf("%w: etcd election %s: %s for %s: lease %016x expired or was revoked", election.ErrSessionLost, e.name, what, c.key, uint64(c.s.lease)))
		return true
	}
	e.retryLog(c, what, err)
	return e.pause(c.ctx, c, f.retry.NextBackOff()) != nil
}

func (f *follower) warn(kv *mvccpb.KeyValue, msg string) {
	if !f.warned[string(kv.Key)] {
		f.warned[string(kv.Key)] = true
		f.e.log.Warn("etcd election: "+msg, "key", string(kv.Key), "create_revision", kv.CreateRevision, "lease", fmt.Sprintf("%016x", uint64(kv.Lease)))
	}
}

// elect starts c's Term at token. The watch must cover the leader key
// from the token on: kept from waiting, or opened at the revision after
// it; renewals count only once it is created (guard).
func (f *follower) elect(token int64, sent time.Time) bool {
	e, c := f.e, f.c
	e.mu.Lock()
	c.token = token // from now on release deletes the leader key by its create revision
	e.mu.Unlock()
	f.watch(after(e.lay.request), token+1) // the leader key and transfer requests
	c.watched.Store(f.w.created)
	// Opening the watch can take a while (with a user name, a new watch
	// stream logs in first, a bcrypt check on a loaded member): the Term
	// counts from the session's latest confirmed renewal, renewed first if
	// the one c claimed with is stale by now, rather than begin expired.
	if last, err := f.renewed(); err == nil && last.After(sent) {
		sent = last
	}
	leader := c.leader
	leader.Token = uint64(token)
	term, lc := backend.NewTerm(e.o, leader, sent)
	var err error
	e.mu.Lock()
	select {
	case <-c.lost:
		err = c.lostErr
	default:
		switch {
		case e.closed:
			err = election.ErrClosed
		case e.cand != c:
			err = election.ErrResigned
		}
	}
	if err != nil {
		e.mu.Unlock()
		lc.End(err)
		return false
	}
	c.lc = lc
	e.terms.Add(lc)
	e.saw(leader.Token)
	close(c.elected)
	e.wg.Add(1)
	e.mu.Unlock()
	go e.renewLoop(c, lc)
	return term.Err() == nil
}

// guard follows the watch while c leads: a change of its keys by anyone
// else ends the candidacy.
func (f *follower) guard(token int64) {
	e, c := f.e, f.c
	seen := token
	p := newPreemption(e, c)
	defer p.stop()
	for c.ctx.Err() == nil {
		if f.w == nil {
			rev, ok := f.rewatch(token, p)
			if !ok {
				return
			}
			seen = rev
		}
		select {
		case <-c.ctx.Done():
			return
		case <-p.fire():
			if p.preempt(token) {
				return
			}
		case wr, ok := <-f.w.ch:
			if !ok || wr.Err() != nil || wr.Canceled {
				c.watched.Store(false)
				f.closeWatch()
				if err := wr.Err(); err != nil && c.ctx.Err() == nil {
					e.retryLog(c, "watching the leader key", err)
				}
				if e.pause(c.ctx, c, f.retry.NextBackOff()) != nil {
					return
				}
				continue
			}
			if wr.Created {
				f.w.created = true
				c.watched.Store(true)
				f.retry.Reset()
			}
			for _, ev := range wr.Events {
				if ev.Kv.ModRevision <= seen {
					continue
				}
				var err error
				switch string(ev.Kv.Key) {
				case c.key:
					err = e.ownEvent(c, ev)
				case e.lay.leader:
					err = e.leaderEvent(c, token, ev)
				case e.lay.request:
					if f.request(ev, token) {
						return // handed over
					}
				default:
					p.event(ev)
				}
				if err != nil {
					e.oust(c, err)
					return
				}
			}
		}
	}
}

// rewatch opens the watch again at the current revision and then reads
// and checks c's keys under it: every change after that read reaches the
// watch, and a change before it fails the check. It returns the read's
// revision, or false if the candidacy ended.
func (f *follower) rewatch(token int64, p *preemption) (int64, bool) {
	e, c := f.e, f.c
	for c.ctx.Err() == nil {
		f.closeWatch()
		ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(c.ctx))
		f.w = &rangeWatch{end: after(e.lay.request), cancel: cancel,
			ch: e.cli.Watch(ctx, c.key, clientv3.WithRange(after(e.lay.request)), clientv3.WithCreatedNotify())}
		wr, ok := <-f.w.ch
		if !ok || wr.Err() != nil || wr.Canceled || !wr.Created {
			if f.failed("watching the leader key", orClosed(wr.Err())) {
				return 0, false
			}
			continue
		}
		f.w.created = true
		ops := []clientv3.Op{clientv3.OpGet(c.key), clientv3.OpGet(e.lay.leader)}
		if p.on() {
			// The candidates above c, of higher priority (preemption).
			ops = append(ops, clientv3.OpGet(after(c.key), clientv3.WithRange(e.lay.queueEnd)))
		}
		resp, err := e.commit(c.ctx, true, e.cli.Txn(c.ctx).Then(ops...))
		if err != nil {
			if f.failed("checking the leader key", err) {
				return 0, false
			}
			continue
		}
		own, leader := resp.Responses[0].GetResponseRange().GetKvs(), resp.Responses[1].GetResponseRange().GetKvs()
		var kv *mvccpb.KeyValue
		if len(own) > 0 {
			kv = own[0]
		}
		err = e.checkOwn(c, kv)
		if err == nil {
			kv = nil
			if len(leader) > 0 {
				kv = leader[0]
			}
			err = e.checkLeader(c, token, kv)
		}
		if err != nil {
			e.oust(c, err)
			return 0, false
		}
		if p.on() {
			p.reset(resp.Responses[2].GetResponseRange().GetKvs())
		}
		c.watched.Store(true)
		return resp.Header.Revision, true
	}
	return 0, false
}

func orClosed(err error) error {
	if err == nil {
		return errors.New("the watch closed")
	}
	return err
}

// ownEvent checks an event of c's queue key.
func (e *Elector) ownEvent(c *candidacy, ev *clientv3.Event) error {
	if ev.Type == clientv3.EventTypeDelete {
		return fmt.Errorf("%w: key %s (revision %d) was deleted at revision %d: another client deleted it or its prefix, or revoked lease %016x",
			election.ErrSessionLost, c.key, c.rev, ev.Kv.ModRevision, uint64(c.s.lease))
	}
	return e.checkOwn(c, ev.Kv)
}

// checkOwn reports how kv, c's queue key as read or as a watch event put
// it, is no longer c's: gone, recreated, moved to another lease, or
// holding another candidate's record.
func (e *Elector) checkOwn(c *candidacy, kv *mvccpb.KeyValue) error {
	what := ""
	switch {
	case kv == nil:
		what = "is gone: another client deleted it or its prefix, or revoked its lease"
	case kv.CreateRevision != c.rev:
		what = fmt.Sprintf("was deleted and created again (create revision %d)", kv.CreateRevision)
	case kv.Lease != int64(c.s.lease):
		what = leaseMoved(kv, c.s.lease) + ": it no longer goes with the candidacy"
	case kv.Value != nil && record.ID(kv.Value) != e.o.ID:
		what = fmt.Sprintf("was overwritten by another client at revision %d with a record that is not this candidate's", kv.ModRevision)
	}
	if what == "" {
		return nil
	}
	return fmt.Errorf("%w: key %s (revision %d) %s", election.ErrSessionLost, c.key, c.rev, what)
}

// leaseMoved says what was seen of a key of the candidacy that no longer
// holds its lease: a put it did not make (an operator's, a second
// program's), with or without a lease.
func leaseMoved(kv *mvccpb.KeyValue, own clientv3.LeaseID) string {
	if kv.Lease == 0 {
		return fmt.Sprintf("was put at revision %d without a lease (version %d; the candidacy's lease is %016x)", kv.ModRevision, kv.Version, uint64(own))
	}
	return fmt.Sprintf("was put at revision %d under lease %016x (version %d; the candidacy's lease is %016x)", kv.ModRevision, uint64(kv.Lease), kv.Version, uint64(own))
}

// leaderEvent checks an event of the leader key while c leads at token.
func (e *Elector) leaderEvent(c *candidacy, token int64, ev *clientv3.Event) error {
	if ev.Type == clientv3.EventTypeDelete {
		return fmt.Errorf("%w: leader key %s (token %d) was deleted at revision %d: another client deleted it or the election's prefix, or revoked lease %016x",
			election.ErrSessionLost, e.lay.leader, token, ev.Kv.ModRevision, uint64(c.s.lease))
	}
	return e.checkLeader(c, token, ev.Kv)
}

// checkLeader reports how kv, the leader key, is no longer c's leadership
// at token. The candidate's own writes (Proclaim) keep its create
// revision, its lease and its record's ID and queue key.
func (e *Elector) checkLeader(c *candidacy, token int64, kv *mvccpb.KeyValue) error {
	what := ""
	switch {
	case kv == nil:
		what = "is gone: another client deleted it or the election's prefix, or revoked its lease"
	case kv.CreateRevision != token:
		what = fmt.Sprintf("was deleted and created again (create revision %d)", kv.CreateRevision)
	case kv.Lease != int64(c.s.lease):
		what = leaseMoved(kv, c.s.lease)
	case record.ID(kv.Value) != e.o.ID || record.Key(kv.Value) != c.key:
		what = fmt.Sprintf("was overwritten by another client at revision %d with a record that is not this candidacy's", kv.ModRevision)
	}
	if what == "" {
		return nil
	}
	return fmt.Errorf("%w: leader key %s (token %d) %s", election.ErrSessionLost, e.lay.leader, token, what)
}

// oust ends c because another client changed its keys: its Term at once
// (before any I/O), then, in the background of this goroutine, what is
// left of it.
func (e *Elector) oust(c *candidacy, err error) {
	if !e.lose(c, err) {
		return
	}
	e.log.Warn("etcd election: the candidate's keys were changed by another client; candidacy ended", "key", c.key, "err", err)
	ctx, cancel := context.WithTimeout(e.bg, e.o.Window())
	defer cancel()
	_ = e.release(ctx, c, true) // logged; retried by the next Campaign, Resign or Close
}

// pause waits d, or less if waiting must stop.
func (e *Elector) pause(ctx context.Context, c *candidacy, d time.Duration) error {
	return e.waiting(c).Pause(ctx, d)
}

// renewLoop renews c's Term with its session: at each of the session's
// ticks, the before-renewal hook, then a renewal of the session's lease
// (shared with the other leaders of the tick), then the lease clock with
// its send time and outcome. A failed renewal is retried every retryDelay
// (hook first) until the clock's deadline ends the Term. When the Term
// ends for any reason, the candidacy is withdrawn, so its keys go at once.
func (e *Elector) renewLoop(c *candidacy, lc *backend.LeaseClock) {
	defer e.wg.Done()
	defer e.forget(c)
	t := lc.Term()
	// Retries of a failed renewal come fast (the Term's deadline runs),
	// but not together with every other leader's on the session.
	b := retryBackoff(c.s.interval / 4)
	for {
		select {
		case <-c.stop:
			return
		case <-t.Done():
			e.withdraw(c, t.Err(), false)
			return
		case <-c.s.ticks():
		}
		for lc.BeforeRenew() == nil {
			watched := c.watched.Load()
			sent, err := c.s.renew(t.Context())
			if t.Err() != nil {
				break
			}
			counted := err
			if err == nil && !(watched && c.watched.Load()) {
				counted = errUnwatched // the lease lives, but a change of the keys might have gone unseen
			}
			lc.Renewed(sent, counted)
			if err == nil || c.s.Err() != nil {
				b.Reset()
				break
			}
			e.retryLog(c, "renewing the lease", err)
			if e.pause(t.Context(), c, b.NextBackOff()) != nil {
				break
			}
		}
	}
}
