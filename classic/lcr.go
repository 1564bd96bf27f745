// LCR, the ring election as [VanSteen] tells it ([Pedersen]'s "LCR": "we
// will adhere to the book"): the Election message collects
// the live members instead of carrying one candidate.
//
// The rules, as the sources state them:
//
//   - "Processes are arranged in a logical unidirectional ring"; "all
//     processes know the structure of the ring" (Config.Members, in ring
//     order) and "do not know which ones are currently alive".
//   - "A process initiates an election if it just recovered from failure or
//     if it notices that the leader has failed."
//   - "Initiator sends Election msg to closest live clockwise neighbor";
//     "each process adds its own ID to the Election message" (List).
//   - "When Election message returns, initiator picks node with highest ID,
//     sends a Coordinator message specifying the election winner; also, IDs
//     with all living members are attached"; "Coordinator message is removed
//     when it has circulated once" (by the initiator).
//   - "Multiple elections can be in progress simultaneously."
//   - "Always 2N messages" with one election in progress: one lap of
//     Election, one of Coordinator (lcr_test.go asserts it for every
//     initiator position, and the simulator's count tests again).
//
// What this file adds to the sources, and why:
//
//   - Best by rank. The Election also carries Cand, the best eligible rank
//     in its list so far (the zero Rank if none), so an ineligible node can
//     relay and be listed without standing. The winner is Cand.
//   - Concurrent elections. The book lets every election complete: both
//     initiators convert their message to a Coordinator "with exactly the
//     same members in the same order". That holds only if no node fails or
//     recovers while they run; otherwise two laps see different live sets
//     and could name two leaders for one epoch. So runs are ordered as in
//     ring.go, by (Run, initiator's rank): a node taking part in a run drops
//     the Elections of lower runs and switches to higher ones. Without
//     failures the result is the book's (everyone learns the same leader);
//     the lower laps stop where they meet the higher one, which only saves
//     messages.
//   - Failure detector: the ring's (neighbours.go, successor side only). A
//     dead successor is skipped; if it was the leader, or an election is
//     running, the node initiates. An election that sees no Coordinator
//     within N·TimeoutTicks (re-armed by every message of it) starts again.
//     A Coordinator naming a node this one takes for dead makes it
//     initiate, as does one naming a node it ranks above while it is
//     eligible (the lap passed it by).
//   - Epochs (fencing tokens), as in ring.go: every Election carries the
//     highest epoch along its path, so the initiator, whose Election has just
//     visited every live node, announces that + 1 (or the current epoch when
//     the winner already leads in the highest epoch: its leadership goes on).
//     The initiator cannot tell by itself whether the winner leads already:
//     the Election says so (Hop = 1) when the winner, passing it on, leads
//     in the highest epoch the message carries, and no later node raised
//     that epoch or outranked it. A recovered node's election then confirms
//     the leader without a new term, as the ring's does.
//     A Coordinator that is stale for its receiver (an epoch below its
//     highest, or equal to it with another leader) is not adopted: the
//     receiver initiates, and its Election carries the higher epoch round.
//   - Eligibility: as in ring.go; an election whose list has no eligible
//     member closes with Coordinator{Cand: zero Rank} (no leader).

package classic

import (
	"fmt"
	"math"
	"slices"
)

// LCR is one node of van Steen's ring election. Build it with NewLCR or
// NewLCRFrom.
type LCR struct {
	mem  *Membership
	self int32
	rank Rank
	det  detector

	eligible    bool
	hasLeader   bool
	leader      int32
	leaderEpoch uint64
	maxEpoch    uint64
	epochLeader ID // who announced maxEpoch, 0 if unknown
	live        []Rank

	electing bool
	run      uint64 // the run this node takes part in
	init     int32  // its initiator
	maxRun   uint64
	doneRun  uint64 // the run whose Coordinator this node passed on last
	doneInit int32
	deadline uint64
}

var _ Node = (*LCR)(nil)

// NewLCR returns the LCR node cfg.ID; Config.Members is the ring's order.
func NewLCR(cfg Config) (*LCR, error) {
	m, err := NewMembership(cfg.Members)
	if err != nil {
		return nil, err
	}
	return NewLCRFrom(m, cfg.ID, cfg.HeartbeatTicks, cfg.TimeoutTicks)
}

