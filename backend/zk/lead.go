package zk

import (
	"context"
	"errors"
	"fmt"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
	"github.com/electkit/election/internal/clock"
)

// check sends the heartbeat of a leader: a transaction with one check
// operation on its leadership node at its version. It goes through the
// ensemble's leader, which refuses it unless c's session is alive and the
// node exists unchanged (no later claim: a claim deletes the leadership
// nodes whose _l is gone), so its success proves both at a moment after
// sent. A nil error means confirmed; errNodeGone wraps a node or session
// that is gone.
//
// With cw, the check goes out with the other heartbeats of the
// connection's tick, in one multi (connWatch.beat), and sent is that
// multi's send time.
func (e *Elector) check(ctx context.Context, stop <-chan struct{}, c *candidacy, cw *connWatch) (sent time.Time, err error) {
	c.writing.Lock()
	defer c.writing.Unlock()
	e.mu.Lock()
	version, node := c.version, c.lead
	e.mu.Unlock()
	sid := e.conn.SessionID()
	sent = clock.Now()
	var rerr error
	var bsent time.Time
	if derr := e.do(ctx, stop, func() {
		if cw != nil {
			bsent, rerr = cw.beat(node, version)
			return
		}
		_, rerr = e.conn.Multi(&gozk.CheckVersionRequest{Path: node, Version: version})
	}); derr != nil {
		return sent, derr
	}
	if cw != nil && bsent.After(sent) {
		sent = bsent
	}
	switch {
	case sid != c.session || e.conn.SessionID() != c.session:
		return sent, fmt.Errorf("%w: %w: session %#x of node %s expired (the connection now has %#x)", errNodeGone, election.ErrSessionLost, c.session, node, e.conn.SessionID())
	case rerr == nil:
		return sent, nil
	case errors.Is(rerr, gozk.ErrNoNode):
		return sent, fmt.Errorf("%w: %w: node %s is gone (its session expired, it was deleted, or another candidate claimed)", errNodeGone, election.ErrSessionLost, node)
	case errors.Is(rerr, gozk.ErrBadVersion):
		return sent, fmt.Errorf("%w: %w: node %s was changed by another client", errNodeGone, election.ErrSessionLost, node)
	case errors.Is(rerr, gozk.ErrSessionExpired):
		return sent, fmt.Errorf("%w: %w: session %#x expired", errNodeGone, election.ErrSessionLost, c.session)
	case errors.Is(rerr, gozk.ErrClosing), errors.Is(rerr, gozk.ErrConnectionClosed) && e.connClosed():
		return sent, fmt.Errorf("%w: %w: the ZooKeeper connection was closed", errNodeGone, election.ErrSessionLost)
	}
	return sent, fmt.Errorf("zk election %s: heartbeat on %s: %w", e.path, node, rerr)
}

// begin starts c's Term from its claim, sent at sent, with outcome err.
func (e *Elector) begin(ctx context.Context, c *candidacy, sent time.Time, err error) (*election.Term, error) {
	if err != nil {
		return nil, e.stopped(ctx, c, err)
	}
	o, err := e.resolveTTL(c.session)
	if err != nil {
		return nil, err // Campaign withdraws c, its leadership nodes with it
	}
	term, lc := backend.NewTerm(o, c.leader, sent)
	e.mu.Lock()
	switch {
	case e.closed:
		err = election.ErrClosed
	case e.cand != c:
		err = election.ErrResigned
	}
	if err != nil {
		e.mu.Unlock()
		lc.End(err)
		return nil, err
	}
	c.lc = lc
	e.terms.Add(lc)
	e.wg.Add(1)
	go e.lead(c, lc, o.TTL, sent)
	if e.o.PreemptAfter > 0 {
		e.wg.Add(1)
		go e.preempt(c, lc.Term())
	}
	e.mu.Unlock()
	if err := term.Err(); err != nil { // the deadline passed while confirming
		return nil, err
	}
	return term, nil
}

