package etcd

import (
	"context"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electkit/election"
	"github.com/electkit/election/internal/clock"
	"github.com/electkit/election/internal/watch"
)

// Leader implements election.Elector with a linearizable read: the oldest
// leased key under the prefix. Keys without a lease are skipped; if the
// oldest leased key is malformed, Leader returns a *MalformedKeyError
// (errors.Is ErrMalformedKey and election.ErrNoLeader) that names it.
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
	// The keys in create-revision order, as many as it takes to hold every
	// key up to the oldest leased one and the first key after it (a key
	// sharing its create revision makes it fail, see head).
	for limit := int64(2); ; limit *= 2 {
		resp, err := e.cli.Get(ctx, e.prefix, clientv3.WithPrefix(),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(limit))
		if err != nil {
			return election.Leader{}, e.storeErr(ctx, "reading the leader", err)
		}
		kvs := resp.Kvs
		if resp.More {
			oldest := int64(-1)
			for _, kv := range kvs {
				if kv.Lease != 0 && !nested(e.prefix, kv.Key) {
					oldest = kv.CreateRevision
					break
				}
			}
			if oldest < 0 || kvs[len(kvs)-1].CreateRevision == oldest {
				continue // the answer may lie past what was read
			}
		}
		l, bad, skipped := head(e.prefix, kvs, e.seen.Load())
		for _, m := range skipped {
			e.log.Warn("etcd election: skipping a key without a lease under the election prefix; it never leads",
				"key", m.Key, "create_revision", m.CreateRevision)
		}
		switch {
		case bad != nil:
			return election.Leader{}, bad
		case l.IsZero():
			return election.Leader{}, election.ErrNoLeader
		}
		e.saw(l.Token)
		return l, nil
	}
}

// Observe implements election.Elector. The first value is the state the
// Elector's watcher read from etcd (it waits for that read); then every
// change. The watcher survives compaction, a lost connection and a member
// that lost its raft leader: it reads the prefix again and resumes from
// after that read, so it never skips the newest value. A zero Leader means
// no leader now, including when the oldest leased key is malformed (the
// key is logged).
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
		resp, err := e.cli.Get(ctx, e.prefix, clientv3.WithPrefix())
		if err != nil {
			if ctx.Err() == nil {
				e.log.Warn("etcd election: observer read failed; retrying", "prefix", e.prefix, "err", err)
			}
			clock.Sleep(ctx, retryDelay)
			continue
		}
		kvs := map[string]*mvccpb.KeyValue{}
		for _, kv := range resp.Kvs {
			kvs[string(kv.Key)] = kv
		}
		e.publish(kvs, warned)
		e.follow(ctx, kvs, resp.Header.Revision+1, warned)
	}
}

// follow applies the prefix's watch events from rev to kvs and publishes
// each new state, until the watch breaks.
func (e *Elector) follow(ctx context.Context, kvs map[string]*mvccpb.KeyValue, rev int64, warned map[string]bool) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for wr := range e.cli.Watch(wctx, e.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev)) {
		if err := wr.Err(); err != nil || wr.Canceled || wr.CompactRevision != 0 {
			if ctx.Err() == nil {
				e.log.Info("etcd election: observer watch broke; reading again", "prefix", e.prefix, "err", err, "compact_revision", wr.CompactRevision)
			}
			return
		}
		for _, ev := range wr.Events {
			switch ev.Type {
			case clientv3.EventTypePut:
				kvs[string(ev.Kv.Key)] = ev.Kv
			case clientv3.EventTypeDelete:
				delete(kvs, string(ev.Kv.Key))
			}
		}
		e.publish(kvs, warned)
	}
}

func (e *Elector) publish(kvs map[string]*mvccpb.KeyValue, warned map[string]bool) {
	all := make([]*mvccpb.KeyValue, 0, len(kvs))
	for _, kv := range kvs {
		all = append(all, kv)
	}
	l, bad, skipped := head(e.prefix, all, e.seen.Load())
	for _, m := range append(skipped, bad) {
		if m != nil && !warned[m.Key] {
			warned[m.Key] = true
			e.log.Warn("etcd election: malformed key under the election prefix", "key", m.Key, "reason", m.Reason, "blocks", m == bad)
		}
	}
	e.saw(l.Token)
	e.obs.Set(l)
}

// saw records that token led this election: a key with a lower token
// never leads in this Elector's eyes after that (see head).
func (e *Elector) saw(token uint64) {
	for {
		old := e.seen.Load()
		if token <= old || e.seen.CompareAndSwap(old, token) {
			return
		}
	}
}
