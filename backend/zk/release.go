package zk

import (
	"context"
	"errors"
	"fmt"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electkit/election/internal/clock"
	"github.com/electkit/election/internal/skeleton"
)

// withdraw ends c if it is still the current candidacy: its Term first (P3:
// before any I/O), then its node.
func (e *Elector) withdraw(c *candidacy, cause error) {
	e.mu.Lock()
	if e.cand != c {
		e.mu.Unlock()
		return
	}
	e.cand = nil
	p := c.pend()
	e.pending = append(e.pending, p)
	e.mu.Unlock()
	e.end(c, cause)
	// A short wait, so that Campaign returns within 100 ms of its ctx
	// whatever the server does: a failed delete stays pending and the
	// reaper retries it in the background.
	ctx, cancel := context.WithTimeout(e.bg, releaseWait)
	defer cancel()
	_ = e.deleteNode(ctx, p)
}

// releaseWait bounds how long Campaign and the leader wait for a node's
// delete before leaving it to the reaper: long enough for a server that
// answers, short enough to return within 100 ms of ctx when it does not.
const releaseWait = 40 * time.Millisecond

// end ends c's Term with cause and stops its goroutines.
func (e *Elector) end(c *candidacy, cause error) {
	e.mu.Lock()
	lc := c.lc
	e.mu.Unlock()
	skeleton.EndTerm(lc, cause)
	c.halt()
}

// drop deletes a node found orphaned or abandoned, waiting releaseWait at
// most: a failed delete stays pending and the reaper retries it.
func (e *Elector) drop(node string) {
	e.dropPend(pend{node: node})
}

// dropPend releases p, waiting releaseWait at most: a failed release
// stays pending and the reaper retries it.
func (e *Elector) dropPend(p pend) {
	e.mu.Lock()
	e.pending = append(e.pending, p)
	e.mu.Unlock()
	ctx, cancel := context.WithTimeout(e.bg, releaseWait)
	defer cancel()
	_ = e.deleteNode(ctx, p)
}

// pend is a release to carry out: a candidate node, with the leader and
// leadership nodes of its leadership if it led, or a hand-over to lapse.
type pend struct {
	node     string     // a candidate node (or another node of this Elector's) to delete, or ""
	lead     string     // the leadership node of node's leadership, or ""
	token    int64      // that leadership's token: the creation zxid of its _l
	session  int64      // the session that made it
	handover int64      // the creation zxid of a hand-over (_t) to withdraw, or 0
	succ     *successor // the successor node's leadership hands over to, or nil (succ.go)
}

// pend returns the release of c: its node and, if it leads, its
// leadership.
func (c *candidacy) pend() pend {
	p := pend{node: c.node, lead: c.lead, token: int64(c.leader.Token), session: c.session, succ: c.succ}
	if c.handed {
		p.session = 0 // its _l is persistent: no session owns it
	}
	return p
}

