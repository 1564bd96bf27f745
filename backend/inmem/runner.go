package inmem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
	"github.com/electkit/election/classic"
	"github.com/electkit/election/internal/clock"
)

// errNoAck is the outcome of a renewal round that no peer accepted.
var errNoAck = errors.New("inmem: no peer accepted the renewal")

// runner is the one goroutine of a live member: it owns the member's node
// (Step, Tick and the rest are called only here), delivers its packets,
// confirms and renews its leadership, answers the probes of leaders, and
// publishes on the member's board the leader the member believes in.
//
// A passive runner has no node: its member joined after the current
// generation was built. It answers probes as a bystander and shows the
// leader that probes it.
type runner struct {
	c    *Cluster
	e    *Elector
	q    *queue
	stop chan struct{}
	done chan struct{}
	t    Timing

	gen  *generation // nil when passive
	node classic.Node
	id   classic.ID

	hold     bool // buffer the node's messages (during an admission)
	held     []packet
	seq      uint64                 // probe rounds, across leaderships
	lead     *leadership            // while the node names itself leader
	deferred map[int]*deferredProbe // probes waiting for the node to learn of their leader
	shown    shown                  // what the board shows
	lastView classic.View           // for tracing
}

// leadership is the node's leadership in one epoch, from the moment its
// view names it leader: first confirmed (rounds of probes until a peer
// accepts it and every peer has answered or timed out), then held as a
// Term renewed by further rounds.
type leadership struct {
	epoch  uint64
	leader election.Leader
	window time.Duration
	term   *termState // nil while confirming
	over   bool       // no Term (any more) for this epoch: rejected, withdrawn or ended

	rounds  []*round
	lastOK  time.Time    // send time of the newest accepted round (while confirming)
	waiting map[int]bool // peers of the first round that have not answered yet
	ticks   int          // ticks since the leadership began
	since   int          // ticks since the last round (while confirming)
}

// round is one probe of every peer.
type round struct {
	seq      uint64
	sent     time.Time
	peers    int
	down     int  // refused (crashed or gone) or passive
	reported bool // outcome given to the lease clock
}

type deferredProbe struct {
	p     probe
	ticks int
}

// shown is the leader on the member's board: member number (0: none), the
// epoch, and when it lapses without a renewal (zero for our own Term).
type shown struct {
	num   int
	epoch uint64
	lapse time.Time
}

func newRunner(c *Cluster, e *Elector) *runner {
	return &runner{c: c, e: e, q: newQueue(), stop: make(chan struct{}), done: make(chan struct{}),
		t: c.cfg.timing, deferred: map[int]*deferredProbe{}}
}

func (r *runner) run() {
	defer close(r.done)
	tick := time.NewTicker(r.t.Tick)
	defer tick.Stop()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		cmds, pkts, next := r.q.take(clock.Now())
		for _, f := range cmds {
			f()
		}
		for _, p := range pkts {
			r.deliver(p)
		}
		if len(cmds)+len(pkts) > 0 {
			continue
		}
		if !next.IsZero() {
			timer.Reset(time.Until(next))
		}
		select {
		case <-r.stop:
			return
		case <-r.q.wake:
		case <-timer.C:
		case <-tick.C:
			r.tick()
		}
		timer.Stop()
	}
}

// halt stops the runner and waits for it. Not from the runner itself.
func (r *runner) halt() {
	r.q.close()
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	<-r.done
}

// post runs f on the runner, unless it has stopped.
func (r *runner) post(f func()) { r.q.pushCmd(f) }

// call runs f on the runner and waits for it; false if the runner stopped
// first. Never called with c.mu held.
func (r *runner) call(f func()) bool {
	ran := make(chan struct{})
	if !r.q.pushCmd(func() { f(); close(ran) }) {
		return false
	}
	select {
	case <-ran:
		return true
	case <-r.done:
		select {
		case <-ran:
			return true
		default:
			return false
		}
	}
}

func (r *runner) logf(msg string, args ...any) {
	r.c.cfg.logger.Debug(msg, append([]any{"member", r.e.o.ID}, args...)...)
}

// tracing reports whether the logger wants every message and view (level
// debug-4): what a test prints to show the protocol unfold.
func (r *runner) tracing() bool {
	return r.c.cfg.logger.Enabled(context.Background(), slog.LevelDebug-4)
}

func (r *runner) trace(what string, args ...any) {
	r.c.cfg.logger.Log(context.Background(), slog.LevelDebug-4, what, append([]any{"member", r.e.o.ID}, args...)...)
}

