package etcd

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
	"github.com/electkit/election/internal/lograte"
	"github.com/electkit/election/internal/record"
	"github.com/electkit/election/internal/skeleton"
	"github.com/electkit/election/internal/watch"
)

// ErrMalformedKey: a key under the election's prefix is not a candidate key
// of this package (see MalformedKeyError).
var ErrMalformedKey = errors.New("etcd election: malformed key")

// retryDelay is the pause before retrying a read, watch or keepalive that
// failed for a reason other than the lease being gone.
const retryDelay = 50 * time.Millisecond

// Elector is one candidate of an election on etcd. It implements
// election.Elector; see the package doc for the protocol.
type Elector struct {
	cli  *clientv3.Client
	lay  layout            // its prefix is the election's name and a slash (Name)
	o    *election.Options // shared with the other Electors of its Session made with the same Options (Session.shared)
	sess *Session          // the shared session, or nil: each candidacy has a lease of its own

	gate skeleton.Gate // one Campaign at a time; Close's signal (by value: one object less per Elector)
	// more: what an Elector needs only once it releases a candidacy,
	// retries outside one, works in the background or is observed; made
	// at its first use (extra): most Electors of a sharded service never
	// need it, and a process may hold thousands of Electors.
	more  atomic.Pointer[electorExtra]
	wg    sync.WaitGroup
	reads atomic.Int64  // queue reads and claims issued while waiting (P9: a handover costs O(1) of them)
	seen  atomic.Uint64 // the highest token seen lead: Leader and Observe never report a lower one

	mu     sync.Mutex
	closed bool
	cand   *candidacy
	queued *queueRun      // the queue call in progress, or nil: Close ends it
	terms  skeleton.Terms // Terms whose hooks may still run: Close waits for them
}

// electorExtra is the rarely needed part of an Elector (Elector.more).
type electorExtra struct {
	// bg: the context of the Elector's background work (releases, reads
	// that outlive a call), canceled by Close; made at its first use
	// (background).
	bg      atomic.Pointer[bgContext]
	bgEnded atomic.Bool                     // Close has canceled bg, or will cancel it as it is made
	retries atomic.Pointer[lograte.Limiter] // log lines of retried errors outside a candidacy (made at the first)

	// Guarded by Elector.mu:
	pending []*candidacy // ended, but their keys or lease not yet released
	// releasing is closed when the goroutine releasing the pending
	// candidacies for Campaign (releasePending) is done; nil when none runs.
	releasing chan struct{}
	obs       *watch.Feed // Observe: one watcher per Elector, made and started by the first stream
}

// extra returns e's rarely needed part, making it at the first call.
func (e *Elector) extra() *electorExtra {
	if x := e.more.Load(); x != nil {
		return x
	}
	e.more.CompareAndSwap(nil, new(electorExtra))
	return e.more.Load()
}

// pendingLocked returns the pending candidacies, without making e's
// extra part; e.mu is held.
func (e *Elector) pendingLocked() []*candidacy {
	if x := e.more.Load(); x != nil {
		return x.pending
	}
	return nil
}

// keepPending adds c to the pending candidacies, unless it is there or e
// is closed; e.mu is held.
func (e *Elector) keepPending(c *candidacy) {
	if e.closed {
		return
	}
	if x := e.extra(); !slices.Contains(x.pending, c) {
		x.pending = append(x.pending, c)
	}
}

// queueRun is a queue call in progress: Close ends its requests (cancel)
// and halts the candidacy it queues (c, once made), and waits for it.
type queueRun struct {
	cancel context.CancelFunc
	c      *candidacy
}

// candidacy is one queue key under one session, from Campaign until it is
// withdrawn.
//
// Ending one takes these steps, each named by one verb throughout:
//   - halt: stop its goroutines and cancel their requests;
//   - end: end its Term, if any, with a cause (P3: before any I/O), then halt;
//   - lose: the store took it (its lease or a key is gone): record why, then end;
//   - withdraw: it stops being the current candidacy: end, then releaseLater;
//   - release: give its keys (and a private lease) back to the store;
//     releaseLater tries briefly at once and then in the background,
//     releaseWithin is bounded by one lease window;
//   - forget: drop its ended Term from e.terms once the hooks are done.
type candidacy struct {
	s    *Session
	key  string  // the queue key
	rev  int64   // the queue key's create revision (0 until known)
	seq  int64   // the arrival its queue key is named for
	next *nextUp // while it leads: a candidate of an earlier version that reserved after it, as its watch saw, or nil (guarded by Elector.mu)
	// succ: while it leads, the queue key just below its own (its
	// successor, succ.go), or nil if unknown (guarded by Elector.mu).
	succ *mvccpb.KeyValue

	// The candidacy is the context of its goroutines' requests and waits
	// (ctx, context.go): done once it halts (withdrawn, lost, Close). It
	// is the candidacy's one signal of its end: a channel each for its
	// stop and its loss would be two more per candidacy, and a process
	// may hold thousands of them.
	stopOnce    sync.Once
	settledOnce atomic.Bool                     // settled is closed
	done        chan struct{}                   // Done's channel, made at the first call (guarded by hookMu)
	lostErr     error                           // why the session or a key is gone, once it is (set once, under Elector.mu, before the halt)
	watched     atomic.Bool                     // the candidacy's watch covers its keys without a gap (see wait.go)
	waiting     atomic.Bool                     // it waits on a live watch (follower.wait): its reads are done until the watch fires
	retries     atomic.Pointer[lograte.Limiter] // log lines of retried errors (made at the first)
	// settled is closed once lc is set, and when c halts or is lost:
	// what Campaign waits on (one channel rather than three, each a
	// parked select case for every waiting Campaign).
	settled chan struct{}
	lc      *backend.LeaseClock
	token   int64 // the leader key's create revision once leading (guarded by Elector.mu)

	// What halt calls (whenHalted, AfterFunc): the cancels of the
	// contexts derived from the candidacy (context.go) and the wakers of
	// a parked wait. A context's map of children would stay with each
	// candidacy for good, and a process may hold thousands of them.
	hookMu sync.Mutex
	hooks  []*func()
	halted bool // (guarded by hookMu)

	keyGone  bool // its keys were deleted; only a private lease is left to revoke (guarded by Elector.mu)
	retrying bool // releaseShared runs for it (guarded by Elector.mu)
	// headed: its Term began with c heading the queue (a claim, or a
	// release to it as the candidate next in line), so nothing of its
	// priority is queued above its key for as long as it leads, and its
	// release compares the priorities above alone (handOverOps). False
	// for a Term a Transfer or a preemption began (guarded by Elector.mu).
	headed bool
}

