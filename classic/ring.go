// Ring election [ChangRoberts], following the rules of the sources: [Misra]
// "Ring LE", [Notebook] "Ring Election" and [Pedersen]'s LCR.
//
// The rules, as the sources state them:
//
//   - Messages go clockwise: member i sends to member i+1 mod N (Config.Members
//     order), skipping members it takes for dead.
//   - Start: "any process that discovers the old coordinator has failed
//     initiates an election" with Election{Cand: own rank, Initiator: self}.
//   - On Election: "if the arrived attribute is greater, forward the message;
//     if it is smaller and p has not forwarded an election message earlier,
//     overwrite it with its own and forward it" (else swallow it); "if the
//     arrived id matches that of p, then p is the new coordinator" and sends
//     Elected around the ring.
//   - On Elected: set the leader and "forward the message, unless it is the
//     new coordinator" (the winner stops it when it comes back).
//   - Multiple initiators: "each process remembers the initiator of each
//     election message it receives and suppresses the election messages of
//     any lower-id initiators", so only the highest initiator's run completes.
//   - Failures ([Misra] at 16:50, [Notebook] "Predecessor Detection"): the
//     predecessor of a dead node detects it and re-initiates; a node "can time
//     out waiting between Election and Elected", "or if it gets an
//     (Elected:80) message but knows 80 has failed" it re-initiates.
//   - Slides: "a process that was previously down comes back up, it holds an
//     election".
//
// Messages carry 2N when the initiator is the would-be leader, 3N−1 when it
// is the would-be leader's successor, and in general 2N + d, d the number of
// hops from the initiator to the best node (ring_test.go asserts these).
//
// What this file adds to the sources, and why:
//
//   - Runs. An election run is named by (Run, Initiator's rank); Start picks
//     Run = highest run seen + 1. A node taking part in a run suppresses runs
//     with a lower key and switches to a higher one (resetting "has
//     forwarded"): this is the sources' initiator suppression, extended so that
//     a re-initiation always supersedes a stale run that died with its would-be
//     leader. A node not taking part in any election joins any run it meets.
//   - Failure detector: every HeartbeatTicks a node sends Heartbeat to its
//     successor; a successor that has not Acked the oldest unanswered
//     Heartbeat within TimeoutTicks is taken as dead and skipped. If it was
//     the leader, or an election is running, the node initiates an election.
//     An Election or Elected whose candidate this node has skipped is dropped
//     and an election initiated ([Notebook]: "(Elected:80) but knows 80 has
//     failed"). A node taking part in an election that sees no Elected within
//     N·TimeoutTicks (re-armed by every message of the election; a lap is at
//     most N hops and a hop takes well under TimeoutTicks) initiates again.
//   - Taking a node back: a skipped node is taken back as successor as soon
//     as a message from it arrives, or an Election of a run it initiated. A
//     node without leader that takes one back initiates (the ring grew). Such
//     a message from the current successor likewise counts as its answer to
//     the outstanding Heartbeat. A recovering node announces itself with a
//     Heartbeat to its 16 nearest predecessors in the configuration, and
//     every node also probes one skipped node per heartbeat period, round
//     robin, so a recovered node is found even behind a longer run of dead
//     predecessors.
//   - Eligibility: an ineligible node never puts itself forward: it forwards
//     every Election unchanged, and when it initiates, its Election carries no
//     candidate, which is the zero Rank (ID 0 is reserved, so no member has
//     it) and ranks below every member. An eligible node overwrites it like
//     any lower candidate. If the ineligible initiator gets its own run back
//     still without a candidate, no eligible node is alive: it sends
//     Elected{Cand: zero Rank} around to close the election with no leader. A
//     leader that turns ineligible steps down and initiates at once; a node
//     that turns eligible initiates if it ranks above the leader or there is
//     none; a node that learns of a leader it ranks above, or of an election
//     closed with no leader, while it is eligible initiates (the run passed
//     it by: it was skipped, or did not stand yet).
//
// Epochs (fencing tokens). Every Election carries the highest epoch known
// along its path: each node raises m.Epoch to its own highest before
// forwarding, and learns m.Epoch itself. The winner's own Election has just
// gone once around every live node, so it knows the highest epoch of all of
// them, and announces that + 1 in Elected. A leader that wins a run while it
// still leads, knowing no later epoch, re-announces its own epoch: its
// leadership continues and no one sees a new term for nothing. A node keeps
// its highest epoch across Recover and forgets everything else. The rule for
// an Elected{L, e} that is stale for the receiver (e below its highest epoch,
// or equal to it while it knows another leader held that epoch): the receiver
// does not adopt or forward it and initiates an election instead; its own
// Election carries its higher epoch around the ring, so the winner of that
// run announces an epoch above every epoch it or anyone on the ring knew. An
// epoch announced by two leaders counts as used up: the receiver raises its
// highest epoch to e+1, so that L too learns of a higher epoch than its own,
// steps down, and cannot re-announce e. Likewise a leader that learns of an
// epoch above its own (from a Heartbeat or Ack) steps down and initiates, and
// a follower that does missed an Elected: it counts itself in an election,
// so that it initiates if none comes within the timeout. Epochs thus strictly
// increase across
// successive leaderships as long as some live node remembers the latest one;
// no algorithm without stable storage at a quorum can promise more.

