package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electkit/election"
	"github.com/electkit/election/internal/clock"
	"github.com/electkit/election/internal/lograte"
	"github.com/electkit/election/internal/skeleton"
	"github.com/electkit/election/internal/watch"
)

// ErrMalformedKey: a key under the election's prefix is not a candidate key
// of this package (see MalformedKeyError).
var ErrMalformedKey = errors.New("etcd election: malformed key")

// MaxNameLen bounds the election name given to New, in bytes.
const MaxNameLen = 1024

// retryDelay is the pause before retrying a read, watch or keepalive that
// failed for a reason other than the lease being gone.
const retryDelay = 50 * time.Millisecond

// Elector is one candidate of an election on etcd. It implements
// election.Elector; see the package doc for the protocol.
type Elector struct {
	cli    *clientv3.Client
	name   string
	prefix string
	o      election.Options
	log    *slog.Logger
	ttlSec int64 // the lease TTL asked of etcd: o.TTL rounded up to seconds

	gate    *skeleton.Gate  // one Campaign at a time; Close's signal
	closing <-chan struct{} // gate.Closing()
	bg      context.Context // canceled by Close
	stopBg  context.CancelFunc
	wg      sync.WaitGroup
	reads   atomic.Int64    // queue reads issued while waiting (P9: a handover costs O(1) of them)
	retries lograte.Limiter // log lines of retried errors outside a candidacy
	seen    atomic.Uint64   // the highest token seen lead: Leader and Observe never report a lower one

	mu      sync.Mutex
	closed  bool
	cand    *candidacy
	pending []*candidacy   // ended, but their key or lease not yet released
	terms   skeleton.Terms // Terms whose hooks may still run: Close waits for them
	obs     *watch.Feed    // Observe: one watcher per Elector, started by the first stream
}

// candidacy is one key under one lease, from Campaign until it is withdrawn.
//
// Ending one takes these steps, each named by one verb throughout:
//   - halt: stop its goroutines and cancel their requests;
//   - end: end its Term, if any, with a cause (P3: before any I/O), then halt;
//   - lose: the store took it (its lease or key is gone): record why, then end;
//   - withdraw: it stops being the current candidacy: end, then releaseLater;
//   - release: give its key (and lease) back to the store; releaseLater tries
//     briefly at once and then in the background, releaseWithin is bounded
//     by one lease window;
//   - forget: drop its ended Term from e.terms once the hooks are done.
type candidacy struct {
	lease  clientv3.LeaseID
	key    string
	rev    int64 // the key's create revision: the token if it leads
	leader election.Leader

	stop     chan struct{} // closed when the candidacy is withdrawn
	stopOnce sync.Once
	ctx      context.Context // canceled with stop, and by Close: the candidacy's goroutines' requests
	cancel   context.CancelFunc
	lost     chan struct{}   // closed (once, under Elector.mu) when the lease or the key is gone
	lostErr  error           // why, set before lost is closed
	guarded  chan struct{}   // closed once guardKey has first checked the key under its watch
	watched  atomic.Bool     // guardKey's watch is live and the key checked under it (see own.go)
	retries  lograte.Limiter // log lines of retried errors
	elected  chan struct{}   // closed once clock is set
	lc       *election.LeaseClock
	renewed  time.Time // send time of the last request etcd confirmed the lease by (guarded by Elector.mu)
	keyGone  bool      // the key was deleted; only the lease is left to revoke (guarded by Elector.mu)
}

func (c *candidacy) halt() {
	c.stopOnce.Do(func() {
		close(c.stop)
		if c.cancel != nil {
			c.cancel()
		}
	})
}

var _ election.Elector = (*Elector)(nil)