// whenHalted makes f be called when c halts, at once if it has; the
// returned func forgets f (if it has not been called).
func (c *candidacy) whenHalted(f func()) (forget func() bool) {
	stop, ok := c.addHook(f)
	if !ok {
		f()
	}
	return stop
}

// settle closes c.settled, once.
func (c *candidacy) settle() {
	if c.settledOnce.CompareAndSwap(false, true) {
		close(c.settled)
	}
}

func (c *candidacy) halt() {
	c.stopOnce.Do(func() {
		// Done first: Campaign, woken by settle, reads the halt from it.
		c.hookMu.Lock()
		c.halted = true
		if c.done != nil {
			close(c.done)
		}
		hooks := c.hooks
		c.hooks = nil
		c.hookMu.Unlock()
		c.settle()
		for _, h := range hooks {
			(*h)()
		}
		if c.s != nil {
			c.s.leave(c)
			if c.s.private {
				c.s.stop()
			}
		}
	})
}

var _ election.Elector = (*Elector)(nil)

// New returns a candidate of the election called name on the etcd cluster
// cli talks to. name is the key prefix of the election ("/services/scheduler",
// see backend.ValidateName for the rule every backend's names follow); the
// election's keys live under name + "/". Each candidacy of the Elector
// holds a lease of its own; NewWithSession shares one among many Electors.
// cli stays the caller's: Close does not close it. Bad options and a bad
// name are refused with an error wrapping election.ErrInvalidOption.
func New(cli *clientv3.Client, name string, opts ...election.Option) (*Elector, error) {
	if err := checkClient(cli); err != nil {
		return nil, err
	}
	return newElector(cli, nil, name, opts)
}

// checkClient refuses a client the package cannot talk through. An
// Elector sends its requests, watches and lease renewals on the client's
// gRPC connection (through the client's interceptors), not through its
// KV, Watcher and Lease: a client without a connection (clientv3's
// NewCtxClient, the embedded server's v3client) has nothing to send on,
// and a KV or Watcher that wraps clientv3's own (namespace.NewKV and
// NewWatcher, above all) would apply to some of what an Elector does and
// not to the rest: its candidates would write under the root while a
// Leader call, an Observe stream or a caller's fenced transaction looked
// under the namespace. Such a client is refused; the namespace belongs in
// the election's name.
func checkClient(cli *clientv3.Client) error {
	switch {
	case cli == nil:
		return &election.OptionError{Field: "client", Value: "nil", Reason: "an etcd client is required"}
	case cli.ActiveConnection() == nil:
		return &election.OptionError{Field: "client", Value: "a client without a gRPC connection", Reason: "an Elector talks to etcd on the client's connection: use clientv3.New (a client of clientv3.NewCtxClient or the embedded server's v3client has none)"}
	case !clientsOwn(cli.KV):
		return wrappedErr("KV", cli.KV)
	case !clientsOwn(cli.Watcher):
		return wrappedErr("Watcher", cli.Watcher)
	}
	return nil
}

// wrappedErr refuses a client whose field (KV or Watcher) holds v, not
// clientv3's own.
func wrappedErr(field string, v any) error {
	return &election.OptionError{Field: "client", Value: fmt.Sprintf("a client whose %s is %T, not clientv3's own", field, v),
		Reason: "an Elector sends its requests and watches on the client's connection, and a wrapper of the client's KV or Watcher (a namespace, ordering, a leasing or logging KV) would apply to some of them only: put a namespace in the election's name, and use gRPC interceptors (clientv3.Config.DialOptions) or a second client for the rest"}
}

// clientPkg is the package path of clientv3's own types.
var clientPkg = reflect.TypeFor[clientv3.Client]().PkgPath()

