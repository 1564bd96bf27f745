package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electkit/election"
	"github.com/electkit/election/internal/record"
)

// This file holds a candidacy's goroutine (follow) and its wait for its
// turn: the watch on its range of the queue, the waiter's loop (waitTurn,
// wait, narrow), and its handling of failed requests and of keys without
// a lease. Reading the queue is view.go's, creating the leader key
// claim.go's, guarding the leadership lead.go's.
//
// A candidacy (follow) keeps one watch, on the client's shared watch
// stream (mux.go), on the range from its own queue key up to what it
// waits for; while it waits, no goroutine runs it (wait parks it):
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
// Term only if that watch was live both when the leader took the renewal
// (sent then, or its session's tick's, sent at or after the tick and
// perhaps answered already) and once its reply had come (guard,
// renewLoop); when it breaks, it is opened again at the current revision
// and the keys are read and checked under it before it counts again (so a
// watch live again by then covers the keys since they were made).

// oldLayoutPoll is how often a candidate that would lead looks again while
// a key of the previous layout (a leased key named the prefix plus 16 hex
// digits) may still be a leader of the election.
const oldLayoutPoll = 500 * time.Millisecond

// rangeWatch is a candidacy's watch on [start, end): from its own key
// while it waits, from the queue's beginning while it leads (it follows
// the candidate just below it, its successor: see succ.go).
type rangeWatch struct {
	start   string
	end     string
	skip    string    // a key of the range whose changes do not concern c, or ""
	mw      *muxWatch // on the client's shared watch stream (mux.go)
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

// keyBefore returns key, sharing the memory of the range's end when that
// is after(key): a waiter keeps the name of the key ahead of it once.
func (w *rangeWatch) keyBefore(key string) string {
	if e := w.end; len(e) == len(key)+1 && e[len(key)] == 0 && e[:len(key)] == key {
		return e[:len(key)]
	}
	return key
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

// follower is the state of a candidacy's goroutine. Its flags are kept
// together at the end, so that a process holding thousands of
// candidacies holds no padding between them.
type follower struct {
	e     *Elector
	c     *candidacy
	w     *rangeWatch
	from  string // where the read of the queue above c begins, past keys without a lease; "" for past(c.key) (fromKey)
	floor int64  // the revision of a deletion the next read must have seen
	// rare: the warnings given and the pauses between retries, made at
	// the first of either (most candidacies never see one).
	rare *followerRare
	// handedAt: the revision of a hand-over to c (handOver, handOverOps),
	// which put c's mark (markKey) with a record naming c's leadership
	// key, created in the same transaction (see confirm, released).
	handedAt int64
	// While c leads: succRev, the revision of the last read of its
	// successor (see needSucc).
	succRev int64

	// The wait in progress (waitTurn): its revision and poll (see inWait,
	// claimNext and handoffNext).
	waitRev     int64
	waitPoll    time.Duration
	pmu         sync.Mutex  // guards the park: parked, parkGen, pollDue, stopCtxWake
	stopCtxWake func() bool // forgets the wake on the candidacy's halt
	pollTimer   *time.Timer
	parkGen     uint32 // counts the parks

	// touched: c's own key was put again by another hand, its lease kept —
	// a hand-over to c (of an earlier version of this package, or one
	// whose record c did not take: see handedAt).
	touched bool
	// confirm: c leads with a leadership key made for it (or found its
	// own), and reads it once its Term has begun (checkHandover).
	confirm bool
	// released: the hand-over to c was a release's, seen as the
	// leader's key going and c's own coming in one revision: nothing
	// to confirm.
	released bool
	// needSucc: while c leads, its successor must be read (succ.go).
	needSucc bool
	// inWait: a wait is in progress (waitRev, waitPoll); claimNext and
	// handoffNext: what the try after it does.
	inWait      bool
	claimNext   bool
	handoffNext bool
	parked      bool // no goroutine runs the candidacy: one of the wakers starts one
	pollDue     bool // the parked wait's poll ran out
	// handedHead: the hand-over to c (handedAt) says that c heads the
	// queue (its mark's record: a release to c as the one next in line).
	handedHead bool
	// headed: the token waitTurn returns came with c heading the queue
	// (candidacy.headed).
	headed bool
	// renews: c leads with a Term that this goroutine renews (elect):
	// its Elector has no before-renewal hook.
	renews bool
}

// followerRare is what a follower needs only once something goes wrong.
type followerRare struct {
	warned map[string]bool // made at the first warning
	// retry: the pauses before trying again after a failed request or a
	// broken watch (made at the first); reset once a request or watch
	// works.
	retry *backoff.ExponentialBackOff
}

// rareOf returns f's rare part, making it at the first call.
func (f *follower) rareOf() *followerRare {
	if f.rare == nil {
		f.rare = &followerRare{}
	}
	return f.rare
}

// follow runs candidacy c from its first view until it ends: waiting,
// leading (it creates the leader key and starts the Term), then guarding
// its keys. The caller has counted it in e.wg, which it leaves when the
// candidacy's goroutine ends for good: a waiting candidacy is parked with
// no goroutine (wait), and counts in e.wg all the same.
//
// A token > 0 says that c's create made it leader (start), its Term
// counting from sent.
func (e *Elector) follow(c *candidacy, v *view, token int64, sent time.Time) {
	// A leader from its create claimed an empty election: the queue below
	// it fills from then on, which its watch shows; any other reads its
	// successor once it leads (succ.go).
	// A create that claimed compared every key above c's (headed).
	f := &follower{e: e, c: c, needSucc: token == 0, headed: token != 0}
	if v == nil {
		f.floor = c.rev // a serializable read that has seen c's key will do
	}
	f.run(v, token, sent)
}

// fromKey is where the read of the queue above c begins: past c's key
// and its mark, or past keys without a lease above them. It is made when
// a read needs it: an idle waiter keeps no copy of its key's name.
func (f *follower) fromKey() string {
	if f.from == "" {
		return past(f.c.key)
	}
	return f.from
}

// run runs the candidacy until it parks or ends.
func (f *follower) run(v *view, token int64, sent time.Time) {
	if token == 0 {
		var parked bool
		token, sent, parked = f.waitTurn(v)
		if parked {
			return
		}
		if token == 0 {
			f.exit()
			return
		}
	}
	if f.elect(token, sent) {
		// The guard renews from the tick after the Term began: a check
		// of a hand-over (one read) may come first.
		var tk *sessionTick
		if f.renews {
			tk = f.c.s.ticks()
		}
		if !f.confirm || f.checkHandover(token) {
			f.guard(token, tk)
		}
		f.confirm = false
	}
	// Nothing guards c's keys any more, so no renewal counts from now
	// on (the guard returns with c's Term ended, or being ended by a
	// hand-over or a loss), and a read of its successor still out is
	// of no use.
	f.c.watched.Store(false)
	succReadsOut.Delete(f.c)
	if f.renews {
		// renewLoop withdraws c once its Term has ended.
		f.e.renewLoop(f.c, f.c.lc)
	}
	f.exit()
}

// exit ends the candidacy's goroutine for good.
func (f *follower) exit() {
	f.closeWatch()
	f.e.wg.Done()
}

func (f *follower) closeWatch() {
	if f.w != nil {
		f.w.mw.cancel()
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
	f.watchRange(f.c.key, end, skip, rev)
}

// watchRange makes the watch cover [start, end) from rev on, with the
// changes of key skip ignored, keeping the one it has if it covers that
// range already.
func (f *follower) watchRange(start, end, skip string, rev int64) {
	if f.w != nil && f.w.start == start && f.w.end == end && f.w.skip == skip {
		return
	}
	f.closeWatch()
	f.w = &rangeWatch{start: start, end: end, skip: skip, mw: muxOf(f.e.cli).watch(start, end, rev)}
}

// waitTurn waits until c heads the queue with no leader, and creates the
// leader key. It returns the token and the send time of the renewal the
// Term counts from; a token of 0 if the candidacy ended; or parked if it
// waits on its watch with no goroutine (wait), to be run again (run) by
// what wakes it.
func (f *follower) waitTurn(v *view) (token int64, sent time.Time, parked bool) {
	e, c := f.e, f.c
	for c.ctx().Err() == nil {
		if f.inWait {
			claim, err, parked := f.wait(f.waitRev, f.waitPoll)
			if parked {
				return 0, time.Time{}, true
			}
			f.inWait = false
			if err != nil {
				e.oust(c, err)
				return 0, time.Time{}, false
			}
			if at := f.handedAt; at != 0 {
				// A hand-over made c leader (handOver): with no request
				// after its event. c reads the key once its Term has
				// begun (checkHandover).
				f.handedAt, f.touched = 0, false
				released, head := f.released, f.handedHead
				f.released, f.handedHead = false, false
				sent, err := f.renewed()
				if err != nil {
					if f.failed("renewing the lease", err) {
						return 0, time.Time{}, false
					}
					v = nil // the read finds c's key first: c leads then
					continue
				}
				f.confirm, f.headed = !released, head
				return at, sent, false
			}

			f.claimNext = claim
			if f.touched {
				// Touched without a hand-over's record: an earlier
				// version of this package handed over through a
				// hand-over key naming c, which the read finds and c
				// claims (or c's leadership key, should a hand-over's
				// put have been missed).
				f.touched, f.claimNext = false, false
			}
			v, f.from = nil, ""
			continue
		}
		if claim, handoff := f.claimNext, f.handoffNext; claim || handoff {
			try := f.claim
			if handoff {
				try = f.claimHandoff
			}
			f.claimNext, f.handoffNext = false, false
			nv, token, sent, err := try()
			f.headed = !handoff // a claim compares every key above c's
			if err == nil {
				f.retried()
			}
			switch {
			case err != nil:
				if f.failed("creating the leader key", err) {
					return 0, time.Time{}, false
				}
				continue
			case nv == nil:
				return token, sent, false
			}
			v = nv
		}
		if v == nil {
			nv, err := e.look(c.ctx(), c, f.fromKey(), f.floor)
			f.floor = 0
			if err != nil {
				if f.failed("reading the queue", err) {
					return 0, time.Time{}, false
				}
				continue
			}
			f.retried()
			v = nv
		}
		if err := e.checkOwn(c, v.own); err != nil {
			e.oust(c, err)
			return 0, time.Time{}, false
		}
		if l := v.leader; l != nil && string(l.Key) == e.lkeyOf(c) && l.Lease == int64(c.s.lease) && record.Key(l.Value) == c.key && record.ID(l.Value) == e.o.ID {
			// The leader key is c's own: a hand-over to c (handOver
			// created it), or a claim (or a create that claimed) whose
			// reply was lost. c leads, and confirms it (confirmHandover).
			sent, err := f.renewed()
			if err != nil {
				if f.failed("renewing the lease", err) {
					return 0, time.Time{}, false
				}
				continue
			}
			f.confirm, f.headed = true, false
			return l.CreateRevision, sent, false
		}
		if t := v.transfer; t != nil && t.Lease == int64(c.s.lease) && string(t.Value) == c.key && v.leader == nil {
			f.handoffNext = true // the leader handed over to c
			continue
		}
		if len(v.above) > 0 && v.above[0].Lease == 0 {
			// A key without a lease never expires: waiting for it would
			// block the election for good. Read on past it.
			f.warn(v.above[0], "skipping a key without a lease in the election's queue; it never leads")
			f.from, v = e.lay.pastKey(string(v.above[0].Key)), nil
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
				ahead, end = "", e.lay.leadEnd() // the key ahead heads the queue (or leads): its leader key too
			}
			f.watchSkipping(end, skip, v.rev+1)
			f.w.ahead = nil
			if first := string(v.above[0].Key); ahead == "" && e.lay.isMark(first) {
				// A mark whose queue key is gone heads the queue: c
				// waits for it to go, which only its own event shows
				// (wait passes over the marks it does not wait on).
				ahead = first
			}
			if ahead != "" {
				f.w.ahead = []string{f.w.keyBefore(ahead)}
			}
		case v.old != nil:
			f.warn(v.old, "a candidate key of the previous key layout may lead this election; waiting until it is gone")
			f.watch(e.lay.leadEnd(), v.rev+1)
			poll = oldLayoutPoll
		case v.leader != nil && v.leader.Lease == 0:
			f.deleteUnleasedLeader(v.leader)
			v = nil
			continue
		case v.leader != nil:
			f.watch(e.lay.leadEnd(), v.rev+1)
		case v.transfer != nil && v.transfer.Lease == 0:
			f.deleteUnleased(e.lay.transfer(), v.transfer, "a hand-over key")
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
			f.watch(after(e.lay.transfer()), v.rev+1)
		default:
			f.claimNext = true
			continue
		}
		f.inWait, f.waitRev, f.waitPoll = true, v.rev, poll
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
//
// While nothing has arrived it parks the candidacy (parked): its goroutine
// ends, and the first of the watch's next response, the candidacy's end
// and the poll starts it again (wake), which calls wait again. An idle
// waiter is its follower and its watch's entry on the shared stream: no
// goroutine.
func (f *follower) wait(rev int64, poll time.Duration) (deleted bool, err error, parked bool) {
	if poll > 0 && f.pollTimer == nil {
		f.pmu.Lock()
		f.pollDue = false
		f.pollTimer = time.AfterFunc(poll, f.pollWake)
		f.pmu.Unlock()
	}
	defer func() {
		if !parked {
			f.c.waiting.Store(false)
			f.pmu.Lock()
			if f.pollTimer != nil {
				f.pollTimer.Stop()
				f.pollTimer = nil
			}
			f.pmu.Unlock()
		}
	}()
	// The revisions of the going of a leadership key, and of the coming of
	// c's own (a release handing over to c, succ.go).
	goneAt, mineAt := int64(0), int64(0)
	for {
		if f.c.ctx().Err() != nil {
			return false, nil, false
		}
		f.pmu.Lock()
		due := f.pollDue
		f.pmu.Unlock()
		if due {
			return false, nil, false
		}
		resps, werr := f.w.mw.take()
		changed, made := false, false
		for _, wr := range resps {
			if wr.Created {
				f.w.created = true
			}
			last := int64(0)
			for _, pev := range wr.Events {
				ev := (*clientv3.Event)(pev)
				kv := ev.Kv
				if kv.ModRevision <= rev {
					continue
				}
				last = max(last, kv.ModRevision)
				if strings.HasPrefix(string(kv.Key), f.e.lay.leader()) {
					switch {
					case ev.Type == clientv3.EventTypeDelete:
						goneAt = kv.ModRevision
					case kv.CreateRevision == kv.ModRevision && f.releasedTo(kv):
						mineAt = kv.ModRevision
						continue
					}
				}
				if ev.Type == clientv3.EventTypePut && kv.CreateRevision == kv.ModRevision && strings.HasPrefix(string(kv.Key), f.e.lay.leader()) {
					made = true // someone leads: a read, not a claim, tells c what to do
				}
				if k := string(kv.Key); k == f.e.lay.markKey(f.c.key) {
					if ev.Type == clientv3.EventTypePut && kv.Lease == int64(f.c.s.lease) {
						if lkey, head := record.Mark(kv.Value); lkey == f.e.lay.leaderKey(f.c.seq, f.c.key) {
							// The leader handed over to c (a release to
							// its successor, a Transfer): the same
							// transaction created c's leadership key,
							// whose create revision is this event's.
							f.handedAt, f.handedHead = kv.ModRevision, head
						}
					}
					continue
				} else if f.e.lay.isMark(k) && !slices.Contains(f.w.ahead, k) {
					// Another candidate's mark (the leader's, in a
					// range that runs past it): not a candidate.
					continue
				}
				if string(kv.Key) == f.c.key {
					if err := f.e.ownEvent(f.c, ev); err != nil {
						return false, err, false
					}
					f.touched, changed = true, true // a hand-over of an earlier version to c, most likely
					continue
				}
				if string(kv.Key) == f.w.skip {
					continue
				}
				if ev.Type == clientv3.EventTypePut && kv.CreateRevision != kv.ModRevision && kv.Lease != 0 &&
					(f.w.ahead == nil || string(kv.Key) != slices.Min(f.w.ahead) || strings.HasPrefix(record.Key(kv.Value), f.e.lay.leader())) {
					// A key put again under its lease: the order is the
					// same; so too a hand-over's put of the key just
					// ahead, naming the leadership key made for it (c is
					// that one's successor, and its release hands over to
					// c). But the key just ahead touched by a release of
					// an earlier version (its candidate reserved, and
					// leads now) wakes c, which reads the queue.
					continue
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
			if mineAt != 0 && mineAt == goneAt && (f.handedAt == 0 || f.handedAt == mineAt) {
				// The leader's release handed over to c: its key went,
				// and c's came, in one transaction, which c saw (its
				// queue key's put, in the same, says so too).
				f.handedAt, f.released = mineAt, true
			}
			if f.handedAt != 0 && !f.released && f.w.end >= f.e.lay.leadEnd() {
				// c watches the leadership keys, where a hand-over to c
				// shows (the leader's key going, c's coming): a record
				// naming c's key without them is another client's put,
				// not a hand-over. c reads the queue again.
				f.handedAt, f.handedHead = 0, false
			}
			if f.handedAt != 0 {
				return false, nil, false
			}
			if changed {
				return deleted && !made, nil, false
			}
			if w := f.w; werr == nil {
				if f.narrow(last); f.w != w {
					// The rest came from the wider watch: the
					// narrower one covers what concerns c from last on.
					resps, werr = nil, nil
					break
				}
			}
		}
		if werr != nil {
			f.closeWatch()
			// The queue is read again, and the watch opened again,
			// after a pause: a watch that breaks as it opens (no
			// leader in the cluster, a member going away) must not
			// make every waiter read the queue as fast as it can.
			f.e.pause(f.c.ctx(), f.c, f.nextRetry()) //nolint:errcheck // the loop checks the candidacy
			return false, nil, false
		}
		f.c.waiting.Store(f.w.created)
		if f.park() {
			return false, nil, true
		}
	}
}

// releasedTo reports whether kv, a leadership key just created, is the
// one a release hands over to c with (succ.go): named for c's arrival,
// under c's lease, with c's record.
func (f *follower) releasedTo(kv *mvccpb.KeyValue) bool {
	c := f.c
	return string(kv.Key) == f.e.lay.leaderKey(c.seq, c.key) && kv.Lease == int64(c.s.lease) && record.Key(kv.Value) == c.key && record.ID(kv.Value) == f.e.o.ID
}

// park arms the wakers of a waiting candidacy — its watch's next
// response, its end, the poll — and reports whether it parked: false if
// a response arrived meanwhile (the caller takes it). Once it parked, the
// caller's goroutine must not touch f again.
func (f *follower) park() bool {
	f.pmu.Lock()
	if f.pollDue {
		f.pmu.Unlock()
		return false
	}
	f.parked = true
	f.parkGen++
	gen := f.parkGen
	if !f.w.mw.onReady(f.wake) {
		f.parked = false
		f.pmu.Unlock()
		return false
	}
	f.pmu.Unlock()
	// From here on a waker may run the candidacy in another goroutine:
	// only what f.pmu guards is touched. The halt hook is set outside the
	// lock, since a halted candidacy calls it at once.
	forget := f.c.whenHalted(f.wake)
	f.pmu.Lock()
	if f.parked && f.parkGen == gen {
		f.stopCtxWake = forget
		forget = nil
	}
	f.pmu.Unlock()
	if forget != nil {
		forget() // woken meanwhile
	}
	return true
}

// wake runs a parked candidacy again, in a goroutine of its own; it is
// called by whichever of its wakers comes first, and does nothing after.
func (f *follower) wake() {
	f.pmu.Lock()
	if !f.parked {
		f.pmu.Unlock()
		return
	}
	f.parked = false
	forget := f.stopCtxWake
	f.stopCtxWake = nil
	f.pmu.Unlock()
	if forget != nil {
		forget()
	}
	go f.resume()
}

// resume runs a candidacy woken from its park.
func (f *follower) resume() {
	if f.w != nil {
		f.w.mw.noWake()
	}
	f.run(nil, 0, time.Time{})
}

// pollWake ends a wait's poll.
func (f *follower) pollWake() {
	f.pmu.Lock()
	f.pollDue = true
	f.pmu.Unlock()
	f.wake()
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
	f.w.ahead = []string{f.w.keyBefore(near)}
	f.c.waiting.Store(false) // until the new watch is created
}

// deleteUnleasedLeader deletes a leader key without a lease: this package
// never writes one, it never expires, and it would block the election for
// good.
func (f *follower) deleteUnleasedLeader(kv *mvccpb.KeyValue) {
	f.deleteUnleased(string(kv.Key), kv, "a leader key")
}

// deleteUnleased deletes key, read as kv, which has no lease (see
// deleteUnleasedLeader). The delete is guarded by the key's revision, so
// a key put again meanwhile stays.
func (f *follower) deleteUnleased(key string, kv *mvccpb.KeyValue, what string) {
	e := f.e
	e.o.Logger.Warn("etcd election: deleting "+what+" without a lease; this package never writes one", "key", string(kv.Key), "mod_revision", kv.ModRevision)
	_, err := e.commit(f.c.ctx(), true, newTxn().
		If(cmpMod(key, kv.ModRevision), cmpLease(key, 0)).
		Then(opDelete(key)))
	if err != nil {
		f.failed("deleting "+what+" without a lease", err)
	}
}

// failed handles a failed request of the candidacy: a lost session or a
// final error ends it (true); anything else is logged and waited out.
func (f *follower) failed(what string, err error) bool {
	return f.failedIn(f.c.ctx(), what, err)
}

// failedIn is failed, with the pause before a retry ended by ctx: a
// leader's guard retries until its Term ends (rewatch).
func (f *follower) failedIn(ctx context.Context, what string, err error) bool {
	e, c := f.e, f.c
	if ctx.Err() != nil {
		return true
	}
	if errors.Is(err, election.ErrSessionLost) {
		e.lose(c, err)
		return true
	}
	if errors.Is(err, election.ErrLeaseExpired) {
		e.lose(c, fmt.Errorf("etcd election %s: %s for %s: %w", e.Name(), what, c.key, err))
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
		e.lose(c, fmt.Errorf("%w: etcd election %s: %s for %s: lease %016x expired or was revoked", election.ErrSessionLost, e.Name(), what, c.key, uint64(c.s.lease)))
		return true
	}
	e.retryLog(c, what, err)
	return e.pause(ctx, c, f.nextRetry()) != nil
}

func (f *follower) warn(kv *mvccpb.KeyValue, msg string) {
	if r := f.rareOf(); !r.warned[string(kv.Key)] {
		if r.warned == nil {
			r.warned = map[string]bool{}
		}
		r.warned[string(kv.Key)] = true
		f.e.o.Logger.Warn("etcd election: "+msg, "key", string(kv.Key), "create_revision", kv.CreateRevision, "lease", fmt.Sprintf("%016x", uint64(kv.Lease)))
	}
}

// nextRetry returns the pause before the next try of a failed request.
func (f *follower) nextRetry() time.Duration {
	r := f.rareOf()
	if r.retry == nil {
		r.retry = retryBackoff(maxRetryWait)
	}
	return r.retry.NextBackOff()
}

// retried notes that a request or watch worked: the pauses start over.
func (f *follower) retried() {
	if f.rare != nil && f.rare.retry != nil {
		f.rare.retry.Reset()
	}
}

// pause waits d, or less if waiting must stop.
func (e *Elector) pause(ctx context.Context, c *candidacy, d time.Duration) error {
	return e.waiting(c).Pause(ctx, d)
}