package classic

import (
	"fmt"
	"math"
)

// Ring is one node of a Chang–Roberts ring election. Build it with NewRing,
// NewRingFrom or NewRingsFrom. Methods are not safe for concurrent use.
type Ring struct {
	mem     *Membership
	rank    Rank // own rank; its ID is the node's
	hbTicks uint64
	toTicks uint64

	maxEpoch    uint64 // the only state that survives Recover
	epochLeader ID     // who led maxEpoch, 0 if unknown
	leaderEpoch uint64

	run      uint64 // the election run this node takes part in (or took last)
	maxRun   uint64 // the highest run seen
	deadline uint64 // re-initiate at this tick if still electing
	doneRun  uint64 // the run of the last Elected passed on

	now      uint64
	nextHB   uint64
	seq      uint64
	probeSeq uint64 // the oldest unanswered Heartbeat to the successor
	probeAt  uint64 // when it was sent

	// Positions in mem.
	self     int32
	leader   int32 // meaningful if hasLeader
	init     int32 // the run's initiator
	doneInit int32 // the initiator of the last Elected passed on; -1 if none
	succ     int32 // current successor
	cursor   int32 // next skipped node to probe

	eligible  bool
	hasLeader bool
	electing  bool
	forwarded bool // has forwarded an Election of this run
	probing   bool // a Heartbeat to the successor is unanswered
}

var _ Node = (*Ring)(nil)

// NewRing returns the ring node cfg.ID. It indexes cfg.Members, which costs
// O(len(cfg.Members)); to build many nodes over one member list, call
// NewMembership once and NewRingFrom (or NewRingsFrom) with it.
func NewRing(cfg Config) (*Ring, error) {
	m, err := NewMembership(cfg.Members)
	if err != nil {
		return nil, err
	}
	return NewRingFrom(m, cfg.ID, cfg.HeartbeatTicks, cfg.TimeoutTicks)
}

// NewRingFrom returns the ring node id of membership m, in O(1): the node
// keeps a pointer to m and shares it with every other node built from it.
// The ring order is m's member order. The ticks are as in Config.
func NewRingFrom(m *Membership, id ID, heartbeatTicks, timeoutTicks int) (*Ring, error) {
	i, err := m.nodeConfig(id, heartbeatTicks, timeoutTicks)
	if err != nil {
		return nil, err
	}
	r := new(Ring)
	r.init0(m, i, heartbeatTicks, timeoutTicks)
	return r, nil
}

