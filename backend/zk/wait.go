package zk

import (
	"context"
	"errors"
	"fmt"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electkit/election"
	"github.com/electkit/election/internal/skeleton"
)

// wait waits until c's node heads the order, then confirms it and starts
// the Term. Each pass lists the children, and watches only the node just
// ahead of c's (P9).
func (e *Elector) wait(ctx context.Context, c *candidacy) (*election.Term, error) {
	skip := map[string]bool{} // persistent nodes: they never go, so they never block
	headGone := false         // the node just gone headed the order: c may lead now
	for {
		if err := e.interrupted(ctx, c); err != nil {
			return nil, err
		}
		if sid := e.conn.SessionID(); sid != c.session && sid != 0 {
			return nil, fmt.Errorf("%w: session %#x of node %s was replaced by %#x", errNodeGone, c.session, c.node, sid)
		}
		// When the leader just went, the confirming check goes out with
		// the listing rather than after it: a handover costs one round
		// trip after the watch event, not two. The check proves c's node
		// alive at a moment after its send time, the listing that no node
		// is ahead of it; nodes ahead cannot appear later, so together
		// they confirm c as leader from the check's send time on (P4).
		var early chan checked
		if headGone && e.ioStart() {
			early = make(chan checked, 1)
			go func() {
				defer e.io.Done()
				sent, err := e.check(ctx, e.closing, c, nil)
				early <- checked{sent, err}
			}()
			headGone = false
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
		order := ordered(names)
		pred, found := "", false
		for _, ch := range order {
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
		predIsHead := pred != ""
		for _, ch := range order {
			if ch.name == pred {
				break
			}
			if !skip[ch.name] {
				predIsHead = false
				break
			}
		}
		if pred == "" {
			var t *election.Term
			if early != nil {
				r := <-early // returns promptly: check gives up on ctx and Close
				t, err = e.begin(ctx, c, r.sent, r.err)
			} else {
				t, err = e.confirm(ctx, c)
			}
			if err == nil {
				return t, nil
			}
			if ierr := e.interrupted(ctx, c); ierr != nil {
				return nil, ierr
			}
			if errors.Is(err, errNodeGone) || errors.Is(err, election.ErrLeaseExpired) {
				return nil, err
			}
			if err := e.transient(ctx, c, err); err != nil {
				return nil, err
			}
			continue
		}
		if e.wasAbandoned(pred) {
			// A node of this session's that an abandoned create left: it
			// would lead for nobody. Delete it; waitGone sees it go.
			e.drop(e.path + "/" + pred)
		}
		gone, persistent, err := e.waitGone(ctx, c, pred)
		if err != nil {
			return nil, err
		}
		if persistent {
			e.log.Warn("zk election: skipping a persistent node in the election's order; it never leads", "path", e.path+"/"+pred)
			skip[pred] = true
		}
		headGone = gone && predIsHead // in every case: list again
	}
}

// checked is the outcome of a check sent ahead of the listing.
type checked struct {
	sent time.Time
	err  error
}

// waitGone watches the node pred (a child of the election path) until it
// is deleted, the watch is lost (the caller lists again), or waiting must
// stop. persistent reports a node that is not ephemeral: it never goes.
func (e *Elector) waitGone(ctx context.Context, c *candidacy, pred string) (gone, persistent bool, err error) {
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
