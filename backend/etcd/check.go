package etcd

import (
	"context"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electkit/election"
	"github.com/electkit/election/internal/record"
)

// This file holds the checks of a candidacy's keys, as read or as its
// watch reports their changes: a change by another client ends the
// candidacy (oust).

// ownEvent checks an event of c's queue key.
func (e *Elector) ownEvent(c *candidacy, ev *clientv3.Event) error {
	if ev.Type == clientv3.EventTypeDelete {
		return fmt.Errorf("%w: key %s (revision %d) was deleted at revision %d: another client deleted it or its prefix, or revoked lease %016x",
			election.ErrSessionLost, c.key, c.rev, ev.Kv.ModRevision, uint64(c.s.lease))
	}
	return e.checkOwn(c, ev.Kv)
}

// checkOwn reports how kv, c's queue key as read or as a watch event put
// it, is no longer c's: gone, recreated, moved to another lease, or
// holding another candidate's record.
func (e *Elector) checkOwn(c *candidacy, kv *mvccpb.KeyValue) error {
	what := ""
	switch {
	case kv == nil:
		what = "is gone: another client deleted it or its prefix, or revoked its lease"
	case kv.CreateRevision != c.rev:
		what = fmt.Sprintf("was deleted and created again (create revision %d)", kv.CreateRevision)
	case kv.Lease != int64(c.s.lease):
		what = leaseMoved(kv, c.s.lease) + ": it no longer goes with the candidacy"
	case kv.Value != nil && record.ID(kv.Value) != e.o.ID:
		what = fmt.Sprintf("was overwritten by another client at revision %d with a record that is not this candidate's", kv.ModRevision)
	}
	if what == "" {
		return nil
	}
	return fmt.Errorf("%w: key %s (revision %d) %s", election.ErrSessionLost, c.key, c.rev, what)
}

// leaseMoved says what was seen of a key of the candidacy that no longer
// holds its lease: a put it did not make (an operator's, a second
// program's), with or without a lease.
func leaseMoved(kv *mvccpb.KeyValue, own clientv3.LeaseID) string {
	if kv.Lease == 0 {
		return fmt.Sprintf("was put at revision %d without a lease (version %d; the candidacy's lease is %016x)", kv.ModRevision, kv.Version, uint64(own))
	}
	return fmt.Sprintf("was put at revision %d under lease %016x (version %d; the candidacy's lease is %016x)", kv.ModRevision, uint64(kv.Lease), kv.Version, uint64(own))
}

// leaderEvent checks an event of the leader key while c leads at token.
func (e *Elector) leaderEvent(c *candidacy, token int64, ev *clientv3.Event) error {
	if ev.Type == clientv3.EventTypeDelete {
		return fmt.Errorf("%w: leader key %s (token %d) was deleted at revision %d: another client deleted it or the election's prefix, or revoked lease %016x",
			election.ErrSessionLost, e.lkeyOf(c), token, ev.Kv.ModRevision, uint64(c.s.lease))
	}
	return e.checkLeader(c, token, ev.Kv)
}

// checkLeader reports how kv, the leader key, is no longer c's leadership
// at token. The candidate's own writes (Proclaim) keep its create
// revision, its lease and its record's ID and queue key.
func (e *Elector) checkLeader(c *candidacy, token int64, kv *mvccpb.KeyValue) error {
	what := ""
	switch {
	case kv == nil:
		what = "is gone: another client deleted it or the election's prefix, or revoked its lease"
	case kv.CreateRevision != token:
		what = fmt.Sprintf("was deleted and created again (create revision %d)", kv.CreateRevision)
	case kv.Lease != int64(c.s.lease):
		what = leaseMoved(kv, c.s.lease)
	case record.ID(kv.Value) != e.o.ID || record.Key(kv.Value) != c.key:
		what = fmt.Sprintf("was overwritten by another client at revision %d with a record that is not this candidacy's", kv.ModRevision)
	}
	if what == "" {
		return nil
	}
	return fmt.Errorf("%w: leader key %s (token %d) %s", election.ErrSessionLost, e.lkeyOf(c), token, what)
}

// oust ends c because another client changed its keys: its Term at once
// (before any I/O), then, in the background of this goroutine, what is
// left of it.
func (e *Elector) oust(c *candidacy, err error) {
	if !e.lose(c, err) {
		return
	}
	e.o.Logger.Warn("etcd election: the candidate's keys were changed by another client; candidacy ended", "key", c.key, "err", err)
	ctx, cancel := context.WithTimeout(e.background(), e.o.Window())
	defer cancel()
	_ = e.release(ctx, c, true) // logged; retried by the next Campaign, Resign or Close
}