// NewLCRFrom returns the LCR node id of membership m, sharing m.
func NewLCRFrom(m *Membership, id ID, heartbeatTicks, timeoutTicks int) (*LCR, error) {
	i, err := m.nodeConfig(id, heartbeatTicks, timeoutTicks)
	if err != nil {
		return nil, err
	}
	l := &LCR{mem: m, self: int32(i), rank: m.members[i].Rank(), eligible: true, doneInit: -1}
	l.det.init(m, i, heartbeatTicks, timeoutTicks, +1)
	l.det.epochOf = func() uint64 { return l.maxEpoch }
	return l, nil
}

// ID returns the node's ID.
func (l *LCR) ID() ID { return l.rank.ID }

// View reports whom the node believes leads.
func (l *LCR) View() View {
	v := View{Electing: l.electing}
	if l.hasLeader {
		v.Leader, v.Epoch, v.HasLeader = l.mem.members[l.leader].ID, l.leaderEpoch, true
	}
	return v
}

// Live returns the member list the last Coordinator carried: the live
// members, in ring order from its initiator. The slice is read-only.
func (l *LCR) Live() []Rank { return l.live }

// Start initiates an election: the node noticed the leader is gone.
func (l *LCR) Start() []Message { return l.initiate(true) }

// Recover restarts the node: it keeps its highest epoch and eligibility,
// announces itself to its nearest predecessors and holds an election.
func (l *LCR) Recover() []Message {
	l.epochLeader, l.hasLeader, l.electing, l.live = 0, false, false, nil
	l.run, l.init, l.maxRun, l.doneRun, l.doneInit = 0, l.self, 0, 0, -1
	l.det.reset()
	return append(l.det.announce(), l.initiate(true)...)
}

// SetEligible makes the node stand for election or not.
func (l *LCR) SetEligible(eligible bool) []Message {
	if eligible == l.eligible {
		return nil
	}
	l.eligible = eligible
	if !eligible {
		if l.leads() {
			return l.initiate(true)
		}
		return nil
	}
	if !l.hasLeader || l.mem.members[l.leader].Rank().Less(l.rank) {
		return l.initiate(false)
	}
	return nil
}

// Tick advances time: heartbeats, a dead successor, the election timeout.
func (l *LCR) Tick() []Message {
	out, lost := l.det.tick()
	if lost && ((l.hasLeader && l.det.dead(int(l.leader))) || l.electing) {
		return append(out, l.initiate(l.hasLeader && l.det.dead(int(l.leader)))...)
	}
	if l.electing && l.det.now >= l.deadline {
		out = append(out, l.initiate(false)...)
	}
	return out
}

// Step handles one message; malformed ones are ignored.
func (l *LCR) Step(m Message) []Message {
	if m.To != l.rank.ID {
		return nil
	}
	switch m.Kind {
	case Election, Coordinator, Heartbeat, Ack:
	default:
		return nil
	}
	from, ok := l.mem.index(m.From)
	if !ok {
		return nil
	}
	var out []Message
	if l.det.heard(from) && !l.hasLeader && !l.electing {
		out = l.initiate(false) // the ring grew
	}
	switch m.Kind {
	case Election:
		return appendAll(out, l.onElection(m))
	case Coordinator:
		return appendAll(out, l.onCoordinator(m))
	case Heartbeat:
		out = append(out, l.learn(m.Epoch)...)
		return append(out, Message{Kind: Ack, From: l.rank.ID, To: m.From, Seq: m.Seq, Epoch: l.maxEpoch})
	default:
		l.det.acked(from, m.Seq)
		return append(out, l.learn(m.Epoch)...)
	}
}

// validList checks that every rank listed is a member's, and that they
// go clockwise round the ring from the first, less than once round (so
// none is listed twice), in O(len(list)).
func (l *LCR) validList(list []Rank) bool {
	n := l.mem.Len()
	if len(list) > n {
		return false
	}
	first, prev := 0, -1
	for i, r := range list {
		p, ok := candidateOf(l.mem, r)
		if !ok || p < 0 {
			return false
		}
		if i == 0 {
			first = p
		}
		d := ((p-first)%n + n) % n
		if d <= prev {
			return false
		}
		prev = d
	}
	return true
}

