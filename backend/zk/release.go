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
	e.pending = append(e.pending, c.node)
	e.mu.Unlock()
	e.end(c, cause)
	// A short wait, so that Campaign returns within 100 ms of its ctx
	// whatever the server does: a failed delete stays pending and the
	// reaper retries it in the background.
	ctx, cancel := context.WithTimeout(e.bg, releaseWait)
	defer cancel()
	_ = e.deleteNode(ctx, c.node)
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
	e.mu.Lock()
	e.pending = append(e.pending, node)
	e.mu.Unlock()
	ctx, cancel := context.WithTimeout(e.bg, releaseWait)
	defer cancel()
	_ = e.deleteNode(ctx, node)
}

// deleteNode deletes node, one of this Elector's, and takes it off the
// pending list; a node already gone counts as deleted. On failure it stays
// pending: Campaign, Resign and Close try again, and meanwhile it goes
// with its session at the latest.
func (e *Elector) deleteNode(ctx context.Context, node string) error {
	var rerr error
	err := e.do(ctx, nil, func() { rerr = e.conn.Delete(node, -1) })
	if err == nil {
		err = rerr
	}
	if err == nil || errors.Is(err, gozk.ErrNoNode) {
		e.unpend(node)
		return nil
	}
	e.log.Warn("zk election: deleting a candidate node failed; retrying in the background (it goes with its session at the latest)", "node", node, "err", err)
	e.reap()
	return fmt.Errorf("zk election: deleting node %s: %w", node, err)
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
			pending := append([]string(nil), e.pending...)
			e.mu.Unlock()
			for _, p := range pending {
				ctx, cancel := context.WithTimeout(e.bg, e.o.Window())
				var rerr error
				err := e.do(ctx, nil, func() { rerr = e.conn.Delete(p, -1) })
				if err == nil {
					err = rerr
				}
				cancel()
				if err == nil || errors.Is(err, gozk.ErrNoNode) {
					e.unpend(p)
				}
			}
		}
	}()
}

func (e *Elector) unpend(node string) {
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
	pending := append([]string(nil), e.pending...)
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
