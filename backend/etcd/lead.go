package etcd

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electkit/election/backend"
)

// This file holds what a candidacy does while it leads: its goroutine
// guards its keys through its watch (guard, rewatch) and, for an Elector
// without a before-renewal hook, renews its Term at its session's ticks
// as well (renewLoop, for one with a hook, does so on a goroutine of its
// own), counting a renewal only while that watch is live (the
// fail-closed rule, wait.go).

// errUnwatched makes a renewal not count: the candidacy's watch did not
// cover its keys throughout it.
var errUnwatched = errors.New("etcd election: the candidate's keys were not watched throughout the renewal; it does not extend the term")

// guard follows the watch while c leads: a change of its keys by anyone
// else ends the candidacy. Without a before-renewal hook it renews c's
// Term too: at each of the session's ticks it takes the tick's renewal
// (of the session's lease, shared with the other leaders of the tick),
// and once the renewal's reply has come and the watch's responses that
// came before it are taken, it counts it (counted), so a leader costs
// one goroutine, not two. When the Term ends, the guard withdraws c.
// A renewal's reply that comes while the guard waits on a request of its
// own (a transfer request's read of its target, its answer: a round trip
// each) is counted once that is done: a store that takes the rest of a
// lease window to answer it ends the Term, which fails closed.
func (f *follower) guard(token int64, tk *sessionTick) {
	e, c := f.e, f.c
	lc := c.lc // set by elect, on this goroutine
	t := lc.Term()
	seen := token
	p := newPreemption(e, c)
	defer p.stop()
	// The read of c's successor runs beside the watch: the watch is
	// taken from (its creation, a change of c's keys) while it is out.
	// The first began with the Term (elect).
	var rd *succRead
	if v, ok := succReadsOut.Load(c); ok {
		rd = v.(*succRead)
	}
	var succRetry <-chan time.Time
	// With tk, the guard renews the Term: the tick it waits for (tk.ch,
	// tickC) and then the reply of its renewal (tk.r.done, replyC), one
	// of them at a time, the ticks one after the other, none skipped
	// (see renewLoop); watched, the watch's state when the tick was
	// taken.
	var tickC, replyC <-chan struct{}
	var watched bool
	if tk != nil {
		tickC = tk.ch
	}
	// ended withdraws c once its Term has ended by itself (its deadline,
	// a hook's error), its keys going at once (after Resign, a hand-over
	// or a loss, withdraw does nothing), and returns once c has halted:
	// see below.
	ended := func() {
		e.withdraw(c, t.Err(), false)
		<-c.ctx().Done()
	}
	// takeWatch follows the responses the watch has for the guard: it
	// reports whether the candidacy ended (ousted, handed over).
	takeWatch := func() bool {
		resps, werr := f.w.mw.take()
		for _, wr := range resps {
			if wr.Created {
				f.w.created = true
				c.watched.Store(true)
				f.retried()
			}
			for _, pev := range wr.Events {
				ev := (*clientv3.Event)(pev)
				if ev.Kv.ModRevision <= seen {
					continue
				}
				var err error
				switch key := string(ev.Kv.Key); {
				case key == c.key:
					err = e.ownEvent(c, ev)
				case e.lay.isLeaderKey(key, c.seq, c.key):
					err = e.leaderEvent(c, token, ev)
				case key == e.lay.request():
					if f.request(ev, token) {
						return true // handed over
					}
				default:
					switch k := string(ev.Kv.Key); {
					case strings.HasPrefix(k, e.lay.leader()):
						e.noteNext(c, ev)
					case strings.HasPrefix(k, e.lay.queue()) && k < c.key:
						switch {
						case rd != nil:
							rd.note(ev) // applied after its view
						case ev.Kv.ModRevision > f.succRev && e.noteSucc(c, ev):
							f.needSucc = true
						}
					default:
						p.event(ev)
					}
				}
				if err != nil {
					e.oust(c, err)
					return true
				}
			}
		}
		if werr != nil {
			c.watched.Store(false)
			f.closeWatch()
			if c.ctx().Err() == nil {
				e.retryLog(c, "watching the leader key", werr)
			}
			// Until the Term's end, which the guard acts on.
			if e.pause(t.Context(), c, f.nextRetry()) != nil {
				return true
			}
		}
		return false
	}
	// A Term that ended leaves nothing to guard: its candidacy is being
	// withdrawn (at the Term's end, below, or by renewLoop) or released
	// (Resign, which halts it once the release is answered). Its own
	// release's events are not a change by another client.
	for c.ctx().Err() == nil && t.Err() == nil {
		if f.w == nil {
			rev, ok := f.rewatch(t.Context(), token, p)
			if !ok {
				return
			}
			seen, f.needSucc = rev, true
		}
		if f.needSucc && rd == nil {
			f.needSucc, succRetry = false, nil
			rd = f.startSuccRead()
		}
		var rdDone <-chan struct{}
		if rd != nil {
			rdDone = rd.done
		}
		// The Term's end, not the candidacy's own: a Done channel of the
		// candidacy's would be one more for every leader of a sharded
		// service. A leading candidacy halts after its Term ends, never
		// before (end, lose; withdraw), and the guard returns at the
		// halt: Resign ends the Term before its release is sent and
		// halts the candidacy once the release is answered, and the
		// guard, woken meanwhile, would otherwise run (and close its
		// watch, on the release's connection) beside the release. After
		// the Term's end the guard acts on nothing.
		select {
		case <-t.Done():
			ended()
			return
		case <-tickC:
			// The tick's renewal renews this Term, sent or not yet
			// (renewLoop): the watch must be live now and at its
			// reply. Now is after the responses the watch has had
			// (its creation's confirmation, a break).
			if f.w != nil && takeWatch() {
				return
			}
			if t.Err() != nil {
				ended()
				return
			}
			tickC, replyC, watched = nil, tk.r.done, c.watched.Load()
		case <-replyC:
			if t.Err() != nil {
				ended()
				return
			}
			// The watch's responses that came before the reply go
			// first: a break among them, or a change of c's keys,
			// is seen before the renewal counts.
			if f.w != nil && takeWatch() {
				return
			}
			if t.Err() != nil {
				ended()
				return
			}
			counted(lc, c, watched, tk.r.sent, tk.r.replied, tk.r.err)
			tk = tk.next
			tickC, replyC = tk.ch, nil
		case <-rdDone:
			if f.endSuccRead(rd) {
				succRetry = time.After(f.nextRetry())
			}
			rd = nil
		case <-succRetry:
			succRetry, f.needSucc = nil, true
		case <-p.fire():
			if t.Err() != nil {
				ended()
				return
			}
			if p.preempt(token) {
				return
			}
		case <-f.w.mw.readyC():
			if t.Err() != nil {
				ended()
				return
			}
			if takeWatch() {
				return
			}
		}
	}
}

