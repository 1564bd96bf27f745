package zk

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electkit/election"
	"github.com/electkit/election/internal/clock"
	"github.com/electkit/election/internal/record"
	"github.com/electkit/election/internal/skeleton"
)

// wait waits until c may lead, then claims the leadership and starts the
// Term. Each pass lists the children and watches one node: the candidate
// node just ahead of c's (P9); at the head of the order, the leader node
// while someone leads, or a pending hand-over to another candidate. c is
// also woken through its wake-up name when a hand-over names it.
func (e *Elector) wait(ctx context.Context, c *candidacy) (*election.Term, error) {
	skip := map[string]bool{} // persistent nodes: they never go, so they never block
	var wake <-chan gozk.Event
	for {
		if err := e.interrupted(ctx, c); err != nil {
			return nil, err
		}
		if sid := e.conn.SessionID(); sid != c.session && sid != 0 {
			return nil, fmt.Errorf("%w: session %#x of node %s was replaced by %#x", errNodeGone, c.session, c.node, sid)
		}
		if wake == nil {
			var err error
			if wake, err = e.watchWake(ctx, c); err != nil {
				return nil, err
			}
		}
		var names []string
		var err error
		e.reads.Add(1)
		if derr := e.do(ctx, e.closing, func() { names, _, err = e.conn.Children(e.path) }); derr != nil {
			return nil, e.stopped(ctx, c, derr)
		}
		if err != nil {
			if errors.Is(err, gozk.ErrNoNode) {
				return nil, fmt.Errorf("%w: the election path %s was deleted", errNodeGone, e.path)
			}
			if err := e.transient(ctx, c, err); err != nil {
				return nil, err
			}
			continue
		}
		v := parseView(names)
		pred, found := "", false
		for _, ch := range v.order {
			if ch.name == c.name {
				found = true
				break
			}
			if !skip[ch.name] {
				pred = ch.name
			}
		}
		if !found {
			return nil, fmt.Errorf("%w: node %s is no longer a child of %s", errNodeGone, c.name, e.path)
		}
		// A pending hand-over that names c: c claims, wherever it is in
		// the order.
		if v.handover && !v.leader {
			ho, err := e.readHandover(ctx, c, v)
			if err != nil {
				return nil, err
			}
			if ho.to == c.name {
				t, err := e.claim(ctx, c, v, ho.version)
				if t != nil || err != nil {
					return t, err
				}
				continue
			}
			if ho.lapsed {
				continue // withdrawn: list again
			}
			if pred == "" { // the head waits for the hand-over to end
				if err := e.waitEvent(ctx, c, ho.watch, wake, &wake); err != nil {
					return nil, err
				}
				continue
			}
		}
		if pred != "" {
			if e.wasAbandoned(pred) {
				// A node of this session's that an abandoned create left: it
				// would lead for nobody. Delete it; waitGone sees it go.
				e.drop(e.path + "/" + pred)
			}
			_, persistent, err := e.waitGone(ctx, c, pred, &wake)
			if err != nil {
				return nil, err
			}
			if persistent {
				e.log.Warn("zk election: skipping a persistent node in the election's order; it never leads", "path", e.path+"/"+pred)
				skip[pred] = true
			}
			continue
		}
		if v.leader {
			ev, err := e.watchLeader(ctx, c)
			if err != nil {
				return nil, err
			}
			if ev != nil {
				if err := e.waitEvent(ctx, c, ev, wake, &wake); err != nil {
					return nil, err
				}
			}
			continue
		}
		if v.handover {
			continue // a hand-over appeared since the listing: read it
		}
		t, err := e.claim(ctx, c, v, -1)
		if t != nil || err != nil {
			return t, err
		}
	}
}