// New returns a candidate of the election called name on the etcd cluster
// cli talks to. name is the key prefix of the election ("/services/scheduler");
// the candidates' keys live under name + "/". cli stays the caller's: Close
// does not close it. Bad options and a bad name are refused with an error
// wrapping election.ErrInvalidOption.
func New(cli *clientv3.Client, name string, opts ...election.Option) (*Elector, error) {
	if cli == nil {
		return nil, &election.OptionError{Field: "client", Value: "nil", Reason: "an etcd client is required"}
	}
	if err := validateName(name); err != nil {
		return nil, err
	}
	o, err := election.NewOptions(opts...)
	if err != nil {
		return nil, err
	}
	bg, stop := context.WithCancel(context.Background())
	name = strings.TrimSuffix(name, "/")
	gate := skeleton.NewGate()
	return &Elector{
		cli: cli, name: name, prefix: name + "/", o: o, log: o.Logger,
		ttlSec: int64(math.Ceil(o.TTL.Seconds())),
		gate:   gate, closing: gate.Closing(), bg: bg, stopBg: stop, obs: watch.NewFeed(),
	}, nil
}

func validateName(name string) error {
	bad := func(reason string) error {
		return &election.OptionError{Field: "name", Value: election.QuoteValue(name), Reason: reason}
	}
	switch {
	case strings.TrimSuffix(name, "/") == "":
		return bad("must not be empty or only \"/\"")
	case len(name) > MaxNameLen:
		return bad(fmt.Sprintf("must be at most %d bytes", MaxNameLen))
	case !utf8.ValidString(name):
		return bad("must be valid UTF-8")
	case strings.ContainsRune(name, 0):
		return bad("must not contain NUL")
	}
	return nil
}

// Prefix returns the key prefix under which the candidates' keys live.
func (e *Elector) Prefix() string { return e.prefix }

// ID returns the candidate's ID.
func (e *Elector) ID() string { return e.o.ID }

// Campaign implements election.Elector: it creates the candidate's key
// under a new lease, waits until every older key is gone, confirms that its
// key still exists under its live lease, and returns a Term whose token is
// the key's create revision. If the candidate already leads, it returns the
// current Term.
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
	// The requests of waiting stop with the candidacy too (its guard ends
	// it when the client closes or the key goes), not only with ctx.
	wctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.ctx, cancel)
	t, err := e.wait(wctx, c)
	stop()
	cancel()
	if err != nil && ctx.Err() == nil && errors.Is(err, context.Canceled) {
		err = e.interrupted(ctx, c) // the candidacy ended: say why, not "canceled"
		if err == nil {
			err = election.ErrResigned
		}
	}
	if err != nil {
		e.withdraw(c, election.ErrResigned, true) // a quitting waiter: its lease too, nothing hands over
		return nil, err
	}
	return t, nil
}

// start grants a lease, creates the key under it and starts its keepalive
// loop. On any failure it revokes the lease (which deletes the key if the
// create's reply was lost).
func (e *Elector) start(ctx context.Context) (*candidacy, error) {
	if e.cli.Ctx().Err() != nil {
		return nil, e.storeErr(ctx, "granting a lease", e.cli.Ctx().Err())
	}
	ctx, cancel := context.WithCancel(ctx)
	defer context.AfterFunc(e.cli.Ctx(), cancel)()
	defer cancel()
	var c *candidacy
	for {
		id := newLeaseID()
		c = &candidacy{lease: id, key: keyName(e.prefix, id),
			stop: make(chan struct{}), lost: make(chan struct{}), elected: make(chan struct{}), guarded: make(chan struct{})}
		c.renewed = clock.Now()
		err := e.grant(ctx, id)
		if errors.Is(err, rpctypes.ErrLeaseExist) {
			continue // an ID drawn twice: draw again
		}
		if err != nil {
			if ctx.Err() != nil || !e.isFinal(err) {
				e.releaseLater(c, true) // the grant may have been applied and its reply lost
			}
			return nil, e.storeErr(ctx, "granting a lease", err)
		}
		break
	}
	resp, err := e.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(c.key), "=", 0)).
		Then(clientv3.OpPut(c.key, encodeRecord(e.o, e.o.Value), clientv3.WithLease(c.lease))).
		Commit()
	if err == nil && !resp.Succeeded {
		err = fmt.Errorf("key %s already exists", c.key)
	}
	if err != nil {
		e.releaseLater(c, true) // revoking the lease also takes the key, if the create was applied
		return nil, e.storeErr(ctx, "creating key "+c.key, err)
	}
	c.rev = resp.Header.Revision
	c.leader = election.Leader{ID: e.o.ID, Value: e.o.Value, Priority: e.o.Priority, Token: uint64(c.rev)}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		e.releaseWithin(c, true)
		return nil, election.ErrClosed
	}
	c.ctx, c.cancel = context.WithCancel(e.bg)
	e.cand = c
	e.wg.Add(2)
	go e.keepAlive(c)
	go e.guardKey(c)
	e.mu.Unlock()
	return c, nil
}