// release carries out p. A leadership's nodes go with the candidate node
// in one multi, guarded by the leadership node (unique to it): no other
// claim can have happened while it exists, so the _l deleted with it is
// this leadership's. If it is gone (another client deleted it), _l is
// read first and deleted only if it is still this leadership's.
func (e *Elector) release(ctx context.Context, p pend) error {
	run := func(op func() error) error {
		var rerr error
		if err := e.do(ctx, nil, func() { rerr = op() }); err != nil {
			return err
		}
		if errors.Is(rerr, gozk.ErrNoNode) || errors.Is(rerr, gozk.ErrBadVersion) {
			return nil
		}
		return rerr
	}
	if p.handover != 0 {
		return run(func() error { return e.dropIfCzxid(e.path+"/"+handoverName, p.handover, 0) })
	}
	if p.lead == "" {
		return run(func() error { return e.conn.Delete(p.node, -1) })
	}
	var rerr error
	if ops := e.handOverOps(p); ops != nil {
		// The hand-over to the successor (succ.go); if it no longer
		// holds (the successor left, a candidate registered ahead of it,
		// the leadership is gone), the nodes go as without one.
		if err := e.do(ctx, nil, func() { _, rerr = e.conn.Multi(ops...) }); err != nil {
			return err
		}
		if rerr == nil || !errors.Is(rerr, gozk.ErrNoNode) && !errors.Is(rerr, gozk.ErrBadVersion) && !errors.Is(rerr, gozk.ErrNodeExists) {
			return rerr
		}
	}
	if err := e.do(ctx, nil, func() {
		_, rerr = e.conn.Multi(&gozk.DeleteRequest{Path: p.lead, Version: -1},
			&gozk.DeleteRequest{Path: e.path + "/" + leaderName, Version: -1},
			&gozk.DeleteRequest{Path: p.node, Version: -1})
	}); err != nil {
		return err
	}
	if rerr == nil || !errors.Is(rerr, gozk.ErrNoNode) {
		return rerr
	}
	if err := run(func() error { return e.conn.Delete(p.lead, -1) }); err != nil {
		return err
	}
	if err := run(func() error { return e.dropIfCzxid(e.path+"/"+leaderName, p.token, p.session) }); err != nil {
		return err
	}
	return run(func() error { return e.conn.Delete(p.node, -1) })
}

// dropIfCzxid deletes the node at path if its creation zxid is czxid (and,
// with session, its owner is that session), at the version read: the
// shared names (_l, _t) are deleted only by the leadership or hand-over
// that made them.
func (e *Elector) dropIfCzxid(path string, czxid, session int64) error {
	ok, st, err := e.conn.Exists(path)
	if err != nil || !ok || st.Czxid != czxid || (session != 0 && st.EphemeralOwner != session) {
		return err
	}
	return e.conn.Delete(path, st.Version)
}

// deleteNode deletes node, one of this Elector's, and takes it off the
// pending list; a node already gone counts as deleted. On failure it stays
// pending: Campaign, Resign and Close try again, and meanwhile it goes
// with its session at the latest.
func (e *Elector) deleteNode(ctx context.Context, p pend) error {
	err := e.release(ctx, p)
	if err == nil {
		e.unpend(p)
		return nil
	}
	e.log.Warn("zk election: deleting a candidate node failed; retrying in the background (it goes with its session at the latest)", "node", p.node, "err", err)
	e.reap()
	return fmt.Errorf("zk election: deleting node %s: %w", p.node, err)
}

// reap starts the reaper unless it runs: it retries the pending deletes
// until none is left or the Elector closes. Unlike an etcd lease, a
// session does not end while its connection lives, so a node whose delete
// failed would otherwise stay, and block the election, for as long as the
// process runs.
func (e *Elector) reap() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.reaping || e.closed || len(e.pending) == 0 {
		return
	}
	e.reaping = true
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		b := retryDelay
		for {
			clock.Sleep(e.bg, b)
			b = min(2*b, time.Second)
			e.mu.Lock()
			if e.bg.Err() != nil || len(e.pending) == 0 {
				e.reaping = false
				e.mu.Unlock()
				return
			}
			pending := append([]pend(nil), e.pending...)
			e.mu.Unlock()
			for _, p := range pending {
				ctx, cancel := context.WithTimeout(e.bg, e.o.Window())
				err := e.release(ctx, p)
				cancel()
				if err == nil {
					e.unpend(p)
				}
			}
		}
	}()
}

func (e *Elector) unpend(node pend) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, p := range e.pending {
		if p == node {
			e.pending = append(e.pending[:i], e.pending[i+1:]...)
			return
		}
	}
}

// deletePending tries once more to delete the nodes of ended candidacies.
func (e *Elector) deletePending(ctx context.Context) []error {
	e.mu.Lock()
	pending := append([]pend(nil), e.pending...)
	e.mu.Unlock()
	var errs []error
	for _, p := range pending {
		if err := e.deleteNode(ctx, p); err != nil {
			if ctx.Err() != nil {
				return append(errs, ctx.Err())
			}
			errs = append(errs, err)
		}
	}
	return errs
}
