package inmem

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/classic"
	"github.com/electkit/election/internal/skeleton"
	"github.com/electkit/election/internal/watch"
)

// errDown is the cause of a member's failures while it is crashed.
var errDown = errors.New("inmem: member is crashed")

// Cluster is one election run live by a classic algorithm: one node per
// member, each driven by its own goroutine, exchanging messages over an
// in-process network. Its members are Electors (Join). The fault-injection
// methods (Crash, Recover, Partition, Heal) make it a test double for code
// that uses an election.Elector. All methods are safe for concurrent use.
type Cluster struct {
	alg Algorithm
	cfg config
	net *network

	// ops serializes what changes the cluster's structure (joins, closes,
	// admissions, rebuilds, faults); it is held while waiting for runners,
	// never by them.
	ops sync.Mutex

	mu      sync.Mutex // guards what follows and every Elector's state
	closed  bool
	members []*Elector // joined and not closed, in join order
	nextNum int
	gen     *generation // the nodes built last; nil before the first admission
	group   map[int]int // the partition, by member number
	handoff *handoff    // a transfer or preemption under way, nil if none

	wakeCh   chan struct{}
	stopCtrl chan struct{}
	ctrlDone chan struct{}
}

// generation is one build of the algorithm's nodes over a fixed membership,
// made at each admission (see admit), when the election is idle, so that no
// leadership is lost by it.
type generation struct {
	num     uint64
	base    uint64 // added to the algorithm's epochs: tokens keep growing across generations
	members []*Elector
	byID    map[classic.ID]*Elector
	id      map[*Elector]classic.ID

	maxEpoch atomic.Uint64 // the highest epoch any node of this generation has used
}

func (g *generation) noteEpoch(e uint64) {
	for {
		cur := g.maxEpoch.Load()
		if e <= cur || g.maxEpoch.CompareAndSwap(cur, e) {
			return
		}
	}
}

// token is the fencing token of the leadership of node id in epoch:
// (generation base + epoch) << 16 | id. The epoch part strictly increases
// across successive leaderships; the id part tells apart two leaders that
// partitions let use the same epoch.
func (g *generation) token(epoch uint64, id classic.ID) uint64 {
	return (g.base+epoch)<<16 | uint64(id)
}