// watchWake sets a watch on c's wake-up name (a hand-over to c creates it
// for a moment), or returns nil when it cannot (c lists again anyway).
func (e *Elector) watchWake(ctx context.Context, c *candidacy) (<-chan gozk.Event, error) {
	var ev <-chan gozk.Event
	var err error
	e.reads.Add(1)
	if derr := e.do(ctx, e.closing, func() { _, _, ev, err = e.conn.ExistsW(e.path + "/" + wakeName(c.guid)) }); derr != nil {
		return nil, e.stopped(ctx, c, derr)
	}
	if err != nil {
		return nil, e.transient(ctx, c, err)
	}
	return ev, nil
}

// waitEvent waits for ev or for c's wake-up (which is then cleared, to be
// set again), or until waiting must stop.
func (e *Elector) waitEvent(ctx context.Context, c *candidacy, ev <-chan gozk.Event, wake <-chan gozk.Event, cleared *<-chan gozk.Event) error {
	select {
	case <-ev:
	case <-wake:
		*cleared = nil
	case <-ctx.Done():
	case <-e.closing:
	case <-c.stop:
	}
	return e.interrupted(ctx, c)
}

// watchLeader watches the leader node while c heads the order. It returns
// nil, nil when the node is gone (c lists again). A persistent leader node
// never goes: it is not this package's (P8), and it is deleted.
func (e *Elector) watchLeader(ctx context.Context, c *candidacy) (<-chan gozk.Event, error) {
	var ok bool
	var st *gozk.Stat
	var ev <-chan gozk.Event
	var err error
	p := e.path + "/" + leaderName
	e.reads.Add(1)
	if derr := e.do(ctx, e.closing, func() { ok, st, ev, err = e.conn.ExistsW(p) }); derr != nil {
		return nil, e.stopped(ctx, c, derr)
	}
	if err != nil {
		return nil, e.transient(ctx, c, err)
	}
	if !ok {
		return nil, nil
	}
	if st.EphemeralOwner == 0 {
		e.log.Warn("zk election: deleting a persistent leader node: this package never makes one", "path", p)
		var derr error
		if err := e.do(ctx, e.closing, func() { derr = e.dropIfCzxid(p, st.Czxid, 0) }); err != nil {
			return nil, e.stopped(ctx, c, err)
		}
		if derr != nil && !errors.Is(derr, gozk.ErrNoNode) && !errors.Is(derr, gozk.ErrBadVersion) {
			return nil, e.transient(ctx, c, derr)
		}
		return nil, nil
	}
	return ev, nil
}

// pendingHandover is what a waiter read of a pending hand-over.
type pendingHandover struct {
	to      string            // the target's candidate node name
	version int32             // the hand-over node's version, for the target's claim
	watch   <-chan gozk.Event // fires when it changes or goes
	lapsed  bool              // it was withdrawn by this read: list again
}

// readHandover reads the pending hand-over. One whose target is not in
// the listing (it left: it can never claim), that is persistent, or that
// names nobody, can never be taken: it is withdrawn (guarded by its
// creation zxid), so that the normal order resumes.
func (e *Elector) readHandover(ctx context.Context, c *candidacy, v view) (pendingHandover, error) {
	p := e.path + "/" + handoverName
	var data []byte
	var st *gozk.Stat
	var ev <-chan gozk.Event
	var err error
	e.reads.Add(1)
	if derr := e.do(ctx, e.closing, func() { data, st, ev, err = e.conn.GetW(p) }); derr != nil {
		return pendingHandover{}, e.stopped(ctx, c, derr)
	}
	if errors.Is(err, gozk.ErrNoNode) {
		return pendingHandover{lapsed: true}, nil
	}
	if err != nil {
		return pendingHandover{}, e.transient(ctx, c, err)
	}
	to := decodeHandover(data)
	present := slices.ContainsFunc(v.order, func(ch child) bool { return ch.name == to })
	if to == "" || !present || st.EphemeralOwner == 0 {
		e.log.Warn("zk election: withdrawing a hand-over that can never be taken", "path", p, "to", to, "ephemeral_owner", st.EphemeralOwner)
		var derr error
		if err := e.do(ctx, e.closing, func() { derr = e.dropIfCzxid(p, st.Czxid, 0) }); err != nil {
			return pendingHandover{}, e.stopped(ctx, c, err)
		}
		if derr != nil && !errors.Is(derr, gozk.ErrNoNode) && !errors.Is(derr, gozk.ErrBadVersion) {
			return pendingHandover{}, e.transient(ctx, c, derr)
		}
		return pendingHandover{lapsed: true}, nil
	}
	return pendingHandover{to: to, version: st.Version, watch: ev}, nil
}

