package zk

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
	"github.com/electkit/election/internal/clock"
	"github.com/electkit/election/internal/record"
	"github.com/electkit/election/internal/skeleton"
)

var (
	_ backend.Lister     = (*Elector)(nil)
	_ backend.Transferer = (*Elector)(nil)
	_ election.Elector   = (*Elector)(nil)
)

// waiting is one waiting candidate read from its node.
type waiting struct {
	name   string
	leader election.Leader
}

// maxReads bounds the reads Candidates and Transfer keep in flight.
const maxReads = 64

// readWaiting reads the candidate nodes of order (blockers and skip
// excluded), keeping their order, and returns those that are well formed:
// ephemeral, a valid record whose Priority is the one their name carries.
// Nodes gone meanwhile are left out.
func (e *Elector) readWaiting(ctx context.Context, order []child, skip string) ([]waiting, error) {
	var todo []child
	for _, ch := range order {
		if !ch.blocker && ch.name != skip {
			todo = append(todo, ch)
		}
	}
	out := make([]waiting, len(todo))
	ok := make([]bool, len(todo))
	errs := make([]error, len(todo))
	sem := make(chan struct{}, maxReads)
	var wg sync.WaitGroup
	for i, ch := range todo {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			var data []byte
			var st *gozk.Stat
			var err error
			if derr := e.do(ctx, e.closing, func() { data, st, err = e.conn.Get(e.path + "/" + ch.name) }); derr != nil {
				errs[i] = derr
				return
			}
			if errors.Is(err, gozk.ErrNoNode) {
				return
			}
			if err != nil {
				errs[i] = e.readErr("reading "+ch.name, err)
				return
			}
			l, derr := decodeNode(ch.name, data, st)
			if derr != nil || l.Priority != ch.prio {
				return // garbage: never a candidate (P8)
			}
			l.Token = 0
			out[i], ok[i] = waiting{name: ch.name, leader: l}, true
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var res []waiting
	for i := range out {
		if ok[i] {
			res = append(res, out[i])
		}
	}
	return res, nil
}

// Candidates lists the candidates waiting in the election (see
// election.Candidates): it syncs the connected server,
// lists the election path, reads the leader node (to leave the leader
// out) and every candidate node, in order: highest Priority first, then
// first come, first served. Malformed nodes and blockers are left out.
func (e *Elector) Candidates(ctx context.Context) ([]election.Candidate, error) {
	if err := skeleton.CheckContext(ctx); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return nil, election.ErrClosed
	}
	var names []string
	var err error
	if derr := e.do(ctx, e.closing, func() {
		if _, err = e.conn.Sync(e.path); err == nil {
			names, _, err = e.conn.Children(e.path)
		}
	}); derr != nil {
		return nil, derr
	}
	if errors.Is(err, gozk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, e.readErr("listing candidates", err)
	}
	v := parseView(names)
	leading := ""
	if v.leader {
		var data []byte
		if derr := e.do(ctx, e.closing, func() { data, _, err = e.conn.Get(e.path + "/" + leaderName) }); derr != nil {
			return nil, derr
		}
		if err != nil && !errors.Is(err, gozk.ErrNoNode) {
			return nil, e.readErr("reading the leader node", err)
		}
		leading = record.Key(data)
	}
	ws, err := e.readWaiting(ctx, v.order, leading)
	if err != nil {
		return nil, err
	}
	out := make([]election.Candidate, len(ws))
	for i, w := range ws {
		out[i] = election.Candidate{ID: w.leader.ID, Value: w.leader.Value, Priority: w.leader.Priority}
	}
	return out, nil
}

