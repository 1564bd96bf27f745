package etcd

import (
	"container/list"
	"context"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A service with a leader per shard may start thousands of Campaigns at
// once. Sent all at once, their requests pile up in the member faster than
// it applies them, and the renewals of every Session wait behind them (etcd
// v3.6 answers a renewal only once it has applied what it committed; any
// member busy with thousands of requests answers it late): the leases
// lapse, and every candidacy on them starts over — the store falls over
// under load that it would have served in turn. So the requests a
// candidacy makes to queue and to lead — a lease for an Elector without a
// Session, the arrival read, the queue key's create, the reads of the
// queue, the claims of the leader key, the releases — go through one
// limiter per client, which lets maxInFlight of them be in flight at once
// and queues the rest, first come first served. Those on a handover's path
// (a waiter's reads and claims, a release) go ahead of new arrivals, so
// that a burst of Campaigns does not slow the elections that already
// run. Renewals, watches and Leader's reads do not wait: they keep
// leaderships alive and are bounded by their number already.

// maxInFlight is how many queue requests of one client may be in flight at
// once: enough to keep a member busy (etcd batches the proposals that
// arrive together), few enough that what waits in it is applied within a
// fraction of a lease renewal's time. Measured with 10,000 elections × 3
// started at once on three Sessions of one member (bench's burst): every
// election led after 23 s with 16, 14–15 s with 32 and 64, 13 s with 128,
// 17 s with 512, the member's RSS growing with the bound (217, 225, 253,
// 310 MiB). With 64, 300 elections × 3 on Sessions of TTL 2 s under the
// race detector and two busy cores let Terms lapse as they began (renewals
// answered late); with 32 none did.
const maxInFlight = 32

// A limiter bounds the requests in flight; requests beyond the bound wait
// in two queues, urgent first.
type limiter struct {
	mu     sync.Mutex
	free   int
	queues [2]list.List // of *slotWait: urgent, then the others
}

type slotWait struct {
	ready   chan struct{} // closed when the slot is granted
	granted bool          // guarded by limiter.mu
}

// limiters holds the limiter of each client, made at its first request
// and dropped when the client closes.
var limiters sync.Map // *clientv3.Client → *limiter

// limiterOf returns cli's limiter.
func limiterOf(cli *clientv3.Client) *limiter {
	if l, ok := limiters.Load(cli); ok {
		return l.(*limiter)
	}
	l, loaded := limiters.LoadOrStore(cli, &limiter{free: maxInFlight})
	if !loaded {
		context.AfterFunc(cli.Ctx(), func() { limiters.Delete(cli) })
	}
	return l.(*limiter)
}

// acquire takes a slot, waiting for one until ctx ends.
func (l *limiter) acquire(ctx context.Context, urgent bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	if l.free > 0 {
		l.free--
		l.mu.Unlock()
		return nil
	}
	q := &l.queues[1]
	if urgent {
		q = &l.queues[0]
	}
	w := &slotWait{ready: make(chan struct{})}
	el := q.PushBack(w)
	l.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		l.mu.Lock()
		if w.granted {
			l.mu.Unlock()
			l.release() // granted as ctx ended: pass it on
			return ctx.Err()
		}
		q.Remove(el)
		l.mu.Unlock()
		return ctx.Err()
	}
}

// release gives a slot back: to the first urgent waiter, else to the
// first other one.
func (l *limiter) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.queues {
		if el := l.queues[i].Front(); el != nil {
			w := l.queues[i].Remove(el).(*slotWait)
			w.granted = true
			close(w.ready)
			return
		}
	}
	l.free++
}

// limited runs request f within a slot of the client's limiter.
func (e *Elector) limited(ctx context.Context, urgent bool, f func() error) error {
	return limitedOn(ctx, e.cli, urgent, f)
}

func limitedOn(ctx context.Context, cli *clientv3.Client, urgent bool, f func() error) error {
	l := limiterOf(cli)
	if err := l.acquire(ctx, urgent); err != nil {
		return err
	}
	defer l.release()
	return f()
}

// retryBackoff returns the pauses between the tries of a request that
// failed for a reason that may pass: from retryDelay, doubling up to
// maxWait, each drawn at random within ±50%, so that the candidacies a
// failure met together do not retry together.
func retryBackoff(maxWait time.Duration) *backoff.ExponentialBackOff {
	return backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(retryDelay),
		backoff.WithMaxInterval(max(maxWait, retryDelay)),
		backoff.WithRandomizationFactor(0.5),
		backoff.WithMaxElapsedTime(0))
}

// maxRetryWait bounds the pause between the tries of a queue request.
const maxRetryWait = 2 * time.Second

// commit commits t within a slot of the client's limiter.
func (e *Elector) commit(ctx context.Context, urgent bool, t clientv3.Txn) (*clientv3.TxnResponse, error) {
	var resp *clientv3.TxnResponse
	err := e.limited(ctx, urgent, func() (err error) {
		resp, err = t.Commit()
		return err
	})
	return resp, err
}
