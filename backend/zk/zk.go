package zk

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electkit/election"
	"github.com/electkit/election/internal/clock"
	"github.com/electkit/election/internal/lograte"
	"github.com/electkit/election/internal/skeleton"
	"github.com/electkit/election/internal/watch"
)

// retryDelay is the pause before retrying a request that failed for a
// reason other than the session or the node being gone.
const retryDelay = 50 * time.Millisecond

// statePoll is how often a leader reads its connection's state (an atomic
// load) to notice a disconnect or a new session at once.
const statePoll = 10 * time.Millisecond

// Policy says what a leader does when its connection to ZooKeeper breaks
// while its session may still be alive (Apache Curator's
// ConnectionStateErrorPolicy).
type Policy int

const (
	// StepDownOnDisconnect ends the Term as soon as the connection is lost
	// (ErrSessionLost), as Curator's standard policy does. The default:
	// the leader stops acting at once, long before the session could
	// expire, and campaigns again (with a new node, so a new token) once
	// reconnected.
	StepDownOnDisconnect Policy = iota
	// HoldUntilDeadline keeps the Term while disconnected, until the point
	// where the server may expire the session: the send time of the last
	// confirmed heartbeat + TTL/(1+ρ) − margin. Reconnecting in time (same
	// session) continues the Term; otherwise it ends then with an error
	// wrapping ErrSessionLost and ErrLeaseExpired. Curator's
	// SessionConnectionStateErrorPolicy.
	HoldUntilDeadline
)

func (p Policy) String() string {
	switch p {
	case StepDownOnDisconnect:
		return "StepDownOnDisconnect"
	case HoldUntilDeadline:
		return "HoldUntilDeadline"
	}
	return fmt.Sprintf("Policy(%d)", int(p))
}

// Config holds the ZooKeeper-specific settings of an Elector. The zero
// Config is valid: open ACLs, StepDownOnDisconnect.
type Config struct {
	// PathACL is the ACL of the election path (and any missing parent)
	// when this Elector creates it; an existing path keeps its own.
	// Default gozk.WorldACL(gozk.PermAll). Deleting a child needs the
	// Delete permission on the path, so restricting the path's ACL to the
	// candidates' identities (digest) is what stops others from deleting
	// the leader's node.
	PathACL []gozk.ACL
	// NodeACL is the ACL of the candidate nodes. Default
	// gozk.WorldACL(gozk.PermAll). With digest auth on the connection,
	// CreatorOnly(gozk.PermRead) lets only the creator change its node.
	NodeACL []gozk.ACL
	// Policy: what a leader does while disconnected. Default
	// StepDownOnDisconnect.
	Policy Policy
}

// CreatorOnly returns an ACL that gives the node's creator (the
// identities the connection authenticated with) every permission and
// everyone else the permissions in others (e.g. gozk.PermRead). The
// connection must have authenticated (Conn.AddAuth), or creates fail with
// ErrInvalidACL.
func CreatorOnly(others int32) []gozk.ACL {
	acl := gozk.AuthACL(gozk.PermAll)
	if others != 0 {
		acl = append(acl, gozk.WorldACL(others)...)
	}
	return acl
}

func (c *Config) validate() error {
	if c.Policy != StepDownOnDisconnect && c.Policy != HoldUntilDeadline {
		return &election.OptionError{Field: "Policy", Value: fmt.Sprint(int(c.Policy)), Reason: "must be StepDownOnDisconnect or HoldUntilDeadline"}
	}
	for _, a := range [][]gozk.ACL{c.PathACL, c.NodeACL} {
		for _, e := range a {
			if e.Perms&gozk.PermAll == 0 || e.Scheme == "" {
				return &election.OptionError{Field: "ACL", Value: fmt.Sprintf("%+v", e), Reason: "needs a scheme and at least one permission"}
			}
		}
	}
	if c.PathACL == nil {
		c.PathACL = gozk.WorldACL(gozk.PermAll)
	}
	if c.NodeACL == nil {
		c.NodeACL = gozk.WorldACL(gozk.PermAll)
	}
	return nil
}

// Elector is one candidate of an election on ZooKeeper. It implements
// election.Elector; see the package doc for the protocol.
type Elector struct {
	conn     *gozk.Conn
	path     string
	o        election.Options
	cfg      Config
	log      *slog.Logger
	ownsConn bool          // made by Dial: Close closes it
	kick     chan struct{} // Dial's session events wake the leader's watch at once
	blip     *atomic.Bool  // Dial's session events: the connection was lost since the leader last looked

	gate    *skeleton.Gate  // one Campaign at a time; Close's signal
	closing <-chan struct{} // gate.Closing()
	bg      context.Context // canceled by Close
	stopBg  context.CancelFunc
	wg      sync.WaitGroup  // goroutines Close waits for
	io      sync.WaitGroup  // goroutines running a ZooKeeper request
	ioMu    sync.Mutex      // orders io.Add before Close's io.Wait
	ioShut  bool            // Close waits for io: no new request may start
	reads   atomic.Int64    // children listings and watches set while waiting (P9)
	retries lograte.Limiter // log lines of retried errors

	mu      sync.Mutex
	closed  bool
	cand    *candidacy
	pending []string // nodes of ended candidacies not yet deleted
	reaping bool     // the reaper goroutine is running
	// abandoned holds the GUIDs of creates given up before their reply
	// (ctx, Close, a lost connection): their node may exist, owned by this
	// session, until found and deleted.
	abandoned map[string]bool
	terms     skeleton.Terms // Terms whose hooks may still run: Close waits for them
	obs       *watch.Feed    // Observe: one watcher per Elector, started by the first stream
}