// claim takes the leadership for c, which heads the order (or is the
// target of the pending hand-over at version handover; else -1): one
// multi checks c's node (its session alive, P4), asserts that no hand-over
// is pending (creating and deleting _t) or takes the one to c, deletes the
// leadership nodes of leaderships whose _l is gone (so that their
// fencing checks fail from now on), and creates _l, which only one
// candidate can, and c's leadership node, whose creation zxid is the
// token. The Term counts from the multi's send time. It returns nil, nil
// when c may not lead now (someone else claimed, a hand-over appeared):
// list again.
func (e *Elector) claim(ctx context.Context, c *candidacy, v view, handover int32) (*election.Term, error) {
	rec := encodeRecord(e.o, e.o.Value)
	lp := e.path + "/" + leadName(c.guid)
	lrec := record.EncodeLeader(e.o, e.o.Value, c.name)
	ops := []any{&gozk.CheckVersionRequest{Path: c.node, Version: -1}}
	tp := e.path + "/" + handoverName
	if handover >= 0 {
		ops = append(ops, &gozk.DeleteRequest{Path: tp, Version: handover})
	} else {
		ops = append(ops, &gozk.CreateRequest{Path: tp, Flags: gozk.FlagEphemeral, Acl: e.cfg.NodeACL},
			&gozk.DeleteRequest{Path: tp, Version: -1})
	}
	for _, l := range v.leads {
		ops = append(ops, &gozk.DeleteRequest{Path: e.path + "/" + l, Version: -1})
	}
	ops = append(ops,
		&gozk.CreateRequest{Path: e.path + "/" + leaderName, Data: lrec, Flags: gozk.FlagEphemeral, Acl: e.cfg.NodeACL},
		&gozk.CreateRequest{Path: lp, Data: rec, Flags: gozk.FlagEphemeral, Acl: e.cfg.NodeACL},
		&gozk.SetDataRequest{Path: lp, Data: rec, Version: 0})
	if e.lostSeen != nil {
		e.lostSeen.Store(false) // a disconnect before this Term is not this Term's
	}
	sid := e.conn.SessionID()
	sent := clock.Now()
	var res []gozk.MultiResponse
	var err error
	if derr := e.do(ctx, e.closing, func() { res, err = e.conn.Multi(ops...) }); derr != nil {
		// The claim may have been carried out: its nodes are released
		// with the candidacy (withdraw), guarded by the leadership node.
		e.mu.Lock()
		c.lead = lp
		e.mu.Unlock()
		return nil, e.stopped(ctx, c, derr)
	}
	if sid != c.session || e.conn.SessionID() != c.session {
		return nil, fmt.Errorf("%w: session %#x of node %s expired", errNodeGone, c.session, c.node)
	}
	switch {
	case err == nil:
	case errors.Is(err, gozk.ErrConnectionClosed), errors.Is(err, gozk.ErrNoServer):
		// The reply was lost: the leadership node, owned by c's session,
		// says whether the claim was carried out.
		st, ok, ferr := e.findLead(ctx, c, lp)
		if ferr != nil {
			return nil, ferr
		}
		if !ok {
			return nil, e.transient(ctx, c, err)
		}
		res = make([]gozk.MultiResponse, len(ops))
		res[len(ops)-1].Stat = st
	case len(res) == len(ops) && errors.Is(res[0].Error, gozk.ErrNoNode):
		return nil, fmt.Errorf("%w: node %s is gone", errNodeGone, c.node)
	case errors.Is(err, gozk.ErrNodeExists), errors.Is(err, gozk.ErrNoNode), errors.Is(err, gozk.ErrBadVersion):
		return nil, nil // someone claimed, a hand-over appeared or went, or a leadership node went: list again
	case errors.Is(err, gozk.ErrSessionExpired):
		return nil, fmt.Errorf("%w: session %#x expired", errNodeGone, c.session)
	default:
		return nil, e.transient(ctx, c, err)
	}
	st := res[len(ops)-1].Stat
	e.mu.Lock()
	c.lead = lp
	c.version = st.Version
	c.leader.Token = uint64(st.Czxid)
	e.mu.Unlock()
	return e.begin(ctx, c, sent, nil)
}