// lead keeps c's Term while it lasts: a heartbeat (check transaction) on
// each tick of its connection's connWatch, at least every Window/3 and
// in one multi with the other leaders' of the tick, through the lease
// clock (before-renewal hook, request, Renewed with its send time and
// outcome), a watch on c's own node, and a
// look at the connection's state whenever it changes (connWatch: one
// poll every statePoll per connection). A node or session found
// gone ends the Term at once (ErrSessionLost), so does a disconnect under
// StepDownOnDisconnect; a failed heartbeat is retried after retryDelay and
// the lease clock ends the Term at its deadline if none succeeds. When the
// Term ends for any reason, the candidacy is withdrawn: its node is
// deleted, so the next candidate leads at once.
func (e *Elector) lead(c *candidacy, lc *backend.LeaseClock, ttl time.Duration, renewed time.Time) {
	defer e.wg.Done()
	defer e.forget(lc)
	t := lc.Term()
	interval := t.Window() / 3
	cw := watchConn(e.conn, interval)
	defer cw.release(interval)
	var retry *time.Timer // a failed heartbeat's retry
	var retryC <-chan time.Time
	defer func() {
		if retry != nil {
			retry.Stop()
		}
	}()
	if clock.Since(renewed) > interval/2 {
		// A Term counted from a confirmation made before it began (a
		// hand-over taken on watchNext's): its deadline is nearer than
		// a claim's, so it beats at once rather than at the next tick.
		retry = time.NewTimer(0)
		retryC = retry.C
	}
	var hold <-chan time.Time // HoldUntilDeadline: fires at the deadline while disconnected
	var holdTimer *time.Timer
	defer func() {
		if holdTimer != nil {
			holdTimer.Stop()
		}
	}()
	own := e.watchNode(c, c.lead, true)
	lw := e.watchNode(c, e.path+"/"+leaderName, true)
	// A leadership handed over by a release (a persistent _l) is valid
	// while c's candidate node exists (succ.go): its deletion ends it.
	var cw0 <-chan gozk.Event
	if c.handed {
		cw0 = e.watchNode(c, c.node, false)
	}
	// Transfer requests (RequestTransfer), each served once.
	req := e.watchRequest(c)
	served := int64(0)
	serve := func() {
		if req.mzxid != 0 && req.mzxid != served {
			served = req.mzxid
			e.serveRequest(c, t, req) // a hand-over ends t: t.Done fires next
		}
	}
	serve()
	// The successor its release hands over to (succ.go), read beside
	// this loop: its requests must not hold the heartbeats and the looks
	// at the connection back.
	succC := make(chan (<-chan gozk.Event), 1)
	readSucc := func() {
		e.wg.Add(1) // within lead's own count: Close waits for it too
		go func() {
			defer e.wg.Done()
			succC <- e.readSucc(c)
		}()
	}
	readSucc()
	var sw <-chan gozk.Event
	for {
		// A look at the connection: at the start, then whenever its
		// state or session changed (connWatch) or Dial's session events
		// say so. The channel is taken before the state is read, so no
		// change is missed between them.
		changes, tick := cw.changes(), cw.ticks()
		st, sid := e.conn.State(), e.conn.SessionID()
		if e.lostSeen != nil && e.lostSeen.Swap(false) && st == gozk.StateHasSession && e.cfg.Policy == StepDownOnDisconnect {
			st = gozk.StateDisconnected // lost and regained between two looks
		}
		switch {
		case sid != c.session && sid != 0, st == gozk.StateExpired:
			lc.End(fmt.Errorf("%w: session %#x of node %s expired", election.ErrSessionLost, c.session, c.node))
		case st == gozk.StateHasSession:
			if d, ok := sessionTimeout(e.conn); ok && d < ttl {
				// A server with other bounds took the session over: it may
				// expire before this Term's deadline.
				e.granted.Store(int64(d))
				lc.End(fmt.Errorf("%w: the session's timeout is now %v, shorter than the Term's TTL %v (a server with other session bounds answered)", election.ErrSessionLost, d, ttl))
			}
			if holdTimer != nil { // reconnected in time, same session
				holdTimer.Stop()
				holdTimer, hold = nil, nil
			}
		case e.cfg.Policy == StepDownOnDisconnect:
			lc.End(fmt.Errorf("%w: disconnected from ZooKeeper (%v); stepping down at once (StepDownOnDisconnect)", election.ErrSessionLost, st))
		case holdTimer == nil:
			// Hold until just before the deadline, so that the Term ends
			// with ErrSessionLost rather than by the lease clock's timer.
			holdTimer = time.NewTimer(max(0, clock.Until(t.Deadline())-time.Millisecond))
			hold = holdTimer.C
		}
		select {
		case <-c.stop:
			return
		case <-t.Done():
			e.withdraw(c, t.Err())
			return
		case ev := <-own:
			own = nil
			if ev.Type == gozk.EventNodeDeleted || (ev.Type == gozk.EventNotWatching && !errors.Is(ev.Err, gozk.ErrConnectionClosed)) {
				lc.End(fmt.Errorf("%w: leadership node %s: %v %v", election.ErrSessionLost, c.lead, ev.Type, ev.Err))
				continue
			}
			own = e.watchNode(c, c.lead, true)
			continue
		case ev := <-cw0:
			cw0 = nil
			if ev.Type == gozk.EventNodeDeleted || (ev.Type == gozk.EventNotWatching && !errors.Is(ev.Err, gozk.ErrConnectionClosed)) {
				lc.End(fmt.Errorf("%w: candidate node %s, which the leader node a release handed over with names: %v %v", election.ErrSessionLost, c.node, ev.Type, ev.Err))
				continue
			}
			cw0 = e.watchNode(c, c.node, false)
			continue
		case ev := <-lw:
			lw = nil
			if ev.Type == gozk.EventNodeDeleted || (ev.Type == gozk.EventNotWatching && !errors.Is(ev.Err, gozk.ErrConnectionClosed)) {
				lc.End(fmt.Errorf("%w: leader node %s/%s: %v %v", election.ErrSessionLost, e.path, leaderName, ev.Type, ev.Err))
				continue
			}
			lw = e.watchNode(c, e.path+"/"+leaderName, true)
			continue
		case <-req.ch:
			req = e.watchRequest(c)
			serve()
			continue
		case sw = <-succC:
			continue
		case <-sw:
			sw = nil
			readSucc()
			continue
		case <-e.sessionEvents:
			continue // look again
		case <-changes:
			continue // look again
		case <-hold:
			lc.End(fmt.Errorf("%w: %w: disconnected from ZooKeeper until the session may have expired", election.ErrSessionLost, election.ErrLeaseExpired))
			continue
		case <-tick:
			if retryC != nil {
				continue // a retry is due sooner
			}
		case <-retryC:
			retryC = nil
		}
		// A heartbeat: on the connection's tick, with the others of it.
		if lc.BeforeRenew() != nil {
			continue // the Term ended: t.Done is closed
		}
		ctx, cancel := context.WithDeadline(e.bg, t.Deadline())
		sent, err := e.check(ctx, c.stop, c, cw)
		cancel()
		lc.Renewed(sent, err)
		switch {
		case err == nil:
		case errors.Is(err, errNodeGone):
			lc.End(err) // wraps ErrSessionLost, with the cause
		default:
			if !errors.Is(err, errBatchFailed) {
				e.log.Warn("zk election: heartbeat failed", "node", c.node, "err", err)
			}
			if retry == nil {
				retry = time.NewTimer(retryDelay)
			} else {
				retry.Reset(retryDelay)
			}
			retryC = retry.C
		}
	}
}