// candidacy is one node, from Campaign until it is withdrawn.
type candidacy struct {
	node    string // full path
	name    string // child name
	seq     int64
	session int64 // the session that owns the node
	leader  election.Leader

	stop     chan struct{} // closed when the candidacy is withdrawn
	stopOnce sync.Once
	lc       *election.LeaseClock // set once leading (guarded by Elector.mu)
	version  int32                // the node's data version (guarded by Elector.mu)
	writing  sync.Mutex           // a heartbeat and Proclaim never overlap: each needs the other's version
}

func (c *candidacy) halt() { c.stopOnce.Do(func() { close(c.stop) }) }

var _ election.Elector = (*Elector)(nil)

// New returns a candidate of the election at path on the ZooKeeper
// ensemble conn talks to, with the default Config. conn stays the caller's:
// Close does not close it.
//
// The Term's deadline is computed from the TTL option, which must not
// exceed the session timeout the server granted conn (servers clamp the
// requested timeout to 2–20 ticks): set WithTTL to that timeout. Dial does
// this itself. Bad options and a bad path are refused with an error
// wrapping election.ErrInvalidOption.
func New(conn *gozk.Conn, path string, opts ...election.Option) (*Elector, error) {
	return NewConfig(conn, path, Config{}, opts...)
}

// NewConfig is New with ZooKeeper-specific settings.
func NewConfig(conn *gozk.Conn, path string, cfg Config, opts ...election.Option) (*Elector, error) {
	if conn == nil {
		return nil, &election.OptionError{Field: "conn", Value: "nil", Reason: "a ZooKeeper connection is required"}
	}
	if err := validatePath(path); err != nil {
		return nil, err
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	o, err := election.NewOptions(opts...)
	if err != nil {
		return nil, err
	}
	bg, stop := context.WithCancel(context.Background())
	gate := skeleton.NewGate()
	return &Elector{
		conn: conn, path: path, o: o, cfg: cfg, log: o.Logger,
		gate: gate, closing: gate.Closing(), bg: bg, stopBg: stop, obs: watch.NewFeed(),
	}, nil
}

// Path returns the election path.
func (e *Elector) Path() string { return e.path }

// ID returns the candidate's ID.
func (e *Elector) ID() string { return e.o.ID }

// Reads returns how many children listings and watches this Elector has
// issued while waiting to lead: a handover ahead of it costs O(1) of them
// (P9), however many candidates wait.
func (e *Elector) Reads() int64 { return e.reads.Load() }

// do runs op, a blocking request of the ZooKeeper client (which takes no
// context), on its own goroutine and waits for it, for ctx, or for stop
// (nil: never). An abandoned request goes on until the client answers or
// is closed; its result is dropped. The variables op writes may be read
// only when do returned nil (then op has returned); never written after.
func (e *Elector) do(ctx context.Context, stop <-chan struct{}, op func()) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	done := make(chan struct{})
	if !e.ioStart() {
		return election.ErrClosed
	}
	go func() {
		defer e.io.Done()
		defer close(done)
		op()
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-stop:
		return election.ErrClosed
	}
}

// ioStart counts a new request goroutine, unless Close has begun waiting
// for them.
func (e *Elector) ioStart() bool {
	e.ioMu.Lock()
	defer e.ioMu.Unlock()
	if e.ioShut {
		return false
	}
	e.io.Add(1)
	return true
}

