package zk

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electkit/election"
	"github.com/electkit/election/internal/clock"
	"github.com/electkit/election/internal/record"
)

// This file holds the leader's successor and the hand-over to it in the
// leader's release. A leader at the head of the order reads, once it
// leads, the candidate just behind it (its successor) and the queue
// node's version (with nobody behind it yet, it watches the children
// until the first registration, and reads then). Its release then hands
// over in the multi that deletes its nodes: the multi checks that the
// successor's node is there (its session alive) and that the queue node
// is at the version read (nobody could have sorted between), deletes the
// leader's _l, leadership node and candidate node, and creates _l and the
// successor's leadership node anew for the successor — persistent, since
// an ephemeral node created by the leader's multi would belong to the
// leader's session and go with it. The multi's zxid is the successor's
// token.
//
// The successor watches the leader's candidate node (just ahead of it in
// the order). On its deletion (or on finding its own leadership node in
// a listing) it reads _l and its own node, and syncs through the
// ensemble's leader, all at once (takeHandover): a persistent _l naming
// its node says that it leads, and the sync's send time is what its Term
// counts from. A successor that waited second or third in the order had
// its connection confirm its session all along (watchNext: a sync each
// tick, or its leaders' heartbeats): the last confirmation, if at most
// half a window old, stands for the sync (and the Term's first heartbeat
// comes early), and the handover's path is the two reads, answered by
// its own server, as Curator's LeaderLatch lists the children once. The
// claim of the leadership, a write through the quorum, is left out of
// the path. Nobody else is woken: the multi touches no
// node another waiter watches (P9).
//
// A persistent _l is valid while the candidate node it names exists: the
// successor's node is ephemeral, so a successor whose session expires
// takes its node along, and the candidate that watched that node finds _l
// naming a node that is gone, deletes it (by its creation zxid) and
// claims, deleting the leadership node left without it. The head of the
// order, when someone leads from behind it, watches the node a persistent
// _l names. The successor's Term ends, as any Term, when _l or its
// leadership node goes or a heartbeat fails, and also when its candidate
// node goes (another client's delete: the candidate behind it takes that
// _l for stale); its release deletes all three.
//
// A release hands over only with open node ACLs (every entry of
// Config.NodeACL of the "world" scheme): the nodes it creates carry the
// leader's identity under an ACL of the "auth" or "digest" scheme, and
// the successor could not write its record (Proclaim).

// successor is a leader's successor, as read (readSucc).
type successor struct {
	name  string // its candidate node's name
	data  []byte // its candidate node's record
	queue int32  // the queue node's version, read before the listing
}

// handsOver reports whether releases of e hand over to the successor:
// with open node ACLs only.
func (e *Elector) handsOver() bool {
	return !slices.ContainsFunc(e.cfg.NodeACL, func(a gozk.ACL) bool { return a.Scheme != "world" })
}

// readSucc reads c's successor, once c leads: the queue node's version,
// a listing, and the record of the candidate just behind c's node, if c
// heads the order and that one may lead next (a candidate node of this
// layout, with a Priority of 0 or more: one of lower priority could be
// passed by a newcomer that bumps nothing). It sets c.succ (nil when
// there is none to hand over to). Nothing of it is watched: the release's
// multi checks that the successor's node is still there and the queue
// node at the version read (a registration that could sort between them
// bumps it), and goes without the hand-over otherwise; a watch would
// outlive the Term on the server and wake this client again at a later
// handover. Only when nobody is behind c yet (c leads from the first
// claim of the election) does it watch the children, whose first change
// is the first registration: cw, after which c reads again. It makes no
// request when e does not hand over.
func (e *Elector) readSucc(c *candidacy) (cw <-chan gozk.Event) {
	set := func(s *successor) {
		e.mu.Lock()
		c.succ = s
		e.mu.Unlock()
	}
	set(nil)
	if !e.handsOver() {
		return nil
	}
	ctx, cancel := context.WithTimeout(e.bg, e.o.Window())
	defer cancel()
	// Each request's results are its closure's own: a request abandoned
	// (ctx, c.stop) may still finish after readSucc has returned.
	type got struct {
		st    *gozk.Stat
		names []string
		data  []byte
		w     <-chan gozk.Event
		err   error
	}
	req := func(f func(g *got)) (got, bool) {
		g := new(got)
		if derr := e.do(ctx, c.stop, func() { f(g) }); derr != nil {
			return got{}, false
		}
		return *g, g.err == nil
	}
	q, ok := req(func(g *got) { _, g.st, g.err = e.conn.Get(e.path + "/" + queueName) })
	if !ok {
		return nil
	}
	l, ok := req(func(g *got) { g.names, _, g.err = e.conn.Children(e.path) })
	if !ok {
		return nil
	}
	next, ok, first := behind(l.names, c.self)
	if !ok && first {
		lw, lok := req(func(g *got) { g.names, _, g.w, g.err = e.conn.ChildrenW(e.path) })
		if !lok {
			return nil
		}
		if next, ok, _ = behind(lw.names, c.self); !ok {
			return lw.w
		}
	}
	if !ok || next.blocker || next.prio < 0 {
		return nil
	}
	d, ok := req(func(g *got) { g.data, g.st, g.err = e.conn.Get(e.path + "/" + next.name) })
	if !ok {
		return nil
	}
	if _, err := record.Decode(d.data); err != nil || d.st.EphemeralOwner == 0 {
		return nil // malformed, or persistent (it never goes): no hand-over to it
	}
	set(&successor{name: next.name, data: d.data, queue: q.st.Version})
	return nil
}