// deliver hands a packet to the node or to the lease protocol.
func (r *runner) deliver(p packet) {
	if !r.c.net.connected(p.from, r.e.num) {
		return // the partition began while it was in flight
	}
	switch {
	case p.msg != nil:
		if r.node == nil || p.gen != r.gen.num {
			return // for another generation of nodes
		}
		r.gen.noteEpoch(p.msg.Epoch)
		if r.tracing() {
			r.trace("step", "msg", p.msg.String(), "epoch", p.msg.Epoch)
		}
		r.after(r.node.Step(*p.msg))
	case p.probe != nil:
		r.onProbe(p.from, *p.probe)
	case p.ack != nil:
		r.onAck(p.from, p.ack.seq, p.ack.epoch, p.ack.verdict, p.ack.theirs)
	case p.refused != nil:
		if r.lead != nil {
			r.onAck(p.from, p.refused.seq, r.lead.epoch, passive, 0)
		}
	case p.release != nil:
		delete(r.deferred, p.from)
		if r.shown.num == p.from && r.shown.epoch == p.release.epoch {
			r.show(shown{}, election.Leader{})
		}
	}
}

func (r *runner) tick() {
	if r.node != nil {
		r.after(r.node.Tick())
	}
	if r.shown.num != 0 && !r.shown.lapse.IsZero() && !clock.Now().Before(r.shown.lapse) {
		r.show(shown{}, election.Leader{}) // the leader stopped renewing: it may be gone
	}
	for from, d := range r.deferred {
		if d.ticks++; d.ticks >= r.t.TimeoutTicks {
			delete(r.deferred, from)
			r.answer(from, d.p, notYet, 0)
		}
	}
	if l := r.lead; l != nil && l.term == nil && !l.over {
		l.ticks++
		if l.since++; l.since >= r.t.HeartbeatTicks {
			r.startRound()
		}
		r.maybeIssue()
	}
}

// route sends the node's messages to their members' runners.
func (r *runner) route(out []classic.Message) {
	for _, m := range out {
		to := r.gen.byID[m.To]
		if to == nil || m.From != r.id {
			r.logf("inmem: dropping a message that names an unknown node", "msg", m.String())
			continue
		}
		r.gen.noteEpoch(m.Epoch)
		mm := m
		p := packet{from: r.e.num, to: to.num, gen: r.gen.num, msg: &mm}
		if r.hold {
			r.held = append(r.held, p)
			continue
		}
		r.c.net.send(p)
	}
}

// after routes what the node said and reacts to its new view.
func (r *runner) after(out []classic.Message) {
	if r.node == nil {
		return
	}
	r.route(out)
	v := r.node.View()
	r.gen.noteEpoch(v.Epoch)
	if r.tracing() && v != r.lastView {
		r.trace("view", "view", fmt.Sprintf("%+v", v))
		r.lastView = v
	}
	if s := r.shown; s.num != 0 && s.num != r.e.num && !r.names(v, s.num, s.epoch) {
		r.show(shown{}, election.Leader{}) // the node no longer names that leader
	}
	for from, d := range r.deferred {
		if vd := r.judge(v, from, d.p.epoch); vd != 0 {
			delete(r.deferred, from)
			r.answer(from, d.p, vd, v.Epoch)
		}
	}
	if l := r.lead; l != nil && !(v.HasLeader && v.Leader == r.id && v.Epoch == l.epoch) {
		r.lead = nil
		if l.term != nil && !l.over {
			l.term.lc.End(fmt.Errorf("%w: %s's node now names %s", election.ErrPreempted, r.e.o.ID, r.describe(v)))
		}
	}
	if r.lead == nil && v.HasLeader && v.Leader == r.id && !v.Electing && r.campaigning(admitted) {
		r.beginLead(v.Epoch)
	}
}

// describe names what a view says, for errors.
func (r *runner) describe(v classic.View) string {
	switch {
	case !v.HasLeader:
		return "no leader"
	case r.gen.byID[v.Leader] != nil:
		return fmt.Sprintf("%s in epoch %d", r.gen.byID[v.Leader].o.ID, v.Epoch)
	}
	return fmt.Sprintf("node %d in epoch %d", v.Leader, v.Epoch)
}

// names reports whether v names member num leader in epoch.
func (r *runner) names(v classic.View, num int, epoch uint64) bool {
	l := r.gen.byID[v.Leader]
	return v.HasLeader && v.Epoch == epoch && l != nil && l.num == num
}