// Campaign implements election.Elector: it creates the candidate's node
// (and the election path, if missing), waits until every node ahead of it
// is gone — watching only the one just ahead (P9) — confirms that its node
// is still there under its session with a check transaction through the
// ensemble's leader, and returns a Term whose token is the node's creation
// zxid. If the candidate already leads, it returns the current Term. If the
// node vanishes while waiting (its session expired, someone deleted it, the
// path was deleted), Campaign makes a new one and waits on.
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
	for {
		c, err := e.start(ctx)
		if err != nil {
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

// start creates the candidate's node: a protected ephemeral-sequential
// create, found again by its GUID when the reply is lost, and its owner
// checked against the connection's session. It creates the election path
// when it is missing.
func (e *Elector) start(ctx context.Context) (*candidacy, error) {
	guid, err := newGUID()
	if err != nil {
		return nil, fmt.Errorf("zk election %s: %w", e.path, err)
	}
	data := encodeRecord(e.o, e.o.Value)
	for attempt := 0; ; attempt++ {
		if err := e.interrupted(ctx, nil); err != nil {
			return nil, err
		}
		if attempt > 0 {
			if err := e.pause(ctx, nil, retryDelay); err != nil {
				return nil, err
			}
		}
		var node string
		var cerr error
		if err := e.do(ctx, e.closing, func() {
			node, cerr = e.conn.Create(e.path+"/"+nodePrefix(guid), data, gozk.FlagEphemeral|gozk.FlagSequence, e.cfg.NodeACL)
		}); err != nil {
			return nil, e.findAndDrop(guid, err)
		}
		switch {
		case cerr == nil:
		case errors.Is(cerr, gozk.ErrNoNode):
			if err := e.ensurePath(ctx); err != nil {
				return nil, err
			}
			continue
		case e.finalErr("creating a candidate node", cerr) != nil:
			return nil, e.finalErr("creating a candidate node", cerr)
		case errors.Is(cerr, gozk.ErrConnectionClosed), errors.Is(cerr, gozk.ErrNoServer):
			// The reply may be lost while the node exists: look for it by
			// GUID until the answer is certain; never create blindly.
			found, err := e.findGUIDRetry(ctx, guid)
			if err != nil {
				return nil, e.findAndDrop(guid, err)
			}
			if found == "" {
				continue // not created (or gone with an expired session): create again
			}
			node = found
		case errors.Is(cerr, gozk.ErrSessionExpired):
			continue // the client makes a new session; the node cannot exist
		case errors.Is(cerr, gozk.ErrClosing):
			return nil, fmt.Errorf("%w: creating a node under %s: the ZooKeeper connection was closed", election.ErrSessionLost, e.path)
		default:
			return nil, fmt.Errorf("zk election %s: creating a candidate node: %w", e.path, cerr)
		}
		c, err := e.adopt(ctx, node)
		if err != nil {
			return nil, err
		}
		if c != nil {
			return c, nil
		}
		// The node is not owned by this connection's session: it was made
		// by a session that has since expired. Delete it and start over.
		e.drop(node)
	}
}

// adopt reads the node just created and makes it the current candidacy if
// its owner is the connection's current session (P4, CURATOR-696). It
// returns nil, nil when the node is gone or owned by another session.
func (e *Elector) adopt(ctx context.Context, node string) (*candidacy, error) {
	var ok bool
	var st *gozk.Stat
	var err error
	sid := e.conn.SessionID()
	if derr := e.do(ctx, e.closing, func() { ok, st, err = e.conn.Exists(node) }); derr != nil {
		e.drop(node)
		return nil, derr
	}
	if err != nil || !ok || st.EphemeralOwner != sid || sid == 0 || e.conn.SessionID() != sid {
		if err != nil && !errors.Is(err, gozk.ErrConnectionClosed) && !errors.Is(err, gozk.ErrSessionExpired) && !errors.Is(err, gozk.ErrNoServer) {
			e.drop(node)
			return nil, fmt.Errorf("zk election %s: reading node %s: %w", e.path, node, err)
		}
		return nil, nil
	}
	name := node[strings.LastIndexByte(node, '/')+1:]
	seq, _ := sequence(name)
	c := &candidacy{node: node, name: name, seq: seq, session: sid, version: st.Version,
		leader: election.Leader{ID: e.o.ID, Value: e.o.Value, Priority: e.o.Priority, Token: uint64(st.Czxid)},
		stop:   make(chan struct{})}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		e.drop(node) // Close waits for this Campaign before its last deletes
		return nil, election.ErrClosed
	}
	e.cand = c
	e.mu.Unlock()
	return c, nil
}

// findAndDrop is called when a create was abandoned (ctx or Close): the
// create may still succeed, so its node, if found by GUID, is deleted;
// failing that, it is deleted with the session. It returns err.
func (e *Elector) findAndDrop(guid string, err error) error {
	e.mu.Lock()
	closed := e.closed
	if !closed {
		e.wg.Add(1)
	}
	e.mu.Unlock()
	e.mu.Lock()
	if e.abandoned == nil {
		e.abandoned = map[string]bool{}
	}
	e.abandoned[guid] = true
	e.mu.Unlock()
	// find looks for the node until the answer is certain: a node left by
	// an abandoned create, owned by this live session, would otherwise
	// sit in the order for as long as the session lives, and the election
	// would wait behind it.
	find := func() {
		delay := retryDelay
		for {
			ctx, cancel := context.WithTimeout(e.bg, e.o.Window())
			node, ferr := e.findGUID(ctx, guid)
			cancel()
			switch {
			case ferr == nil:
				e.mu.Lock()
				delete(e.abandoned, guid)
				e.mu.Unlock()
				if node != "" {
					e.drop(node)
				}
				return
			case e.bg.Err() != nil, e.finalErr("looking for an abandoned node", ferr) != nil:
				return // Close deletes what is pending; the node goes with the session at the latest
			}
			e.retryLog("looking for the node of an abandoned create", ferr)
			clock.Sleep(e.bg, delay)
			delay = min(2*delay, time.Second)
		}
	}
	if closed {
		return err // Close waits for this Campaign, then looks for the node and deletes it
	}
	// Off the caller's path: Campaign returns with its ctx, whatever the
	// server does; Close waits for this.
	go func() {
		defer e.wg.Done()
		find()
	}()
	return err
}

// dropAbandoned looks, until ctx ends, for the nodes of the creates given
// up before their reply, and deletes those it finds. Close calls it: the
// connection may be the caller's and outlive the Elector, and with it the
// session that owns such a node, which would head the order for nobody.
// Requests on a connection are carried out in the order sent, so a listing
// sent now sees every create sent before it.
func (e *Elector) dropAbandoned(ctx context.Context) {
	delay := retryDelay
	for {
		e.mu.Lock()
		n := len(e.abandoned)
		e.mu.Unlock()
		if n == 0 {
			return
		}
		var names []string
		var err error
		if derr := e.do(ctx, nil, func() { names, _, err = e.conn.Children(e.path) }); derr != nil {
			return
		}
		if errors.Is(err, gozk.ErrNoNode) {
			err, names = nil, nil
		}
		if err == nil {
			for _, name := range names {
				if e.wasAbandoned(name) {
					e.mu.Lock()
					e.pending = append(e.pending, e.path+"/"+name) // deleted next, by Close
					e.mu.Unlock()
				}
			}
			e.mu.Lock()
			clear(e.abandoned) // the rest were never created
			e.mu.Unlock()
			return
		}
		if e.finalErr("looking for the nodes of abandoned creates", err) != nil {
			return
		}
		e.retryLog("looking for the nodes of abandoned creates", err)
		clock.Sleep(ctx, delay)
		delay = min(2*delay, time.Second)
	}
}

// wasAbandoned reports whether name is the node of an abandoned create,
// and forgets its GUID.
func (e *Elector) wasAbandoned(name string) bool {
	g := guidOf(name)
	e.mu.Lock()
	defer e.mu.Unlock()
	if g == "" || !e.abandoned[g] {
		return false
	}
	delete(e.abandoned, g)
	return true
}

// findGUID returns the child of the election path whose name carries guid,
// or "" if there is none.
func (e *Elector) findGUID(ctx context.Context, guid string) (string, error) {
	var names []string
	var err error
	if derr := e.do(ctx, nil, func() { names, _, err = e.conn.Children(e.path) }); derr != nil {
		return "", derr
	}
	if errors.Is(err, gozk.ErrNoNode) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	for _, n := range names {
		if guidOf(n) == guid {
			return e.path + "/" + n, nil
		}
	}
	return "", nil
}

// findGUIDRetry is findGUID, retried until it answers or waiting must
// stop.
func (e *Elector) findGUIDRetry(ctx context.Context, guid string) (string, error) {
	for {
		found, err := e.findGUID(ctx, guid)
		if err == nil {
			return found, nil
		}
		if ferr := e.finalErr("looking for the candidate node just created", err); ferr != nil {
			return "", ferr
		}
		e.retryLog("looking for the candidate node just created", err)
		if perr := e.pause(ctx, nil, retryDelay); perr != nil {
			return "", perr
		}
	}
}

// ensurePath creates the election path and its missing parents, as
// persistent nodes with the PathACL.
func (e *Elector) ensurePath(ctx context.Context) error {
	segs := strings.Split(e.path[1:], "/")
	for i := range segs {
		p := "/" + strings.Join(segs[:i+1], "/")
		var err error
		if derr := e.do(ctx, e.closing, func() { _, err = e.conn.Create(p, nil, 0, e.cfg.PathACL) }); derr != nil {
			return derr
		}
		switch {
		case err == nil, errors.Is(err, gozk.ErrNodeExists):
		case errors.Is(err, gozk.ErrConnectionClosed), errors.Is(err, gozk.ErrNoServer), errors.Is(err, gozk.ErrSessionExpired):
			return nil // the caller retries the create, and so this
		default:
			return fmt.Errorf("zk election %s: creating %s: %w", e.path, p, err)
		}
	}
	return nil
}

// wait waits until c's node heads the order, then confirms it and starts
// the Term. Each pass lists the children, and watches only the node just
// ahead of c's (P9).
func (e *Elector) wait(ctx context.Context, c *candidacy) (*election.Term, error) {
	skip := map[string]bool{} // persistent nodes: they never go, so they never block
	headGone := false         // the node just gone headed the order: c may lead now
	for {
		if err := e.interrupted(ctx, c); err != nil {
			return nil, err
		}
		if sid := e.conn.SessionID(); sid != c.session && sid != 0 {
			return nil, fmt.Errorf("%w: session %#x of node %s was replaced by %#x", errNodeGone, c.session, c.node, sid)
		}
		// When the leader just went, the confirming check goes out with
		// the listing rather than after it: a handover costs one round
		// trip after the watch event, not two. The check proves c's node
		// alive at a moment after its send time, the listing that no node
		// is ahead of it; nodes ahead cannot appear later, so together
		// they confirm c as leader from the check's send time on (P4).
		var early chan checked
		if headGone && e.ioStart() {
			early = make(chan checked, 1)
			go func() {
				defer e.io.Done()
				sent, err := e.check(ctx, e.closing, c)
				early <- checked{sent, err}
			}()
			headGone = false
		}
		var names []string
		var err error
		e.reads.Add(1)
		if derr := e.do(ctx, e.closing, func() { names, _, err = e.conn.Children(e.path) }); derr != nil {
			return nil, e.stopped(ctx, c, derr)
		}
		if err != nil {
			if errors.Is(err, gozk.ErrNoNode) {
				return nil, fmt.Errorf("%w: the election path %s was deleted", errNodeGone, e.path)
			}
			if err := e.transient(ctx, c, err); err != nil {
				return nil, err
			}
			continue
		}
		order := ordered(names)
		pred, found := "", false
		for _, ch := range order {
			if ch.name == c.name {
				found = true
				break
			}
			if !skip[ch.name] {
				pred = ch.name
			}
		}
		if !found {
			return nil, fmt.Errorf("%w: node %s is no longer a child of %s", errNodeGone, c.name, e.path)
		}
		predIsHead := pred != ""
		for _, ch := range order {
			if ch.name == pred {
				break
			}
			if !skip[ch.name] {
				predIsHead = false
				break
			}
		}
		if pred == "" {
			var t *election.Term
			if early != nil {
				r := <-early // returns promptly: check gives up on ctx and Close
				t, err = e.begin(ctx, c, r.sent, r.err)
			} else {
				t, err = e.confirm(ctx, c)
			}
			if err == nil {
				return t, nil
			}
			if ierr := e.interrupted(ctx, c); ierr != nil {
				return nil, ierr
			}
			if errors.Is(err, errNodeGone) || errors.Is(err, election.ErrLeaseExpired) {
				return nil, err
			}
			if err := e.transient(ctx, c, err); err != nil {
				return nil, err
			}
			continue
		}
		if e.wasAbandoned(pred) {
			// A node of this session's that an abandoned create left: it
			// would lead for nobody. Delete it; waitGone sees it go.
			e.drop(e.path + "/" + pred)
		}
		gone, persistent, err := e.waitGone(ctx, c, pred)
		if err != nil {
			return nil, err
		}
		if persistent {
			e.log.Warn("zk election: skipping a persistent node in the election's order; it never leads", "path", e.path+"/"+pred)
			skip[pred] = true
		}
		headGone = gone && predIsHead // in every case: list again
	}
}

// checked is the outcome of a check sent ahead of the listing.
type checked struct {
	sent time.Time
	err  error
}

// waitGone watches the node pred (a child of the election path) until it
// is deleted, the watch is lost (the caller lists again), or waiting must
// stop. persistent reports a node that is not ephemeral: it never goes.
func (e *Elector) waitGone(ctx context.Context, c *candidacy, pred string) (gone, persistent bool, err error) {
	var ok bool
	var st *gozk.Stat
	var ev <-chan gozk.Event
	var rerr error
	e.reads.Add(1)
	if derr := e.do(ctx, e.closing, func() { ok, st, ev, rerr = e.conn.ExistsW(e.path + "/" + pred) }); derr != nil {
		return false, false, e.stopped(ctx, c, derr)
	}
	if rerr != nil {
		return false, false, e.transient(ctx, c, rerr)
	}
	if !ok {
		return true, false, nil
	}
	if st.EphemeralOwner == 0 {
		return false, true, nil
	}
	select {
	case <-ev: // deleted, changed, or the watch is lost: list again
		return true, false, e.interrupted(ctx, c)
	case <-ctx.Done():
	case <-e.closing:
	case <-c.stop:
	}
	return false, false, e.interrupted(ctx, c)
}

// interrupted reports why waiting must stop, or nil. c may be nil.
func (e *Elector) interrupted(ctx context.Context, c *candidacy) error {
	select {
	case <-e.closing:
		return election.ErrClosed
	default:
	}
	if c != nil {
		select {
		case <-c.stop:
			return election.ErrResigned
		default:
		}
	}
	return ctx.Err()
}

// stopped turns the error of an abandoned request into why waiting stops.
func (e *Elector) stopped(ctx context.Context, c *candidacy, err error) error {
	if ierr := e.interrupted(ctx, c); ierr != nil {
		return ierr
	}
	return err
}

// transient handles a failed request while waiting: a closed connection
// ends the campaign; anything else is retried after a pause.
func (e *Elector) transient(ctx context.Context, c *candidacy, err error) error {
	if ferr := e.finalErr("waiting", err); ferr != nil {
		return ferr
	}
	e.retryLog("a request while waiting", err)
	return e.pause(ctx, c, retryDelay)
}

// pause waits d, or less if waiting must stop. c may be nil.
func (e *Elector) pause(ctx context.Context, c *candidacy, d time.Duration) error {
	tm := time.NewTimer(d)
	defer tm.Stop()
	var stop chan struct{}
	if c != nil {
		stop = c.stop
	}
	select {
	case <-tm.C:
	case <-ctx.Done():
	case <-e.closing:
	case <-stop:
	}
	return e.interrupted(ctx, c)
}

// check sends the heartbeat of a candidacy: a transaction with one check
// operation on c's node at its version. It goes through the ensemble's
// leader, which refuses it unless c's session is alive and the node exists
// unchanged, so its success proves both at a moment after sent. A nil
// error means confirmed; errNodeGone wraps a node or session that is gone.
func (e *Elector) check(ctx context.Context, stop <-chan struct{}, c *candidacy) (sent time.Time, err error) {
	c.writing.Lock()
	defer c.writing.Unlock()
	e.mu.Lock()
	version := c.version
	e.mu.Unlock()
	sid := e.conn.SessionID()
	sent = clock.Now()
	var rerr error
	if derr := e.do(ctx, stop, func() {
		_, rerr = e.conn.Multi(&gozk.CheckVersionRequest{Path: c.node, Version: version})
	}); derr != nil {
		return sent, derr
	}
	switch {
	case sid != c.session || e.conn.SessionID() != c.session:
		return sent, fmt.Errorf("%w: %w: session %#x of node %s expired (the connection now has %#x)", errNodeGone, election.ErrSessionLost, c.session, c.node, e.conn.SessionID())
	case rerr == nil:
		return sent, nil
	case errors.Is(rerr, gozk.ErrNoNode):
		return sent, fmt.Errorf("%w: %w: node %s is gone (its session expired or it was deleted)", errNodeGone, election.ErrSessionLost, c.node)
	case errors.Is(rerr, gozk.ErrBadVersion):
		return sent, fmt.Errorf("%w: %w: node %s was changed by another client", errNodeGone, election.ErrSessionLost, c.node)
	case errors.Is(rerr, gozk.ErrSessionExpired):
		return sent, fmt.Errorf("%w: %w: session %#x expired", errNodeGone, election.ErrSessionLost, c.session)
	case errors.Is(rerr, gozk.ErrClosing), errors.Is(rerr, gozk.ErrConnectionClosed) && e.connClosed():
		return sent, fmt.Errorf("%w: %w: the ZooKeeper connection was closed", errNodeGone, election.ErrSessionLost)
	}
	return sent, fmt.Errorf("zk election %s: heartbeat on %s: %w", e.path, c.node, rerr)
}

// confirm makes c's leadership a Term once wait found no node ahead of it:
// a check transaction confirms the node under its session (P4), and the
// Term's deadline counts from its send time. It then starts the leader's
// heartbeats.
func (e *Elector) confirm(ctx context.Context, c *candidacy) (*election.Term, error) {
	sent, err := e.check(ctx, e.closing, c)
	return e.begin(ctx, c, sent, err)
}

// begin starts c's Term from a check sent at sent with outcome err.
func (e *Elector) begin(ctx context.Context, c *candidacy, sent time.Time, err error) (*election.Term, error) {
	if e.blip != nil {
		e.blip.Store(false) // a disconnect before this Term is not this Term's
	}
	if err != nil {
		return nil, e.stopped(ctx, c, err)
	}
	term, lc := election.NewTerm(e.o, c.leader, sent)
	e.mu.Lock()
	switch {
	case e.closed:
		err = election.ErrClosed
	case e.cand != c:
		err = election.ErrResigned
	}
	if err != nil {
		e.mu.Unlock()
		lc.End(err)
		return nil, err
	}
	c.lc = lc
	e.terms.Add(lc)
	e.wg.Add(1)
	go e.lead(c, lc, sent)
	e.mu.Unlock()
	if err := term.Err(); err != nil { // the deadline passed while confirming
		return nil, err
	}
	return term, nil
}

// lead keeps c's Term while it lasts: a heartbeat (check transaction)
// every Window/3 through the lease clock (before-renewal hook, request,
// Renewed with its send time and outcome), a watch on c's own node, and a
// look at the connection's state every statePoll. A node or session found
// gone ends the Term at once (ErrSessionLost), so does a disconnect under
// StepDownOnDisconnect; a failed heartbeat is retried after retryDelay and
// the lease clock ends the Term at its deadline if none succeeds. When the
// Term ends for any reason, the candidacy is withdrawn: its node is
// deleted, so the next candidate leads at once.
func (e *Elector) lead(c *candidacy, lc *election.LeaseClock, renewed time.Time) {
	defer e.wg.Done()
	defer e.forget(lc)
	t := lc.Term()
	interval := e.o.Window() / 3
	beat := time.NewTimer(clock.Until(renewed.Add(interval)))
	defer beat.Stop()
	poll := time.NewTicker(statePoll)
	defer poll.Stop()
	var hold <-chan time.Time // HoldUntilDeadline: fires at the deadline while disconnected
	var holdTimer *time.Timer
	defer func() {
		if holdTimer != nil {
			holdTimer.Stop()
		}
	}()
	own := e.watchOwn(c)
	for {
		select {
		case <-c.stop:
			return
		case <-t.Done():
			e.withdraw(c, t.Err())
			return
		case ev := <-own:
			own = nil
			if ev.Type == gozk.EventNodeDeleted || (ev.Type == gozk.EventNotWatching && !errors.Is(ev.Err, gozk.ErrConnectionClosed)) {
				lc.End(fmt.Errorf("%w: node %s: %v %v", election.ErrSessionLost, c.node, ev.Type, ev.Err))
				continue
			}
			own = e.watchOwn(c)
			continue
		case <-e.kick:
		case <-poll.C:
		case <-hold:
			lc.End(fmt.Errorf("%w: %w: disconnected from ZooKeeper until the session may have expired", election.ErrSessionLost, election.ErrLeaseExpired))
			continue
		case <-beat.C:
			if lc.BeforeRenew() != nil {
				continue // the Term ended: t.Done is closed
			}
			ctx, cancel := context.WithDeadline(e.bg, t.Deadline())
			sent, err := e.check(ctx, c.stop, c)
			cancel()
			lc.Renewed(sent, err)
			next := interval
			switch {
			case err == nil:
			case errors.Is(err, errNodeGone):
				lc.End(err) // wraps ErrSessionLost, with the cause
				continue
			default:
				e.log.Warn("zk election: heartbeat failed", "node", c.node, "err", err)
				next = retryDelay
			}
			beat.Reset(next)
			continue
		}
		// A look at the connection.
		st, sid := e.conn.State(), e.conn.SessionID()
		if e.blip != nil && e.blip.Swap(false) && st == gozk.StateHasSession && e.cfg.Policy == StepDownOnDisconnect {
			st = gozk.StateDisconnected // lost and regained between two looks
		}
		switch {
		case sid != c.session && sid != 0, st == gozk.StateExpired:
			lc.End(fmt.Errorf("%w: session %#x of node %s expired", election.ErrSessionLost, c.session, c.node))
		case st == gozk.StateHasSession:
			if holdTimer != nil { // reconnected in time, same session
				holdTimer.Stop()
				holdTimer, hold = nil, nil
			}
		case e.cfg.Policy == StepDownOnDisconnect:
			lc.End(fmt.Errorf("%w: disconnected from ZooKeeper (%v); stepping down at once (StepDownOnDisconnect)", election.ErrSessionLost, st))
		case holdTimer == nil:
			// Hold until just before the deadline, so that the Term ends
			// with ErrSessionLost rather than by the lease clock's timer.
			holdTimer = time.NewTimer(max(0, clock.Until(t.Deadline())-time.Millisecond))
			hold = holdTimer.C
		}
	}
}

// forget drops a Term from e.terms once its hooks are done
// (skeleton.Terms.Forget). lead returns only once the Term has ended or
// its candidacy was withdrawn (which ends it).
func (e *Elector) forget(lc *election.LeaseClock) {
	lc.End(election.ErrResigned) // no-op for a Term that has ended
	e.terms.Forget(lc)
}

// watchOwn sets a watch on c's own node, so that its deletion ends the
// Term within a round trip. It returns nil if the watch cannot be set (the
// heartbeats still find out).
func (e *Elector) watchOwn(c *candidacy) <-chan gozk.Event {
	var ok bool
	var ev <-chan gozk.Event
	var err error
	ctx, cancel := context.WithTimeout(e.bg, e.o.Window())
	defer cancel()
	if derr := e.do(ctx, c.stop, func() { ok, _, ev, err = e.conn.ExistsW(c.node) }); derr != nil || err != nil {
		return nil
	}
	if !ok {
		ch := make(chan gozk.Event, 1)
		ch <- gozk.Event{Type: gozk.EventNodeDeleted, Path: c.node}
		return ch
	}
	return ev
}

// withdraw ends c if it is still the current candidacy: its Term first (P3:
// before any I/O), then its node.
func (e *Elector) withdraw(c *candidacy, cause error) {
	e.mu.Lock()
	if e.cand != c {
		e.mu.Unlock()
		return
	}
	e.cand = nil
	e.pending = append(e.pending, c.node)
	e.mu.Unlock()
	e.end(c, cause)
	// A short wait, so that Campaign returns within 100 ms of its ctx
	// whatever the server does: a failed delete stays pending and the
	// reaper retries it in the background.
	ctx, cancel := context.WithTimeout(e.bg, releaseWait)
	defer cancel()
	_ = e.deleteNode(ctx, c.node)
}

// releaseWait bounds how long Campaign and the leader wait for a node's
// delete before leaving it to the reaper: long enough for a server that
// answers, short enough to return within 100 ms of ctx when it does not.
const releaseWait = 40 * time.Millisecond

// end ends c's Term with cause and stops its goroutines.
func (e *Elector) end(c *candidacy, cause error) {
	e.mu.Lock()
	lc := c.lc
	e.mu.Unlock()
	if lc != nil {
		if cause == nil {
			cause = election.ErrResigned
		}
		lc.End(cause)
	}
	c.halt()
}

// drop deletes a node found orphaned or abandoned, waiting releaseWait at
// most: a failed delete stays pending and the reaper retries it.
func (e *Elector) drop(node string) {
	e.mu.Lock()
	e.pending = append(e.pending, node)
	e.mu.Unlock()
	ctx, cancel := context.WithTimeout(e.bg, releaseWait)
	defer cancel()
	_ = e.deleteNode(ctx, node)
}

// deleteNode deletes node, one of this Elector's, and takes it off the
// pending list; a node already gone counts as deleted. On failure it stays
// pending: Campaign, Resign and Close try again, and meanwhile it goes
// with its session at the latest.
func (e *Elector) deleteNode(ctx context.Context, node string) error {
	var rerr error
	err := e.do(ctx, nil, func() { rerr = e.conn.Delete(node, -1) })
	if err == nil {
		err = rerr
	}
	if err == nil || errors.Is(err, gozk.ErrNoNode) {
		e.unpend(node)
		return nil
	}
	e.log.Warn("zk election: deleting a candidate node failed; retrying in the background (it goes with its session at the latest)", "node", node, "err", err)
	e.reap()
	return fmt.Errorf("zk election: deleting node %s: %w", node, err)
}

// reap starts the reaper unless it runs: it retries the pending deletes
// until none is left or the Elector closes. Unlike an etcd lease, a
// session does not end while its connection lives, so a node whose delete
// failed would otherwise stay, and block the election, for as long as the
// process runs.
func (e *Elector) reap() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.reaping || e.closed || len(e.pending) == 0 {
		return
	}
	e.reaping = true
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		b := retryDelay
		for {
			clock.Sleep(e.bg, b)
			b = min(2*b, time.Second)
			e.mu.Lock()
			if e.bg.Err() != nil || len(e.pending) == 0 {
				e.reaping = false
				e.mu.Unlock()
				return
			}
			pending := append([]string(nil), e.pending...)
			e.mu.Unlock()
			for _, p := range pending {
				ctx, cancel := context.WithTimeout(e.bg, e.o.Window())
				var rerr error
				err := e.do(ctx, nil, func() { rerr = e.conn.Delete(p, -1) })
				if err == nil {
					err = rerr
				}
				cancel()
				if err == nil || errors.Is(err, gozk.ErrNoNode) {
					e.unpend(p)
				}
			}
		}
	}()
}