// NewRingsFrom returns every node of membership m, in m's order, in one
// allocation: &rings[i] is member i's node. For very large rings it is much
// cheaper than one NewRingFrom per node, and neighbours sit side by side in
// memory.
func NewRingsFrom(m *Membership, heartbeatTicks, timeoutTicks int) ([]Ring, error) {
	if m == nil {
		return nil, fmt.Errorf("%w: nil Membership", ErrInvalidConfig)
	}
	if _, err := m.nodeConfig(m.members[0].ID, heartbeatTicks, timeoutTicks); err != nil {
		return nil, err
	}
	rings := make([]Ring, m.Len())
	for i := range rings {
		rings[i].init0(m, i, heartbeatTicks, timeoutTicks)
	}
	return rings, nil
}

func (r *Ring) init0(m *Membership, i, heartbeatTicks, timeoutTicks int) {
	r.mem = m
	r.self = int32(i)
	r.rank = m.members[i].Rank()
	r.hbTicks, r.toTicks = uint64(heartbeatTicks), uint64(timeoutTicks)
	r.eligible = true
	r.doneInit = -1
	r.resetDetector()
}

// ID returns the node's ID.
func (r *Ring) ID() ID { return r.rank.ID }

// View reports whom the node believes leads, and in which epoch.
func (r *Ring) View() View {
	v := View{Electing: r.electing}
	if r.hasLeader {
		v.Leader, v.Epoch, v.HasLeader = r.idAt(r.leader), r.leaderEpoch, true
	}
	return v
}

// Start initiates an election: the node noticed the leader is gone, so it
// forgets it (a leader calling Start steps down).
func (r *Ring) Start() []Message { return r.initiate(true) }

// announceTo is how many predecessors a recovering node announces itself to.
const announceTo = 16

// Recover restarts the node after a crash. It keeps only its highest epoch
// (and its eligibility, which is the operator's setting), announces itself
// with a Heartbeat to its nearest predecessors in the configuration (up to
// 16: any of them may be the live node that skipped it, and takes it back,
// or may be about to skip it, and does not), and initiates an election.
func (r *Ring) Recover() []Message {
	r.epochLeader = 0
	r.hasLeader = false
	r.electing, r.forwarded = false, false
	r.run, r.init, r.maxRun = 0, r.self, 0
	r.doneRun, r.doneInit = 0, -1
	r.resetDetector()
	var out []Message
	r.seq++
	for p, i := r.prev(r.pos()), 0; p != r.pos() && i < announceTo; p, i = r.prev(p), i+1 {
		out = append(out, r.to(p, Message{Kind: Heartbeat, Seq: r.seq, Epoch: r.maxEpoch}))
	}
	return append(out, r.initiate(true)...)
}

// SetEligible makes the node stand for election or not.
func (r *Ring) SetEligible(eligible bool) []Message {
	if eligible == r.eligible {
		return nil
	}
	r.eligible = eligible
	if !eligible {
		if r.leads() {
			return r.initiate(true) // step down; the run finds the best eligible node
		}
		return nil
	}
	if !r.hasLeader || r.rankAt(int(r.leader)).Less(r.rank) {
		return r.initiate(false) // a run under way may have passed us by: start a newer one
	}
	return nil
}

// Tick advances time: heartbeats to the successor, its failure, probes of
// skipped nodes, and the election timeout.
func (r *Ring) Tick() []Message {
	r.now++
	var out []Message
	if r.succ != r.self && r.probing && r.now-r.probeAt >= r.toTicks {
		out = append(out, r.skipSuccessor()...)
	}
	if r.now >= r.nextHB {
		r.nextHB = satAdd(r.now, r.hbTicks)
		if r.succ != r.self {
			r.seq++
			out = append(out, r.to(int(r.succ), Message{Kind: Heartbeat, Seq: r.seq, Epoch: r.maxEpoch}))
			if !r.probing {
				r.probing, r.probeSeq, r.probeAt = true, r.seq, r.now
			}
		}
		if r.hasSkips() {
			if !r.skipped(int(r.cursor)) {
				r.cursor = int32(r.next(r.pos()))
			}
			r.seq++
			out = append(out, r.to(int(r.cursor), Message{Kind: Heartbeat, Seq: r.seq, Epoch: r.maxEpoch}))
			r.cursor = int32(r.next(int(r.cursor)))
		}
	}
	if r.electing && r.now >= r.deadline {
		out = append(out, r.initiate(false)...)
	}
	return out
}

