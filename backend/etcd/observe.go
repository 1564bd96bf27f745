package etcd

import (
	"context"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electkit/election"
	"github.com/electkit/election/internal/clock"
	"github.com/electkit/election/internal/skeleton"
	"github.com/electkit/election/internal/watch"
)

// Leader implements election.Elector with a linearizable read of the
// leader key, one key whatever the number of candidates. If the key is
// malformed, Leader returns a *MalformedKeyError (errors.Is
// ErrMalformedKey and election.ErrNoLeader) that names it.
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
	resp, err := e.cli.Get(ctx, e.lay.leader(), clientv3.WithRange(e.lay.leadEnd()), clientv3.WithLimit(1))
	if err != nil {
		return election.Leader{}, e.storeErr(ctx, "reading the leader", err)
	}
	if len(resp.Kvs) == 0 {
		return election.Leader{}, election.ErrNoLeader
	}
	kv := resp.Kvs[0]
	l, _, err := e.lay.decodeLeader(kv, e.seen.Load())
	if err != nil {
		return election.Leader{}, malformed(kv, err)
	}
	e.saw(l.Token)
	return l, nil
}

// Observe implements election.Elector. The first value is the state the
// Elector's watcher read from etcd (it waits for that read); then every
// change. The watcher follows the leader key alone, so its cost does not
// grow with the number of candidates. It survives compaction, a lost
// connection and a member that lost its raft leader: it reads the key
// again and resumes from after that read, so it never skips the newest
// value. A zero Leader means no leader now, including when the leader key
// is malformed (the key is logged).
func (e *Elector) Observe(ctx context.Context) <-chan election.Leader {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || ctx == nil { // Close may be waiting on wg: start nothing
		return watch.Closed()
	}
	x := e.extra()
	if x.obs == nil {
		x.obs = watch.NewFeed() // made at the first Observe: most Electors never observe
	}
	return x.obs.Stream(ctx, e.gate.Closing(), &e.wg, e.observeLoop)
}

func (e *Elector) observeLoop() {
	ctx := e.background()
	warned := map[int64]bool{}
	b := retryBackoff(maxRetryWait)
	for ctx.Err() == nil {
		resp, err := e.cli.Get(ctx, e.lay.leader(), clientv3.WithRange(e.lay.leadEnd()))
		if err != nil {
			if ctx.Err() == nil {
				e.o.Logger.Warn("etcd election: observer read failed; retrying", "key", e.lay.leader(), "err", err)
			}
			clock.Sleep(ctx, b.NextBackOff())
			continue
		}
		keys := map[string]*mvccpb.KeyValue{}
		for _, kv := range resp.Kvs {
			keys[string(kv.Key)] = kv
		}
		e.publish(first(keys), warned)
		began := time.Now()
		if e.observeFrom(ctx, resp.Header.Revision+1, keys, warned) || time.Since(began) >= maxRetryWait {
			b.Reset()
		}
		// A watch that breaks at once, again and again, is not read
		// again at once.
		clock.Sleep(ctx, b.NextBackOff())
	}
}

// first returns the leadership key that sorts first (the leader's: their
// names sort in the order they were created), or nil.
func first(keys map[string]*mvccpb.KeyValue) *mvccpb.KeyValue {
	var kv *mvccpb.KeyValue
	for k, v := range keys {
		if kv == nil || k < string(kv.Key) {
			kv = v
		}
	}
	return kv
}

// observeFrom publishes the leader's changes from rev on, keys being the
// leadership keys read before rev, until the watch breaks. It reports
// whether the watch delivered any.
func (e *Elector) observeFrom(ctx context.Context, rev int64, keys map[string]*mvccpb.KeyValue, warned map[int64]bool) (delivered bool) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for wr := range e.cli.Watch(wctx, e.lay.leader(), clientv3.WithRange(e.lay.leadEnd()), clientv3.WithRev(rev)) {
		if err := wr.Err(); err != nil || wr.Canceled || wr.CompactRevision != 0 {
			if ctx.Err() == nil {
				e.o.Logger.Info("etcd election: observer watch broke; reading again", "key", e.lay.leader(), "err", err, "compact_revision", wr.CompactRevision)
			}
			return
		}
		if len(wr.Events) > 0 {
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypePut {
					keys[string(ev.Kv.Key)] = ev.Kv
				} else {
					delete(keys, string(ev.Kv.Key))
				}
			}
			e.publish(first(keys), warned)
			delivered = true
		}
	}
	return delivered
}

// publish sets the observed leader from the leader key (nil: absent).
func (e *Elector) publish(kv *mvccpb.KeyValue, warned map[int64]bool) {
	if kv == nil {
		e.extra().obs.Set(election.Leader{})
		return
	}
	l, _, err := e.lay.decodeLeader(kv, e.seen.Load())
	if err != nil {
		if !warned[kv.ModRevision] {
			warned[kv.ModRevision] = true
			e.o.Logger.Warn("etcd election: malformed leader key", "key", string(kv.Key), "mod_revision", kv.ModRevision, "reason", err.Error())
		}
		e.extra().obs.Set(election.Leader{})
		return
	}
	e.saw(l.Token)
	e.extra().obs.Set(l)
}

// saw records that token led this election: a leader key with a lower
// token never leads in this Elector's eyes after that (see decodeLeader).
func (e *Elector) saw(token uint64) {
	for {
		old := e.seen.Load()
		if token <= old || e.seen.CompareAndSwap(old, token) {
			return
		}
	}
}