func (l *LCR) onElection(m Message) []Message {
	initPos, ok := l.mem.index(m.Initiator)
	if !ok || !l.validList(m.List) {
		return nil
	}
	candPos, ok := candidateOf(l.mem, m.Cand)
	if !ok {
		return nil
	}
	l.det.heard(initPos) // it initiated this run: it was alive
	if m.Epoch > l.maxEpoch {
		l.maxEpoch, l.epochLeader = m.Epoch, 0
		if l.leads() {
			l.hasLeader = false
		}
	}
	l.maxRun = max(l.maxRun, m.Run)
	if l.electing {
		c := compareRuns(l.mem, m.Run, initPos, l.run, int(l.init))
		if c < 0 {
			return nil // a lower run: suppressed
		}
		if c > 0 {
			l.join(m.Run, initPos)
		}
	} else {
		l.join(m.Run, initPos)
	}
	l.arm()
	if initPos != int(l.self) || m.Run != l.run {
		// Add ourselves and pass it on.
		m.List = append(slices.Clip(m.List), l.rank)
		if l.eligible && better(l.rank, m.Cand) {
			m.Cand, m.Hop = l.rank, 0
		}
		if l.maxEpoch > m.Epoch {
			m.Epoch, m.Hop = l.maxEpoch, 0
		}
		if m.Cand == l.rank && l.leads() && l.leaderEpoch == m.Epoch {
			m.Hop = 1 // the candidate leads already, in the highest epoch so far
		}
		return []Message{l.det.msg(l.det.peer(+1), m)}
	}
	// Our Election is back: pick the winner and announce it. We are in the
	// list too, and may have turned eligible since we sent it.
	if l.eligible && better(l.rank, m.Cand) {
		m.Cand, m.Hop, candPos = l.rank, 0, int(l.self)
		if l.leads() && l.leaderEpoch == m.Epoch {
			m.Hop = 1
		}
	}
	if candPos >= 0 && l.det.dead(candPos) {
		return l.initiate(false) // it died meanwhile
	}
	c := Message{Kind: Coordinator, Cand: m.Cand, Run: m.Run, Initiator: l.rank.ID, List: m.List}
	continues := m.Hop == 1 && m.Epoch == l.maxEpoch // the winner leads in the highest epoch
	l.electing = false
	l.doneRun, l.doneInit = l.run, l.self
	l.live = m.List
	if candPos < 0 { // no eligible member is alive
		l.hasLeader = false
		return []Message{l.det.msg(l.det.peer(+1), c)}
	}
	if candPos == int(l.self) && !l.eligible {
		return l.initiate(true)
	}
	epoch := l.maxEpoch + 1
	if continues || (l.hasLeader && int(l.leader) == candPos && l.leaderEpoch == l.maxEpoch) {
		epoch = l.maxEpoch // the leader wins again: its leadership goes on
	} else if l.maxEpoch == math.MaxUint64 {
		return nil // epochs exhausted: never reuse one
	}
	c.Epoch = epoch
	l.maxEpoch, l.epochLeader = epoch, m.Cand.ID
	l.hasLeader, l.leader, l.leaderEpoch = true, int32(candPos), epoch
	return []Message{l.det.msg(l.det.peer(+1), c)}
}

