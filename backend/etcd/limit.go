package etcd

import (
	"container/list"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
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
//
// What waits is sent together. When a request at the head of the queue
// has others behind it of other elections and of its kind (ranges with
// ranges; transactions that write, or nest another, with each other), they
// go as one transaction whose operations are theirs — each a nested
// transaction (or a range) with its own Compares, as it would have been
// sent alone. Elections' keys are disjoint (names may not hold "_"
// segments, and one request of an election goes in a batch), so each
// request's Compares, reads and writes see and do what they would have
// alone, and etcd orders, logs and applies the whole as one request: one
// Raft entry, one fsync and one round trip for many candidacies where each
// would have waited for its own. Tokens stay create revisions: the
// leadership keys created in one batch, one per election, share its
// revision. At most maxBatches batches of a client are in flight, and a
// request with others to go with waits for one to end rather than go
// alone: measured with 10,000 elections × 3 started at once on three
// Sessions, every election led after 3.4–3.9 s with 1–8 batches in flight
// and 64 or 100 requests each, 4.5 s with 16 and 5.7 s with 32 (one
// member in process; the more in flight, the longer each waits in the
// member, and etcd writes out every request slower than 300 ms in its
// log); 5.0 s when a request could go alone while the batches were in
// flight. A request alone in the queue goes alone, as before. A batch that
// etcd refuses as a whole for a reason that may be one request's (a
// permission denied on one election's keys, a lease one of its puts names
// that etcd no longer knows, too many operations, too large) is sent again
// request by request, a few at a time, so that each gets its own answer.

// maxInFlight is how many requests of one client may be in flight at once
// alone, beside the batches: enough to keep a member busy, few enough that
// what waits in it is applied within a fraction of a lease renewal's
// time. Measured with 10,000 elections × 3 started at once on three
// Sessions of one member (bench's burst), before batching: every election
// led after 23 s with 16, 14–15 s with 32 and 64, 13 s with 128, 17 s with
// 512, the member's RSS growing with the bound (217, 225, 253, 310 MiB).
// With 64, 300 elections × 3 on Sessions of TTL 2 s under the race
// detector and two busy cores let Terms lapse as they began (renewals
// answered late); with 32 none did.
const maxInFlight = 32

// maxBatches is how many batches of one client may be in flight at once.
const maxBatches = 4

// Bounds of one batch: requests, etcd's default --max-txn-ops (a
// transaction's operations at each level, nested ones counting against
// their parent's: see opCost), and bytes, well below etcd's default
// --max-request-bytes (1.5 MiB). A member configured lower refuses a
// batch; the client's limiter then lowers its bound and sends that
// batch's requests one by one.
const (
	maxBatch      = 64
	defaultMaxOps = 128
	maxBatchBytes = 256 << 10
)

// A limiter bounds the requests in flight; requests beyond the bound wait
// in two queues, urgent first.
type limiter struct {
	cli    *clientv3.Client
	stub   *kvStub // sends the requests (wire.go)
	mu     sync.Mutex
	free   int          // slots for requests alone
	queues [2]list.List // of *call: urgent, then the others
	maxOps int          // the transaction's operation budget a batch keeps to
	bytes  int          // the size a batch keeps to
	nbatch int          // batches in flight
	// held: the elections (groups) with writes in flight whose callers
	// gave up on them (their ctx ended), and how many: their next
	// requests wait until those are answered (see do).
	held map[string]int
}

// hold counts a given-up write of group in flight. Called with l.mu held.
func (l *limiter) hold(group string) {
	if l.held == nil {
		l.held = map[string]int{}
	}
	l.held[group]++
}

// unhold ends one hold of group and starts what it held back. Called
// with l.mu held.
func (l *limiter) unhold(group string) {
	if l.held[group]--; l.held[group] <= 0 {
		delete(l.held, group)
	}
	l.dispatch()
}

// A call is one request through the limiter: an opaque one (fn), or a
// range or transaction (op) that may go in a batch.
type call struct {
	ctx    context.Context
	fn     func() error  // an opaque request (a lease's grant or revoke), or nil
	op     *pb.RequestOp // a range or a transaction, when fn is nil
	group  string        // the election's key prefix: one request of a group per batch
	kind   opKind
	cost   int // the operations its nesting takes (opCost)
	size   int // about its bytes
	urgent bool
	batchy bool // at the head of the queue, it had requests to go with (guarded by limiter.mu)

	// The outcome, set before done is closed.
	header *pb.ResponseHeader
	resp   *pb.ResponseOp
	err    error

	batch *batchLife    // the batch it is in, once sent (guarded by limiter.mu)
	ready chan struct{} // closed when the call is granted a slot or its batch is done
	state callState     // guarded by limiter.mu
	el    *list.Element // its place in a queue while queued
}

// batchLife ends a batch's request once no request in it waits for it
// (each call's ctx ended), without a context.AfterFunc on each call's
// context: those are a candidacy's, and the map of children an AfterFunc
// gives a context stays with it for good.
type batchLife struct {
	live   int      // calls still waiting (guarded by limiter.mu)
	write  bool     // its requests write: it runs to its answer (do)
	held   []string // the groups of its calls that gave up on it: held until it ends (guarded by limiter.mu)
	cancel context.CancelFunc
}

// goneWriteWait bounds how long a batch of writes runs on once no caller
// waits for it, and so how long an election's next requests wait behind
// a write its caller gave up on.
const goneWriteWait = 5 * time.Second

type callState uint8

const (
	callQueued  callState = iota
	callGranted           // it holds a slot: it sends alone
	callBatched           // it is in a batch in flight
	callDone              // its outcome is set
	callGone              // its ctx ended while batched: the batch's outcome is dropped
)

// opKind sorts requests that may share a batch, so that a batch costs
// etcd what its requests would have: ranges go with ranges (a transaction
// of ranges alone is a read, serializable if every range is), and
// transactions that write, or nest another (etcd makes any transaction
// with a nested one a write, through Raft), go with each other. A
// transaction of Compares and ranges alone, which etcd serves as a read,
// goes alone.
type opKind uint8

const (
	kindAlone opKind = iota
	kindWrite
	kindRead
	kindSerializable
)

// limiters holds the limiter of each client, made at its first request
// and dropped when the client closes.
var limiters sync.Map // *clientv3.Client → *limiter

// limiterOf returns cli's limiter.
func limiterOf(cli *clientv3.Client) *limiter {
	if l, ok := limiters.Load(cli); ok {
		return l.(*limiter)
	}
	l, loaded := limiters.LoadOrStore(cli, &limiter{cli: cli, stub: newKVStub(cli), free: maxInFlight, maxOps: defaultMaxOps, bytes: maxBatchBytes})
	if !loaded {
		context.AfterFunc(cli.Ctx(), func() { limiters.Delete(cli) })
	}
	return l.(*limiter)
}

// do runs c, alone or in a batch, and returns its outcome; it returns
// ctx.Err() once c's ctx ends, whatever a batch it is in does.
func (l *limiter) do(c *call) error {
	if err := c.ctx.Err(); err != nil {
		return err
	}
	c.ready = make(chan struct{})
	l.mu.Lock()
	if l.free > 0 && l.queues[0].Len()+l.queues[1].Len() == 0 && l.held[c.group] == 0 {
		l.free--
		l.mu.Unlock()
		return l.sendAlone(c)
	}
	q := &l.queues[1]
	if c.urgent {
		q = &l.queues[0]
	}
	c.el = q.PushBack(c)
	l.dispatch()
	l.mu.Unlock()
	gone, also, stopGone := doneOf(c.ctx)
	ended := false
	select {
	case <-c.ready:
	case <-gone:
		ended = true
	case <-also:
		ended = true
	}
	stopGone()
	if ended {
		l.mu.Lock()
		switch c.state {
		case callQueued:
			q.Remove(c.el)
			c.el = nil
			l.dispatch() // a batch it held up may go now
			l.mu.Unlock()
			return c.ctx.Err()
		case callBatched:
			c.state = callGone
			if b := c.batch; b != nil {
				if b.write && c.group != "" {
					// The write may still be applied: the election's
					// next request (its release, most likely) must not
					// overtake it, or it would delete a key the write
					// then creates, which its Session renews for good.
					l.hold(c.group)
					b.held = append(b.held, c.group)
				}
				if b.live--; b.live == 0 {
					if b.write {
						// No one waits for it, but what it writes must
						// be answered before those elections go on: it
						// runs on, for a bounded time.
						time.AfterFunc(goneWriteWait, b.cancel)
					} else {
						b.cancel() // no one waits for the batch any longer
					}
				}
			}
			l.mu.Unlock()
			return c.ctx.Err()
		case callGranted:
			l.free++ // granted as ctx ended: pass it on
			l.dispatch()
			l.mu.Unlock()
			return c.ctx.Err()
		}
		l.mu.Unlock() // done meanwhile: its outcome stands
	}
	l.mu.Lock()
	st := c.state
	l.mu.Unlock()
	if st == callGranted {
		return l.sendAlone(c)
	}
	return c.err
}

// sendAlone sends c, which holds a slot of its own, and gives the slot
// back.
func (l *limiter) sendAlone(c *call) error {
	kept := false // a given-up write keeps its slot until it ends (sendWrite)
	defer func() {
		if kept {
			return
		}
		l.mu.Lock()
		l.free++
		l.dispatch()
		l.mu.Unlock()
	}()
	if err := c.ctx.Err(); err != nil {
		return err // granted as its ctx ended: not sent
	}
	if c.fn != nil {
		return c.fn()
	}
	if c.kind == kindWrite && c.group != "" {
		var err error
		kept, err = l.sendWrite(c)
		return err
	}
	ctx, done := requestCtx(c.ctx)
	defer done()
	c.header, c.resp, c.err = l.alone(ctx, c)
	return c.err
}

// afterFuncer is a context that runs a func when it is done, as a
// candidacy does (context.go).
type afterFuncer interface {
	AfterFunc(func()) (stop func() bool)
}

// requestCtx returns the context to send a request under ctx with, and
// what to call once it is answered. Under a candidacy's context
// (context.go) the request gets a context of its own, which the
// candidacy's halt ends: the client wraps the context it is given (its
// metadata) before gRPC derives the request's from it, and the context
// package would watch such a wrapper with a goroutine per request.
func requestCtx(ctx context.Context) (context.Context, func()) {
	a, ok := ctx.(afterFuncer)
	if !ok {
		return ctx, func() {}
	}
	base := context.Background()
	if s, ok := ctx.(*stopCtx); ok {
		base = context.WithoutCancel(s.Context) // the caller's Values (its end comes through AfterFunc)
	}
	rctx, cancel := context.WithCancel(base)
	stop := a.AfterFunc(cancel)
	return rctx, func() {
		stop()
		cancel()
	}
}

// doneOf returns a channel closed once ctx is done, and what to call once
// the channel is no longer waited on. Under a candidacy's context
// (context.go) the channel is the wait's own, closed by a halt hook that
// the call removes again: the candidacy's Done channel, made at its
// first call, would stay with the candidacy for its whole life, and in a
// burst every candidacy's create waits here.
//
// Under a queue call's context (stopCtx) the channel is the wait's own,
// closed by a hook of its stop, and also is the caller's context's Done:
// the wait selects on both, so that it puts nothing in the map of
// children of the caller's context, which every Campaign of a burst
// shares. also is nil otherwise.
func doneOf(ctx context.Context) (gone, also <-chan struct{}, stop func() bool) {
	if s, ok := ctx.(*stopCtx); ok {
		ch := make(chan struct{})
		f := func() { close(ch) }
		h, ok := s.addHook(f)
		if !ok {
			close(ch)
			return ch, nil, noStop
		}
		return ch, s.Context.Done(), func() bool { return s.dropHook(h) }
	}
	a, ok := ctx.(afterFuncer)
	if !ok {
		return ctx.Done(), nil, noStop
	}
	ch := make(chan struct{})
	return ch, nil, a.AfterFunc(func() { close(ch) })
}

// noStop is the stop of a wait with nothing to undo.
func noStop() bool { return false }

// sendWrite sends c, a write of an election, alone. Should c's ctx end
// first, it returns then (kept), and the request runs on to its answer
// (for goneWriteWait at most) with the election held, as a batch's
// writes do (see do), and with c's slot, which it gives back when it
// ends: a request canceled in flight may still be applied, after a
// release the caller sends next.
func (l *limiter) sendWrite(c *call) (kept bool, err error) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(c.ctx))
	stop := context.AfterFunc(l.cli.Ctx(), cancel) // a closed client ends it, whoever waits
	var (
		h    *pb.ResponseHeader
		r    *pb.ResponseOp
		rerr error
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		h, r, rerr = l.alone(ctx, c)
	}()
	gone, also, stopGone := doneOf(c.ctx)
	select {
	case <-done:
		stopGone()
		stop()
		cancel()
		c.header, c.resp, c.err = h, r, rerr
		return false, rerr
	case <-gone:
	case <-also:
	}
	stopGone()
	l.mu.Lock()
	l.hold(c.group)
	l.mu.Unlock()
	t := time.AfterFunc(goneWriteWait, cancel)
	go func() {
		<-done
		t.Stop()
		stop()
		cancel()
		l.mu.Lock()
		l.free++ // c's slot
		l.unhold(c.group)
		l.mu.Unlock()
	}()
	return true, c.ctx.Err()
}