// clientsOwn reports whether v, a client's KV or Watcher, is clientv3's
// own implementation rather than a wrapper of it or nil.
func clientsOwn(v any) bool {
	t := reflect.TypeOf(v)
	if t == nil {
		return false
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.PkgPath() == clientPkg
}

// NewWithSession returns a candidate of the election called name whose
// candidacies all live on the shared session s (see Session): its Terms
// count from s's renewals and end when s is lost. It takes s's TTL; a
// WithTTL that differs from it is refused. Close leaves s open.
func NewWithSession(s *Session, name string, opts ...election.Option) (*Elector, error) {
	if s == nil {
		return nil, &election.OptionError{Field: "session", Value: "nil", Reason: "a Session is required"}
	}
	var given election.Options
	for _, opt := range opts {
		if opt != nil {
			opt(&given)
		}
	}
	if given.TTL != 0 && given.TTL != s.o.TTL {
		return nil, &election.OptionError{Field: "TTL", Value: given.TTL.String(), Reason: fmt.Sprintf("differs from the session's TTL %v: an Elector on a session takes the session's", s.o.TTL)}
	}
	return newElector(s.cli, s, name, append(opts, election.WithTTL(s.o.TTL)))
}

func newElector(cli *clientv3.Client, s *Session, name string, opts []election.Option) (*Elector, error) {
	if err := backend.ValidateName(name); err != nil {
		return nil, err
	}
	o, err := election.NewOptions(opts...)
	if err != nil {
		return nil, err
	}
	return &Elector{cli: cli, lay: newLayout(name), o: s.shared(o), sess: s}, nil
}

// bgContext is an Elector's background context and its cancel.
type bgContext struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// background returns the context of the Elector's background work,
// made at the first call; Close cancels it (stopBackground), whether
// it was made before or after.
func (e *Elector) background() context.Context {
	x := e.extra()
	if b := x.bg.Load(); b != nil {
		return b.ctx
	}
	ctx, cancel := context.WithCancel(context.Background())
	if !x.bg.CompareAndSwap(nil, &bgContext{ctx: ctx, cancel: cancel}) {
		cancel()
		return x.bg.Load().ctx
	}
	if x.bgEnded.Load() {
		cancel() // Close came first
	}
	return ctx
}

// stopBackground cancels the background context, now or as it is made.
func (e *Elector) stopBackground() {
	x := e.extra()
	x.bgEnded.Store(true)
	if b := x.bg.Load(); b != nil {
		b.cancel()
	}
}

// Name returns the election's name, the one given to New.
func (e *Elector) Name() string { return e.lay.name }

// ID returns the candidate's ID.
func (e *Elector) ID() string { return e.o.ID }

// Options returns the options the Elector was made with (election.Run
// reports its campaigns to their Events). Their Value is a copy.
func (e *Elector) Options() election.Options {
	o := *e.o
	o.Value = append([]byte(nil), o.Value...)
	return o
}

// Campaign implements election.Elector: it queues the candidate (a key
// under its lease), waits until it heads the queue and the leader key is
// free, creates the leader key, and returns a Term whose token is the
// leader key's create revision. If the candidate already leads, it
// returns the current Term.
func (e *Elector) Campaign(ctx context.Context) (*election.Term, error) {
	if err := e.gate.Enter(ctx); err != nil {
		return nil, err
	}
	defer e.gate.Leave()

	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, election.ErrClosed
	}
	old := e.cand
	if old != nil && old.lc != nil && old.lc.Term().Err() == nil {
		e.mu.Unlock()
		return old.lc.Term(), nil // already leading
	}
	e.mu.Unlock()
	if old != nil {
		e.withdraw(old, election.ErrResigned, false) // a Term that ended on its own, or a waiting key left behind
	}
	e.releasePending(ctx) // leases emptied by earlier Resigns, off their handover's path
	c, err := e.start(ctx)
	if err != nil {
		return nil, err
	}
	// Close ends the candidacy, which settles it: no case of its own
	// (each case is a parked goroutine's sudog, and a process may hold
	// thousands of waiting Campaign calls).
	settled := false
	select {
	case <-c.settled: // elected, stopped, lost or closed
		// settle closed it, once (settledOnce): no one reads it again,
		// and a leader keeps its candidacy for its whole Term.
		c.settled = nil
		settled = true
	case <-ctx.Done():
	}
	if settled {
		e.mu.Lock()
		lc := c.lc
		e.mu.Unlock()
		if lc != nil {
			if t := lc.Term(); t.Err() == nil {
				return t, nil
			}
		}
	}
	err = e.interrupted(ctx, c)
	if err == nil || errors.Is(err, election.ErrResigned) {
		// c stops (halts) when its Term ends by itself too, not only on
		// Resign: its guard or renewLoop withdraws it (a Term that
		// expired as it began, or soon after), a hand-over ends it. The
		// Term's own cause says why, then (Resign's is ErrResigned).
		e.mu.Lock()
		lc := c.lc
		e.mu.Unlock()
		if lc != nil {
			if t := lc.Term(); t.Err() != nil {
				err = fmt.Errorf("etcd election %s: the term of key %s (token %d) ended before Campaign returned it: %w", e.Name(), c.key, t.Token(), t.Err())
			}
		}
	}
	if err == nil {
		err = fmt.Errorf("%w: etcd election %s: the term of key %s ended as it began", election.ErrLeaseExpired, e.Name(), c.key)
	}
	e.withdraw(c, election.ErrResigned, true) // a quitting waiter: its lease too, nothing hands over
	return nil, err
}

// errLeaseLapsed: a candidacy's own lease was gone when its queue key was
// created (etcd let it lapse: a renewal came too late); the candidacy
// starts again with a new one.
var errLeaseLapsed = errors.New("etcd election: the candidacy's lease lapsed before its key was created")

// start queues the candidate (queue), again with a new lease if its own
// lapsed before its key was created, after a pause that grows with each
// try.
func (e *Elector) start(ctx context.Context) (*candidacy, error) {
	b := retryBackoff(maxRetryWait)
	for {
		c, err := e.queue(ctx, b)
		if err != nil && e.isClosed() {
			return nil, election.ErrClosed
		}
		if !errors.Is(err, errLeaseLapsed) {
			return c, err
		}
		e.retryLog(nil, "creating the queue key", err)
		if err := (skeleton.Waiting{Closing: e.gate.Closing()}).Pause(ctx, b.NextBackOff()); err != nil {
			return nil, err
		}
	}
}

