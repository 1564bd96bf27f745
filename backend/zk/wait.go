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
//
// Next in line (the first or second in the order, no blocker ahead, a
// Priority of 0 or more), c claims as soon as what it watches is deleted,
// without listing again: one round trip after the watch event. Its last
// listing is current enough for that. A newcomer that could sort ahead of
// c has a positive priority, and its registration bumps the queue node,
// whose version c read before the listing and the claim checks (one of
// priority 0 or less sorts behind c: it bumps nothing, so the churn of an
// election without priorities never costs a waiter its early claim). A
// claim by anyone else needs _l gone (c, first in line, watches it) or
// rewrites the claimer's node (c, second in line, watches it: it is next
// in line then, and learns it from the queue node alone, without listing
// again). A hand-over creates _t, whose absence the claim asserts. A
// woken target of a hand-over takes it without listing again too.
func (e *Elector) wait(ctx context.Context, c *candidacy) (*election.Term, error) {
	skip := map[string]bool{} // persistent nodes: they never go, so they never block
	var wake <-chan gozk.Event
	var leads []string     // the leadership nodes of the last listing, kept while c is next in line
	lastQueue := int32(-1) // the queue node's version before it, or -1
	at := 0                // c's place in it
	next := hintNone       // what the last wait saw
	rewatch := ""          // watch this node again, next in line, without listing
	handed := false        // what c watched went: a release may have handed over to c (takeHandover)
	// nw: c's registration (watchNext) while it waits on a candidate
	// node near the head (second or third in the order), which may hand
	// over to it, or hand over to the one ahead of c, whose release hands
	// over to c in turn without waking it first: c's connection keeps its
	// session confirmed, so that a hand-over's Term counts from a
	// confirmation already made.
	var nw *connWatch
	nwInterval := time.Duration(0)
	unregister := func() {
		if nw != nil {
			nw.releaseNext(nwInterval)
			nw = nil
		}
	}
	defer unregister()
	// awaitPred waits on pred, the candidate node just ahead of c, and
	// sets next or rewatch from what it saw.
	awaitPred := func(pred string, inLine bool) error {
		if nw == nil && at <= 2 && e.handsOver() {
			if o, err := e.resolveTTL(c.session); err == nil {
				nwInterval = o.Window() / 3
				nw = watchNext(e.conn, nwInterval)
			}
		}
		gone, changed, persistent, woken, err := e.waitGone(ctx, c, pred, &wake)
		if err != nil {
			return err
		}
		if persistent {
			e.log.Warn("zk election: skipping a persistent node in the election's order; it never leads", "path", e.path+"/"+pred)
			skip[pred] = true
		}
		handed = gone
		switch {
		case woken:
			next = hintWoken
		case gone && inLine:
			next = hintGone
		case changed && lastQueue >= 0 && guidOf(pred) != "":
			// The candidate ahead claimed: its claim rewrites its node.
			// Every candidate ahead of it is gone then, so c is next in
			// line if none registered since the last listing: the queue
			// node says so, without listing again.
			if err := e.readQueue(ctx, c); err != nil {
				return err
			}
			if c.queue == lastQueue {
				c.queue, rewatch, at = -1, pred, 1
				leads = []string{leadName(guidOf(pred))}
			}
		}
		return nil
	}
	for {
		if err := e.interrupted(ctx, c); err != nil {
			return nil, err
		}
		if sid := e.conn.SessionID(); sid != c.session && sid != 0 {
			return nil, fmt.Errorf("%w: session %#x of node %s was replaced by %#x", errNodeGone, c.session, c.node, sid)
		}
		if handed {
			handed = false
			t, err := e.takeHandover(ctx, c, nw)
			if t != nil || err != nil {
				return t, err
			}
		}
		if next != hintNone {
			queue, handover := lastQueue, int32(-1)
			if next == hintWoken {
				queue, handover = -1, handoverVersion
			}
			next = hintNone
			t, err := e.claim(ctx, c, leads, queue, handover, true)
			if t != nil || err != nil {
				return t, err
			}
		}
		if wake == nil {
			var err error
			if wake, err = e.watchWake(ctx, c); err != nil {
				return nil, err
			}
		}
		if rewatch != "" {
			pred := rewatch
			rewatch = ""
			if err := awaitPred(pred, true); err != nil {
				return nil, err
			}
			continue
		}
		if c.queue < 0 && at <= 2 && e.o.Priority >= 0 {
			// Near the head: read the queue node before the listing (a
			// registration of higher priority after this read bumps it).
			if err := e.readQueue(ctx, c); err != nil {
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
		v := placeIn(names, c.self, skip)
		if slices.Contains(v.leads, leadName(c.guid)) {
			// c's leadership node: a release handed over to c, which
			// the event it woke on did not show (it listed instead).
			t, err := e.takeHandover(ctx, c, nw)
			if t != nil || err != nil {
				return t, err
			}
		}
		lastQueue, c.queue = c.queue, -1
		pred, found, blocked := v.pred, v.found, v.blocked
		at = v.at
		if pred == "" || at > 2 {
			unregister() // c heads the order, or is too far back for a hand-over
		}
		if !found {
			return nil, fmt.Errorf("%w: node %s is no longer a child of %s", errNodeGone, c.name, e.path)
		}
		if blocked {
			lastQueue = -1 // a blocker ahead: no claim without listing
		}
		inLine := at <= 1 && lastQueue >= 0
		leads = nil
		if inLine {
			leads = v.leads // not the listing: a waiter keeps no O(N) state
		}
		// A pending hand-over that names c: c claims, wherever it is in
		// the order.
		if v.handover && !v.leader {
			ho, err := e.readHandover(ctx, c, names)
			if err != nil {
				return nil, err
			}
			if ho.to == c.name {
				t, err := e.claim(ctx, c, v.leads, -1, ho.version, false)
				if t != nil || err != nil {
					return t, err
				}
				continue
			}
			if ho.lapsed {
				continue // withdrawn: list again
			}
			if pred == "" { // the head waits for the hand-over to end
				woken, err := e.waitEvent(ctx, c, ho.watch, wake, &wake)
				if err != nil {
					return nil, err
				}
				if woken {
					next = hintWoken
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
			if err := awaitPred(pred, inLine); err != nil {
				return nil, err
			}
			continue
		}
		if v.leader {
			ev, err := e.watchLeader(ctx, c)
			if err != nil {
				return nil, err
			}
			if ev == nil {
				continue // gone meanwhile: list again
			}
			select {
			case got := <-ev:
				handed = got.Type == gozk.EventNodeDeleted
				if got.Type == gozk.EventNodeDeleted && inLine {
					next = hintGone
				}
			case <-wake:
				wake = nil
				next = hintWoken
			case <-ctx.Done():
			case <-e.closing:
			case <-c.stop:
			}
			if err := e.interrupted(ctx, c); err != nil {
				return nil, err
			}
			continue
		}
		if v.handover {
			continue // a hand-over appeared since the listing: read it
		}
		t, err := e.claim(ctx, c, v.leads, -1, -1, false)
		if t != nil || err != nil {
			return t, err
		}
	}
}

// hint is what a wait saw that lets c claim without listing again.
type hint int

const (
	hintNone  hint = iota
	hintGone       // what c watched next in line was deleted
	hintWoken      // c's wake-up name: a hand-over names c
)

// handoverVersion is the data version of a hand-over node: created and
// set once in the hand-over's multi, so that a claim of it names its
// version.
const handoverVersion = 1

// readQueue reads the queue node's data version into c.queue, making
// the node when it is missing (a path made by someone else).
func (e *Elector) readQueue(ctx context.Context, c *candidacy) error {
	p := e.path + "/" + queueName
	for {
		var ok bool
		var st *gozk.Stat
		var err error
		e.reads.Add(1)
		if derr := e.do(ctx, e.closing, func() {
			if ok, st, err = e.conn.Exists(p); err == nil && !ok {
				if _, err = e.conn.Create(p, nil, 0, e.cfg.PathACL); err == nil || errors.Is(err, gozk.ErrNodeExists) {
					ok, st, err = e.conn.Exists(p)
				}
			}
		}); derr != nil {
			return e.stopped(ctx, c, derr)
		}
		switch {
		case err == nil && ok:
			c.queue = st.Version
			return nil
		case err == nil, errors.Is(err, gozk.ErrNoAuth), errors.Is(err, gozk.ErrNoNode):
			return nil // c lists and claims as if it were not next in line
		}
		if err := e.transient(ctx, c, err); err != nil {
			return err
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
// set again: woken), or until waiting must stop.
func (e *Elector) waitEvent(ctx context.Context, c *candidacy, ev <-chan gozk.Event, wake <-chan gozk.Event, cleared *<-chan gozk.Event) (woken bool, err error) {
	select {
	case <-ev:
	case <-wake:
		*cleared = nil
		woken = true
	case <-ctx.Done():
	case <-e.closing:
	case <-c.stop:
	}
	return woken, e.interrupted(ctx, c)
}

// watchLeader watches the leader node while c heads the order. It returns
// nil, nil when the node is gone (c lists again). A persistent leader node
// is a release's hand-over (succ.go) while the candidate node it names
// exists: c watches that node, whose deletion ends that leadership.
// Otherwise it never goes, and is deleted.
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
		named, nev, err := e.watchNamed(ctx, c)
		if err != nil || nev != nil {
			return nev, err
		}
		if named != "" {
			e.log.Info("zk election: deleting a leader node a release handed over with: the candidate node it names is gone", "path", p, "names", named)
		} else {
			e.log.Warn("zk election: deleting a persistent leader node that names no candidate node of the election", "path", p)
		}
		var derr error
		if err := e.do(ctx, e.closing, func() { derr = e.dropStale(p, st, named) }); err != nil {
			return nil, e.stopped(ctx, c, err)
		}
		if derr != nil && !errors.Is(derr, gozk.ErrNoNode) && !errors.Is(derr, gozk.ErrBadVersion) {
			return nil, e.transient(ctx, c, derr)
		}
		return nil, nil
	}
	return ev, nil
}

// watchNamed reads the persistent leader node and, if the candidate node
// it names exists, watches that node: nev fires when it goes (or the
// watch is lost). named is the node it names, or "" if it names none of
// this layout; both are zero when _l is gone. A candidate node's name is
// never made again, so once it is gone the leader node is stale for good.
func (e *Elector) watchNamed(ctx context.Context, c *candidacy) (named string, nev <-chan gozk.Event, err error) {
	var data []byte
	var rerr error
	e.reads.Add(1)
	if derr := e.do(ctx, e.closing, func() { data, _, rerr = e.conn.Get(e.path + "/" + leaderName) }); derr != nil {
		return "", nil, e.stopped(ctx, c, derr)
	}
	if errors.Is(rerr, gozk.ErrNoNode) {
		return "", nil, nil
	}
	if rerr != nil {
		return "", nil, e.transient(ctx, c, rerr)
	}
	named = record.Key(data)
	if guidOf(named) == "" {
		return "", nil, nil
	}
	var ok bool
	var w <-chan gozk.Event
	var nst *gozk.Stat
	var werr error
	e.reads.Add(1)
	if derr := e.do(ctx, e.closing, func() { ok, nst, w, werr = e.conn.ExistsW(e.path + "/" + named) }); derr != nil {
		return "", nil, e.stopped(ctx, c, derr)
	}
	if werr != nil {
		return "", nil, e.transient(ctx, c, werr)
	}
	if !ok || nst.EphemeralOwner == 0 {
		return named, nil, nil // gone, or persistent: it never goes, and never leads
	}
	return named, w, nil
}

// dropStale deletes the persistent leader node at p, read with st, that
// names the candidate node named (or none: ""): with that leadership's
// own leadership node, in one multi, so that a leader node made since by
// a claim or a hand-over (its version is 0 too) is never deleted in its
// place. If that leadership node is gone (another client deleted it), by
// its creation zxid, as dropIfCzxid does.
func (e *Elector) dropStale(p string, st *gozk.Stat, named string) error {
	if g := guidOf(named); g != "" {
		_, err := e.conn.Multi(&gozk.DeleteRequest{Path: e.path + "/" + leadName(g), Version: -1},
			&gozk.DeleteRequest{Path: p, Version: st.Version})
		if !errors.Is(err, gozk.ErrNoNode) {
			return err
		}
	}
	return e.dropIfCzxid(p, st.Czxid, 0)
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
func (e *Elector) readHandover(ctx context.Context, c *candidacy, names []string) (pendingHandover, error) {
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
	present := slices.Contains(names, to)
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
// fencing checks fail from now on), creates _l, which only one
// candidate can, and c's leadership node, whose creation zxid is the
// token, and (unless it takes a hand-over) rewrites c's node's data
// unchanged, which wakes the candidate behind it: it is next in line
// now. The Term counts from the
// multi's send time. It returns nil, nil when c may not lead now (someone
// else claimed, a hand-over appeared, a candidate registered): list
// again.
//
// leads are the leadership nodes of the last listing. early: c claims on
// a watch event without listing again. With queue >= 0 (the queue node's
// version before that listing), the multi checks that no candidate
// registered since. The leadership nodes are then asserted gone (created
// and deleted) rather than deleted: their leaders release them with _l.
func (e *Elector) claim(ctx context.Context, c *candidacy, leads []string, queue, handover int32, early bool) (*election.Term, error) {
	rec := encodeRecord(e.o, e.o.Value)
	lp := e.path + "/" + leadName(c.guid)
	lrec := record.EncodeLeader(e.o, e.o.Value, c.name)
	ops := []any{&gozk.CheckVersionRequest{Path: c.node, Version: -1}}
	if early && queue >= 0 {
		ops = append(ops, &gozk.CheckVersionRequest{Path: e.path + "/" + queueName, Version: queue})
	}
	tp := e.path + "/" + handoverName
	if handover >= 0 {
		ops = append(ops, &gozk.DeleteRequest{Path: tp, Version: handover})
	} else {
		ops = append(ops, &gozk.CreateRequest{Path: tp, Flags: gozk.FlagEphemeral, Acl: e.cfg.NodeACL},
			&gozk.DeleteRequest{Path: tp, Version: -1})
	}
	for _, l := range leads {
		if early {
			ops = append(ops, &gozk.CreateRequest{Path: e.path + "/" + l, Flags: gozk.FlagEphemeral, Acl: e.cfg.NodeACL},
				&gozk.DeleteRequest{Path: e.path + "/" + l, Version: -1})
			continue
		}
		ops = append(ops, &gozk.DeleteRequest{Path: e.path + "/" + l, Version: -1})
	}
	if handover < 0 {
		// Every candidate ahead of c is gone: the one behind it is next
		// in line now. (Not for a hand-over, whose target may lead from
		// the middle of the order.)
		ops = append(ops, &gozk.SetDataRequest{Path: c.node, Data: rec, Version: -1})
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
	e.claims.Add(1)
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
// changes, the watch is lost (the caller lists again), or waiting must
// stop. gone reports that it was deleted (or was already gone); changed,
// that its data was written; persistent, a node that is not ephemeral:
// it never goes; woken, c's wake-up.
func (e *Elector) waitGone(ctx context.Context, c *candidacy, pred string, wake *<-chan gozk.Event) (gone, changed, persistent, woken bool, err error) {
	var ok bool
	var st *gozk.Stat
	var ev <-chan gozk.Event
	var rerr error
	e.reads.Add(1)
	if derr := e.do(ctx, e.closing, func() { ok, st, ev, rerr = e.conn.ExistsW(e.path + "/" + pred) }); derr != nil {
		return false, false, false, false, e.stopped(ctx, c, derr)
	}
	if rerr != nil {
		return false, false, false, false, e.transient(ctx, c, rerr)
	}
	if !ok {
		return true, false, false, false, nil
	}
	if st.EphemeralOwner == 0 {
		return false, false, true, false, nil
	}
	select {
	case got := <-ev: // deleted, changed, or the watch is lost: list again
		gone = got.Type == gozk.EventNodeDeleted
		changed = got.Type == gozk.EventNodeDataChanged
	case <-*wake: // a hand-over names c
		*wake = nil
		woken = true
	case <-ctx.Done():
	case <-e.closing:
	case <-c.stop:
	}
	return gone, changed, false, woken, e.interrupted(ctx, c)
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