// Step handles one message addressed to this node. Messages of an unknown
// kind, from or about unknown nodes, or otherwise malformed are ignored.
func (r *Ring) Step(m Message) []Message {
	if m.To != r.rank.ID {
		return nil
	}
	switch m.Kind {
	case Election, Elected, Heartbeat, Ack:
	default:
		return nil
	}
	from, ok := r.mem.index(m.From)
	if !ok {
		return nil
	}
	var out []Message
	if from == int(r.succ) {
		r.probing = false // any message from the successor shows it alive
	}
	if r.hasSkips() && r.skipped(from) {
		r.takeBack(from) // it is alive after all
		if !r.hasLeader && !r.electing {
			out = r.initiate(false) // the ring grew: it may hold a candidate now
		}
	}
	switch m.Kind {
	case Election:
		return appendAll(out, r.onElection(m))
	case Elected:
		return appendAll(out, r.onElected(m))
	case Heartbeat:
		out = append(out, r.learn(m.Epoch)...)
		return append(out, Message{Kind: Ack, From: r.rank.ID, To: m.From, Seq: m.Seq, Epoch: r.maxEpoch})
	default: // Ack
		out = append(out, r.learn(m.Epoch)...)
		if r.probing && from == int(r.succ) && m.Seq >= r.probeSeq {
			r.probing = false
		}
		return out
	}
}

// appendAll appends b to a without copying b when a is empty: the common
// case, one allocation per message.
func appendAll(a, b []Message) []Message {
	if len(a) == 0 {
		return b
	}
	return append(a, b...)
}

func (r *Ring) onElection(m Message) []Message {
	initPos, ok := r.mem.index(m.Initiator)
	if !ok {
		return nil
	}
	candPos, ok := r.candidate(m.Cand)
	if !ok {
		return nil
	}
	if r.hasSkips() && r.skipped(initPos) {
		r.takeBack(initPos) // it initiated this run: it is alive (if not, we skip it again)
	} else if initPos == int(r.succ) {
		r.probing = false // our successor initiated this run: it is alive
	}
	// Learn the epoch the message carries; a stale leader steps down (the
	// run under way elects the next one).
	if m.Epoch > r.maxEpoch {
		r.maxEpoch, r.epochLeader = m.Epoch, 0
		if r.leads() {
			r.hasLeader = false
		}
	}
	r.maxRun = max(r.maxRun, m.Run)
	if r.electing {
		c := r.compareRun(m.Run, initPos)
		if c < 0 {
			return nil // a lower run: suppressed
		}
		if c > 0 {
			r.joinRun(m.Run, initPos)
		}
	} else {
		r.joinRun(m.Run, initPos)
	}
	r.armElection()

	if candPos >= 0 && r.hasSkips() && r.skipped(candPos) {
		return r.initiate(false) // its candidate died: re-initiate
	}
	switch {
	case candPos == r.pos():
		if !r.eligible {
			return r.initiate(false) // we no longer stand: run again without us
		}
		return r.win()
	case candPos < 0 && initPos == r.pos() && !r.eligible:
		// Our run went round with no candidate: no eligible node is alive.
		r.electing, r.hasLeader = false, false
		r.doneRun, r.doneInit = r.run, r.init
		return []Message{r.to(int(r.succ), Message{Kind: Elected, Run: r.run, Initiator: r.rank.ID})}
	case !r.eligible || better(m.Cand, r.rank):
		r.forwarded = true
		return []Message{r.forward(m)}
	case !r.forwarded:
		r.forwarded = true
		m.Cand = r.rank
		return []Message{r.forward(m)}
	default:
		return nil // lower, and we already forwarded in this run: swallow
	}
}