// NewCluster returns an empty cluster that runs alg. Options are checked:
// a refused one is an *election.OptionError wrapping
// election.ErrInvalidOption that names it and its value. Close releases the
// cluster and every member.
func NewCluster(alg Algorithm, opts ...ClusterOption) (*Cluster, error) {
	if alg.newNode == nil {
		return nil, optErr("inmem.Algorithm", strconv.Quote(alg.name), "use one of Algorithms(): "+algorithmNames())
	}
	cfg := defaultConfig()
	for i, opt := range opts {
		if opt == nil {
			return nil, optErr("inmem.ClusterOption", "option #"+strconv.Itoa(i)+" is nil", "")
		}
		opt(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Cluster{
		alg:      alg,
		cfg:      cfg,
		net:      newNetwork(cfg.timing.Latency),
		wakeCh:   make(chan struct{}, 1),
		stopCtrl: make(chan struct{}),
		ctrlDone: make(chan struct{}),
	}
	go c.control()
	return c, nil
}

// Algorithm returns the algorithm the cluster runs.
func (c *Cluster) Algorithm() Algorithm { return c.alg }

// Timing returns the cluster's clockwork, with the derived lease TTL.
func (c *Cluster) Timing() Timing { return c.cfg.timing }

// Join adds a member and returns its Elector. The options are those of
// every backend (election.NewOptions), with these rules: the TTL is the
// cluster's Timing().LeaseTTL, which is the default here, and any other
// value is refused (the failure detector, not the member, decides how long
// a leader may act); IDs must be unique among the cluster's members;
// Priority is the algorithm's election attribute. A member takes part in
// the algorithm from the next batch of candidates on (see "Membership and
// Campaign" in the package doc); until then it learns the leader from the
// leader's renewals.
func (c *Cluster) Join(opts ...election.Option) (*Elector, error) {
	ttl := c.cfg.timing.LeaseTTL
	o, err := election.NewOptions(append([]election.Option{election.WithTTL(ttl)}, opts...)...)
	if err != nil {
		return nil, err
	}
	if o.TTL != ttl {
		return nil, optErr("TTL", o.TTL.String(), fmt.Sprintf("the lease TTL of an inmem cluster is %v, derived from its failure detector (inmem.WithTimeoutTicks, inmem.WithTick)", ttl))
	}
	c.ops.Lock()
	defer c.ops.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, election.ErrClosed
	}
	if len(c.members) >= MaxMembers {
		return nil, optErr("ID", strconv.Quote(o.ID), fmt.Sprintf("the cluster is full (MaxMembers = %d)", MaxMembers))
	}
	for _, m := range c.members {
		if m.o.ID == o.ID {
			return nil, optErr("ID", strconv.Quote(o.ID), "is already a member of this cluster")
		}
	}
	c.nextNum++
	gate := skeleton.NewGate()
	e := &Elector{
		c:       c,
		num:     c.nextNum,
		o:       o,
		board:   watch.NewBoard(),
		gate:    gate,
		closing: gate.Closing(),
	}
	c.members = append(c.members, e)
	c.startRunnerLocked(e)
	return e, nil
}

// startRunnerLocked starts e's runner: active if e's node is built in the
// current generation, passive otherwise.
func (c *Cluster) startRunnerLocked(e *Elector) *runner {
	r := newRunner(c, e)
	if e.gen != nil && e.gen == c.gen {
		r.gen, r.node, r.id = e.gen, e.node, e.gen.id[e]
	}
	e.runner = r
	c.net.attach(e.num, r)
	go r.run()
	return r
}

// wakeController makes the controller look at the gate.
func (c *Cluster) wakeController() {
	select {
	case c.wakeCh <- struct{}{}:
	default:
	}
}

// control admits waiting candidates whenever the election is idle, and
// keeps the clock of preemptions and hand-overs (see handover.go).
func (c *Cluster) control() {
	defer close(c.ctrlDone)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-c.stopCtrl:
			return
		case <-c.wakeCh:
		case <-timer.C:
		}
		c.ops.Lock()
		c.admit()
		next := c.watchHandovers()
		c.ops.Unlock()
		timer.Stop()
		if !next.IsZero() {
			timer.Reset(time.Until(next))
		}
	}
}

// admit is the gate. Campaigns are admitted into the algorithm in batches,
// only when the election is idle: no member holds a Term that may still be
// valid (a crashed leader's included) and every candidate admitted before
// has led or withdrawn. Then the cluster builds the algorithm's nodes afresh
// over the current members (the classic state machines have static
// membership, and a node must not carry what it knew of the previous batch:
// a bully node that remembers a member as "not standing" would lead without
// asking it), every waiting candidate becomes eligible at once (all of them
// before any message goes out), and the algorithm elects the best of them.
// When that one's Term ends, the algorithm elects the next best of the
// batch, and so on. So a better candidate never preempts a valid leader: it
// waits for its batch, unless the leader hands over to it (a transfer, or a
// preemption: see handover.go): then the next batch is that candidate
// alone. Called with c.ops held.
func (c *Cluster) admit() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	h := c.handoffLocked()
	var batch []*Elector
	for _, e := range c.members {
		if e.term != nil {
			c.mu.Unlock()
			return // a leader's Term may be valid
		}
		if e.cand == nil || e.crashed {
			continue
		}
		if e.cand.state != pending {
			c.mu.Unlock()
			return // an earlier batch is still campaigning
		}
		if h == nil || h.target == e {
			batch = append(batch, e)
		}
	}
	if len(batch) == 0 {
		c.mu.Unlock()
		return
	}
	var boost *Elector
	if h != nil {
		boost = h.target
	}
	cands := make([]*candidacy, len(batch))
	for i, e := range batch {
		e.cand.state = admitted
		cands[i] = e.cand
	}
	c.mu.Unlock()
	if err := c.rebuild(boost); err != nil {
		c.mu.Lock()
		for i, e := range batch {
			if e.cand == cands[i] {
				e.cand = nil
				cands[i].resolveLocked(nil, err)
			}
		}
		c.mu.Unlock()
		return
	}
	rs := make([]*runner, len(batch))
	c.mu.Lock()
	for i, e := range batch {
		rs[i] = e.runner
	}
	c.mu.Unlock()
	for _, phase := range []func(*runner, *candidacy){(*runner).makeEligible, (*runner).startElection} {
		for i, r := range rs {
			if r != nil {
				r.call(func() { phase(r, cands[i]) })
			}
		}
	}
}