// queue queues the candidate: a lease (its own, or the shared session's),
// then, in one transaction, its queue key and the first look at the queue
// around it; then it starts the candidacy's goroutine (follow, wait.go). Errors
// that may pass are retried, after the pauses of b, until ctx ends; on a
// final one, or ctx's end, it releases what it made. A shared session
// whose lease etcd no longer knows ends (ErrSessionLost); an own lease
// that lapsed ends the try with errLeaseLapsed.
func (e *Elector) queue(ctx context.Context, b backoff.BackOff) (*candidacy, error) {
	if e.cli.Ctx().Err() != nil {
		return nil, e.storeErr(ctx, "granting a lease", e.cli.Ctx().Err())
	}
	// queue is one of the Elector's goroutines while it runs: Close waits
	// for it (a lease granted as Close begins is closed, not left with
	// its renewals), and ends it (queueRun) if it has not ended on its
	// own. Not through an AfterFunc of the background context: the map
	// of children that gives that context stays with it for good, and a
	// process may hold thousands of Electors; nor through a
	// context.WithCancel of ctx, for the same map of ctx's (stopCtx). A
	// closed client fails the requests at once, which ends it too.
	qctx := newStopCtx(ctx)
	defer qctx.stop()
	ctx, cancel := context.Context(qctx), qctx.stop
	run := &queueRun{cancel: cancel}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, election.ErrClosed
	}
	e.wg.Add(1)
	e.queued = run
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		if e.queued == run {
			e.queued = nil
		}
		e.mu.Unlock()
		e.wg.Done()
	}()
	retry := func(what string, err error) error {
		if ctx.Err() != nil || e.isFinal(err) || errors.Is(err, election.ErrSessionLost) {
			if errors.Is(err, election.ErrSessionLost) {
				return err
			}
			return e.storeErr(ctx, what, err)
		}
		e.retryLog(nil, what, err)
		if err := (skeleton.Waiting{Closing: e.gate.Closing()}).Pause(ctx, b.NextBackOff()); err != nil {
			return err
		}
		return nil
	}
	// The arrival order: the store's revision now (a candidate queued
	// before this read began sorts ahead), read with the leadership keys:
	// whether one exists, and a reservation of lower priority than c's
	// (outranked), which c's create deletes: c sorts ahead of the one who
	// reserved, and the highest priority leads next. With a private lease
	// the read runs beside the grant.
	var outranked *mvccpb.KeyValue
	readArrival := func() (int64, bool, *mvccpb.KeyValue, error) {
		resp, err := e.get(ctx, false, e.lay.leader(), withRange(e.lay.leadEnd()), withLimit(2))
		if err != nil {
			return 0, false, nil, err
		}
		var res *mvccpb.KeyValue
		if len(resp.Kvs) > 1 && e.outranks(resp.Kvs[1]) {
			res = resp.Kvs[1]
		}
		return resp.Header.Revision, resp.Count > 0, res, nil
	}
	s, seq, led := e.sess, int64(0), false
	if s == nil {
		type arrival struct {
			rev int64
			led bool
			res *mvccpb.KeyValue
			err error
		}
		read := make(chan arrival, 1)
		go func() {
			rev, led, res, err := readArrival()
			read <- arrival{rev, led, res, err}
		}()
		for s == nil {
			ps, rev, err := grantSession(ctx, e.background(), e.cli, *e.o, true, &e.wg)
			if err == nil {
				s, seq = ps, rev
				break
			}
			if err := retry("granting a lease", err); err != nil {
				return nil, err
			}
		}
		// The grant's revision is an arrival too: without the read (it
		// failed), the create carries a claim, as if no leader were known.
		if a := <-read; a.err == nil {
			seq, led, outranked = max(seq, a.rev), a.led, a.res
		}
	}
	for seq == 0 {
		rev, l, res, err := readArrival()
		if err == nil {
			seq, led, outranked = rev, l, res
			break
		}
		if err := retry("reading the store's revision", err); err != nil {
			return nil, err
		}
	}
	nonce := s.nonce.Add(1)
	c := &candidacy{s: s, key: e.lay.queueKey(e.o.Priority, seq, s.lease, nonce), settled: make(chan struct{})}
	// Close halts the candidacy being queued (queueRun) as it ends the
	// current one.
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		c.halt()
		return nil, election.ErrClosed
	}
	run.c = c
	e.mu.Unlock()
	if err := s.join(c, e); err != nil {
		c.halt()
		return nil, err
	}
	// The candidacy's end (its session lost, Close) ends the create and
	// its wait for a slot of the limiter.
	defer c.whenHalted(cancel)()
	// The create reads the first window above the key only: in a queue
	// filling up it holds the key just ahead; otherwise the candidacy's
	// goroutine reads on (a read-only look) rather than carry every
	// window in a write, which etcd logs whole.
	//
	// With no leader key and nothing queued above the new key (a sharded
	// service's elections, where the first candidate finds the election
	// empty), the create also creates the leader key: a claim as the
	// follower makes it (claim), checked window by window, folded into
	// the create so that the first candidate leads in one write. It is
	// tried only while the session's last confirmed renewal is fresh
	// enough for a claim (the Term counts from that renewal's send time),
	// and only if the arrival read found no leader key: the claim's
	// windows are some 4 KB that every write carries into etcd's log,
	// which a queue filling up behind a leader does not need. If that
	// leader goes before the create, the candidacy's goroutine claims.
	//
	// A leadership key whose candidate may sort behind the new key fails
	// the create (the arrival is read again): a leader whose own arrival
	// read came at the same revision or later, and whose create took the
	// leader key, would sort behind the new key, and the waiter just
	// behind the leader's key would then be woken by its going as well as
	// the head. A leadership key is named for a revision at or after its
	// candidate's arrival (a claim's is its arrival), so the Compares are
	// on names: none named for a later revision than c's arrival, nor for
	// the same one with a lease and nonce that sort at or below c's. A
	// burst's first candidate of an election claims while the others
	// create, most of them after reading the same revision: the others'
	// creates stand whenever the leader sorts ahead (before, every create
	// that came after a claim made since its arrival read was made again:
	// 22,000 of 30,000 in a burst of 10,000 elections × 3).
	//
	// A reservation of lower priority than c's made after the arrival
	// read, which c's create did not delete, is deleted once c's key is
	// there (the near read shows it): c is next, as if it had queued
	// first.
	sent, lead := s.fresh(e.o.Window())
	lead = lead && !led
	var from, lkey string
	var then []*pb.RequestOp
	arrive := func(at int64) {
		seq = at
		c.key = e.lay.queueKey(e.o.Priority, seq, s.lease, nonce)
		c.seq = seq
		lkey = e.lay.leaderKey(seq, c.key)
		from = past(c.key)
		then = append([]*pb.RequestOp{opPut(c.key, string(record.Encode(*e.o, e.o.Value)), withLease(s.lease))}, e.createOps(from)...)
		if r := outranked; r != nil {
			then = append(then, opTxn([]*pb.Compare{cmpMod(string(r.Key), r.ModRevision)},
				[]*pb.RequestOp{opDelete(string(r.Key))}, nil))
		}
		if lead {
			put := e.leaderPut(c)
			then = append(then, opTxn(
				[]*pb.Compare{e.lay.noLeader(), cmpCreate(e.lay.transfer(), 0)},
				[]*pb.RequestOp{e.lay.firstAndRest(from, put)},
				nil))
		}
	}
	arrive(seq)
	var v *view
	token := int64(0)
	// unsure: a try of this key failed with no reply, so it may have been
	// applied. blind: c arrived again at a refused create's revision,
	// without reading the leadership keys (a reservation it outranks is
	// deleted once its key is there).
	unsure, blind := false, false
	for {
		resp, err := e.commit(ctx, false, newTxn().
			If(cmpCreate(c.key, 0),
				emptyIn(e.lay.leaderAt(seq), after(lkey)), emptyIn(e.lay.leaderAt(seq+1), e.lay.leadEnd())).
			Then(then...))
		if err != nil {
			unsure = true
		}
		if err == nil && !resp.Succeeded && !unsure {
			// Refused, and no try of this key can have made it: a
			// leadership key named for c's arrival or later is there
			// (its candidate may sort behind c's key). The refusal's
			// revision comes after that key's create, so c arrives
			// again at it, as after a read of the leadership keys, and
			// spares that read: in a burst, a third of the creates
			// meet a claim made since their arrival read.
			lead, outranked, blind = false, nil, true
			arrive(resp.Header.Revision)
			continue
		}
		if err == nil && resp.Succeeded {
			c.rev = resp.Header.Revision
			own := &mvccpb.KeyValue{Key: []byte(c.key), CreateRevision: c.rev, ModRevision: c.rev, Version: 1, Lease: int64(s.lease)}
			v = e.createView(resp.Header.Revision, resp.Responses[1:], from, own)
			if lead {
				if t := resp.Responses[len(resp.Responses)-1].GetResponseTxn(); t != nil && t.Succeeded && len(t.Responses) == 1 {
					if _, claimed, _ := walkNested(t.Responses[0]); claimed {
						token = resp.Header.Revision
					}
				}
			}
			break
		}
		if err == nil {
			// Refused: a read says why (a create's operations are in
			// etcd's log, and most creates stand).
			resp, err = e.commit(ctx, false, newTxn().Then(e.createElseOps(c)...))
		}
		if err == nil {
			v = &view{rev: resp.Header.Revision}
			if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
				v.own = kvs[0]
			}
			v.leader, v.second = leaders(resp.Responses[1])
			behind := func(kv *mvccpb.KeyValue) bool {
				n := string(kv.Key)
				return n >= e.lay.leaderAt(seq) && n <= lkey || n >= e.lay.leaderAt(seq+1)
			}
			if v.own == nil && (v.leader != nil && behind(v.leader) || v.second != nil && behind(v.second)) {
				lead, outranked = false, nil
				if v.second != nil && e.outranks(v.second) {
					outranked = v.second
				}
				arrive(resp.Header.Revision) // a leader since the arrival read: arrive again
				unsure = false               // a new key, which no try has sent
				continue
			}
			// The key exists: an earlier try of this create whose reply
			// was lost, or not ours.
			if v.own == nil || v.own.Lease != int64(s.lease) {
				what := "was refused, and the key is not there"
				if v.own != nil {
					what = "found the key there already: it " + leaseMoved(v.own, s.lease)
				}
				err = fmt.Errorf("creating key %s %s", c.key, what)
				v = nil
			} else {
				// An earlier try's key: c's goroutine reads the queue.
				c.rev, v = v.own.CreateRevision, nil
				break
			}
		}
		lapsed := errors.Is(err, rpctypes.ErrLeaseNotFound)
		if lapsed && !s.private {
			// etcd no longer knows the session's lease: every candidacy
			// on it is lost, not only this one.
			s.end(fmt.Errorf("%w: etcd session lease %016x expired or was revoked", election.ErrSessionLost, uint64(s.lease)))
		}
		if lapsed && s.private {
			err = fmt.Errorf("%w: %w", errLeaseLapsed, err)
		} else {
			err = retry("creating key "+c.key, err)
		}
		if err != nil {
			c.halt()
			e.releaseLater(c, true) // the create may have been applied and its reply lost
			switch {
			case e.isClosed():
				return nil, election.ErrClosed
			case lapsed && s.private:
				return nil, err
			case e.sess != nil && s.Err() != nil:
				return nil, s.ended()
			}
			if lerr := e.lostErr(c); lerr != nil {
				return nil, lerr
			}
			return nil, err
		}
	}
	if r := secondOf(v); r != nil && (r.CreateRevision > seq || blind) && e.outranks(r) {
		// A reservation of lower priority made after the arrival read
		// (or one an arrival without a read did not see): c goes first.
		_, err := e.commit(ctx, false, newTxn().
			If(cmpMod(string(r.Key), r.ModRevision)).
			Then(opDelete(string(r.Key))))
		if err != nil {
			e.retryLog(c, "deleting a reservation of lower priority than "+c.key, err)
		}
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		c.halt()
		e.releaseWithin(c, true)
		return nil, election.ErrClosed
	}
	// Nothing in the windows the create read: with a leader, the
	// goroutine reads on for the key ahead; with none (most likely an
	// empty election) it tries to lead at once, and the claim checks
	// every window.
	if v != nil && len(v.above) == 0 && !v.last && v.leader != nil {
		v = nil
	}
	e.cand = c
	e.wg.Add(1)
	go e.follow(c, v, token, sent)
	e.mu.Unlock()
	return c, nil
}