// campaigning reports whether the member's candidacy is in state st.
func (r *runner) campaigning(st candState) bool {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	return r.e.cand != nil && r.e.cand.state == st && r.e.runner == r
}

// show publishes l on the member's board.
func (r *runner) show(s shown, l election.Leader) {
	r.shown = s
	r.e.board.Set(l)
}

// ---- the leader's side ----

func (r *runner) beginLead(epoch uint64) {
	o := r.e.o
	r.lead = &leadership{
		epoch:  epoch,
		leader: election.Leader{ID: o.ID, Value: o.Value, Priority: o.Priority, Token: r.gen.token(epoch, r.id)},
		window: o.Window(),
	}
	r.startRound()
	r.maybeIssue()
}

// startRound probes every peer. A round succeeds when one peer accepts, or
// when no peer could: all are down or take no part in the algorithm. A
// renewal round that has not succeeded when the next one starts is
// reported as failed.
func (r *runner) startRound() {
	l := r.lead
	l.since = 0
	peers := r.c.peers(r.e.num)
	r.seq++
	rd := &round{seq: r.seq, sent: clock.Now(), peers: len(peers)}
	keep := l.rounds[:0]
	for _, old := range l.rounds {
		if !old.reported && l.term != nil {
			old.reported = true
			l.term.lc.Renewed(old.sent, errNoAck)
		}
		if old.seq+2 > rd.seq {
			keep = append(keep, old)
		}
	}
	l.rounds = append(keep, rd)
	if l.waiting == nil {
		l.waiting = make(map[int]bool, len(peers))
		for _, p := range peers {
			l.waiting[p] = true
		}
	}
	pr := probe{seq: rd.seq, epoch: l.epoch, leader: l.leader, window: l.window}
	for _, p := range peers {
		r.c.net.send(packet{from: r.e.num, to: p, probe: &pr})
	}
	if rd.peers == 0 {
		r.roundOK(rd)
	}
}

func (r *runner) roundOK(rd *round) {
	rd.reported = true
	l := r.lead
	if l.term != nil {
		l.term.lc.Renewed(rd.sent, nil)
		return
	}
	if rd.sent.After(l.lastOK) {
		l.lastOK = rd.sent
	}
}

func (r *runner) onAck(from int, seq, epoch uint64, vd verdict, theirs uint64) {
	l := r.lead
	if l == nil || epoch != l.epoch || l.over {
		return
	}
	delete(l.waiting, from)
	var rd *round
	for _, x := range l.rounds {
		if x.seq == seq {
			rd = x
		}
	}
	switch vd {
	case accept:
		if rd != nil && !rd.reported {
			r.roundOK(rd)
		}
	case passive:
		if rd != nil && !rd.reported {
			if rd.down++; rd.down == rd.peers {
				r.roundOK(rd)
			}
		}
	case reject:
		// A peer's node names a newer leadership, or another of the same
		// epoch (two sides of a healed partition): this one may have been
		// replaced. Stop at once rather than wait for our node to learn;
		// the Term's end makes the node step down into an election.
		l.over = true
		if l.term != nil {
			l.term.lc.End(fmt.Errorf("%w: %s names a newer or rival leadership (epoch %d, ours %d)",
				election.ErrPreempted, r.c.name(from), theirs, l.epoch))
		} else if theirs == l.epoch {
			// Not confirmed yet, and rivals in one epoch: neither algorithm
			// resolves that by itself, so our node holds an election, as a
			// node that notices its leader situation is wrong does.
			r.after(r.node.Start())
		}
	}
	r.maybeIssue()
}

// maybeIssue hands out the Term once the leadership is confirmed (P4): the
// node names itself leader, a round was accepted recently enough that its
// lease is still valid, and every peer has answered or had TimeoutTicks
// to, so that every reachable member already shows the new leader.
func (r *runner) maybeIssue() {
	l := r.lead
	if l == nil || l.term != nil || l.over || l.lastOK.IsZero() {
		return
	}
	if len(l.waiting) > 0 && l.ticks < r.t.TimeoutTicks {
		return
	}
	if !clock.Now().Before(l.lastOK.Add(l.window)) {
		return // lapsed while waiting: the next accepted round will do
	}
	c, e := r.c, r.e
	c.mu.Lock()
	defer c.mu.Unlock()
	cd := e.cand
	if cd == nil || cd.state != admitted || e.closed || e.crashed || e.runner != r {
		l.over = true // withdrawn: whoever withdrew makes the node ineligible
		return
	}
	t, lc := backend.NewTerm(e.o, l.leader, l.lastOK)
	if t.Err() != nil {
		return
	}
	ts := &termState{term: t, lc: lc, epoch: l.epoch}
	l.term = ts
	r.show(shown{num: e.num, epoch: l.epoch}, l.leader)
	e.term = ts
	cd.state = leading
	cd.resolveLocked(ts, nil)
	e.wg.Add(1)
	go e.leaseLoop(ts)
	c.wakeController() // a leader made WithPreemption: the controller watches its challengers
}