// wait waits until c's key is the oldest live key, then confirms it and
// starts the Term. Each pass reads, in one transaction, whether c's key
// still exists and which leased key is just ahead of it, and then watches
// only that key (P9), from the revision after the read, so the watch is
// live at once.
func (e *Elector) wait(ctx context.Context, c *candidacy) (*election.Term, error) {
	var deleted int64 // revision of the predecessor's deletion, once seen
	for {
		if err := e.interrupted(ctx, c); err != nil {
			return nil, err
		}
		pred, predLease, rev, err := e.predecessor(ctx, c, deleted)
		deleted = 0
		if err != nil {
			if ierr := e.interrupted(ctx, c); ierr != nil {
				return nil, ierr // Close or Resign may have deleted the key meanwhile
			}
			if errors.Is(err, election.ErrSessionLost) {
				return nil, err
			}
			if e.isFinal(err) {
				return nil, e.finalErr("reading the queue ahead of "+c.key, err)
			}
			e.retryLog(c, "reading the queue", err)
			if err := e.pause(ctx, c, retryDelay); err != nil {
				return nil, err
			}
			continue
		}
		if pred == "" {
			if err := e.awaitGuard(ctx, c); err != nil {
				return nil, err
			}
			t, err := e.confirm(ctx, c)
			if err == nil {
				return t, nil
			}
			if ierr := e.interrupted(ctx, c); ierr != nil {
				return nil, ierr
			}
			for _, final := range []error{election.ErrSessionLost, election.ErrClosed, election.ErrResigned, election.ErrLeaseExpired} {
				if errors.Is(err, final) {
					return nil, err
				}
			}
			if e.isFinal(err) {
				return nil, e.finalErr("confirming "+c.key, err)
			}
			if !errors.Is(err, errUnwatched) {
				e.retryLog(c, "confirming leadership", err)
			}
			if err := e.pause(ctx, c, retryDelay); err != nil { // a transient failure: read again
				return nil, err
			}
			continue
		}
		if deleted, err = e.waitDelete(ctx, c, pred, predLease, rev); err != nil {
			return nil, err
		}
	}
}

// awaitGuard waits until guardKey watches c's key (own.go): a Term is
// confirmed only under that watch.
func (e *Elector) awaitGuard(ctx context.Context, c *candidacy) error {
	select {
	case <-c.guarded:
		return nil
	case <-ctx.Done():
	case <-e.closing:
	case <-c.stop:
	case <-c.lost:
	}
	return e.interrupted(ctx, c)
}

// interrupted reports why waiting must stop, or nil.
func (e *Elector) interrupted(ctx context.Context, c *candidacy) error {
	return e.waiting(c).Interrupted(ctx)
}

// waiting is what ends c's waits besides ctx.
func (e *Elector) waiting(c *candidacy) skeleton.Waiting {
	return skeleton.Waiting{Closing: e.closing, Stop: c.stop, Lost: c.lost, LostErr: func() error { return c.lostErr }}
}

// pause waits d, or less if waiting must stop.
func (e *Elector) pause(ctx context.Context, c *candidacy, d time.Duration) error {
	return e.waiting(c).Pause(ctx, d)
}

