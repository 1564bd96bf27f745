package etcd

import (
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
// guards its keys through its watch (guard, rewatch), and renewLoop
// renews its Term, counting a renewal only while that watch is live (the
// fail-closed rule, wait.go).

// errUnwatched makes a renewal not count: the candidacy's watch did not
// cover its keys throughout it.
var errUnwatched = errors.New("etcd election: the candidate's keys were not watched throughout the renewal; it does not extend the term")

// guard follows the watch while c leads: a change of its keys by anyone
// else ends the candidacy.
func (f *follower) guard(token int64) {
	e, c := f.e, f.c
	e.mu.Lock()
	t := c.lc.Term()
	e.mu.Unlock()
	seen := token
	p := newPreemption(e, c)
	defer p.stop()
	// The read of c's successor runs beside the watch: the watch is
	// taken from (its creation, a change of c's keys) while it is out.
	var rd *succRead
	var succRetry <-chan time.Time
	// A Term that ended leaves nothing to guard: its candidacy is being
	// withdrawn (renewLoop) or released (Resign, which halts it once
	// the release is answered). Its own release's events are not a
	// change by another client.
	for c.ctx().Err() == nil && t.Err() == nil {
		if f.w == nil {
			rev, ok := f.rewatch(token, p)
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
		// The Term's end, whose channel renewLoop waits on as well, not
		// the candidacy's own: a Done channel of the candidacy's would be
		// one more for every leader of a sharded service. A leading
		// candidacy halts after its Term ends, never before (end, lose;
		// renewLoop withdraws it), and the guard returns at the halt:
		// Resign ends the Term before its release is sent and halts the
		// candidacy once the release is answered, and the guard, woken
		// meanwhile, would otherwise run (and close its watch, on the
		// release's connection) beside the release. After the Term's
		// end the guard acts on nothing.
		select {
		case <-t.Done():
			<-c.ctx().Done()
			return
		case <-rdDone:
			if f.endSuccRead(rd) {
				succRetry = time.After(f.nextRetry())
			}
			rd = nil
		case <-succRetry:
			succRetry, f.needSucc = nil, true
		case <-p.fire():
			if t.Err() != nil {
				return
			}
			if p.preempt(token) {
				return
			}
		case <-f.w.mw.readyC():
			if t.Err() != nil {
				return
			}
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
							return // handed over
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
						return
					}
				}
			}
			if werr != nil {
				c.watched.Store(false)
				f.closeWatch()
				if c.ctx().Err() == nil {
					e.retryLog(c, "watching the leader key", werr)
				}
				if e.pause(c.ctx(), c, f.nextRetry()) != nil {
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
	for c.ctx().Err() == nil {
		f.closeWatch()
		start, end := e.lay.queueIn(c.key), after(e.lay.request())
		f.w = &rangeWatch{start: start, end: end, mw: muxOf(e.cli).watch(start, end, 0)}
		if err := f.awaitCreated(); err != nil {
			if f.failed("watching the leader key", err) {
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
		resp, err := e.commit(c.ctx(), true, newTxn().Then(ops...))
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

// awaitCreated waits until etcd confirms the creation of f's watch, and
// returns why not if it broke first or the candidacy ended. Events that
// come with or after the confirmation stay for the next take.
func (f *follower) awaitCreated() error {
	mw := f.w.mw
	for {
		select {
		case <-f.c.ctx().Done():
			return f.c.ctx().Err()
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
			counted := err
			if err == nil && !(watched && c.watched.Load()) {
				counted = errUnwatched // the lease lives, but a change of the keys might have gone unseen
			}
			lc.RenewedAt(sent, replied, counted)
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
