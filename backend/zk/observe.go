package zk

import (
	"context"
	"errors"
	"fmt"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electkit/election"
	"github.com/electkit/election/internal/clock"
	"github.com/electkit/election/internal/record"
	"github.com/electkit/election/internal/skeleton"
	"github.com/electkit/election/internal/watch"
)

// Leader implements election.Elector. It first syncs the connected server
// with the ensemble's leader, so the answer is no older than the call;
// then it reads the leader node. With no leader, it looks at the head of
// the order: if a node that never leads holds it (a blocker, or a
// candidate node whose record is malformed), Leader returns a
// *MalformedNodeError (errors.Is ErrMalformedNode and election.ErrNoLeader)
// that names it. A malformed leader node gives one too; a persistent one
// (a release's hand-over) leads while the candidate node it names exists.
func (e *Elector) Leader(ctx context.Context) (election.Leader, error) {
	if err := skeleton.CheckContext(ctx); err != nil {
		return election.Leader{}, err
	}
	if err := ctx.Err(); err != nil {
		return election.Leader{}, err
	}
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return election.Leader{}, election.ErrClosed
	}
	var err error
	if derr := e.do(ctx, e.closing, func() { _, err = e.conn.Sync(e.path) }); derr != nil {
		return election.Leader{}, derr
	}
	if errors.Is(err, gozk.ErrNoNode) {
		return election.Leader{}, election.ErrNoLeader
	}
	if err != nil {
		return election.Leader{}, e.readErr("syncing", err)
	}
	for {
		l, _, _, err := e.head(ctx, false)
		if errors.Is(err, errRetry) {
			continue
		}
		if errors.Is(err, election.ErrNoLeader) {
			var bad *MalformedNodeError
			if !errors.As(err, &bad) {
				if herr := e.headBlocker(ctx); herr != nil {
					return election.Leader{}, herr
				}
			}
		}
		return l, err
	}
}

// errRetry: the state changed while it was read; read again.
var errRetry = errors.New("zk election: the order changed while reading")

// head reads the leader node: the leader, or ErrNoLeader, or a
// *MalformedNodeError. With watch, it also returns a channel that fires
// when the answer may have changed (a data watch on the leader node, or an
// exists watch while it is missing).
func (e *Elector) head(ctx context.Context, watch bool) (election.Leader, <-chan gozk.Event, <-chan gozk.Event, error) {
	p := e.path + "/" + leaderName
	var data []byte
	var st *gozk.Stat
	var cw, nw <-chan gozk.Event
	var err error
	if derr := e.do(ctx, e.closing, func() {
		if watch {
			data, st, cw, err = e.conn.GetW(p)
		} else {
			data, st, err = e.conn.Get(p)
		}
	}); derr != nil {
		return election.Leader{}, nil, nil, derr
	}
	if errors.Is(err, gozk.ErrNoNode) {
		if !watch {
			return election.Leader{}, nil, nil, election.ErrNoLeader
		}
		var ok bool
		if derr := e.do(ctx, e.closing, func() { ok, _, cw, err = e.conn.ExistsW(p) }); derr != nil {
			return election.Leader{}, nil, nil, derr
		}
		if err == nil && ok {
			return election.Leader{}, nil, nil, errRetry // created meanwhile
		}
		if err != nil {
			return election.Leader{}, nil, nil, e.readErr("watching the leader node", err)
		}
		return election.Leader{}, cw, nil, election.ErrNoLeader
	}
	if err != nil {
		return election.Leader{}, nil, nil, e.readErr("reading "+p, err)
	}
	named := record.Key(data)
	if st.EphemeralOwner == 0 && guidOf(named) != "" {
		// A release's hand-over (succ.go): it leads while the node it
		// names exists. Observe watches that node too (nw).
		var ok bool
		var w <-chan gozk.Event
		var nst *gozk.Stat
		if derr := e.do(ctx, e.closing, func() {
			if watch {
				ok, nst, w, err = e.conn.ExistsW(e.path + "/" + named)
			} else {
				ok, nst, err = e.conn.Exists(e.path + "/" + named)
			}
		}); derr != nil {
			return election.Leader{}, nil, nil, derr
		}
		if err != nil {
			return election.Leader{}, nil, nil, e.readErr("reading "+named, err)
		}
		if !ok || nst.EphemeralOwner == 0 {
			// Its candidate is gone: no leader until the next one
			// deletes it (the watch on _l sees that).
			return election.Leader{}, cw, nil, election.ErrNoLeader
		}
		nw = w
		st = &gozk.Stat{Czxid: st.Czxid, EphemeralOwner: -1} // as the candidate node's
	}
	l, derr := decodeNode(leaderName, data, st)
	if derr == nil && guidOf(named) == "" {
		derr = errors.New("its record names no candidate node")
	}
	if derr != nil {
		return election.Leader{}, cw, nw, &MalformedNodeError{Path: p, EphemeralOwner: st.EphemeralOwner, Reason: derr.Error()}
	}
	return l, cw, nw, nil
}

