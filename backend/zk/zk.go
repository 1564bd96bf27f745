package zk

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
	"github.com/electkit/election/internal/lograte"
	"github.com/electkit/election/internal/skeleton"
	"github.com/electkit/election/internal/watch"
)

// retryDelay is the pause before retrying a request that failed for a
// reason other than the session or the node being gone.
const retryDelay = 50 * time.Millisecond

// statePoll is how often a connection's state is read (an atomic load,
// once per connection for all its leaders: connWatch) to notice a
// disconnect or a new session at once.
const statePoll = 10 * time.Millisecond

// Elector is one candidate of an election on ZooKeeper. It implements
// election.Elector; see the package doc for the protocol.
type Elector struct {
	conn          *gozk.Conn
	path          string
	o             election.Options
	cfg           Config
	log           *slog.Logger
	ownsConn      bool          // made by Dial: Close closes it
	sessionEvents chan struct{} // Dial's session events wake the leader's watch at once
	lostSeen      *atomic.Bool  // Dial's session events: the connection was lost since the leader last looked
	ttlGiven      time.Duration // the TTL WithTTL set, or 0: the granted session timeout is the TTL (ttl.go)
	granted       atomic.Int64  // the session timeout last read from conn, in ns, or 0 (ttl.go)

	gate    *skeleton.Gate  // one Campaign at a time; Close's signal
	closing <-chan struct{} // gate.Closing()
	bg      context.Context // canceled by Close
	stopBg  context.CancelFunc
	wg      sync.WaitGroup // goroutines Close waits for
	io      sync.WaitGroup // goroutines running a ZooKeeper request
	ioMu    sync.Mutex     // orders io.Add before Close's io.Wait
	ioShut  bool           // Close waits for io: no new request may start
	reads   atomic.Int64   // children listings and watches set while waiting (P9)
	claims  atomic.Int64   // claims sent (the multi that takes the leadership)
	// confirmedTakes: hand-overs taken on a confirmation of the session
	// already made (watchNext), with no sync on their path.
	confirmedTakes atomic.Int64
	retries        lograte.Limiter // log lines of retried errors

	mu      sync.Mutex
	closed  bool
	cand    *candidacy
	pending []pend // nodes of ended candidacies not yet deleted
	reaping bool   // the reaper goroutine is running
	// abandoned holds the GUIDs of creates given up before their reply
	// (ctx, Close, a lost connection): their node may exist, owned by this
	// session, until found and deleted.
	abandoned map[string]bool
	terms     skeleton.Terms // Terms whose hooks may still run: Close waits for them
	obs       *watch.Feed    // Observe: one watcher per Elector, started by the first stream
}

// candidacy is one node, from Campaign until it is withdrawn.
//
// Ending one takes these steps, each named by one verb throughout: halt
// (stop its goroutines), end (end its Term, if any, then halt), withdraw
// (it stops being the current candidacy: end, then delete its node), drop
// (delete a node found orphaned or abandoned), forget (drop its ended Term
// from e.terms once the hooks are done). A delete that fails stays pending
// for the reaper.
type candidacy struct {
	node    string // full path
	name    string // child name
	guid    string
	self    child // its place in the order
	seq     int64
	session int64 // the session that owns the node
	leader  election.Leader
	lead    string     // the leadership node's full path, once claimed (guarded by Elector.mu)
	succ    *successor // while it leads: the candidate its release hands over to, or nil (succ.go; guarded by Elector.mu)
	handed  bool       // it leads on a release's hand-over (succ.go): set before its Term begins

	// queue is the data version of the queue node (_q) read before the
	// next listing, or -1: every registration bumps it, so a claim made on
	// a watch event, without listing again, checks it. Only the waiting
	// goroutine uses it.
	queue int32

	stop     chan struct{} // closed when the candidacy is withdrawn
	stopOnce sync.Once
	lc       *backend.LeaseClock // set once leading (guarded by Elector.mu)
	version  int32               // the leadership node's data version (guarded by Elector.mu)
	writing  sync.Mutex          // a heartbeat and Proclaim never overlap: each needs the other's version
}