// forget drops a Term from e.terms once its hooks are done
// (skeleton.Terms.Forget). lead returns only once the Term has ended or
// its candidacy was withdrawn (which ends it).
func (e *Elector) forget(lc *backend.LeaseClock) {
	lc.End(election.ErrResigned) // no-op for a Term that has ended
	e.terms.Forget(lc)
}

// watchNode sets a watch on node, the leader's leadership node or _l
// (made, with token, at c's token) or its candidate node, so that its
// deletion ends the Term within a round trip. It returns nil if the watch
// cannot be set (the heartbeats still find out). A node that is gone, or
// with token one not made at c's token (a _l of another leadership),
// counts as deleted.
func (e *Elector) watchNode(c *candidacy, node string, token bool) <-chan gozk.Event {
	var ok bool
	var st *gozk.Stat
	var ev <-chan gozk.Event
	var err error
	ctx, cancel := context.WithTimeout(e.bg, e.o.Window())
	defer cancel()
	if derr := e.do(ctx, c.stop, func() { ok, st, ev, err = e.conn.ExistsW(node) }); derr != nil || err != nil {
		return nil
	}
	if !ok || token && uint64(st.Czxid) != c.leader.Token {
		ch := make(chan gozk.Event, 1)
		ch <- gozk.Event{Type: gozk.EventNodeDeleted, Path: node}
		return ch
	}
	return ev
}
