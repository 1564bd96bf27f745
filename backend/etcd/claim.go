package etcd

import (
	"fmt"
	"runtime"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
	"github.com/electkit/election/internal/clock"
	"github.com/electkit/election/internal/record"
)

// This file holds the claim of the leadership: the transaction that
// creates the leader key when a candidacy heads the queue with no leader
// (claim), and the start of its Term (elect).

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
	ownCmps := []*pb.Compare{
		e.lay.noLeader(),
		cmpCreate(c.key, c.rev),
		cmpLease(c.key, int64(s.lease)),
		cmpCreate(e.lay.transfer(), 0),
	}
	if f.w != nil && (f.w.end == e.lay.leadEnd() || f.w.end == after(e.lay.transfer())) {
		// c watched up to the leader key: it heads the queue, or the key
		// ahead did and has gone (a handover). Nothing is expected above,
		// so one Compare over the rest of the queue checks it (a range
		// Compare reads every key of its range: cheap while empty), and
		// the Else reads only the first window (a write carries every
		// branch, and etcd logs slow ones whole).
		resp, err := e.commit(c.ctx(), true, newTxn().
			If(append(ownCmps, emptyIn(f.fromKey(), e.lay.queueEnd()))...).
			Then(put).
			Else(e.nearOps(c, f.fromKey())...))
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
	nothingAbove := e.lay.nested(f.fromKey(),
		func() []*pb.RequestOp { return []*pb.RequestOp{put} },
		func(lo, hi string) []*pb.RequestOp {
			return []*pb.RequestOp{opGet(lo, withRange(hi), withLimit(aboveLimit))}
		})
	resp, err := e.commit(c.ctx(), true, newTxn().
		If(ownCmps...).
		Then(nothingAbove).
		Else(e.nearOps(c, f.fromKey())...))
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
			v.above = e.lay.dropMarks(rs[0].GetResponseRange().GetKvs(), 2)
		}
		v.last = depth == len(e.lay.windows(f.fromKey()))-1
		return v, 0, sent, nil
	}
	return nil, resp.Header.Revision, sent, nil
}

// leaderPut creates the leader key for c (in a transaction that checks
// it is absent).
func (e *Elector) leaderPut(c *candidacy) *pb.RequestOp {
	return opPut(e.lkeyOf(c), e.leaderRec(c), withLease(c.s.lease))
}

// leaderRec is the leader key's value as c creates it. It is made when a
// request needs it rather than kept with each candidacy.
func (e *Elector) leaderRec(c *candidacy) string {
	return string(record.EncodeLeader(*e.o, e.o.Value, c.key))
}

// renewed returns the send time of the session's last confirmed renewal,
// renewing first if that is more than half a lease window old: what a
// Term that begins now counts from.
func (f *follower) renewed() (time.Time, error) {
	s := f.c.s
	if sent, ok := s.fresh(f.e.o.Window()); ok {
		return sent, nil
	}
	if _, _, err := s.renew(f.c.ctx()); err != nil {
		if last := s.lastRenewed(); s.private && clock.Since(last) > s.TTL() {
			// The candidacy's own lease: no renewal went through for a
			// whole TTL (its keepalives cannot reach etcd), so etcd has
			// let it go, or will, with the queue key. The candidacy
			// ends rather than retry the claim for good.
			return time.Time{}, fmt.Errorf("%w: lease %016x not renewed for %v: %w", election.ErrLeaseExpired, uint64(s.lease), clock.Since(last).Round(time.Millisecond), err)
		}
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
	v := f.e.nearView(rev, rs, f.fromKey())
	if v.own != nil && len(v.above) == 0 && !v.last {
		var err error
		if v, err = f.e.look(f.c.ctx(), f.c, f.fromKey(), rev); err != nil {
			return nil, 0, time.Time{}, err
		}
	}
	return v, 0, time.Time{}, nil
}

// elect starts c's Term at token. The watch must cover the leader key
// from the token on: kept from waiting, or opened at the revision after
// it; renewals count only once it is created (guard).
func (f *follower) elect(token int64, sent time.Time) bool {
	e, c := f.e, f.c
	e.mu.Lock()
	c.token = token // from now on release deletes the leader key by its create revision
	c.headed = f.headed
	e.mu.Unlock()
	// The leader key and transfer requests, and the queue below c: its
	// successor (succ.go). The watch opens from the token on, so nothing
	// since c's Term began is missed; renewals count once it is created
	// (guard). It opens after the Term has begun (below), off Campaign's
	// path, unless the client has no watch stream yet: opening one can
	// take a while (with a user name, a new stream logs in first, a
	// bcrypt check on a loaded member), which the Term's first window
	// should not pay.
	early := !muxOf(e.cli).live()
	if early {
		f.watchRange(e.lay.queueIn(c.key), after(e.lay.request()), "", token+1)
		c.watched.Store(f.w.created)
	}
	// The Term counts from the session's latest confirmed renewal,
	// renewed first if the one c claimed with is stale by now (a claim
	// retried, a slow member, a stream's login), rather than begin
	// expired.
	if last, err := f.renewed(); err == nil && last.After(sent) {
		sent = last
	}
	leader := election.Leader{ID: e.o.ID, Value: e.o.Value, Priority: e.o.Priority}
	leader.Token = uint64(token)
	term, lc := backend.NewTerm(*e.o, leader, sent)
	var err error
	e.mu.Lock()
	switch {
	case c.lostErr != nil:
		err = c.lostErr
	case e.closed:
		err = election.ErrClosed
	case e.cand != c:
		err = election.ErrResigned
	}
	if err != nil {
		e.mu.Unlock()
		lc.End(err)
		return false
	}
	c.lc = lc
	e.terms.Add(lc)
	e.saw(leader.Token)
	if f.needSucc {
		// The read of c's successor (succ.go) begins before Campaign
		// returns, so that a Resign made at once finds it out, waits
		// for it (awaitSucc) and hands over; the guard takes it on.
		f.needSucc = false
		f.startSuccRead()
	}
	c.settle()
	e.wg.Add(1)
	e.mu.Unlock()
	// Campaign's caller goes first: it was readied by settle onto this
	// goroutine's processor, and would otherwise wait for what follows
	// (or for another processor to wake and take it).
	runtime.Gosched()
	if !early {
		f.watchRange(e.lay.queueIn(c.key), after(e.lay.request()), "", token+1)
		c.watched.Store(f.w.created)
	}
	// Without a before-renewal hook, the Term is renewed where its keys
	// are guarded, on this goroutine (guard; then run's renewLoop, which
	// withdraws c at the Term's end if the guard did not); with one,
	// which may take its time, on a goroutine of its own.
	f.renews = e.o.BeforeRenew == nil
	if !f.renews {
		go e.renewLoop(c, lc)
	}
	return term.Err() == nil
}