// secondOf is v's second leadership key, or nil.
func secondOf(v *view) *mvccpb.KeyValue {
	if v == nil {
		return nil
	}
	return v.second
}

// nextUp is a candidate of an earlier version of this package that
// reserved the leadership after a leader's: its queue key and lease, and
// its leadership key.
type nextUp struct {
	key   string
	lease int64
	lkey  string
}

// reserved is c.next, or the zero nextUp. Called with Elector.mu held.
func (c *candidacy) reserved() nextUp {
	if c.next == nil {
		return nextUp{}
	}
	return *c.next
}

// noteNext follows, from the leader c's watch, the reservation after c's
// leadership key: its release touches the reserving candidate's queue key
// (see release).
func (e *Elector) noteNext(c *candidacy, ev *clientv3.Event) {
	kv := ev.Kv
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case ev.Type == clientv3.EventTypeDelete && c.next != nil && string(kv.Key) == c.next.lkey:
		c.next = nil
	case ev.Type == clientv3.EventTypePut && kv.CreateRevision == kv.ModRevision && kv.Lease != 0:
		if q := record.Key(kv.Value); q != "" {
			if lease, err := e.lay.queueLease(q); err == nil && lease == kv.Lease {
				c.next = &nextUp{key: q, lease: kv.Lease, lkey: string(kv.Key)}
			}
		}
	}
}

