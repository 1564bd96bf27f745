package etcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electkit/election"
	"github.com/electkit/election/internal/record"
)

// A candidacy's own key is watched for as long as the candidacy lasts, so
// that another client's hand on it ends the candidacy within milliseconds
// instead of never: someone deleting the key, deleting the election's
// prefix, revoking the lease (etcd deletes the lease's keys) or re-putting
// the key without the lease or under another one. The lease alone cannot
// tell: it is still renewed while the key it was meant to keep is gone, and
// the next candidate leads at once.
//
// The watch starts at the store's current revision (a watch started at a
// past revision joins etcd's lagging group, caught up only every 100 ms),
// and each time it is (re)established the key is read and checked after
// the watch was created. So every change after that check reaches the
// guard live, and a change before it fails the check. Campaign confirms
// leadership only once the guard has made its first check, and a renewal
// counts for the Term's deadline only if the guard was watching both when
// the renewal was sent and when its reply came (see keepAlive): while the
// watch is down, the Term runs on the deadline it had, and ends at it if
// the watch does not come back. The fail-closed rule is thus one lease
// window of unwatched validity at most, which is what the Term had before
// keys were watched at all.
//
// Writes of the candidate itself (Proclaim) keep the key's lease and its
// record's ID; any other change ends the candidacy.

// errUnwatched makes a renewal not count: the guard did not watch the key
// throughout it.
var errUnwatched = errors.New("etcd election: the candidate's own key was not watched throughout the renewal; it does not extend the term")

// guardKey watches c's own key until the candidacy ends. It closes
// c.guarded after its first check; if the key fails a check or an event
// shows another client's change, it ousts the candidacy.
func (e *Elector) guardKey(c *candidacy) {
	defer e.wg.Done()
	first := true
	for c.ctx.Err() == nil {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(c.ctx))
		err := e.guardOnce(wctx, c, &first)
		cancel()
		c.watched.Store(false)
		if err != nil {
			e.oust(c, err)
			return
		}
		if c.ctx.Err() != nil {
			return
		}
		select { // the watch broke: establish it again, after a pause if it broke at once
		case <-c.ctx.Done():
			return
		case <-time.After(retryDelay):
		}
	}
}

// guardOnce establishes the watch, checks the key and follows the events
// until the watch breaks (nil) or the key is found changed (the error, for
// oust).
func (e *Elector) guardOnce(ctx context.Context, c *candidacy, first *bool) error {
	wch := e.cli.Watch(ctx, c.key, clientv3.WithCreatedNotify())
	wr, ok := <-wch
	if !ok || wr.Err() != nil || wr.Canceled || !wr.Created {
		return e.guardFailed(c, "watching the candidate's own key", wr.Err())
	}
	resp, err := e.cli.Get(ctx, c.key)
	if err != nil {
		return e.guardFailed(c, "checking the candidate's own key", err)
	}
	var kv *mvccpb.KeyValue
	if len(resp.Kvs) > 0 {
		kv = resp.Kvs[0]
	}
	if err := e.checkOwn(c, kv); err != nil {
		return err
	}
	c.watched.Store(true)
	if *first {
		*first = false
		close(c.guarded)
	}
	for wr := range wch {
		if wr.Err() != nil || wr.Canceled {
			return e.guardFailed(c, "watching the candidate's own key", wr.Err())
		}
		for _, ev := range wr.Events {
			if c.ctx.Err() != nil {
				return nil // the candidacy ended: its own release may be what this is
			}
			if ev.Type == clientv3.EventTypeDelete {
				return fmt.Errorf("%w: key %s (revision %d) was deleted at revision %d: another client deleted it or its prefix, or revoked lease %016x",
					election.ErrSessionLost, c.key, c.rev, ev.Kv.ModRevision, uint64(c.lease))
			}
			if err := e.checkOwn(c, ev.Kv); err != nil {
				return err
			}
		}
	}
	return e.guardFailed(c, "watching the candidate's own key", errors.New("the watch channel closed"))
}

// guardFailed classifies a failed request of the guard: a final error ends
// the candidacy, anything else is logged and the watch set up again.
func (e *Elector) guardFailed(c *candidacy, what string, err error) error {
	if c.ctx.Err() != nil {
		return nil
	}
	if e.isFinal(err) {
		return e.finalErr(what+" "+c.key, err)
	}
	e.retryLog(c, what, err)
	return nil
}

// checkOwn reports how kv, c's key as read or as a watch event put it, is
// no longer c's: gone, recreated, moved to another lease, or holding another
// candidate's record.
func (e *Elector) checkOwn(c *candidacy, kv *mvccpb.KeyValue) error {
	what := ""
	switch {
	case kv == nil:
		what = "is gone: another client deleted it or its prefix, or revoked its lease"
	case kv.CreateRevision != c.rev:
		what = fmt.Sprintf("was deleted and created again (create revision %d)", kv.CreateRevision)
	case kv.Lease != int64(c.lease):
		what = fmt.Sprintf("was put again by another client under lease %016x (revision %d): it no longer goes with the candidate's lease", uint64(kv.Lease), kv.ModRevision)
	default:
		if record.ID(kv.Value) != e.o.ID {
			what = fmt.Sprintf("was overwritten by another client at revision %d with a record that is not this candidate's", kv.ModRevision)
		}
	}
	if what == "" {
		return nil
	}
	return fmt.Errorf("%w: key %s (revision %d) %s", election.ErrSessionLost, c.key, c.rev, what)
}

// oust ends c because another client changed its key: its Term at once
// (before any I/O), then, in the background, what is left of it: the key
// if it is still there under c's create revision (re-put without the
// lease, it would never go), and the lease.
func (e *Elector) oust(c *candidacy, err error) {
	if !e.lose(c, err) {
		return
	}
	e.log.Warn("etcd election: the candidate's own key was changed by another client; candidacy ended", "key", c.key, "err", err)
	e.mu.Lock()
	if !e.closed {
		e.pending = append(e.pending, c)
	}
	e.mu.Unlock()
	ctx, cancel := context.WithTimeout(e.bg, e.o.Window())
	defer cancel()
	_ = e.release(ctx, c, true) // logged; retried by the next Campaign, Resign or Close
}