// Transfer hands t's leadership on (call it through election.Transfer). It
// lists the candidates, picks the target (the first well-formed candidate
// node whose ID is to, or the first one for ""), ends t with ErrTransferred
// and, in one multi, deletes t's nodes (leader, leadership and candidate
// node), checks that the target's node is there, creates the hand-over node
// _t naming it, and wakes it (its wake-up name, created and deleted). Only
// the target's claim can take a pending hand-over; it goes with this
// session, or is withdrawn when the target's node goes, after one lease
// window, when ctx ends or the Elector closes.
func (e *Elector) Transfer(ctx context.Context, t *election.Term, to string, fallback election.Fallback) error {
	if err := skeleton.CheckContext(ctx); err != nil {
		return err
	}
	c, err := e.current(t)
	if err != nil {
		return err
	}
	var names []string
	if derr := e.do(ctx, e.closing, func() { names, _, err = e.conn.Children(e.path) }); derr != nil {
		return derr
	}
	if err != nil {
		return e.readErr("listing candidates", err)
	}
	v := parseView(names)
	var target *waiting
	order := v.order
	if to == "" {
		// The best: read them in order until one is well formed.
		for len(order) > 0 && target == nil {
			ws, err := e.readWaiting(ctx, order[:1], c.name)
			if err != nil {
				return err
			}
			if len(ws) > 0 {
				target = &ws[0]
			}
			order = order[1:]
		}
	} else {
		ws, err := e.readWaiting(ctx, order, c.name)
		if err != nil {
			return err
		}
		for i := range ws {
			if ws[i].leader.ID == to {
				target = &ws[i]
				break
			}
		}
	}
	if target == nil {
		what := skeleton.NotWaiting(to)
		err := fmt.Errorf("%w: zk election %s: transfer from %s: %s", election.ErrNoCandidate, e.path, e.o.ID, what)
		if fallback == election.StepDown {
			return errors.Join(err, e.Resign(ctx))
		}
		return err
	}
	return e.handOver(ctx, c, target.name, fmt.Errorf("%w to %s", election.ErrTransferred, target.leader.ID))
}