func (e *Elector) unpend(node string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, p := range e.pending {
		if p == node {
			e.pending = append(e.pending[:i], e.pending[i+1:]...)
			return
		}
	}
}

// deletePending tries once more to delete the nodes of ended candidacies.
func (e *Elector) deletePending(ctx context.Context) []error {
	e.mu.Lock()
	pending := append([]string(nil), e.pending...)
	e.mu.Unlock()
	var errs []error
	for _, p := range pending {
		if err := e.deleteNode(ctx, p); err != nil {
			if ctx.Err() != nil {
				return append(errs, ctx.Err())
			}
			errs = append(errs, err)
		}
	}
	return errs
}

// Resign implements election.Elector: it ends the Term (if leading) before
// any I/O and deletes the candidate's node, so the next candidate leads at
// once. It is idempotent. If the delete fails (no connection, or ctx is
// done), Resign returns the error and the Elector retries the delete in the
// background until it succeeds; the node goes with the session at the
// latest.
func (e *Elector) Resign(ctx context.Context) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return election.ErrClosed
	}
	c := e.cand
	e.cand = nil
	if c != nil {
		e.pending = append(e.pending, c.node)
	}
	e.mu.Unlock()
	if c != nil {
		e.end(c, election.ErrResigned)
	}
	errs := e.deletePending(ctx)
	if ctx.Err() != nil {
		return ctx.Err()
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
		e.pending = append(e.pending, c.node)
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