// predecessor returns the key just ahead of c's (the leased key with the
// highest create revision below c's; "" if there is none) and the revision
// of the read. The same transaction checks that c's key still exists under
// c's lease, so "" also confirms that c may lead (P4). Keys without a lease
// are skipped: they never expire, so waiting for them would block the
// election for good. A leased key that is malformed is waited for like any
// other (it may be a candidate of another program; it goes when its lease
// does).
//
// The read is linearizable, except right after the watch reported the
// predecessor's deletion at revision floor > 0: then a serializable read
// is tried first, and used only if the member read from had applied the
// deletion (its revision is at least floor); otherwise the read is done
// again, linearizably. The serializable read sees a committed state at or
// after the deletion, which is as good as a linearizable read here: once
// no leased key is older than c's, none can become older (new keys get
// newer revisions), and c's key stays until its lease ends — which the
// Term's deadline, counted from c's last confirmed renewal, already bounds
// — or someone deletes it. It spares a round of Raft heartbeats
// (ReadIndex) on the handover path.
func (e *Elector) predecessor(ctx context.Context, c *candidacy, floor int64) (key string, lease, rev int64, err error) {
	maxRev := c.rev - 1
	for lagged := false; ; {
		if !lagged { // the same read again on a member that caught up is not another queue read
			e.reads.Add(1)
		}
		lagged = false
		get := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithMaxCreateRev(maxRev),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend),
			clientv3.WithLimit(1), clientv3.WithKeysOnly()}
		if floor > 0 {
			get = append(get, clientv3.WithSerializable())
		}
		resp, err := e.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(c.key), "=", c.rev),
				clientv3.Compare(clientv3.LeaseValue(c.key), "=", c.lease)).
			Then(clientv3.OpGet(e.prefix, get...)).
			Commit()
		if err != nil {
			return "", 0, 0, err
		}
		if floor > 0 && resp.Header.Revision < floor {
			floor, lagged = 0, true // that member lags behind the deletion: read linearizably
			continue
		}
		if !resp.Succeeded {
			return "", 0, 0, fmt.Errorf("%w: key %s (revision %d) is gone: its lease %016x expired or it was deleted",
				election.ErrSessionLost, c.key, c.rev, uint64(c.lease))
		}
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			return "", 0, resp.Header.Revision, nil
		}
		kv := kvs[0]
		switch {
		case nested(e.prefix, kv.Key):
			// A key of an election named under this one's name: not ours.
		case kv.Lease != 0:
			return string(kv.Key), kv.Lease, resp.Header.Revision, nil
		default:
			e.log.Warn("etcd election: skipping a key without a lease under the election prefix; it never leads",
				"key", string(kv.Key), "create_revision", kv.CreateRevision)
		}
		maxRev = kv.CreateRevision - 1
	}
}

// waitDelete watches key from rev+1 until it is deleted (it returns the
// revision of the deletion), put again without its lease or under another
// one (it returns 0: the caller reads again, and skips a key that lost its
// lease), the watch breaks (0 too), or waiting must stop. A put that keeps
// the lease (the leader's Proclaim) changes nothing in the queue.
func (e *Elector) waitDelete(ctx context.Context, c *candidacy, key string, lease, rev int64) (int64, error) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := e.cli.Watch(wctx, key, clientv3.WithRev(rev+1))
	for {
		select {
		case wr, ok := <-wch:
			if !ok || wr.Err() != nil || wr.Canceled {
				return 0, e.pause(ctx, c, 0) // read again
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete {
					return ev.Kv.ModRevision, nil
				}
				if ev.Kv.Lease != lease {
					return 0, e.interrupted(ctx, c) // read again
				}
			}
		case <-ctx.Done():
		case <-e.closing:
		case <-c.stop:
		case <-c.lost:
		}
		if err := e.interrupted(ctx, c); err != nil {
			return 0, err
		}
	}
}

