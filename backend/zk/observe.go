package zk

import (
	"context"
	"errors"
	"fmt"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electkit/election"
	"github.com/electkit/election/internal/clock"
	"github.com/electkit/election/internal/watch"
)

// Leader implements election.Elector. It first syncs the connected server
// with the ensemble's leader, so the answer is no older than the call;
// then it reads the children and the node at the head of the order.
// Persistent nodes are skipped; if the head is malformed, Leader returns a
// *MalformedNodeError (errors.Is ErrMalformedNode and election.ErrNoLeader)
// that names it.
func (e *Elector) Leader(ctx context.Context) (election.Leader, error) {
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
		l, _, err := e.head(ctx, false)
		if errors.Is(err, errRetry) {
			continue
		}
		return l, err
	}
}

// errRetry: the order changed while it was read; read again.
var errRetry = errors.New("zk election: the order changed while reading")

// head reads the children and the node at the head of the order: the
// leader, or ErrNoLeader, or a *MalformedNodeError. With watch, it also
// returns a channel that fires when the answer may have changed (a child
// watch on the path, and a data watch on the head, or an exists watch on
// the path when it is missing).
func (e *Elector) head(ctx context.Context, watch bool) (election.Leader, <-chan gozk.Event, error) {
	var names []string
	var cw <-chan gozk.Event
	var err error
	if derr := e.do(ctx, e.closing, func() {
		if watch {
			names, _, cw, err = e.conn.ChildrenW(e.path)
		} else {
			names, _, err = e.conn.Children(e.path)
		}
	}); derr != nil {
		return election.Leader{}, nil, derr
	}
	if errors.Is(err, gozk.ErrNoNode) {
		if !watch {
			return election.Leader{}, nil, election.ErrNoLeader
		}
		var ok bool
		if derr := e.do(ctx, e.closing, func() { ok, _, cw, err = e.conn.ExistsW(e.path) }); derr != nil {
			return election.Leader{}, nil, derr
		}
		if err == nil && ok {
			return election.Leader{}, nil, errRetry // created meanwhile
		}
		if err != nil {
			return election.Leader{}, nil, e.readErr("watching the path", err)
		}
		return election.Leader{}, cw, election.ErrNoLeader
	}
	if err != nil {
		return election.Leader{}, nil, e.readErr("listing candidates", err)
	}
	for _, ch := range ordered(names) {
		p := e.path + "/" + ch.name
		var data []byte
		var st *gozk.Stat
		var hw <-chan gozk.Event
		if derr := e.do(ctx, e.closing, func() {
			if watch {
				data, st, hw, err = e.conn.GetW(p)
			} else {
				data, st, err = e.conn.Get(p)
			}
		}); derr != nil {
			return election.Leader{}, nil, derr
		}
		if errors.Is(err, gozk.ErrNoNode) {
			return election.Leader{}, nil, errRetry
		}
		if err != nil {
			return election.Leader{}, nil, e.readErr("reading "+p, err)
		}
		if st.EphemeralOwner == 0 {
			e.log.Warn("zk election: skipping a persistent node in the election's order; it never leads", "path", p)
			continue
		}
		l, derr := decodeNode(ch.name, data, st)
		if watch {
			cw = merge(e, cw, hw)
		}
		if derr != nil {
			return election.Leader{}, cw, &MalformedNodeError{Path: p, EphemeralOwner: st.EphemeralOwner, Reason: derr.Error()}
		}
		return l, cw, nil
	}
	return election.Leader{}, cw, election.ErrNoLeader
}

// merge returns a channel that fires when a or b does. Its goroutine ends
// when either fires or the Elector closes; the watch channels are
// buffered, so an abandoned one never blocks the client.
func merge(e *Elector, a, b <-chan gozk.Event) <-chan gozk.Event {
	out := make(chan gozk.Event, 1)
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		select {
		case ev := <-a:
			out <- ev
		case ev := <-b:
			out <- ev
		case <-e.closing:
		}
	}()
	return out
}

func (e *Elector) readErr(what string, err error) error {
	if errors.Is(err, gozk.ErrClosing) {
		return fmt.Errorf("%w: %s: the ZooKeeper connection was closed", election.ErrSessionLost, what)
	}
	return fmt.Errorf("zk election %s: %s: %w", e.path, what, err)
}

// Observe implements election.Elector. The first value is the state the
// Elector's watcher read from ZooKeeper (it waits for that read); then
// every change. The watcher holds a child watch on the election path and a
// data watch on the head node, and reads again whenever one fires or is
// lost (a reconnect, a new session), so it never skips the newest value. A
// zero Leader means no leader now, including when the head of the order
// is malformed (the node is logged).
func (e *Elector) Observe(ctx context.Context) <-chan election.Leader {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed { // Close may be waiting on wg: start nothing
		return watch.Closed()
	}
	return e.obs.Stream(ctx, e.closing, &e.wg, e.observeLoop)
}

func (e *Elector) observeLoop() {
	ctx := e.bg
	warned := map[string]bool{}
	for ctx.Err() == nil {
		l, ch, err := e.head(ctx, true)
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
		case <-ctx.Done():
		}
	}
}