func (c *candidacy) halt() { c.stopOnce.Do(func() { close(c.stop) }) }

var _ election.Elector = (*Elector)(nil)

// New returns a candidate of the election called name on the ZooKeeper
// ensemble conn talks to, with the default Config. name is the election's
// path ("/services/scheduler"; backend.ValidateName states the rule every
// backend's names follow); Campaign creates it and its missing parents.
// conn stays the caller's: Close does not close it.
//
// The TTL, from which the Term's deadline is computed, is the session
// timeout the server granted conn (servers clamp the requested timeout to
// 2–20 ticks): leave WithTTL out to use it; a WithTTL that differs is
// refused with an *election.OptionError naming both. New reads the timeout
// when conn has a session; on a conn still connecting, Campaign reads and
// checks it once connected (see TTL and session timeout in the package
// doc). Bad options and a bad name are refused with an error
// wrapping election.ErrInvalidOption.
//
// Electors made by New on one conn share its session, as etcd's Electors
// share a Session: one session, kept alive by the client's pings, carries
// the ephemeral nodes of every election on it, so many elections per
// process cost one connection. The price is the same: when the session
// expires, every leadership on it ends at once. The leaders on one conn
// beat together: on each tick (every third of the shortest lease window
// among them) one multi carries every leader's check of its own node, so
// 10,000 leaderships on a conn cost one request per tick, not 10,000;
// each Elector still watches its own predecessor.
func New(conn *gozk.Conn, name string, opts ...election.Option) (*Elector, error) {
	return NewConfig(conn, name, Config{}, opts...)
}

// NewConfig is New with ZooKeeper-specific settings.
func NewConfig(conn *gozk.Conn, name string, cfg Config, opts ...election.Option) (*Elector, error) {
	if conn == nil {
		return nil, &election.OptionError{Field: "conn", Value: "nil", Reason: "a ZooKeeper connection is required"}
	}
	if err := backend.ValidateName(name); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	o, err := election.NewOptions(opts...)
	if err != nil {
		return nil, err
	}
	given := givenTTL(opts)
	granted, ok := sessionTimeout(conn)
	switch {
	case ok:
		if o, err = withSessionTTL(o, given, granted); err != nil {
			return nil, err
		}
	case timeoutField == nil && given == 0:
		return nil, &election.OptionError{Field: "TTL", Value: "unset", Reason: "this version of github.com/go-zookeeper/zk does not expose the session timeout the server granted: set WithTTL to it"}
	}
	bg, stop := context.WithCancel(context.Background())
	gate := skeleton.NewGate()
	e := &Elector{
		conn: conn, path: name, o: o, cfg: cfg, log: o.Logger, ttlGiven: given,
		gate: gate, closing: gate.Closing(), bg: bg, stopBg: stop, obs: watch.NewFeed(),
	}
	e.granted.Store(int64(granted))
	return e, nil
}

// Name returns the election's name, the path given to New (or Dial).
func (e *Elector) Name() string { return e.path }

// ID returns the candidate's ID.
func (e *Elector) ID() string { return e.o.ID }

// Options returns the options the Elector was made with (election.Run
// reports its campaigns to their Events). Their Value is a copy.
func (e *Elector) Options() election.Options {
	o := e.o
	o.Value = append([]byte(nil), o.Value...)
	return o
}