func (r *Ring) onElected(m Message) []Message {
	initPos, ok := r.mem.index(m.Initiator)
	if !ok {
		return nil
	}
	lpos, ok := r.candidate(m.Cand)
	if !ok {
		return nil
	}
	r.maxRun = max(r.maxRun, m.Run)
	if lpos < 0 { // the election closed with no eligible node
		if initPos == r.pos() || !r.electing || m.Run != r.run || int32(initPos) != r.init {
			return nil
		}
		r.electing, r.hasLeader = false, false
		r.doneRun, r.doneInit = m.Run, int32(initPos)
		out := []Message{r.forward(m)}
		if r.eligible {
			out = append(out, r.initiate(false)...) // the run passed us while we did not stand
		}
		return out
	}
	if lpos == r.pos() {
		return nil // our own announcement is back: it has gone round
	}
	if r.hasSkips() && r.skipped(lpos) {
		return r.initiate(false) // announces a node we know is dead
	}
	if r.hasLeader && int(r.leader) == lpos && r.leaderEpoch == m.Epoch {
		// The leadership we already follow, announced again.
		if m.Run == r.doneRun && int32(initPos) == r.doneInit && !r.electing {
			return nil // second lap: we passed this one on already
		}
		r.electing = false
		r.doneRun, r.doneInit = m.Run, int32(initPos)
		return r.preempt([]Message{r.forward(m)}, m.Cand)
	}
	if m.Epoch == 0 {
		return nil // epochs start at 1
	}
	if m.Epoch < r.maxEpoch || (m.Epoch == r.maxEpoch && r.epochLeader != 0 && r.epochLeader != m.Cand.ID) {
		// Stale: elect again above what we know. An epoch claimed twice is
		// taken as used up, so our Election shows its claimant a higher one.
		if m.Epoch == r.maxEpoch && r.maxEpoch < math.MaxUint64 {
			r.maxEpoch, r.epochLeader = r.maxEpoch+1, 0
		}
		return r.initiate(r.leads() && r.leaderEpoch < r.maxEpoch)
	}
	r.maxEpoch, r.epochLeader = m.Epoch, m.Cand.ID
	r.hasLeader, r.leader, r.leaderEpoch = true, int32(lpos), m.Epoch
	r.electing = false
	r.doneRun, r.doneInit = m.Run, int32(initPos)
	return r.preempt([]Message{r.forward(m)}, m.Cand)
}

// preempt initiates a run if this node, eligible, ranks above the leader just
// announced: it was left out of the run that elected it (skipped, or not yet
// eligible).
func (r *Ring) preempt(out []Message, leader Rank) []Message {
	if r.eligible && leader.Less(r.rank) {
		out = append(out, r.initiate(false)...)
	}
	return out
}

// win makes this node the leader: its own candidacy came back.
func (r *Ring) win() []Message {
	epoch := r.maxEpoch + 1
	if r.leads() && r.leaderEpoch == r.maxEpoch {
		epoch = r.leaderEpoch // still leading: the leadership continues
	} else if r.maxEpoch == math.MaxUint64 {
		r.electing = false // epochs exhausted: never reuse one
		return nil
	}
	r.maxEpoch, r.epochLeader = epoch, r.rank.ID
	r.hasLeader, r.leader, r.leaderEpoch = true, r.self, epoch
	r.electing = false
	r.doneRun, r.doneInit = r.run, r.init
	return []Message{r.to(int(r.succ), Message{Kind: Elected, Cand: r.rank, Epoch: epoch, Run: r.run, Initiator: r.idAt(r.init)})}
}

// initiate starts a new run with this node as initiator. leaderGone drops the
// leader this node believed in (stepping down if that was itself).
func (r *Ring) initiate(leaderGone bool) []Message {
	if leaderGone {
		r.hasLeader = false
	}
	r.maxRun++
	r.joinRun(r.maxRun, r.pos())
	r.forwarded = true
	r.armElection()
	var cand Rank // no candidate: the zero Rank
	if r.eligible {
		cand = r.rank
	}
	return []Message{r.to(int(r.succ), Message{Kind: Election, Cand: cand, Initiator: r.rank.ID, Run: r.run, Epoch: r.maxEpoch})}
}

func (r *Ring) joinRun(run uint64, initPos int) {
	r.electing = true
	r.run, r.init = run, int32(initPos)
	r.forwarded = false
}