func (l *LCR) onCoordinator(m Message) []Message {
	initPos, ok := l.mem.index(m.Initiator)
	if !ok || !l.validList(m.List) {
		return nil
	}
	lpos, ok := candidateOf(l.mem, m.Cand)
	if !ok {
		return nil
	}
	l.maxRun = max(l.maxRun, m.Run)
	if initPos == int(l.self) {
		return nil // our Coordinator has circulated once: remove it
	}
	fwd := func() []Message { return []Message{l.det.msg(l.det.peer(+1), m)} }
	if lpos < 0 { // the election closed with no eligible member
		if !l.electing || m.Run != l.run || int32(initPos) != l.init {
			return nil
		}
		l.electing, l.hasLeader = false, false
		l.doneRun, l.doneInit, l.live = m.Run, int32(initPos), m.List
		out := fwd()
		if l.eligible {
			out = append(out, l.initiate(false)...)
		}
		return out
	}
	if l.det.dead(lpos) || (lpos == int(l.self) && !l.eligible) {
		return l.initiate(lpos == int(l.self)) // names a node we know is dead, or us, who no longer stand
	}
	if l.hasLeader && int(l.leader) == lpos && l.leaderEpoch == m.Epoch {
		if m.Run == l.doneRun && int32(initPos) == l.doneInit && !l.electing {
			return nil // a second lap: its initiator is gone
		}
		l.electing = false
		l.doneRun, l.doneInit, l.live = m.Run, int32(initPos), m.List
		return l.preempt(fwd(), m.Cand)
	}
	if m.Epoch == 0 {
		return nil
	}
	if m.Epoch < l.maxEpoch || (m.Epoch == l.maxEpoch && l.epochLeader != 0 && l.epochLeader != m.Cand.ID) {
		if m.Epoch == l.maxEpoch && l.maxEpoch < math.MaxUint64 {
			l.maxEpoch, l.epochLeader = l.maxEpoch+1, 0
		}
		return l.initiate(l.leads() && l.leaderEpoch < l.maxEpoch)
	}
	l.maxEpoch, l.epochLeader = m.Epoch, m.Cand.ID
	l.hasLeader, l.leader, l.leaderEpoch = true, int32(lpos), m.Epoch
	l.electing = false
	l.doneRun, l.doneInit, l.live = m.Run, int32(initPos), m.List
	return l.preempt(fwd(), m.Cand)
}

func (l *LCR) preempt(out []Message, leader Rank) []Message {
	if l.eligible && leader.Less(l.rank) {
		out = append(out, l.initiate(false)...)
	}
	return out
}

// initiate starts a new run with this node as initiator.
func (l *LCR) initiate(leaderGone bool) []Message {
	if leaderGone {
		l.hasLeader = false
	}
	l.maxRun++
	l.join(l.maxRun, int(l.self))
	l.arm()
	m := Message{Kind: Election, Initiator: l.rank.ID, Run: l.run, Epoch: l.maxEpoch, List: []Rank{l.rank}}
	if l.eligible {
		m.Cand = l.rank
		if l.leads() && l.leaderEpoch == l.maxEpoch {
			m.Hop = 1
		}
	}
	return []Message{l.det.msg(l.det.peer(+1), m)}
}

func (l *LCR) join(run uint64, initPos int) {
	l.electing, l.run, l.init = true, run, int32(initPos)
}

func (l *LCR) arm() {
	l.deadline = satAdd(l.det.now, satMul(l.det.to, uint64(l.mem.Len())))
}

// learn takes in the highest epoch a Heartbeat or Ack carries (ring.go).
func (l *LCR) learn(e uint64) []Message {
	if e <= l.maxEpoch {
		return nil
	}
	l.maxEpoch, l.epochLeader = e, 0
	if l.leads() {
		return l.initiate(true)
	}
	if !l.electing {
		l.electing = true
		l.arm()
	}
	return nil
}

func (l *LCR) leads() bool { return l.hasLeader && l.leader == l.self }

// String describes the node for debugging.
func (l *LCR) String() string { return fmt.Sprintf("lcr %v %+v", l.rank, l.View()) }

// candidateOf validates a carried rank: the zero Rank (no candidate,
// position -1) or exactly a member's rank.
func candidateOf(m *Membership, c Rank) (int, bool) {
	if c.ID == 0 {
		return -1, c == Rank{}
	}
	i, ok := m.index(c.ID)
	if !ok || m.members[i].Attr != c.Attr {
		return 0, false
	}
	return i, true
}

// compareRuns orders run (run, initiator a) against (cur, initiator b).
func compareRuns(m *Membership, run uint64, a int, cur uint64, b int) int {
	switch {
	case run != cur:
		if run < cur {
			return -1
		}
		return 1
	case a == b:
		return 0
	case m.members[a].Rank().Less(m.members[b].Rank()):
		return -1
	}
	return 1
}