// rebuild builds the algorithm's nodes afresh for the current members and
// restarts their runners. Node IDs count down from the number of members in
// join order, so that between equal priorities the earlier member ranks
// higher; the ring's order is the join order. The new generation's epochs
// count on from the highest epoch of the last. Called with c.ops held, when
// the election is idle.
//
// boost, if not nil, is the target of a hand-over, the only candidate of
// the batch: it ranks above every member in this build (its election
// attribute is the highest there is) and its node stands from the start
// instead of turning eligible, so that every algorithm elects it at once
// (a bully node that turns eligible waits out an OK timeout, which a node
// that knows it ranks highest does not). Its Leader still shows its own
// Priority; the next build ranks everyone as usual.
func (c *Cluster) rebuild(boost *Elector) error {
	c.mu.Lock()
	var old []*runner
	for _, e := range c.members {
		if e.runner != nil {
			old = append(old, e.runner)
		}
	}
	c.mu.Unlock()
	for _, r := range old {
		r.halt()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	g := &generation{byID: map[classic.ID]*Elector{}, id: map[*Elector]classic.ID{}}
	if c.gen != nil {
		g.num = c.gen.num + 1
		g.base = c.gen.base + c.gen.maxEpoch.Load()
	}
	g.members = append([]*Elector(nil), c.members...)
	n := len(g.members)
	ms := make([]classic.Member, n)
	for i, e := range g.members {
		id := classic.ID(n - i)
		ms[i] = classic.Member{ID: id, Attr: e.o.Priority}
		if boost != nil {
			ms[i].Attr = min(ms[i].Attr, math.MaxInt64-1)
			if e == boost {
				ms[i].Attr = math.MaxInt64
			}
		}
		g.byID[id] = e
		g.id[e] = id
	}
	nodes := make([]classic.Node, n)
	var err error
	for i, e := range g.members {
		cfg := classic.Config{ID: g.id[e], Members: append([]classic.Member(nil), ms...),
			HeartbeatTicks: c.cfg.timing.HeartbeatTicks, TimeoutTicks: c.cfg.timing.TimeoutTicks}
		if nodes[i], err = c.alg.newNode(cfg); err != nil {
			err = fmt.Errorf("inmem: building the %v node of %s: %w", c.alg, e.o.ID, err)
			break
		}
		// Nodes stand for election only while their member campaigns (a
		// hand-over's target stands from the start: see above).
		if e != boost {
			nodes[i].SetEligible(false)
		}
	}
	if err == nil {
		c.gen = g
		for i, e := range g.members {
			e.node, e.gen = nodes[i], g
		}
	}
	for _, e := range g.members {
		e.board.Set(election.Leader{})
		if !e.crashed {
			c.startRunnerLocked(e)
		}
	}
	return err
}

func (c *Cluster) member(e *Elector) error {
	if e == nil || e.c != c {
		id := "nil"
		if e != nil {
			id = strconv.Quote(e.o.ID)
		}
		return optErr("Elector", id, "is not a member of this cluster")
	}
	return nil
}

// Crash makes e's member die without resigning, as a process that stops:
// its node gets nothing more (a probe to it is refused), its goroutine stops,
// a Campaign it is waiting in fails with election.ErrSessionLost, and its
// calls fail so until Recover. A Term it holds is not renewed and ends at
// its Deadline with election.ErrLeaseExpired: the application of a crashed
// leader that is still running (a paused process, say) sees exactly how
// long it may act. Crashing a crashed member does nothing.
func (c *Cluster) Crash(e *Elector) error {
	if err := c.member(e); err != nil {
		return err
	}
	c.ops.Lock()
	defer c.ops.Unlock()
	c.mu.Lock()
	if e.closed || e.crashed {
		closed := e.closed
		c.mu.Unlock()
		if closed {
			return election.ErrClosed
		}
		return nil
	}
	e.crashed = true
	r := e.runner
	e.runner = nil
	if cd := e.cand; cd != nil && cd.state != leading {
		e.cand = nil
		cd.resolveLocked(nil, fmt.Errorf("%w: %s: %w", election.ErrSessionLost, e.o.ID, errDown))
	}
	c.mu.Unlock()
	c.net.detach(e.num)
	if r != nil {
		r.halt()
	}
	c.wakeController()
	return nil
}

// Recover restarts a crashed member. Its node keeps only what the
// algorithm keeps across a crash (its highest epoch) and rejoins as the
// algorithm says (the bully holds an election); it stands for election
// only when its Elector campaigns again. A Term it held and that has not
// lapsed yet ends with election.ErrSessionLost: the process that held it
// is gone. Recovering a live member does nothing.
func (c *Cluster) Recover(e *Elector) error {
	if err := c.member(e); err != nil {
		return err
	}
	c.ops.Lock()
	defer c.ops.Unlock()
	c.mu.Lock()
	if e.closed || !e.crashed {
		closed := e.closed
		c.mu.Unlock()
		if closed {
			return election.ErrClosed
		}
		return nil
	}
	e.crashed = false
	ts := e.term
	r := c.startRunnerLocked(e)
	c.mu.Unlock()
	if ts != nil {
		ts.lc.End(fmt.Errorf("%w: %s crashed and recovered", election.ErrSessionLost, e.o.ID))
	}
	r.call(r.recoverNode)
	c.wakeController()
	return nil
}

// Partition splits the network: messages pass only between members of the
// same group; the members named in no group form one more group together.
// Messages in flight across the new split are lost. A later Partition
// replaces this one. The algorithms assume a network that never splits:
// each side may elect its own leader, and both leaders' Terms stay valid
// while each hears from a peer on its side (see the package doc).
func (c *Cluster) Partition(groups ...[]*Elector) error {
	c.ops.Lock()
	defer c.ops.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return election.ErrClosed
	}
	g := map[int]int{}
	for i, grp := range groups {
		for _, e := range grp {
			if err := c.member(e); err != nil {
				return err
			}
			if _, dup := g[e.num]; dup {
				return optErr("Partition", strconv.Quote(e.o.ID), "is in two groups")
			}
			g[e.num] = i + 1
		}
	}
	c.group = g
	c.net.partition(g)
	return nil
}