// outranks reports whether kv, a reservation of the leadership (the
// second leadership key), is a candidate's of lower priority than this
// Elector's.
func (e *Elector) outranks(kv *mvccpb.KeyValue) bool {
	ld, err := record.Decode(kv.Value)
	return err == nil && ld.Priority < e.o.Priority
}

// interrupted reports why waiting must stop, or nil.
func (e *Elector) interrupted(ctx context.Context, c *candidacy) error {
	return e.waiting(c).Interrupted(ctx)
}

// waiting is what ends c's waits besides ctx.
func (e *Elector) waiting(c *candidacy) skeleton.Waiting {
	return skeleton.Waiting{Closing: e.gate.Closing(), Stop: c.Done(), LostErr: func() error { return e.lostErr(c) }}
}

// lostErr is why the store took c (its session or a key is gone), or nil.
func (e *Elector) lostErr(c *candidacy) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return c.lostErr
}

// forget drops c's Term, if it had one, from e.terms once its hooks are
// done (skeleton.Terms.Forget). c is no longer the current candidacy, so
// its Term has ended.
func (e *Elector) forget(c *candidacy) {
	e.mu.Lock()
	lc := c.lc
	e.mu.Unlock()
	e.terms.Forget(lc)
}

// lose records that c's session or one of its keys is gone and ends its
// Term, if any. It reads c.lc under the lock that elect installs it under,
// so a Term made while the loss was found ends too; elect refuses to make
// one after this. It reports whether this call was the first: only the
// first cause counts.
func (e *Elector) lose(c *candidacy, err error) bool {
	if err == nil {
		err = election.ErrSessionLost // not reached: every caller names a cause
	}
	e.mu.Lock()
	if c.lostErr != nil {
		e.mu.Unlock()
		return false
	}
	c.lostErr = err
	c.settle()
	lc := c.lc
	mine := e.cand == c
	if mine {
		e.cand = nil
		e.keepPending(c) // what is left of it goes with the next Campaign, Resign or Close
	}
	e.mu.Unlock()
	if lc != nil {
		lc.End(err)
	}
	c.halt()
	return true
}

// withdraw ends c if it is still the current candidacy: its Term first (P3:
// before any I/O), then its goroutines, then its keys, and with lease a
// private lease (without, the emptied lease is revoked later, off a
// handover's path: see release).
func (e *Elector) withdraw(c *candidacy, cause error, lease bool) {
	e.mu.Lock()
	if e.cand != c {
		e.mu.Unlock()
		return
	}
	e.cand = nil
	e.mu.Unlock()
	e.end(c, cause)
	e.releaseLater(c, lease)
}

// releaseWait bounds how long Campaign waits for its own release when it
// fails or its ctx ends: long enough for a store that answers (a delete
// takes about a millisecond), short enough to return within 100 ms of ctx
// when the store does not.
const releaseWait = 40 * time.Millisecond

// releaseLater releases c (see release): at once for up to releaseWait, so
// that a store that answers has the keys gone when Campaign returns; then,
// if that did not do, off the caller's path, so that Campaign returns as
// soon as its ctx ends whatever the store does: in a goroutine that Close
// waits for, bounded by one lease window — past that a private lease
// expires on its own, since nothing renews it. c stays pending until then,
// so Close releases it too. Once the Elector is closed it releases at once
// instead, bounded the same way.
func (e *Elector) releaseLater(c *candidacy, lease bool) {
	ctx, cancel := context.WithTimeout(e.background(), releaseWait)
	err := e.release(ctx, c, lease)
	cancel()
	if err == nil {
		return
	}
	e.mu.Lock()
	closed := e.closed
	if !closed {
		e.wg.Add(1)
	}
	e.mu.Unlock()
	if closed {
		_ = e.releaseWithin(c, lease)
		return
	}
	go func() {
		defer e.wg.Done()
		ctx, cancel := context.WithTimeout(e.background(), e.o.Window())
		defer cancel()
		_ = e.release(ctx, c, lease) // logged; retried by the next Campaign, Resign or Close
	}()
}

// end ends c's Term with cause and stops its goroutines.
func (e *Elector) end(c *candidacy, cause error) {
	e.mu.Lock()
	lc := c.lc
	e.mu.Unlock()
	skeleton.EndTerm(lc, cause)
	c.halt()
}

// releaseWithin is release with a timeout of one lease window, not tied to
// the Elector's background context: Campaign releases this way when it
// loses a race with Close, after Close has stopped that context.
func (e *Elector) releaseWithin(c *candidacy, lease bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), e.o.Window())
	defer cancel()
	return e.release(ctx, c, lease)
}