// confirm makes c's leadership a Term, once predecessor has confirmed in
// one transaction that c's key exists under c's lease and that no leased key
// is older. The Term's deadline counts from the send time of the last
// request by which etcd confirmed the lease (the grant or a keepalive): etcd
// keeps the lease, hence the key, at least TTL after it received that
// request. If that leaves less than half a lease window, a keepalive is
// sent first and its send time counts instead. The keepalive loop renews
// one interval (a third of the window) after that renewal.
func (e *Elector) confirm(ctx context.Context, c *candidacy) (*election.Term, error) {
	e.mu.Lock()
	sent := c.renewed
	e.mu.Unlock()
	if clock.Since(sent) > e.o.Window()/2 {
		sent = clock.Now()
		kctx, cancel := context.WithTimeout(ctx, e.o.Window())
		_, err := e.cli.KeepAliveOnce(kctx, c.lease)
		cancel()
		if err != nil {
			if errors.Is(err, rpctypes.ErrLeaseNotFound) {
				return nil, fmt.Errorf("%w: lease %016x of key %s expired before it could lead", election.ErrSessionLost, uint64(c.lease), c.key)
			}
			return nil, err
		}
	}
	term, lc := election.NewTerm(e.o, c.leader, sent)
	var err error
	e.mu.Lock()
	select {
	case <-c.lost: // a renewal found the lease gone meanwhile
		err = c.lostErr
	default:
		switch {
		case e.closed:
			err = election.ErrClosed
		case e.cand != c:
			err = election.ErrResigned
		case !c.watched.Load():
			err = errUnwatched // the guard's watch broke: read again once it is back
		}
	}
	if err != nil {
		e.mu.Unlock()
		lc.End(err)
		return nil, err
	}
	c.lc = lc
	e.terms.Add(lc)
	e.saw(c.leader.Token)
	close(c.elected)
	e.mu.Unlock()
	if err := term.Err(); err != nil { // the deadline passed while confirming
		return nil, err
	}
	return term, nil
}

// keepAlive renews c's lease every Window/3 while the candidacy lasts. While
// it leads, each renewal goes through the Term's lease clock: the
// before-renewal hook first, then the keepalive, then Renewed with its send
// time and outcome. A failed renewal is retried after retryDelay; the clock
// ends the Term at its deadline if none succeeds. A lease etcd no longer
// knows ends the candidacy at once (ErrSessionLost). When the Term ends for
// any reason, the candidacy is withdrawn, so the key goes at once.
func (e *Elector) keepAlive(c *candidacy) {
	defer e.wg.Done()
	defer e.forget(c)
	interval := e.o.Window() / 3
	tm := time.NewTimer(interval)
	defer tm.Stop()
	elected := c.elected
	var lc *election.LeaseClock
	var termDone <-chan struct{}
	for {
		select {
		case <-c.stop:
			return
		case <-elected:
			elected = nil
			e.mu.Lock()
			lc = c.lc
			e.mu.Unlock()
			termDone = lc.Term().Done()
			e.mu.Lock()
			renewed := c.renewed
			e.mu.Unlock()
			tm.Reset(clock.Until(renewed.Add(interval))) // one interval after the renewal the Term counts from
			continue
		case <-termDone:
			e.withdraw(c, lc.Term().Err(), false)
			return
		case <-tm.C:
		}
		if lc == nil {
			// The Term may have begun after the timer fired and before
			// elected was seen: renew it through its clock all the same.
			e.mu.Lock()
			lc = c.lc
			e.mu.Unlock()
			if lc != nil {
				elected, termDone = nil, lc.Term().Done()
			}
		}
		next := interval
		if lc != nil && lc.BeforeRenew() != nil {
			tm.Reset(0) // the Term ended: termDone is closed
			continue
		}
		watched := c.watched.Load()
		sent := clock.Now()
		timeout := interval
		if lc != nil {
			timeout = clock.Until(lc.Term().Deadline())
		}
		ctx, cancel := context.WithTimeout(e.bg, max(timeout, retryDelay))
		_, err := e.cli.KeepAliveOnce(ctx, c.lease)
		cancel()
		if lc != nil {
			counted := err
			if err == nil && !(watched && c.watched.Load()) {
				counted = errUnwatched // the lease lives, but a change of the key might have gone unseen
			}
			lc.Renewed(sent, counted)
		}
		switch {
		case err == nil:
			e.mu.Lock()
			c.renewed = sent
			e.mu.Unlock()
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			e.lose(c, fmt.Errorf("%w: lease %016x of key %s expired", election.ErrSessionLost, uint64(c.lease), c.key))
			return
		case e.isFinal(err):
			e.lose(c, e.finalErr(fmt.Sprintf("renewing lease %016x of key %s", uint64(c.lease), c.key), err))
			return
		default:
			if c.ctx.Err() == nil {
				e.retryLog(c, "renewing the lease", err)
			}
			next = retryDelay
		}
		tm.Reset(next)
	}
}