// Heal ends the partition. The algorithms have no rule for merging the
// leaderships of two sides; the cluster's lease protocol notices them: a
// leader whose probe a peer rejects because the peer's node names a newer
// leadership (or another one of the same epoch) loses its Term
// (election.ErrPreempted) and its node steps down into an election that now
// runs over the whole network, so the members converge on one leader,
// usually the newer side's, whose Term survives.
func (c *Cluster) Heal() error {
	c.ops.Lock()
	defer c.ops.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return election.ErrClosed
	}
	c.group = nil
	c.net.partition(nil)
	return nil
}

// Close closes every member (see Elector.Close) and stops the cluster. It
// waits for every goroutine the cluster started. Safe to call twice.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	members := append([]*Elector(nil), c.members...)
	c.mu.Unlock()
	for _, e := range members {
		e.Close()
	}
	c.ops.Lock()
	c.mu.Lock()
	c.closed = true
	rest := append([]*Elector(nil), c.members...)
	c.mu.Unlock()
	c.ops.Unlock()
	for _, e := range rest { // joined while closing
		e.Close()
	}
	close(c.stopCtrl)
	<-c.ctrlDone
	return nil
}

// name returns the ID of member num, for errors.
func (c *Cluster) name(num int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.members {
		if e.num == num {
			return e.o.ID
		}
	}
	return "member #" + strconv.Itoa(num)
}

// peers returns the member numbers of every member but num.
func (c *Cluster) peers(num int) []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	ps := make([]int, 0, len(c.members))
	for _, e := range c.members {
		if e.num != num {
			ps = append(ps, e.num)
		}
	}
	return ps
}