// counted records a renewal of the session's lease, sent at sent and
// answered (or failed) at replied with err, in c's Term (lc): it counts
// only if c's watch was live when the leader took it (watched) and is
// still (c.watched).
func counted(lc *backend.LeaseClock, c *candidacy, watched bool, sent, replied time.Time, err error) {
	if err == nil && !(watched && c.watched.Load()) {
		err = errUnwatched // the lease lives, but a change of the keys might have gone unseen
	}
	lc.RenewedAt(sent, replied, err)
}

// rewatch opens the watch again at the current revision and then reads
// and checks c's keys under it: every change after that read reaches the
// watch, and a change before it fails the check. It returns the read's
// revision, or false if the candidacy ended. It gives up when ctx (the
// Term's) ends: the guard withdraws the candidacy then.
func (f *follower) rewatch(ctx context.Context, token int64, p *preemption) (int64, bool) {
	e, c := f.e, f.c
	for ctx.Err() == nil {
		f.closeWatch()
		start, end := e.lay.queueIn(c.key), after(e.lay.request())
		f.w = &rangeWatch{start: start, end: end, mw: muxOf(e.cli).watch(start, end, 0)}
		if err := f.awaitCreated(ctx); err != nil {
			if f.failedIn(ctx, "watching the leader key", err) {
				return 0, false
			}
			continue
		}
		ops := []*pb.RequestOp{opGet(c.key), opGet(e.lkeyOf(c))}
		if p.on() {
			// The candidates above c, of higher priority (preemption):
			// the range begins at the next priority, past the deleted
			// keys of c's (handOverOps).
			ops = append(ops, opGet(e.lay.priorityEnd(c.key), withRange(e.lay.queueEnd())))
		}
		resp, err := e.commit(ctx, true, newTxn().Then(ops...))
		if err != nil {
			if f.failedIn(ctx, "checking the leader key", err) {
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

// awaitCreated waits until etcd confirms the creation of f's watch, and
// returns why not if it broke first or ctx ended. Events that come with or
// after the confirmation stay for the next take.
func (f *follower) awaitCreated(ctx context.Context) error {
	mw := f.w.mw
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-mw.readyC():
		}
		mw.mu.Lock()
		created := false
		for i, wr := range mw.resps {
			if wr.Created {
				created = true
				mw.resps = mw.resps[i+1:]
				if len(wr.Events) > 0 {
					mw.resps = append([]*pb.WatchResponse{{Events: wr.Events}}, mw.resps...)
				}
				break
			}
		}
		if created && len(mw.resps) > 0 {
			select {
			case mw.ready <- struct{}{}: // made by readyC above
			default:
			}
		}
		err := mw.err
		mw.mu.Unlock()
		if created {
			f.w.created = true
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// renewLoop renews c's Term with its session: at each of the session's
// ticks, the before-renewal hook, then the tick's renewal of the session's
// lease (shared with the other leaders of the tick; with a hook, one sent
// after it returned), then the lease clock with its send and reply times
// and outcome. A failed renewal is retried at the session's next tick,
// which comes sooner after a failure (with a hook, on the leader's own
// backoff, hook first), until the clock's deadline ends the Term. When
// the Term ends for any reason, the candidacy is withdrawn, so its keys
// go at once.
func (e *Elector) renewLoop(c *candidacy, lc *backend.LeaseClock) {
	defer e.wg.Done()
	defer e.forget(c)
	t := lc.Term()
	// A leader with a before-renewal hook retries a failed renewal of its
	// own fast (the Term's deadline runs), but not together with every
	// other leader's on the session. The backoff is made at the first
	// failure: most Terms never see one.
	var b *backoff.ExponentialBackOff
	joined := e.o.BeforeRenew == nil
	tk := c.s.ticks()
	for {
		// A leading candidacy halts only with its Term ended first (end,
		// lose), so the Term's end is the one case to wait on besides the
		// ticks: each case is a parked goroutine's sudog, per leader.
		select {
		case <-t.Done():
			e.withdraw(c, t.Err(), false) // nothing if it was withdrawn already
			return
		case <-tk.ch:
		}
		// The tick's own renewal renews this Term too, sent or not yet:
		// its send time, at or after the tick, is what the Term counts
		// from, and its reply time what its latency is measured to. A
		// before-renewal hook is asked before a renewal it approves is
		// sent, so with one the Term waits for a renewal sent after the
		// hook returned, as alone, and retries a failed one itself.
		for lc.BeforeRenew() == nil {
			watched := c.watched.Load()
			var sent, replied time.Time
			var err error
			if joined {
				sent, replied, err = c.s.await(t.Context(), tk.r)
			} else {
				sent, replied, err = c.s.renew(t.Context())
			}
			if t.Err() != nil {
				break
			}
			counted(lc, c, watched, sent, replied, err)
			if err == nil || c.s.Err() != nil {
				if b != nil {
					b.Reset()
				}
				break
			}
			if joined {
				// The tick's renewal failed, and the session says so
				// (tickNow): its next tick comes sooner, after a pause
				// that grows with jitter, and tries again for every
				// leader at once rather than each on its own.
				break
			}
			if b == nil {
				b = retryBackoff(c.s.interval / 4)
			}
			e.retryLog(c, "renewing the lease", err)
			if e.pause(t.Context(), c, b.NextBackOff()) != nil {
				break
			}
		}
		if joined {
			// The ticks one after the other, none skipped: the one after
			// a failed renewal comes within tens of milliseconds, and a
			// leader still busy then would otherwise wait a whole
			// interval for the next, its Term running out meanwhile.
			tk = tk.next
		} else {
			tk = c.s.ticks() // a slow hook skips the ticks it missed
		}
	}
}