// findLead reads c's leadership node after a claim whose reply was lost:
// ok when it exists under c's session, with its stat.
func (e *Elector) findLead(ctx context.Context, c *candidacy, lp string) (*gozk.Stat, bool, error) {
	for {
		var ok bool
		var st *gozk.Stat
		var err error
		if derr := e.do(ctx, e.closing, func() { ok, st, err = e.conn.Exists(lp) }); derr != nil {
			return nil, false, e.stopped(ctx, c, derr)
		}
		if err == nil {
			return st, ok && st.EphemeralOwner == c.session, nil
		}
		if err := e.transient(ctx, c, err); err != nil {
			return nil, false, err
		}
	}
}

// waitGone watches the node pred (a child of the election path) until it
// is deleted, the watch is lost (the caller lists again), or waiting must
// stop. persistent reports a node that is not ephemeral: it never goes.
func (e *Elector) waitGone(ctx context.Context, c *candidacy, pred string, wake *<-chan gozk.Event) (gone, persistent bool, err error) {
	var ok bool
	var st *gozk.Stat
	var ev <-chan gozk.Event
	var rerr error
	e.reads.Add(1)
	if derr := e.do(ctx, e.closing, func() { ok, st, ev, rerr = e.conn.ExistsW(e.path + "/" + pred) }); derr != nil {
		return false, false, e.stopped(ctx, c, derr)
	}
	if rerr != nil {
		return false, false, e.transient(ctx, c, rerr)
	}
	if !ok {
		return true, false, nil
	}
	if st.EphemeralOwner == 0 {
		return false, true, nil
	}
	select {
	case <-ev: // deleted, changed, or the watch is lost: list again
		return true, false, e.interrupted(ctx, c)
	case <-*wake: // a hand-over names c: list again
		*wake = nil
	case <-ctx.Done():
	case <-e.closing:
	case <-c.stop:
	}
	return false, false, e.interrupted(ctx, c)
}

// interrupted reports why waiting must stop, or nil. c may be nil.
func (e *Elector) interrupted(ctx context.Context, c *candidacy) error {
	return e.waiting(c).Interrupted(ctx)
}

// waiting is what ends c's waits besides ctx. c may be nil.
func (e *Elector) waiting(c *candidacy) skeleton.Waiting {
	w := skeleton.Waiting{Closing: e.closing}
	if c != nil {
		w.Stop = c.stop
	}
	return w
}

// stopped turns the error of an abandoned request into why waiting stops.
func (e *Elector) stopped(ctx context.Context, c *candidacy, err error) error {
	if ierr := e.interrupted(ctx, c); ierr != nil {
		return ierr
	}
	return err
}

// transient handles a failed request while waiting: a closed connection
// ends the campaign; anything else is retried after a pause.
func (e *Elector) transient(ctx context.Context, c *candidacy, err error) error {
	if ferr := e.finalErr("waiting", err); ferr != nil {
		return ferr
	}
	e.retryLog("a request while waiting", err)
	return e.pause(ctx, c, retryDelay)
}

// pause waits d, or less if waiting must stop. c may be nil.
func (e *Elector) pause(ctx context.Context, c *candidacy, d time.Duration) error {
	return e.waiting(c).Pause(ctx, d)
}