// dispatch starts what waits, first come first served (urgent first), as
// far as the slots allow: the request at the head of the queue goes in a
// batch with the requests behind it that may go with it, while fewer
// than maxBatches batches are in flight; with none that may go with it,
// alone, within a slot of its own. A request that has some to go with
// waits for a batch to end rather than go alone: the member applies many
// in one request faster than one by one. Called with l.mu held.
func (l *limiter) dispatch() {
	for {
		q, el := l.next()
		if el == nil {
			return
		}
		c := el.Value.(*call)
		if c.batchy && l.nbatch >= maxBatches {
			return // it had some to go with when last looked at: it waits
		}
		if with := l.companions(c); len(with) > 0 {
			if l.nbatch >= maxBatches {
				c.batchy = true
				return
			}
			b := []*call{c}
			q.Remove(el)
			for _, o := range with {
				l.queues[0].Remove(o.el)
				l.queues[1].Remove(o.el)
				b = append(b, o)
			}
			for _, o := range b {
				o.el = nil
				o.state = callBatched
			}
			l.nbatch++
			go func() {
				l.sendBatch(b)
				l.mu.Lock()
				l.nbatch--
				l.dispatch()
				l.mu.Unlock()
			}()
			continue
		}
		if l.free == 0 {
			return
		}
		q.Remove(el)
		c.el = nil
		l.free--
		c.state = callGranted
		close(c.ready)
	}
}