// forget drops c's Term, if it had one, from e.terms once its hooks are
// done (skeleton.Terms.Forget). c is no longer the current candidacy, so
// its Term has ended (or confirm refused to start one).
func (e *Elector) forget(c *candidacy) {
	e.mu.Lock()
	lc := c.lc
	e.mu.Unlock()
	e.terms.Forget(lc)
}

// lose records that c's lease or key is gone and ends its Term, if any. It
// reads c.lc under the lock that confirm installs it under, so a Term
// that confirm made while the failed renewal was in flight ends too;
// confirm refuses to make one after this. It reports whether this call
// was the first: only the first cause counts.
func (e *Elector) lose(c *candidacy, err error) bool {
	e.mu.Lock()
	select {
	case <-c.lost:
		e.mu.Unlock()
		return false
	default:
	}
	c.lostErr = err
	close(c.lost)
	lc := c.lc
	if e.cand == c {
		e.cand = nil
	}
	e.mu.Unlock()
	if lc != nil {
		lc.End(err)
	}
	c.halt()
	return true
}

// withdraw ends c if it is still the current candidacy: its Term first (P3:
// before any I/O), then its keepalives, then its key, and with lease its
// lease (without, the emptied lease is revoked later, off a handover's
// path: see release).
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
// that a store that answers has the key gone when Campaign returns; then,
// if that did not do, off the caller's path, so that Campaign returns as
// soon as its ctx ends whatever the store does: in a goroutine that Close
// waits for, bounded by one lease window — past that the lease expires on
// its own, since nothing renews it. c stays pending until then, so Close
// releases it too. Once the Elector is closed it releases at once instead,
// bounded the same way.
func (e *Elector) releaseLater(c *candidacy, lease bool) {
	ctx, cancel := context.WithTimeout(e.bg, releaseWait)
	err := e.release(ctx, c, lease)
	cancel()
	if err == nil {
		return
	}
	e.mu.Lock()
	if !slices.Contains(e.pending, c) {
		e.pending = append(e.pending, c)
	}
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
		ctx, cancel := context.WithTimeout(e.bg, e.o.Window())
		defer cancel()
		_ = e.release(ctx, c, lease) // logged; retried by the next Campaign, Resign or Close
	}()
}

// end ends c's Term with cause and stops its keepalives.
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