// renew starts a renewal round of ts, if it is still this runner's.
func (r *runner) renew(ts *termState) {
	if l := r.lead; l != nil && l.term == ts && !l.over {
		r.startRound()
	}
}

// stepDown ends the member's part in a leadership or candidacy that ended
// (ts may be nil: a candidacy withdrawn before it led): peers stop showing
// it at once if tell (not when the algorithm preempted it: they know
// better), and the node stops standing for election unless its member
// campaigns again, so that "an election follows at once".
func (r *runner) stepDown(ts *termState, tell bool) {
	if l := r.lead; l != nil && ts != nil && l.term == ts && !l.over {
		l.over = true
		if tell {
			rel := &release{epoch: l.epoch}
			for _, p := range r.c.peers(r.e.num) {
				r.c.net.send(packet{from: r.e.num, to: p, release: rel})
			}
		}
	}
	if ts != nil && r.shown.num == r.e.num && r.shown.epoch == ts.epoch {
		r.show(shown{}, election.Leader{})
	}
	if r.node != nil && !r.campaigning(admitted) && !r.campaigning(leading) {
		r.after(r.node.SetEligible(false))
	}
}

// makeEligible and startElection admit a candidacy in two phases (see
// Cluster.admit). The node turns eligible first, with its messages held
// back: a bully node that turns eligible elects at once, and its Election
// must not reach a batch-mate that is not eligible yet (it would not answer,
// and the asker would lead by default). Then it starts an election unless
// turning eligible did, and what it held goes out.
func (r *runner) makeEligible(cd *candidacy) {
	if r.node != nil && r.admittedNow(cd) {
		r.hold = true
		r.after(r.node.SetEligible(true))
	}
}

func (r *runner) startElection(cd *candidacy) {
	if r.node != nil && r.admittedNow(cd) {
		if v := r.node.View(); !v.Electing && !(v.HasLeader && v.Leader == r.id) {
			r.after(r.node.Start())
		}
	}
	r.release()
}

// release sends the messages held back.
func (r *runner) release() {
	r.hold = false
	for _, p := range r.held {
		r.c.net.send(p)
	}
	r.held = nil
}

func (r *runner) admittedNow(cd *candidacy) bool {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	return r.e.cand == cd && cd.state == admitted
}

// recoverNode restarts a crashed node. A crash ended its candidacy, so it
// comes back not standing for election.
func (r *runner) recoverNode() {
	if r.node == nil {
		return
	}
	r.node.SetEligible(false) // still down: what it would say is lost
	r.after(r.node.Recover())
}

// ---- the follower's side ----

// judge says how the node's view v answers a probe from member from for
// epoch: accept, reject, or 0 (not yet: wait for the node to learn).
func (r *runner) judge(v classic.View, from int, epoch uint64) verdict {
	if !v.HasLeader {
		return 0
	}
	l := r.gen.byID[v.Leader]
	same := l != nil && l.num == from
	switch {
	case same && v.Epoch == epoch:
		return accept
	case v.Epoch > epoch, v.Epoch == epoch && !same:
		return reject
	}
	return 0
}

func (r *runner) onProbe(from int, p probe) {
	if r.node == nil {
		r.show(shown{num: from, epoch: p.epoch, lapse: clock.Now().Add(p.window)}, p.leader)
		r.answer(from, p, passive, 0)
		return
	}
	v := r.node.View()
	vd := r.judge(v, from, p.epoch)
	if vd == 0 {
		r.deferred[from] = &deferredProbe{p: p}
		return
	}
	r.answer(from, p, vd, v.Epoch)
}

// answer replies to a probe; an accepted leader is shown until it stops
// renewing (its window after this probe arrived, which is no earlier than
// the end of its Term).
func (r *runner) answer(to int, p probe, vd verdict, theirs uint64) {
	if vd == accept {
		r.show(shown{num: to, epoch: p.epoch, lapse: clock.Now().Add(p.window)}, p.leader)
	}
	r.c.net.send(packet{from: r.e.num, to: to, ack: &ack{seq: p.seq, epoch: p.epoch, verdict: vd, theirs: theirs}})
}