// next returns the first queued request (urgent first, then first come
// first served) of an election not held (see do), and its queue; el is
// nil if there is none. Called with l.mu held.
func (l *limiter) next() (*list.List, *list.Element) {
	for i := range l.queues {
		q := &l.queues[i]
		for el := q.Front(); el != nil; el = el.Next() {
			if c := el.Value.(*call); l.held[c.group] == 0 || c.group == "" {
				return q, el
			}
		}
	}
	return nil, nil
}

// companions returns the requests queued behind c (urgent first, then
// first come first served) that may go in one batch with it: of c's kind,
// of elections not in it yet, within the bounds of a batch. It looks at a
// bounded number of queued requests. Called with l.mu held.
func (l *limiter) companions(c *call) []*call {
	if c.fn != nil || c.kind == kindAlone || l.queues[0].Len()+l.queues[1].Len() < 2 {
		return nil
	}
	var with []*call
	groups := map[string]bool{c.group: true}
	cost, size, looked := c.cost, c.size, 0
	for i := range l.queues {
		for el := l.queues[i].Front(); el != nil && 1+len(with) < maxBatch && looked < 4*maxBatch; el = el.Next() {
			looked++
			o := el.Value.(*call)
			if o != c && o.fn == nil && o.kind == c.kind && !groups[o.group] && l.held[o.group] == 0 && 2+len(with)+max(cost, o.cost) <= l.maxOps && size+o.size <= l.bytes {
				groups[o.group] = true
				cost, size = max(cost, o.cost), size+o.size
				with = append(with, o)
			}
		}
	}
	return with
}