// handOver ends c's Term with cause, then hands its leadership to the
// candidate node target, and waits until target leads (nil), or the
// hand-over lapses: target's node went, one lease window passed, ctx
// ended or the Elector closed. A lapsed hand-over is withdrawn, and the
// normal order resumes.
func (e *Elector) handOver(ctx context.Context, c *candidacy, target string, cause error) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return election.ErrClosed
	}
	if e.cand != c || c.lc == nil || c.lc.Term().Err() != nil {
		e.mu.Unlock()
		return fmt.Errorf("%w: %s does not lead", election.ErrNotLeader, e.o.ID)
	}
	e.cand = nil
	lc, lead, rel := c.lc, c.lead, c.pend()
	e.wg.Add(1)
	e.mu.Unlock()
	defer e.wg.Done()
	lc.End(cause) // before the hand-over is sent (P3)
	c.halt()
	lc.AwaitHooks(backend.HandOverWait) // the old Term's Observer.Ended before the next leader

	hp := e.path + "/" + handoverName
	tp := e.path + "/" + target
	wk := e.path + "/" + wakeName(guidOf(target))
	data := encodeHandover(target)
	var res []gozk.MultiResponse
	var err error
	derr := e.do(ctx, e.closing, func() {
		res, err = e.conn.Multi(
			&gozk.CheckVersionRequest{Path: tp, Version: -1},
			&gozk.DeleteRequest{Path: lead, Version: -1},
			&gozk.DeleteRequest{Path: e.path + "/" + leaderName, Version: -1},
			&gozk.DeleteRequest{Path: c.node, Version: -1},
			&gozk.CreateRequest{Path: hp, Data: data, Flags: gozk.FlagEphemeral, Acl: e.cfg.NodeACL},
			&gozk.SetDataRequest{Path: hp, Data: data, Version: handoverVersion - 1},
			&gozk.CreateRequest{Path: wk, Flags: gozk.FlagEphemeral, Acl: e.cfg.NodeACL},
			&gozk.DeleteRequest{Path: wk, Version: -1})
	})
	var czxid int64
	switch {
	case derr == nil && err == nil:
		czxid = res[5].Stat.Czxid
	case derr == nil && len(res) > 0 && errors.Is(res[0].Error, gozk.ErrNoNode):
		e.dropPend(rel)
		return fmt.Errorf("%w: zk election %s: %s left before the hand-over", election.ErrTransferFailed, e.path, target)
	case derr == nil && !errors.Is(err, gozk.ErrConnectionClosed) && !errors.Is(err, gozk.ErrNoServer):
		e.dropPend(rel)
		return fmt.Errorf("%w: zk election %s: handing over to %s: %w", election.ErrTransferFailed, e.path, target, err)
	default:
		// The outcome is unknown: a hand-over of this session's to target
		// says it was carried out.
		rctx, cancel := context.WithTimeout(context.Background(), e.o.Window())
		var ok bool
		var st *gozk.Stat
		var hdata []byte
		var gerr error
		if e.do(rctx, nil, func() { hdata, st, gerr = e.conn.Get(hp); ok = gerr == nil }) == nil && ok &&
			st.EphemeralOwner == c.session && decodeHandover(hdata) == target {
			czxid = st.Czxid
		}
		cancel()
		if czxid == 0 {
			e.dropPend(rel)
			if derr != nil {
				return fmt.Errorf("%w: zk election %s: handing over to %s: %w", election.ErrTransferFailed, e.path, target, derr)
			}
			return fmt.Errorf("%w: zk election %s: handing over to %s: %w", election.ErrTransferFailed, e.path, target, err)
		}
	}
	bound := time.NewTimer(e.o.Window())
	defer bound.Stop()
	// pending reports whether the hand-over made at czxid is still there,
	// and watches it.
	pending := func() (bool, <-chan gozk.Event, error) {
		var ok bool
		var st *gozk.Stat
		var ev <-chan gozk.Event
		var rerr error
		if derr := e.do(ctx, e.closing, func() { ok, st, ev, rerr = e.conn.ExistsW(hp) }); derr != nil {
			return false, nil, derr
		}
		return rerr == nil && ok && st.Czxid == czxid, ev, rerr
	}
	for {
		var retry <-chan time.Time
		still, hev, err := pending()
		var tev <-chan gozk.Event
		switch {
		case ctx.Err() != nil || isClosing(e.closing):
		case err != nil && !isZK(err):
			return e.lapse(czxid, target, err)
		case err != nil:
			e.retryLog("watching a hand-over", err)
			retry = time.After(retryDelay)
		case !still:
			return e.handedOver(ctx, target) // taken: only the target's claim deletes it
		default:
			var ok bool
			var rerr error
			if derr := e.do(ctx, e.closing, func() { ok, _, tev, rerr = e.conn.ExistsW(tp) }); derr != nil {
				break
			}
			if rerr != nil {
				e.retryLog("watching a hand-over's target", rerr)
				retry = time.After(retryDelay)
				break
			}
			if !ok {
				// The target's node went: its claim takes the hand-over in
				// the same multi; otherwise it left.
				if still, _, err := pending(); err == nil && !still {
					return e.handedOver(ctx, target)
				}
				return e.lapse(czxid, target, fmt.Errorf("%w: zk election %s: %s left before leading", election.ErrTransferFailed, e.path, target))
			}
		}
		select {
		case <-hev:
		case <-tev:
		case <-retry:
		case <-bound.C:
			return e.lapse(czxid, target, fmt.Errorf("%w: zk election %s: %s did not lead within %v", election.ErrTransferFailed, e.path, target, e.o.Window()))
		case <-ctx.Done():
			return e.lapse(czxid, target, ctx.Err())
		case <-e.closing:
			return e.lapse(czxid, target, election.ErrClosed)
		}
	}
}

// isClosing reports whether ch is closed.
func isClosing(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// isZK reports whether err is the ZooKeeper client's (retried), not why
// do gave up (ctx, Close).
func isZK(err error) bool {
	return !errors.Is(err, election.ErrClosed) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// handedOver reports whether target leads now: nil if the leader node
// names it.
func (e *Elector) handedOver(ctx context.Context, target string) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.o.Window())
	defer cancel()
	var data []byte
	var err error
	if derr := e.do(rctx, nil, func() { data, _, err = e.conn.Get(e.path + "/" + leaderName) }); derr != nil {
		return fmt.Errorf("%w: zk election %s: %w", election.ErrTransferFailed, e.path, derr)
	}
	if err == nil && record.Key(data) == target {
		return nil
	}
	return fmt.Errorf("%w: zk election %s: the hand-over to %s was withdrawn before it led", election.ErrTransferFailed, e.path, target)
}