// release gives up c's key and, with lease, its lease, within ctx.
//
// The key goes first, on its own, by a delete guarded by its create
// revision: that deletion is what the next candidate's watch waits for,
// and etcd takes about twice as long to revoke a lease as to delete a key
// (BENCHMARKS.md, "Resign → the waiting candidate's Campaign returns"). A
// lease revoke sent at once behind the
// delete would also run while the next candidate reads the queue, and
// slow that read down: so the emptied lease, which nothing renews any
// more, is left in the pending list when lease is false, and revoked by the
// next Campaign, Resign or Close — or it expires on its own after the TTL.
//
// A lease etcd no longer knows counts as revoked. On failure c stays in
// the pending list, to be retried; meanwhile its lease expires on its own
// after the TTL, since nothing renews it, and takes the key with it.
func (e *Elector) release(ctx context.Context, c *candidacy, lease bool) error {
	e.mu.Lock()
	deleteKey := c.rev != 0 && !c.keyGone
	e.mu.Unlock()
	var err error
	what := "deleting key " + c.key
	if e.cli.Ctx().Err() != nil {
		// A closed client's requests wait out their ctx; nothing can be
		// released through it: the lease expires on its own.
		return fmt.Errorf("etcd election: %s: the etcd client was closed (the lease expires on its own within its TTL)", what)
	}
	if deleteKey {
		_, err = e.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(c.key), "=", c.rev)).
			Then(clientv3.OpDelete(c.key)).Commit()
		if err == nil {
			e.mu.Lock()
			c.keyGone = true
			e.mu.Unlock()
		}
	}
	if err == nil && lease {
		what = fmt.Sprintf("revoking lease %016x of key %s", uint64(c.lease), c.key)
		_, err = e.cli.Revoke(ctx, c.lease)
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			err = nil
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	i := slices.Index(e.pending, c)
	switch {
	case err == nil && lease:
		if i >= 0 {
			e.pending = slices.Delete(e.pending, i, i+1)
		}
		return nil
	case i < 0:
		e.pending = append(e.pending, c)
	}
	if err == nil {
		return nil
	}
	e.log.Warn("etcd election: releasing a candidacy failed; it will be retried, and its lease expires on its own", "key", c.key, "lease", fmt.Sprintf("%016x", uint64(c.lease)), "err", err)
	return fmt.Errorf("etcd election: %s: %w (the lease expires on its own within its TTL)", what, err)
}

// releasePending revokes the leases of ended candidacies (and deletes their
// keys if that failed before), ignoring failures: they are logged and
// retried later.
func (e *Elector) releasePending(ctx context.Context) {
	e.mu.Lock()
	pending := append([]*candidacy(nil), e.pending...)
	e.mu.Unlock()
	for _, p := range pending {
		if ctx.Err() != nil {
			return
		}
		_ = e.release(ctx, p, true)
	}
}

// Resign implements election.Elector: it ends the Term (if leading) before
// any I/O, stops the keepalives and deletes the key, so the next candidate
// leads at once; the emptied lease is revoked later, off the handover's
// path (see release), and with it the leases of earlier candidacies. It is
// idempotent. If a request fails (its reply lost, etcd unreachable),
// Resign returns the error and keeps what is left to release for the next
// Campaign, Resign or Close; the key goes at the latest when the lease
// expires.
func (e *Elector) Resign(ctx context.Context) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return election.ErrClosed
	}
	c := e.cand
	e.cand = nil
	if c != nil {
		e.pending = append(e.pending, c)
	}
	pending := append([]*candidacy(nil), e.pending...)
	e.mu.Unlock()
	if c != nil {
		e.end(c, election.ErrResigned)
	}
	var errs []error
	for _, p := range pending {
		// The key of the candidacy just ended goes first, alone (see
		// release); the leases of earlier ones are revoked.
		if err := e.release(ctx, p, p != c); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Close implements election.Elector: it resigns (with a timeout of one
// lease window; a lease it cannot revoke expires on its own), stops every
// goroutine it started and waits for the renewal hooks. It does not close
// the etcd client.
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
	if c != nil {
		e.pending = append(e.pending, c)
	}
	pending := append([]*candidacy(nil), e.pending...)
	e.mu.Unlock()
	if c != nil {
		e.end(c, election.ErrClosed)
	}
	if e.cli.Ctx().Err() == nil {
		ctx, cancel := context.WithTimeout(context.Background(), e.o.Window())
		for _, p := range pending {
			_ = e.release(ctx, p, true) // logged; the lease expires on its own
		}
		cancel()
	}
	e.stopBg()
	e.wg.Wait()
	e.terms.EndAll(election.ErrClosed)
	return nil
}

// storeErr wraps a failed request: ctx's own error as is, the client's
// closing as ErrClosed-like session loss, anything else with what was being
// done.
func (e *Elector) storeErr(ctx context.Context, what string, err error) error {
	if e.cli.Ctx().Err() != nil {
		return fmt.Errorf("%w: %s: the etcd client was closed", election.ErrSessionLost, what)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("etcd election %s: %s: %w", e.name, what, err)
}