// releaseTxn builds the transaction that deletes c's keys (see release),
// with the hand-over to c's successor as c knows it now. Resign builds it
// before it ends the Term, whose end wakes the candidacy's goroutines,
// and sends it after: the next candidate waits for it.
func (e *Elector) releaseTxn(c *candidacy) *txn {
	e.mu.Lock()
	token, next, succ, headed := c.token, c.reserved(), c.succ, c.headed
	e.mu.Unlock()
	lkey := e.lkeyOf(c)
	qcmp := cmpCreate(c.key, c.rev)
	if c.rev == 0 {
		qcmp = cmpLease(c.key, int64(c.s.lease)) // the create's reply was lost
	}
	var lcmp *pb.Compare
	if token != 0 {
		lcmp = cmpCreate(lkey, token)
	} else {
		lcmp = cmpValue(lkey, e.leaderRec(c)) // a claim or reservation whose reply was lost, or a reservation
	}
	delQ := opTxn([]*pb.Compare{qcmp}, []*pb.RequestOp{opDelete(c.key)}, nil)
	// A hand-over to c that c did not take goes with it.
	delT := opTxn([]*pb.Compare{cmpValue(e.lay.transfer(), c.key)}, []*pb.RequestOp{opDelete(e.lay.transfer())}, nil)
	// c's hand-over mark, if a hand-over made one (markKey), goes
	// with its queue key: its name is c's.
	delM := opDelete(e.lay.markKey(c.key))
	then := []*pb.RequestOp{opDelete(lkey), delQ, delM, delT}
	orElse := []*pb.RequestOp{delQ, delM, delT}
	switch {
	case token != 0 && next.key != "":
		// A candidate of an earlier version of this package
		// reserved after c: it leads on this release's event;
		// touching its queue key (put again, its value and lease
		// kept) wakes the one candidate just behind it, which is
		// next in line now and reserves in turn.
		then = append(then, opTxn([]*pb.Compare{cmpLease(next.key, next.lease)},
			[]*pb.RequestOp{opPut(next.key, "", withIgnoreValue(), withIgnoreLease())}, nil))
	case token != 0 && succ != nil:
		// c's successor leads on this release's event (succ.go).
		if op, ok := e.handOverOps(c, lkey, token, headed, succ); ok {
			then = append(then, op)
		}
	}
	return newTxn().If(lcmp).Then(then...).Else(orElse...)
}

// release gives up c's keys and, with lease, its private lease, within
// ctx. c must be halted, or (Resign) its Term ended: its guard then acts
// on nothing more, and it halts once its keys are released.
//
// The keys go first, in one transaction: the leader key if c holds it
// (by its create revision once c leads; before, by the exact value c
// would have created it with, so that a claim whose reply was lost is
// undone too) and the queue key (by its create revision, or, if the
// create's reply was lost, by its lease). That deletion is what the next
// candidate's watch waits for, and etcd takes about twice as long to
// revoke a lease as to delete a key (BENCHMARKS.md, "Resign → the waiting
// candidate's Campaign returns"): so a private lease, emptied, which
// nothing renews any more, is left in the pending list when lease is
// false, and revoked by the next Campaign, Resign or Close — or it expires
// on its own after the TTL. A shared session's lease is never revoked
// here: Session.Close does.
//
// A lease etcd no longer knows counts as revoked. On failure c stays in
// the pending list, to be retried; meanwhile a private lease expires on
// its own after the TTL, since nothing renews it, and takes the keys with
// it.
func (e *Elector) release(ctx context.Context, c *candidacy, lease bool) error {
	return e.releaseWith(ctx, c, lease, nil)
}