// alone sends c by itself, under ctx.
func (l *limiter) alone(ctx context.Context, c *call) (*pb.ResponseHeader, *pb.ResponseOp, error) {
	if r := c.op.GetRequestRange(); r != nil {
		resp, err := l.stub.get(ctx, r)
		if err != nil {
			return nil, nil, err
		}
		return resp.Header, &pb.ResponseOp{Response: &pb.ResponseOp_ResponseRange{ResponseRange: resp}}, nil
	}
	t := c.op.GetRequestTxn()
	if t == nil {
		return nil, nil, errors.New("etcd election: a request is neither a range nor a transaction")
	}
	resp, err := l.stub.txn(ctx, t)
	if err != nil {
		return nil, nil, err
	}
	return resp.Header, &pb.ResponseOp{Response: &pb.ResponseOp_ResponseTxn{ResponseTxn: resp}}, nil
}

// sendBatch sends b's requests as one transaction and hands each its
// part of the outcome. The transaction's context ends when every
// request's has (or the client closes), not with any one of them.
func (l *limiter) sendBatch(b []*call) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	defer context.AfterFunc(l.cli.Ctx(), cancel)()
	// A call whose ctx ended before the batch went is left out, as it
	// would not have been sent alone.
	life := &batchLife{cancel: cancel, write: len(b) > 0 && b[0].kind == kindWrite}
	defer func() {
		l.mu.Lock()
		for _, g := range life.held {
			l.unhold(g) // answered: the election's next requests go
		}
		l.mu.Unlock()
	}()
	l.mu.Lock()
	sent := b[:0]
	for _, c := range b {
		if c.state == callBatched {
			c.batch = life
			life.live++
			sent = append(sent, c)
		}
	}
	l.mu.Unlock()
	b = sent
	if len(b) == 0 {
		return
	}
	ops := make([]*pb.RequestOp, len(b))
	cost := 0
	for i, c := range b {
		ops[i] = c.op
		cost = max(cost, c.cost)
	}
	resp, err := l.stub.txn(ctx, &pb.TxnRequest{Success: ops})
	if err == nil && len(resp.Responses) != len(b) {
		err = errors.New("etcd election: a batch's response holds a different number of responses than it had requests")
	}
	if err != nil && refusedWhole(l.cli, err) && l.cli.Ctx().Err() == nil {
		// Refused as a whole, nothing applied: perhaps for one request's
		// sake (its election's permission, its lease gone), perhaps for
		// the batch's own (more operations or bytes than the member
		// takes). Each goes alone, a few at a time.
		l.mu.Lock()
		switch {
		case errors.Is(err, rpctypes.ErrTooManyOps):
			l.maxOps = max(2, (len(b)+cost)/2)
		case errors.Is(err, rpctypes.ErrRequestTooLarge):
			l.bytes = max(1<<10, l.bytes/2)
		}
		l.mu.Unlock()
		var wg sync.WaitGroup
		slots := make(chan struct{}, maxFallback)
		for _, c := range b {
			slots <- struct{}{}
			wg.Go(func() {
				defer func() { <-slots }()
				// The batch's ctx, not the caller's: a caller that
				// gives up meanwhile is held as in the batch (do).
				h, r, err := l.alone(ctx, c)
				l.finish(c, h, r, err)
			})
		}
		wg.Wait()
		return
	}
	for i, c := range b {
		if err != nil {
			l.finish(c, nil, nil, err)
			continue
		}
		l.finish(c, resp.Header, resp.Responses[i], nil)
	}
}