// headBlocker returns a *MalformedNodeError if the head of the order is a
// node that never leads, or nil.
func (e *Elector) headBlocker(ctx context.Context) error {
	var names []string
	var err error
	if derr := e.do(ctx, e.closing, func() { names, _, err = e.conn.Children(e.path) }); derr != nil {
		return derr
	}
	if err != nil {
		return nil
	}
	for _, ch := range parseView(names).order {
		p := e.path + "/" + ch.name
		var data []byte
		var st *gozk.Stat
		if derr := e.do(ctx, e.closing, func() { data, st, err = e.conn.Get(p) }); derr != nil {
			return derr
		}
		if err != nil {
			return nil
		}
		if st.EphemeralOwner == 0 {
			continue // skipped: it never leads, and never blocks
		}
		reason := "not a candidate node of this layout (an older version's, or another program's): it holds its place and never leads"
		if !ch.blocker {
			_, derr := decodeNode(ch.name, data, st)
			if derr == nil {
				return nil
			}
			reason = derr.Error()
		}
		return &MalformedNodeError{Path: p, EphemeralOwner: st.EphemeralOwner, Reason: reason}
	}
	return nil
}

func (e *Elector) readErr(what string, err error) error {
	if errors.Is(err, gozk.ErrClosing) {
		return fmt.Errorf("%w: %s: the ZooKeeper connection was closed", election.ErrSessionLost, what)
	}
	return fmt.Errorf("zk election %s: %s: %w", e.path, what, err)
}

// Observe implements election.Elector. The first value is the state the
// Elector's watcher read from ZooKeeper (it waits for that read); then
// every change. The watcher holds one watch, on the leader node (a data
// watch, or an exists watch while it is missing), and a second on the
// candidate node a persistent leader node names (a release's hand-over:
// it leads while that node exists), and reads again whenever
// it fires or is lost (a reconnect, a new session), so it never skips the
// newest value. A zero Leader means no leader now, including when the
// leader node is malformed (it is logged).
func (e *Elector) Observe(ctx context.Context) <-chan election.Leader {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || ctx == nil { // Close may be waiting on wg: start nothing
		return watch.Closed()
	}
	return e.obs.Stream(ctx, e.closing, &e.wg, e.observeLoop)
}

func (e *Elector) observeLoop() {
	ctx := e.bg
	warned := map[string]bool{}
	for ctx.Err() == nil {
		l, ch, ch2, err := e.head(ctx, true)
		var bad *MalformedNodeError
		switch {
		case errors.Is(err, errRetry):
			continue
		case err == nil, errors.Is(err, election.ErrNoLeader) && ch != nil:
			if errors.As(err, &bad) && !warned[bad.Path] {
				warned[bad.Path] = true
				e.log.Warn("zk election: malformed node heads the election", "path", bad.Path, "reason", bad.Reason)
			}
			e.obs.Set(l)
		default:
			if ctx.Err() == nil {
				e.log.Warn("zk election: observer read failed; retrying", "path", e.path, "err", err)
			}
			if errors.Is(err, election.ErrSessionLost) { // the connection was closed: nothing more to see
				e.obs.Set(election.Leader{})
				<-ctx.Done()
				return
			}
			clock.Sleep(ctx, retryDelay)
			continue
		}
		select {
		case <-ch:
		case <-ch2: // the candidate node a hand-over's leader node names
		case <-ctx.Done():
		}
	}
}
