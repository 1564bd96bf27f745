package conns

import (
	"context"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Tally counts the keys under an etcd prefix from one count-only read and
// a watch of the prefix from the revision after it. Reading Count costs
// the store nothing, where every count-only range visits each key under
// the prefix in the member's index (etcd keeps no counts): polled every
// 10 ms at 10,000 keys, a census by range keeps a member's core busy and
// slows the very registrations it times.
type Tally struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu  sync.Mutex
	n   int
	err error
}

// NewTally reads the count under prefix and keeps it current until Close.
func NewTally(ctx context.Context, cli *clientv3.Client, prefix string) (*Tally, error) {
	wctx, cancel := context.WithCancel(context.Background())
	t := &Tally{cancel: cancel, done: make(chan struct{})}
	rev, err := t.baseline(ctx, cli, prefix)
	if err != nil {
		cancel()
		return nil, err
	}
	go t.run(wctx, cli, prefix, rev)
	return t, nil
}

func (t *Tally) baseline(ctx context.Context, cli *clientv3.Client, prefix string) (int64, error) {
	r, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	t.mu.Lock()
	t.n, t.err = int(r.Count), nil
	t.mu.Unlock()
	return r.Header.Revision, nil
}

func (t *Tally) run(ctx context.Context, cli *clientv3.Client, prefix string, rev int64) {
	defer close(t.done)
	for ctx.Err() == nil {
		for resp := range cli.Watch(clientv3.WithRequireLeader(ctx), prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
			if resp.Err() != nil {
				break
			}
			d := 0
			for _, ev := range resp.Events {
				switch {
				case ev.IsCreate():
					d++
				case ev.Type == clientv3.EventTypeDelete:
					d--
				}
			}
			t.mu.Lock()
			t.n += d
			t.mu.Unlock()
		}
		// The watch ended (compaction, a lost leader): count afresh.
		for ctx.Err() == nil {
			var err error
			if rev, err = t.baseline(ctx, cli, prefix); err == nil {
				break
			}
			t.mu.Lock()
			t.err = err
			t.mu.Unlock()
			select {
			case <-ctx.Done():
			case <-cli.Ctx().Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// Count is the number of keys under the prefix as of the last event the
// watch delivered, or the error that stopped it from being known.
func (t *Tally) Count() (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return 0, t.err
	}
	return t.n, nil
}

// Close stops the watch.
func (t *Tally) Close() {
	t.cancel()
	<-t.done
}