// lapse withdraws the hand-over made at czxid (deleting _t if it is still
// that one) and returns why, or nil if target took it meanwhile. A delete
// that fails is retried by the reaper; the hand-over goes with the
// session at the latest.
func (e *Elector) lapse(czxid int64, target string, why error) error {
	ctx, cancel := context.WithTimeout(context.Background(), e.o.Window())
	defer cancel()
	hp := e.path + "/" + handoverName
	var taken bool
	var rerr error
	derr := e.do(ctx, nil, func() {
		ok, st, err := e.conn.Exists(hp)
		switch {
		case err != nil:
			rerr = err
		case !ok || st.Czxid != czxid:
			taken = true
		default:
			rerr = e.conn.Delete(hp, st.Version)
			taken = errors.Is(rerr, gozk.ErrNoNode) || errors.Is(rerr, gozk.ErrBadVersion)
		}
	})
	if derr == nil && taken {
		if e.handedOver(ctx, target) == nil {
			return nil
		}
		return why
	}
	if derr != nil || rerr != nil {
		e.log.Warn("zk election: withdrawing a hand-over failed; retrying in the background (it goes with its session at the latest)", "path", hp, "err", errors.Join(derr, rerr))
		e.mu.Lock()
		e.pending = append(e.pending, pend{handover: czxid})
		e.mu.Unlock()
		e.reap()
	}
	return why
}

// preempt runs while c leads with PreemptAfter: it watches the election
// path's children, and once the best waiting candidate of strictly higher
// priority has been present, without a break, for the hold-off since
// this leader first saw it, hands the leadership to it (ErrPreempted).
func (e *Elector) preempt(c *candidacy, t *election.Term) {
	defer e.wg.Done()
	hold := e.o.PreemptAfter
	seen := map[string]time.Time{}
	bad := map[string]bool{}
	var tm *time.Timer
	defer func() {
		if tm != nil {
			tm.Stop()
		}
	}()
	for t.Err() == nil {
		var names []string
		var ev <-chan gozk.Event
		var err error
		if derr := e.do(t.Context(), c.stop, func() { names, _, ev, err = e.conn.ChildrenW(e.path) }); derr != nil {
			return
		}
		if err != nil {
			e.retryLog("watching for a candidate of higher priority", err)
			clock.Sleep(t.Context(), retryDelay)
			continue
		}
		now := clock.Now()
		var best *child
		present := map[string]bool{}
		for _, ch := range parseView(names).order {
			if ch.blocker || ch.name == c.name || bad[ch.name] || ch.prio <= c.leader.Priority {
				continue
			}
			present[ch.name] = true
			if _, ok := seen[ch.name]; !ok {
				seen[ch.name] = now
			}
			if best == nil {
				best = &ch
			}
		}
		for n := range seen {
			if !present[n] {
				delete(seen, n) // a break: it starts again if it comes back
			}
		}
		var fire <-chan time.Time
		if best != nil {
			d := seen[best.name].Add(hold).Sub(now)
			if d <= 0 {
				ws, err := e.readWaiting(t.Context(), []child{*best}, c.name)
				if err != nil {
					clock.Sleep(t.Context(), retryDelay)
					continue
				}
				if len(ws) == 0 {
					bad[best.name] = true // malformed, or gone
					continue
				}
				w := ws[0]
				cause := fmt.Errorf("%w: %s (priority %d) waited %v", election.ErrPreempted, w.leader.ID, w.leader.Priority, hold)
				if err := e.handOver(e.bg, c, w.name, cause); err != nil {
					e.log.Warn("zk election: preemption: the hand-over failed; the normal order resumes", "path", e.path, "to", w.leader.ID, "err", err)
				}
				return
			}
			if tm == nil {
				tm = time.NewTimer(d)
			} else {
				tm.Reset(d)
			}
			fire = tm.C
		}
		select {
		case <-ev:
		case <-fire:
		case <-t.Done():
			return
		case <-c.stop:
			return
		}
	}
}