// releaseWith is release, with the transaction that deletes c's keys
// built already (releaseTxn) unless t is nil.
func (e *Elector) releaseWith(ctx context.Context, c *candidacy, lease bool, t *txn) error {
	e.mu.Lock()
	deleteKeys := !c.keyGone
	e.mu.Unlock()
	lease = lease && c.s.private
	var err error
	what := "deleting key " + c.key
	if e.cli.Ctx().Err() != nil {
		// A closed client's requests wait out their ctx; nothing can be
		// released through it: the lease expires on its own.
		err = fmt.Errorf("etcd election: %s: the etcd client was closed (the lease expires on its own within its TTL)", what)
		e.mu.Lock()
		e.keepPending(c)
		e.mu.Unlock()
		return err
	}
	if deleteKeys {
		if t == nil {
			t = e.releaseTxn(c)
		}
		_, err = e.commit(ctx, true, t)
		if err == nil {
			e.mu.Lock()
			c.keyGone = true
			e.mu.Unlock()
		}
	}
	if err == nil && lease {
		what = fmt.Sprintf("revoking lease %016x of key %s", uint64(c.s.lease), c.key)
		err = e.limited(ctx, true, func() error {
			_, err := e.cli.Revoke(ctx, c.s.lease)
			return err
		})
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			err = nil
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	i := slices.Index(e.pendingLocked(), c)
	switch {
	case err == nil && (lease || !c.s.private):
		if i >= 0 {
			x := e.extra()
			x.pending = slices.Delete(x.pending, i, i+1)
		}
		return nil
	case i < 0:
		x := e.extra()
		x.pending = append(x.pending, c)
	}
	if err == nil {
		return nil
	}
	if !c.s.private {
		// A shared session keeps renewing the lease: nothing expires the
		// keys but a delete, so it is retried until it is done.
		if !c.retrying && !e.closed {
			c.retrying = true
			e.wg.Add(1)
			go e.releaseShared(c)
		}
		e.o.Logger.Warn("etcd election: releasing a candidacy failed; it will be retried", "key", c.key, "lease", fmt.Sprintf("%016x", uint64(c.s.lease)), "err", err)
		return fmt.Errorf("etcd election: %s: %w (retried in the background; the keys go at the latest with the session)", what, err)
	}
	e.o.Logger.Warn("etcd election: releasing a candidacy failed; it will be retried, and its lease expires on its own", "key", c.key, "lease", fmt.Sprintf("%016x", uint64(c.s.lease)), "err", err)
	return fmt.Errorf("etcd election: %s: %w (the lease expires on its own within its TTL)", what, err)
}

// releaseShared retries releasing c, a candidacy of a shared session,
// until it is done, the session ends (its keys go with its lease) or the
// Elector closes (Close releases it once more).
func (e *Elector) releaseShared(c *candidacy) {
	defer e.wg.Done()
	b := backoff.NewExponentialBackOff(backoff.WithInitialInterval(retryDelay), backoff.WithMaxInterval(time.Second), backoff.WithMaxElapsedTime(0))
	for {
		select {
		case <-e.background().Done():
			return
		case <-c.s.Done():
			return
		case <-time.After(b.NextBackOff()):
		}
		e.mu.Lock()
		done := c.keyGone || !slices.Contains(e.pendingLocked(), c)
		e.mu.Unlock()
		if done {
			return
		}
		ctx, cancel := context.WithTimeout(e.background(), e.o.Window())
		err := e.release(ctx, c, false)
		cancel()
		if err == nil {
			return
		}
	}
}

// releasePending revokes the private leases of ended candidacies (and
// deletes their keys if that failed before), ignoring failures: they are
// logged and retried later. It waits until that is done or ctx ends; the
// requests themselves run on a goroutine of the Elector's within a lease
// window, so that the end of ctx (a Campaign given up as it began, Run
// stopping) does not cut a revoke short, for the client to warn about and
// the next call to send again.
func (e *Elector) releasePending(ctx context.Context) {
	e.mu.Lock()
	var done chan struct{}
	if x := e.more.Load(); x != nil {
		done = x.releasing
	}
	if done == nil && len(e.pendingLocked()) > 0 && !e.closed {
		x := e.extra()
		pending := append([]*candidacy(nil), x.pending...)
		done = make(chan struct{})
		x.releasing = done
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			rctx, cancel := context.WithTimeout(e.background(), e.o.Window())
			for _, p := range pending {
				if rctx.Err() != nil {
					break
				}
				_ = e.release(rctx, p, true)
			}
			cancel()
			e.mu.Lock()
			x.releasing = nil
			e.mu.Unlock()
			close(done)
		}()
	}
	e.mu.Unlock()
	if done == nil {
		return
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// Resign implements election.Elector: it ends the Term (if leading) before
// any I/O, stops the renewals and deletes the keys, so the next candidate
// leads at once; a private lease, emptied, is revoked later, off the
// handover's path, and with it the leases of earlier candidacies. It is idempotent. If a request fails (its reply lost, etcd
// unreachable), Resign returns the error and keeps what is left to release
// for the next Campaign, Resign or Close; a private lease expires on its
// own.
func (e *Elector) Resign(ctx context.Context) error {
	if err := skeleton.CheckContext(ctx); err != nil {
		return err
	}
	e.awaitSucc(ctx) // a leader that reads its successor still hands over to it
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return election.ErrClosed
	}
	c := e.cand
	e.cand = nil
	if c != nil {
		e.keepPending(c)
	}
	// c first: its keys' deletion is what the next candidate waits for
	// (the leases of earlier candidacies, left to the next call, follow).
	pending := make([]*candidacy, 0, len(e.pendingLocked())+1)
	if c != nil {
		pending = append(pending, c)
	}
	for _, p := range e.pendingLocked() {
		if p != c {
			pending = append(pending, p)
		}
	}
	e.mu.Unlock()
	// Ending the Term cancels its Context and every ctx derived from it,
	// such as OnElected's under election.Run, which may be ctx: the
	// requests go on for up to a lease window past it.
	rctx, cancel := backend.ResignContext(ctx, e.o.Window())
	defer cancel()
	var first *txn
	if c != nil {
		first = e.releaseTxn(c) // before the Term's end wakes c's goroutines
		e.mu.Lock()
		lc := c.lc
		e.mu.Unlock()
		if lc == nil {
			e.end(c, election.ErrResigned)
		} else {
			// A leader's Term ends before anything is sent (P3); its
			// candidacy halts once its keys' release has been answered,
			// so that waking its goroutines (its guard closes its watch,
			// on the client's connection) does not hold up the release
			// the next candidate waits for. Its guard stops at its next
			// wake-up, the release's own events most likely, without
			// acting on them: the Term has ended.
			skeleton.EndTerm(lc, election.ErrResigned)
			defer c.halt()
		}
	}
	var errs []error
	for _, p := range pending {
		// The keys of the candidacy just ended go first, alone (see
		// release); the leases of earlier ones are revoked.
		var t *txn
		if p == c {
			t = first
		}
		if err := e.releaseWith(rctx, p, p != c, t); err != nil {
			if cause := context.Cause(rctx); cause != nil {
				if cause == ctx.Err() {
					return cause // ctx's own end, as is
				}
				return errors.Join(append(errs, err)...)
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Close implements election.Elector: it resigns (with a timeout of one
// lease window; a lease it cannot revoke expires on its own), stops every
// goroutine it started and waits for the renewal hooks. It closes neither
// the etcd client nor a shared session: they are the caller's.
func (e *Elector) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	e.gate.Close()
	c := e.cand
	e.cand = nil
	var releasing chan struct{}
	if c != nil {
		if x := e.extra(); !slices.Contains(x.pending, c) {
			x.pending = append(x.pending, c) // e.closed is set: keepPending would not
		}
	}
	if x := e.more.Load(); x != nil {
		releasing = x.releasing
	}
	run := e.queued
	var queuing *candidacy
	if run != nil {
		queuing = run.c
	}
	e.mu.Unlock()
	if queuing != nil {
		queuing.halt() // its create ends; queue releases what it made
	}
	if run != nil {
		run.cancel()
	}
	if c != nil {
		e.end(c, election.ErrClosed)
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.o.Window())
	if releasing != nil {
		select { // what it releases is not sent again
		case <-releasing:
		case <-ctx.Done():
		}
	}
	e.mu.Lock()
	pending := append([]*candidacy(nil), e.pendingLocked()...)
	e.mu.Unlock()
	if e.cli.Ctx().Err() == nil {
		for _, p := range pending {
			_ = e.release(ctx, p, true) // logged; the lease expires on its own
		}
	}
	cancel()
	e.stopBackground()
	e.wg.Wait()
	e.terms.EndAll(election.ErrClosed)
	return nil
}

// storeErr wraps a failed request: ctx's own error as is, the client's
// closing as session loss, anything else with what was being done.
func (e *Elector) storeErr(ctx context.Context, what string, err error) error {
	if e.cli.Ctx().Err() != nil {
		return fmt.Errorf("%w: %s: the etcd client was closed", election.ErrSessionLost, what)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("etcd election %s: %s: %w", e.Name(), what, err)
}