// behind returns the child just behind self in the order of a listing,
// if self heads it (first: no child sorts ahead of it).
func behind(names []string, self child) (next child, ok, first bool) {
	for _, n := range names {
		if n == self.name {
			continue
		}
		ch, isChild := parseChild(n)
		if !isChild {
			continue
		}
		if compareChildren(ch, self) < 0 {
			return child{}, false, false // self does not head the order
		}
		if !ok || compareChildren(ch, next) < 0 {
			next, ok = ch, true
		}
	}
	return next, ok, true
}

// handOverOps returns the multi of p's release that hands over to p.succ
// (see the top of this file): nil if there is none.
func (e *Elector) handOverOps(p pend) []any {
	s := p.succ
	if s == nil || p.lead == "" || !e.handsOver() {
		return nil
	}
	ld, err := record.Decode(s.data)
	if err != nil {
		return nil
	}
	guid := guidOf(s.name)
	if guid == "" {
		return nil
	}
	to := election.Options{ID: ld.ID, Priority: ld.Priority}
	lp := e.path + "/" + leaderName
	return []any{
		&gozk.CheckVersionRequest{Path: e.path + "/" + s.name, Version: -1},
		&gozk.CheckVersionRequest{Path: e.path + "/" + queueName, Version: s.queue},
		&gozk.DeleteRequest{Path: p.lead, Version: -1},
		&gozk.DeleteRequest{Path: lp, Version: -1},
		&gozk.DeleteRequest{Path: p.node, Version: -1},
		&gozk.CreateRequest{Path: lp, Data: record.EncodeLeader(to, ld.Value, s.name), Acl: e.cfg.NodeACL},
		&gozk.CreateRequest{Path: e.path + "/" + leadName(guid), Data: encodeRecord(to, ld.Value), Acl: e.cfg.NodeACL},
	}
}

// takeHandover reads _l after what c watched went: if a release handed
// over to c (a persistent _l naming c's node), c leads, with the token
// _l's creation zxid. Three requests go out at once: the read of _l and
// of c's own node (P4: it is there, under c's session), both answered by
// the server c is connected to, and a sync, which that server forwards to
// the ensemble's leader, which refuses it unless c's session is alive: the
// Term counts from the sync's send time, as a heartbeat's (a server cut
// off from the leader may still answer reads, for a session the leader
// has expired). With nw (c waited near the head, watchNext), a
// confirmation of the session its connection made since half a window
// ago stands for the sync, and the Term counts from its send time: the
// reads alone are on the path, both answered by c's own server, as
// Curator's listing is. It returns nil, nil otherwise (c goes on as
// before: it claims or lists).
func (e *Elector) takeHandover(ctx context.Context, c *candidacy, nw *connWatch) (*election.Term, error) {
	type reads struct {
		data          []byte
		st, own       *gozk.Stat
		found         bool
		err, oe, serr error
		confirmed     time.Time // a confirmation already made, sent then, which stands for the sync
	}
	r := new(reads)
	if e.lostSeen != nil {
		e.lostSeen.Store(false) // a disconnect before this Term is not this Term's
	}
	sid := e.conn.SessionID()
	sent := clock.Now()
	// A confirmation of the session made since half a window ago (a
	// heartbeat of a leader on the connection, or a sync of watchNext's,
	// one in flight included) stands for the sync: the Term counts from
	// its send time, at least half a window before its deadline, and the
	// first heartbeat comes within a third.
	var notBefore time.Time
	if nw != nil {
		if o, err := e.resolveTTL(c.session); err == nil {
			notBefore = sent.Add(-o.Window() / 2)
		}
	}
	e.reads.Add(1)
	if derr := e.do(ctx, e.closing, func() {
		var wg sync.WaitGroup
		wg.Go(func() {
			if !notBefore.IsZero() {
				if at := nw.confirmed(ctx, c.stop, e.closing, sid, notBefore); !at.IsZero() {
					r.confirmed = at
					return
				}
			}
			if err := ctx.Err(); err != nil {
				r.serr = err
				return
			}
			_, r.serr = e.conn.Sync(e.path)
		})
		wg.Go(func() { r.found, r.own, r.oe = e.conn.Exists(c.node) })
		r.data, r.st, r.err = e.conn.Get(e.path + "/" + leaderName)
		wg.Wait()
	}); derr != nil {
		return nil, e.stopped(ctx, c, derr)
	}
	if errors.Is(r.err, gozk.ErrNoNode) {
		return nil, nil
	}
	for _, err := range []error{r.err, r.oe, r.serr} {
		if err != nil {
			return nil, e.transient(ctx, c, err)
		}
	}
	if sid != c.session || e.conn.SessionID() != c.session || !r.found || r.own.EphemeralOwner != c.session {
		return nil, errNodeGone // the node went, or went with its session: Campaign makes a new one
	}
	if !handedTo(r.data, r.st, c.name, e.o.ID) {
		return nil, nil
	}
	e.mu.Lock()
	c.lead = e.path + "/" + leadName(c.guid)
	c.version = 0 // created by the hand-over, never written since
	c.handed = true
	c.leader.Token = uint64(r.st.Czxid)
	e.mu.Unlock()
	if !r.confirmed.IsZero() {
		sent = r.confirmed
		e.confirmedTakes.Add(1)
	}
	return e.begin(ctx, c, sent, nil)
}

// handedTo reports whether _l, read as data and st, is a hand-over to the
// candidate node name of the candidate id: persistent, its record naming
// that node and id.
func handedTo(data []byte, st *gozk.Stat, name, id string) bool {
	return st.EphemeralOwner == 0 && st.Czxid > 0 && record.Key(data) == name && record.ID(data) == id
}