// Campaign implements election.Elector: it creates the candidate's node
// (and the election path, if missing), placed in the order by its
// Priority, waits until it heads the order with nobody leading and no
// hand-over to another candidate pending (or a hand-over names it) —
// watching one node at a time (P9) — and claims the leadership in one
// multi that also checks its node under its session (P4), or takes the
// leadership a release handed over to it, after reading that its node is
// there under its session and a sync through the ensemble's leader. The
// Term's token is the zxid of the multi that made the leadership. If the candidate already leads, it returns
// the current Term. If the node vanishes while waiting (its session
// expired, someone deleted it, the path was deleted), Campaign makes a
// new one and waits on.
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
		e.withdraw(old, election.ErrResigned) // a Term that ended on its own, or a waiting node left behind
	}
	e.deletePending(ctx)
	if err := e.checkTTL(); err != nil {
		return nil, err
	}
	for {
		c, err := e.start(ctx)
		if err != nil {
			return nil, err
		}
		if _, err := e.resolveTTL(c.session); err != nil && !errors.Is(err, errNodeGone) {
			e.withdraw(c, election.ErrResigned) // WithTTL differs from the timeout of the session the node was made on
			return nil, err
		}
		t, err := e.wait(ctx, c)
		if errors.Is(err, errNodeGone) {
			e.log.Warn("zk election: the candidate's node vanished while waiting; making a new one", "node", c.node, "err", err)
			e.withdraw(c, election.ErrResigned)
			continue
		}
		if err != nil {
			e.withdraw(c, election.ErrResigned)
			return nil, err
		}
		return t, nil
	}
}

// errNodeGone: the waiting candidate's node is gone; Campaign makes a new
// one.
var errNodeGone = errors.New("zk election: candidate node gone")

// Resign implements election.Elector: it ends the Term (if leading) before
// any I/O and deletes the candidate's node, so the next candidate leads at
// once. It is idempotent. If the delete fails (no connection, or ctx is
// done), Resign returns the error and the Elector retries the delete in the
// background until it succeeds; the node goes with the session at the
// latest.
func (e *Elector) Resign(ctx context.Context) error {
	if err := skeleton.CheckContext(ctx); err != nil {
		return err
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return election.ErrClosed
	}
	c := e.cand
	e.cand = nil
	if c != nil {
		e.pending = append(e.pending, c.pend())
	}
	e.mu.Unlock()
	// Ending the Term cancels its Context and every ctx derived from it,
	// such as OnElected's under election.Run, which may be ctx: the
	// deletes go on for up to a lease window past it.
	rctx, cancel := backend.ResignContext(ctx, e.o.Window())
	defer cancel()
	if c != nil {
		e.end(c, election.ErrResigned)
	}
	errs := e.deletePending(rctx)
	if err := ctx.Err(); err != nil && context.Cause(rctx) == err {
		return err // ctx's own end, as is
	}
	return errors.Join(errs...)
}

// Close implements election.Elector: it resigns (with a timeout of one
// lease window; a node it cannot delete goes with its session), stops
// every goroutine it started and waits for the renewal hooks. It closes
// the connection only if Dial made it. A request the ZooKeeper client
// still holds (it has no connection to send it on) is waited for at most
// one lease window.
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
		e.pending = append(e.pending, c.pend())
	}
	e.mu.Unlock()
	if c != nil {
		e.end(c, election.ErrClosed)
	}
	// A running Campaign sees closing at once and returns, after deleting
	// any node it made meanwhile; wait for it, so that no node outlives
	// Close.
	e.gate.Drain()
	if e.conn.State() != gozk.StateDisconnected || e.ownsConn {
		ctx, cancel := context.WithTimeout(context.Background(), e.o.Window())
		e.dropAbandoned(ctx)
		_ = e.deletePending(ctx) // logged; the nodes go with the session
		cancel()
	}
	e.stopBg()
	e.wg.Wait()
	e.terms.EndAll(election.ErrClosed)
	if e.ownsConn {
		e.conn.Close()
	}
	e.ioMu.Lock()
	e.ioShut = true
	e.ioMu.Unlock()
	ioDone := make(chan struct{})
	go func() { e.io.Wait(); close(ioDone) }()
	select {
	case <-ioDone:
	case <-time.After(e.o.Window()):
		e.log.Warn("zk election: Close: a ZooKeeper request is still outstanding; it ends when the client answers or is closed", "path", e.path)
	}
	return nil
}