// compareRun orders the run (run, initiator) against the current one.
func (r *Ring) compareRun(run uint64, initPos int) int {
	switch {
	case run != r.run:
		if run < r.run {
			return -1
		}
		return 1
	case int32(initPos) == r.init:
		return 0
	case r.rankAt(initPos).Less(r.rankAt(int(r.init))):
		return -1
	}
	return 1
}

func (r *Ring) armElection() {
	r.deadline = satAdd(r.now, satMul(r.toTicks, uint64(r.mem.Len())))
}

// learn takes in the highest epoch a Heartbeat or Ack carries. A leader that
// learns of a later epoch than its own steps down and initiates. A follower
// that does missed an Elected (it was skipped, or the message was lost): it
// counts itself in an election, so that it initiates one if no Elected comes
// within the election timeout.
func (r *Ring) learn(e uint64) []Message {
	if e <= r.maxEpoch {
		return nil
	}
	r.maxEpoch, r.epochLeader = e, 0
	if r.leads() {
		return r.initiate(true)
	}
	if !r.electing {
		r.electing = true
		r.armElection()
	}
	return nil
}

func (r *Ring) leads() bool { return r.hasLeader && r.leader == r.self }

// candidate validates a carried rank: the zero Rank (no candidate, position
// -1) or exactly a member's rank.
func (r *Ring) candidate(c Rank) (int, bool) {
	if c.ID == 0 {
		return -1, c == Rank{}
	}
	i, ok := r.mem.index(c.ID)
	if !ok || r.mem.members[i].Attr != c.Attr {
		return 0, false
	}
	return i, true
}

// better reports whether candidate a ranks above b; no candidate ranks below
// everyone.
func better(a, b Rank) bool {
	return a.ID != 0 && (b.ID == 0 || b.Less(a))
}

// forward passes m on to the successor, raising its epoch to ours.
func (r *Ring) forward(m Message) Message {
	if m.Kind == Election {
		m.Epoch = max(m.Epoch, r.maxEpoch)
	}
	return r.to(int(r.succ), m)
}

func (r *Ring) to(pos int, m Message) Message {
	m.From, m.To = r.rank.ID, r.idAt(int32(pos))
	return m
}

func (r *Ring) idAt(pos int32) ID   { return r.mem.members[pos].ID }
func (r *Ring) rankAt(pos int) Rank { return r.mem.members[pos].Rank() }
func (r *Ring) pos() int            { return int(r.self) }

// skipSuccessor takes the successor for dead and moves past it.
func (r *Ring) skipSuccessor() []Message {
	dead := r.succ
	r.succ = int32(r.next(int(r.succ)))
	r.probing = false
	r.cursor = int32(r.next(r.pos()))
	if r.hasLeader && r.leader == dead {
		return r.initiate(true)
	}
	if r.electing {
		return r.initiate(false) // our last forward may be lost with it
	}
	return nil
}

func (r *Ring) takeBack(pos int) {
	r.succ = int32(pos)
	r.probing = false
	r.cursor = int32(r.next(r.pos()))
}

func (r *Ring) resetDetector() {
	r.succ = int32(r.next(r.pos()))
	r.cursor = r.succ
	r.probing = false
	r.nextHB = satAdd(r.now, r.hbTicks)
}

func (r *Ring) next(i int) int {
	if i++; i == r.mem.Len() {
		return 0
	}
	return i
}

func (r *Ring) prev(i int) int {
	if i == 0 {
		return r.mem.Len() - 1
	}
	return i - 1
}

// dist is the number of hops from this node to position j, clockwise.
func (r *Ring) dist(j int) int {
	d := j - r.pos()
	if d < 0 {
		d += r.mem.Len()
	}
	return d
}

// succDist is the number of hops to the successor; N when alone.
func (r *Ring) succDist() int {
	if d := r.dist(int(r.succ)); d != 0 {
		return d
	}
	return r.mem.Len()
}

func (r *Ring) hasSkips() bool { return r.succDist() > 1 }

// skipped reports whether position j lies between this node and its
// successor: a node it takes for dead.
func (r *Ring) skipped(j int) bool {
	return j != r.pos() && r.dist(j) < r.succDist()
}