// maxFallback is how many requests of a batch refused as a whole go alone
// at once.
const maxFallback = 8

// refusedWhole reports whether err, a batch's, says the member refused
// the transaction as a whole, applying none of it, for a reason that may
// be one request's alone: a final error (isFinal), or a lease one of its
// puts names that the member no longer knows (it checks every put's lease
// before it applies any).
func refusedWhole(cli *clientv3.Client, err error) bool {
	return isFinal(cli, err) || errors.Is(err, rpctypes.ErrLeaseNotFound)
}

// finish sets c's outcome and wakes it, unless its ctx ended.
func (l *limiter) finish(c *call, h *pb.ResponseHeader, r *pb.ResponseOp, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.state != callBatched {
		return
	}
	c.header, c.resp, c.err = h, r, err
	c.state = callDone
	close(c.ready)
}

// opCost is how much of a transaction's operation budget op takes when
// nested: etcd lets a transaction hold --max-txn-ops operations at each
// level (the largest of its Compares, Then and Else), less those of every
// level above it.
func opCost(op *pb.RequestOp) int {
	t := op.GetRequestTxn()
	if t == nil {
		return 0
	}
	n, below := max(len(t.Compare), len(t.Success), len(t.Failure)), 0
	for _, o := range t.Success {
		below = max(below, opCost(o))
	}
	for _, o := range t.Failure {
		below = max(below, opCost(o))
	}
	return n + below
}

// opKindOf tells which requests op may share a batch with.
func opKindOf(op *pb.RequestOp) opKind {
	switch r := op.Request.(type) {
	case *pb.RequestOp_RequestRange:
		if r.RequestRange.Serializable {
			return kindSerializable
		}
		return kindRead
	case *pb.RequestOp_RequestTxn:
		if slices.ContainsFunc(r.RequestTxn.Success, opWrites) || slices.ContainsFunc(r.RequestTxn.Failure, opWrites) {
			return kindWrite
		}
	}
	return kindAlone
}

// opWrites reports whether op, an operation of a transaction, is not a
// range (nested transactions count as writes, as they did for kindOf).
func opWrites(op *pb.RequestOp) bool {
	return op.GetRequestRange() == nil
}

// opSize is about the bytes op takes in a request.
func opSize(op *pb.RequestOp) int {
	switch r := op.Request.(type) {
	case *pb.RequestOp_RequestRange:
		return 16 + len(r.RequestRange.Key) + len(r.RequestRange.RangeEnd)
	case *pb.RequestOp_RequestPut:
		return 16 + len(r.RequestPut.Key) + len(r.RequestPut.Value)
	case *pb.RequestOp_RequestDeleteRange:
		return 16 + len(r.RequestDeleteRange.Key) + len(r.RequestDeleteRange.RangeEnd)
	case *pb.RequestOp_RequestTxn:
		n := 16
		for _, c := range r.RequestTxn.Compare {
			n += 24 + len(c.Key) + len(c.RangeEnd) + len(c.GetValue())
		}
		for _, o := range r.RequestTxn.Success {
			n += opSize(o)
		}
		for _, o := range r.RequestTxn.Failure {
			n += opSize(o)
		}
		return n
	}
	return 16
}

// limited runs request f within a slot of the client's limiter; f is sent
// alone.
func (e *Elector) limited(ctx context.Context, urgent bool, f func() error) error {
	return limitedOn(ctx, e.cli, urgent, f)
}

func limitedOn(ctx context.Context, cli *clientv3.Client, urgent bool, f func() error) error {
	return limiterOf(cli).do(&call{ctx: ctx, fn: f, urgent: urgent})
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

// request runs op (a Get or a Txn) of e's election through the client's
// limiter, in a batch when others wait.
func (e *Elector) request(ctx context.Context, urgent bool, op *pb.RequestOp) (*pb.ResponseHeader, *pb.ResponseOp, error) {
	c := &call{ctx: ctx, op: op, group: e.lay.name, kind: opKindOf(op), cost: opCost(op), size: opSize(op), urgent: urgent}
	if err := limiterOf(e.cli).do(c); err != nil {
		return nil, nil, err
	}
	return c.header, c.resp, nil
}

// commit commits t through the client's limiter.
func (e *Elector) commit(ctx context.Context, urgent bool, t *txn) (*clientv3.TxnResponse, error) {
	h, r, err := e.request(ctx, urgent, opTxn(t.cmps, t.then, t.els))
	if err != nil {
		return nil, err
	}
	tr := r.GetResponseTxn()
	if tr == nil {
		return nil, errors.New("etcd election: a transaction's response holds no transaction")
	}
	return &clientv3.TxnResponse{Header: h, Succeeded: tr.Succeeded, Responses: tr.Responses}, nil
}

// get reads key (with opts) through the client's limiter.
func (e *Elector) get(ctx context.Context, urgent bool, key string, opts ...opOption) (*clientv3.GetResponse, error) {
	h, r, err := e.request(ctx, urgent, opGet(key, opts...))
	if err != nil {
		return nil, err
	}
	rr := r.GetResponseRange()
	if rr == nil {
		return nil, errors.New("etcd election: a range's response holds no range")
	}
	return &clientv3.GetResponse{Header: h, Kvs: rr.Kvs, More: rr.More, Count: rr.Count}, nil
}
