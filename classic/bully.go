// Bully election [GarciaMolina], following the rules of the sources: [Misra]
// "Bully LE", [Notebook] "Bully Algorithm" and [Pedersen]'s BE.
//
// The rules, as the sources state them:
//
//   - All processes know each other's ranks (Config.Members).
//   - "When a process finds the coordinator has failed via the failure
//     detector, and if it knows its id is the highest, it elects itself as
//     the coordinator and sends the coordinator message to all the processes
//     with the lower id"; "else it initiates an election by sending an
//     election message only to the processes that have a higher id than
//     itself; if it receives no answer within the timeout it calls itself the
//     leader and sends the coordinator message to all the lower id processes".
//   - "If an answer (OK) is received, it waits for the coordinator message; if
//     none is received after another timeout it starts a new election."
//   - "A process that receives an election message replies OK and starts its
//     own election" (unless it is running one already); the slides: "respond
//     with Coordinator if it is the process with the highest ID": the current
//     leader answers an Election with a Coordinator to its sender, keeping
//     its epoch (its leadership continues).
//   - "If a process receives a Coordinator message, it treats the sender as
//     the coordinator." Slides: "if a process that was previously down comes
//     back up, it holds an election"; "the bully with the highest ID bullies
//     those with lower IDs": a node that receives a Coordinator from a lower
//     node while it is eligible holds an election.
//   - Message counts (bully_test.go asserts them, counting Election, OK and
//     Coordinator only): best case, the second-best's failure detector finds
//     that the best died: N−2 Coordinator and nothing else; worst case, the
//     lowest node initiates in a fresh cluster, all alive: (N−1)+(N−2)+…+1 =
//     N(N−1)/2 Election, as many OK, N−1 Coordinator, N²−1 in all.
//
// What this file adds to the sources, and why:
//
//   - "Knows it is the highest" means every higher-ranked member is known
//     dead: the leader whose heartbeat timed out, and the higher members that
//     let an Election go unanswered. Start alone proves nothing (a false
//     suspicion must not make a second leader), so it asks the higher members
//     as usual. Any message from a member clears its mark, and adopting a new
//     leadership clears them all (whoever was down may be back), so two nodes
//     cannot both take themselves for the highest on stale marks.
//   - Failure detector: a node that follows a leader and runs no election
//     sends it a Heartbeat every HeartbeatTicks; no Ack to the oldest
//     unanswered one within TimeoutTicks means the leader is dead: it holds
//     an election. A leader's Ack carries its rank in Cand ("I lead"); an Ack
//     without it, or an Election with no candidate from the leader, means it
//     stepped down (it turned ineligible). A leader probes the higher members,
//     one per heartbeat period, round robin, so that a false suspicion or a
//     lost Coordinator cannot leave two leaders for good: an Ack from a higher
//     member not known to stay out of the running makes it elect again, and
//     the epochs both sides carry make the stale one step down. The wait for
//     a Coordinator after an OK is 3·TimeoutTicks, long enough for the node
//     that answered to wait out its own OK timeout and epoch query.
//   - Eligibility: an ineligible node neither answers OK nor stands: it
//     answers an Election with Ack{Seq: 0} ("alive, not standing"), which is
//     not an OK. Electing nodes count such a member as out of the running
//     (not as dead), and a new leader sends its Coordinator to the lower
//     members and to the higher ones it knows are alive but not standing, so
//     those learn the leader too (with no ineligible node, these are the
//     sources' messages exactly). When an ineligible node must hold an election
//     it sends Election{Cand: zero Rank} ("no candidate"; an eligible node's
//     Election carries its own rank) to every member: it cannot stand, and the
//     best eligible node may rank below it. If no one answers OK in time there
//     is no eligible node and it stays without leader; it asks again later,
//     backing off from 2 to 64 TimeoutTicks, unless every member answered that
//     it does not stand (a lost message must not leave it without leader for
//     good, and a cluster where no one stands stays quiet). A leader that
//     turns ineligible steps down and holds one at once. A node that turns
//     eligible holds one if it ranks above the leader or there is none; lower
//     members may have counted it out, so its Election goes to every member
//     (from a higher member it means "I stand": a lower one answers nothing,
//     and stops its own election from ending in an announcement), and it
//     waits out the OK timeout before it announces.
//
// Epochs (fencing tokens). Election, OK, Heartbeat and Ack carry the sender's
// highest epoch and every receiver learns it; a new leader announces its
// highest known epoch + 1. A node keeps its highest epoch across Recover and
// forgets everything else.
//
// The sources let a recovered top node announce at once, which could reuse an
// epoch: it may have missed leaderships while it was down. So a node whose
// knowledge is unconfirmed (new, or recovered, and it has not adopted or
// announced a leadership since) asks before it announces: it sends
// Heartbeat{Cand: its rank} (an epoch query) to every member it would
// announce to that is not known dead, and announces when all have Acked (an
// Ack carries the highest epoch) or TimeoutTicks have passed. A recovered
// node that is not the top asks at once, with plain Heartbeats, while it
// still can: those that remember may be gone by the time it could lead. A
// node that gets a query from a higher member, or while it has no leader, or
// any Heartbeat from a higher member while it waits for OKs, waits for that
// member's Coordinator instead of announcing itself, so two nodes do not
// announce the same epoch at once; and one that learns a higher epoch after
// answering a query (an announcement was in flight) sends the asker an
// updated Ack. This adds only Heartbeat/Ack traffic, so the sources' counts of
// Election/OK/Coordinator hold.
//
// The rule for a Coordinator{L, e} that is stale for its receiver (e below
// the receiver's highest epoch, or equal to it while the receiver knows
// another leader held it): the receiver does not adopt it and holds an
// election; its Election carries its higher epoch to L (or, if it is
// ineligible, to everyone), L learns that its leadership is stale, steps down
// and elects again, and the winner announces above every epoch the live nodes
// know. An epoch announced by two leaders counts as used up: the receiver
// raises its highest epoch to e+1 first, so that L learns of a higher epoch
// than its own even then. A leader that learns of a later epoch than its own
// in any message does the same, and a follower that learns one from a
// Heartbeat or Ack missed a Coordinator: it waits for one, and elects if
// none comes. Epochs thus strictly increase across successive leaderships as
// long as some live node remembers the latest one; no algorithm without
// stable storage at a quorum can promise more.

package classic

import (
	"math"
	"slices"
)

type bullyPhase uint8

const (
	idle      bullyPhase = iota
	waitOK               // sent Election; an OK means someone better takes over
	waitCoord            // got an OK; waiting for the Coordinator
	waitQuery            // about to lead; asking lower members for their epochs
)

// Bully is one node of a bully election. Build it with NewBully or
// NewBullyFrom. Methods are not safe for concurrent use.
type Bully struct {
	mem      *Membership
	self     int // own position in mem
	pos      int // own position in the rank order
	me       Member
	rank     Rank
	hbTicks  uint64
	toTicks  uint64
	eligible bool

	// The only state that survives Recover.
	maxEpoch uint64

	epochLeader ID // who led maxEpoch, 0 if unknown

	hasLeader   bool
	leader      ID
	leaderPos   int // the leader's position in mem
	leaderEpoch uint64

	phase     bullyPhase
	deadline  uint64
	confirmed bool             // our highest epoch is known to be current enough to announce above
	dead      map[int]struct{} // members known dead, by position
	passive   map[int]struct{} // members known alive but not standing (ineligible)
	querySeq  uint64
	queryWait map[int]struct{} // lower members yet to answer the epoch query

	now       uint64
	nextHB    uint64
	seq       uint64
	probing   bool   // a Heartbeat to the leader is unanswered
	probeSeq  uint64 // the oldest unanswered one
	probeAt   uint64
	cursor    int    // next higher member a leader probes
	followSeq uint64 // our last Heartbeat seq before following the leader: older Acks are not its
	asker     int    // the would-be leader whose epoch query we answered last, -1 if none
	askerSeq  uint64 // its query's Seq
	told      uint64 // the epoch we told it
	retryAt   uint64 // an ineligible node without leader asks again then (0: never)
	retryGap  uint64
}

var _ Node = (*Bully)(nil)

// NewBully returns the bully node cfg.ID. It indexes cfg.Members, which costs
// O(N log N); to build many nodes over one member list, call NewMembership
// once and NewBullyFrom per node.
func NewBully(cfg Config) (*Bully, error) {
	m, err := NewMembership(cfg.Members)
	if err != nil {
		return nil, err
	}
	return NewBullyFrom(m, cfg.ID, cfg.HeartbeatTicks, cfg.TimeoutTicks)
}

// NewBullyFrom returns the bully node id of membership m, keeping a pointer to
// m shared with every other node built from it. The ticks are as in Config.
func NewBullyFrom(m *Membership, id ID, heartbeatTicks, timeoutTicks int) (*Bully, error) {
	i, err := m.nodeConfig(id, heartbeatTicks, timeoutTicks)
	if err != nil {
		return nil, err
	}
	m.ranks()
	b := &Bully{
		mem:      m,
		self:     i,
		pos:      int(m.rankPos[i]),
		me:       m.members[i],
		rank:     m.members[i].Rank(),
		hbTicks:  uint64(heartbeatTicks),
		toTicks:  uint64(timeoutTicks),
		eligible: true,
		dead:     map[int]struct{}{},
		passive:  map[int]struct{}{},
		asker:    -1,
	}
	return b, nil
}

// ID returns the node's ID.
func (b *Bully) ID() ID { return b.me.ID }

// View reports whom the node believes leads, and in which epoch.
func (b *Bully) View() View {
	v := View{Electing: b.phase != idle}
	if b.hasLeader {
		v.Leader, v.Epoch, v.HasLeader = b.leader, b.leaderEpoch, true
	}
	return v
}

// Start holds an election: the node believes the leader is gone, so it
// forgets it (a leader calling Start steps down). It does not take the leader
// for dead on Start's word alone, only on its own failure detector's: a
// false suspicion would otherwise let it announce itself at once next to a
// live leader. So it asks the higher members as usual, and the live leader
// answers with its Coordinator.
func (b *Bully) Start() []Message {
	return b.elect(true)
}

// Recover restarts the node after a crash: it keeps only its highest epoch
// (and its eligibility, the operator's setting) and holds an election. Unless
// it is the top member (which asks when it announces, below), it also asks
// the lower members for their epochs at once, with plain Heartbeats: those
// that remember the latest epoch may be gone by the time it could lead.
func (b *Bully) Recover() []Message {
	b.epochLeader = 0
	b.hasLeader = false
	b.phase = idle
	b.confirmed = false
	clear(b.dead)
	clear(b.passive)
	b.queryWait = nil
	b.probing = false
	b.asker = -1
	var out []Message
	if len(b.higher()) > 0 {
		out = b.query(Rank{})
	}
	return append(out, b.elect(true)...)
}

// SetEligible makes the node stand for election or not.
func (b *Bully) SetEligible(eligible bool) []Message {
	if eligible == b.eligible {
		return nil
	}
	b.eligible = eligible
	if !eligible {
		if b.isLeader() {
			return b.elect(true) // step down; ask everyone
		}
		if b.phase != idle {
			return b.elect(false) // we asked only those above us; ask everyone
		}
		return nil
	}
	if !b.hasLeader || b.mem.rankPos[b.leaderPos] < int32(b.pos) {
		return b.standUp() // also when electing: lower members may have counted us out
	}
	return nil
}

// standUp holds the election of a node that just turned eligible. Lower
// members may have counted it out of the running and be about to announce
// themselves, so it sends its Election to every member, not only the higher
// ones (to a lower member it means "I stand"), and always waits out the OK
// timeout, even if it knows it is the highest, before it announces.
func (b *Bully) standUp() []Message {
	b.retryAt = 0
	b.phase, b.deadline = waitOK, satAdd(b.now, b.toTicks)
	out := make([]Message, 0, b.mem.Len()-1)
	for p := range b.mem.members {
		if p != b.self {
			if b.above(p) {
				delete(b.passive, p)
			}
			out = append(out, b.to(p, Message{Kind: Election, Cand: b.rank, Epoch: b.maxEpoch}))
		}
	}
	return out
}

// Tick advances time: the election's timeouts and the heartbeat to the
// leader.
func (b *Bully) Tick() []Message {
	b.now++
	switch b.phase {
	case waitOK:
		if b.now < b.deadline {
			return nil
		}
		if !b.eligible {
			// No eligible node answered: no leader. Unless every other
			// member said it does not stand, some may just not have
			// heard us: ask again later, backing off.
			b.phase = idle
			if len(b.passive) < b.mem.Len()-1 {
				b.backOff()
			}
			return nil
		}
		for _, p := range b.higher() {
			if _, ok := b.passive[int(p)]; !ok {
				b.dead[int(p)] = struct{}{}
			}
		}
		return b.becomeLeader()
	case waitCoord:
		if b.now >= b.deadline {
			return b.elect(false) // whoever answered OK died: start again
		}
	case waitQuery:
		if b.now >= b.deadline {
			b.confirmed = true // those that did not answer are down
			return b.announce()
		}
	default:
		if b.isLeader() {
			return b.probeHigher()
		}
		if !b.hasLeader {
			if b.retryAt != 0 && b.now >= b.retryAt {
				b.retryAt = 0
				return b.elect(false)
			}
			return nil
		}
		if b.probing && b.now-b.probeAt >= b.toTicks {
			b.dead[b.leaderPos] = struct{}{}
			return b.elect(true)
		}
		if b.now >= b.nextHB {
			b.nextHB = satAdd(b.now, b.hbTicks)
			b.seq++
			if !b.probing {
				b.probing, b.probeSeq, b.probeAt = true, b.seq, b.now
			}
			return []Message{b.to(b.leaderPos, Message{Kind: Heartbeat, Seq: b.seq, Epoch: b.maxEpoch})}
		}
	}
	return nil
}

// Step handles one message addressed to this node. Messages of an unknown
// kind, from unknown nodes, or otherwise malformed are ignored.
func (b *Bully) Step(m Message) []Message {
	if m.To != b.me.ID {
		return nil
	}
	from, ok := b.mem.index(m.From)
	if !ok || from == b.self {
		return nil
	}
	switch m.Kind {
	case Election, OK, Coordinator, Heartbeat, Ack:
	default:
		return nil
	}
	delete(b.dead, from) // it is alive
	out := b.step(m, from)
	if b.asker >= 0 && b.maxEpoch > b.told {
		// We told a would-be leader our highest epoch, and have learned a
		// higher one since (an announcement that was in flight): tell it
		// again, lest it announce an epoch that is taken.
		b.told = b.maxEpoch
		out = append(out, b.to(b.asker, Message{Kind: Ack, Seq: b.askerSeq, Epoch: b.maxEpoch}))
	}
	return out
}

func (b *Bully) step(m Message, from int) []Message {
	switch m.Kind {
	case Election:
		// Cand is the sender's rank, or no candidate if it does not stand.
		switch m.Cand {
		case Rank{}:
			b.passive[from] = struct{}{}
			if b.hasLeader && b.leaderPos == from {
				b.hasLeader, b.probing = false, false // our leader stepped down
				b.retryGap = 0
				b.backOff() // if no Coordinator reaches us, ask ourselves
			}
		case b.mem.members[from].Rank():
			delete(b.passive, from)
		default:
			return nil
		}
		if b.learn(m.Epoch, false) {
			b.hasLeader = false // our leadership is stale; the election below replaces it
		}
		if !b.eligible {
			return []Message{b.to(from, Message{Kind: Ack, Epoch: b.maxEpoch})} // alive, not standing
		}
		if m.Cand != (Rank{}) && b.above(from) {
			// A higher member that just turned eligible says it stands: it
			// will take over. Tell it the current leadership, or stop
			// ours from ending in a second announcement.
			if b.isLeader() && b.phase == idle {
				return []Message{b.to(from, Message{Kind: Coordinator, Cand: b.rank, Epoch: b.leaderEpoch})}
			}
			if b.phase == waitOK || b.phase == waitQuery {
				b.phase, b.deadline = waitCoord, satAdd(b.now, satMul(3, b.toTicks))
				b.queryWait = nil
			}
			return nil
		}
		if b.isLeader() && b.phase == idle {
			return []Message{b.to(from, Message{Kind: Coordinator, Cand: b.rank, Epoch: b.leaderEpoch})}
		}
		out := []Message{b.to(from, Message{Kind: OK, Epoch: b.maxEpoch})}
		if b.phase == idle {
			out = append(out, b.elect(false)...)
		}
		return out
	case OK:
		delete(b.passive, from)
		if b.learn(m.Epoch, false) {
			return b.elect(true)
		}
		if (b.phase == waitOK && (b.above(from) || !b.eligible)) || (b.phase == waitQuery && b.above(from)) {
			b.phase = waitCoord
			b.deadline = satAdd(b.now, satMul(3, b.toTicks))
			b.queryWait = nil
		}
		return nil
	case Coordinator:
		return b.onCoordinator(m, from)
	case Heartbeat:
		var out []Message
		if b.learn(m.Epoch, true) {
			out = b.elect(true)
		}
		// A Heartbeat with a candidate is a would-be leader asking for epochs
		// before it announces. If it ranks above us, or we are idle without
		// leader, expect its Coordinator (and elect if it never comes: it
		// died meanwhile): our own election must not end in a second
		// announcement of the same epoch. And any Heartbeat from a higher
		// member while we wait for OKs (it recovered, and asks for epochs)
		// is as good as its OK.
		_, passive := b.passive[from]
		query := m.Cand == b.mem.members[from].Rank() && !b.isLeader() && b.phase != waitCoord &&
			(b.above(from) || (b.phase == idle && !b.hasLeader))
		if query || (b.phase == waitOK && b.eligible && b.above(from) && !passive) {
			b.phase, b.deadline = waitCoord, satAdd(b.now, satMul(3, b.toTicks))
			b.queryWait = nil
		}
		if m.Cand == b.mem.members[from].Rank() {
			b.asker, b.askerSeq, b.told = from, m.Seq, b.maxEpoch
		}
		ack := Message{Kind: Ack, Seq: m.Seq, Epoch: b.maxEpoch}
		if b.isLeader() {
			ack.Cand = b.rank // "I lead": a follower learns when its leader no longer does
		}
		return append(out, b.to(from, ack))
	default: // Ack
		if m.Seq == 0 {
			b.passive[from] = struct{}{} // answered our Election: alive, not standing
		}
		if b.learn(m.Epoch, true) {
			return b.elect(true)
		}
		if b.hasLeader && !b.isLeader() && from == b.leaderPos && m.Seq > b.followSeq && b.phase == idle {
			if m.Cand != b.mem.members[from].Rank() {
				return b.elect(true) // alive, but no longer leading
			}
			if b.probing && m.Seq >= b.probeSeq {
				b.probing = false
			}
		}
		if _, passive := b.passive[from]; b.isLeader() && b.phase == idle && b.above(from) && !passive {
			return b.elect(false) // a better node is alive after all: let it take over
		}
		if b.queryWait != nil && m.Seq == b.querySeq {
			delete(b.queryWait, from)
			if len(b.queryWait) == 0 {
				b.queryWait = nil
				b.confirmed = true
				if b.phase == waitQuery {
					return b.announce()
				}
			}
		}
		return nil
	}
}

func (b *Bully) onCoordinator(m Message, from int) []Message {
	if m.Cand.ID != m.From || m.Cand.Attr != b.mem.members[from].Attr || m.Epoch == 0 {
		return nil
	}
	delete(b.passive, from)
	e := m.Epoch
	if b.eligible && !b.above(from) {
		// A lower node claims to lead while we are alive and eligible: bully it.
		if e > b.maxEpoch {
			b.maxEpoch, b.epochLeader = e, m.From
		}
		if b.isLeader() && b.leaderEpoch <= e {
			return b.elect(true) // its claim is as new as ours: lead again with a fresh epoch
		}
		if b.phase != idle {
			return nil // our own election will announce above e
		}
		return b.elect(false)
	}
	if e < b.maxEpoch || (e == b.maxEpoch && b.epochLeader != 0 && b.epochLeader != m.From) {
		// Stale: elect again; our Election carries our higher epoch. An
		// epoch claimed twice is taken as used up, so that its claimant
		// learns of a higher one.
		if e == b.maxEpoch && b.maxEpoch < math.MaxUint64 {
			b.maxEpoch, b.epochLeader = b.maxEpoch+1, 0
		}
		if b.isLeader() && b.leaderEpoch < b.maxEpoch {
			return b.elect(true)
		}
		if b.phase != idle {
			return nil
		}
		return b.elect(false)
	}
	if !(b.hasLeader && b.leaderPos == from && b.leaderEpoch == e) {
		clear(b.dead) // a new leadership: what we took for dead may be back
	}
	if from == b.asker {
		b.asker = -1 // it announced
	}
	b.maxEpoch, b.epochLeader = e, m.From
	b.hasLeader, b.leader, b.leaderPos, b.leaderEpoch = true, m.From, from, e
	b.phase = idle
	b.retryAt, b.retryGap = 0, 0
	b.followSeq = b.seq
	b.queryWait = nil
	b.confirmed = true
	b.probing = false
	b.nextHB = satAdd(b.now, b.hbTicks)
	return nil
}

// elect holds an election. leaderGone drops the leader this node believed in
// (stepping down if that was itself).
func (b *Bully) elect(leaderGone bool) []Message {
	if leaderGone {
		b.hasLeader = false
		b.probing = false
	}
	b.retryAt = 0
	if !b.eligible {
		// It cannot stand, so it asks every member, above and below it.
		clear(b.passive) // each says again whether it stands
		b.phase, b.deadline = waitOK, satAdd(b.now, b.toTicks)
		out := make([]Message, 0, b.mem.Len()-1)
		for p := range b.mem.members {
			if p != b.self {
				out = append(out, b.to(p, Message{Kind: Election, Epoch: b.maxEpoch})) // no candidate
			}
		}
		return out
	}
	higher := b.higher()
	if b.knowsHighest(higher) {
		return b.becomeLeader()
	}
	b.phase, b.deadline = waitOK, satAdd(b.now, b.toTicks)
	out := make([]Message, 0, len(higher))
	for _, p := range higher {
		delete(b.passive, int(p)) // it says again whether it stands
		out = append(out, b.to(int(p), Message{Kind: Election, Cand: b.rank, Epoch: b.maxEpoch}))
	}
	return out
}

// backOff schedules the next election of a node left without leader:
// 2·TimeoutTicks after the first, doubling up to 64·TimeoutTicks.
func (b *Bully) backOff() {
	b.retryGap = min(max(2*b.toTicks, 2*b.retryGap), satMul(64, b.toTicks))
	b.retryAt = satAdd(b.now, b.retryGap)
}

// probeHigher sends, once per heartbeat period, a Heartbeat to the next
// higher member, round robin. A leader expects them all dead or not
// standing; if one is not (a false suspicion, a lost Coordinator), its Ack,
// or the epochs the two exchange, end the double leadership.
func (b *Bully) probeHigher() []Message {
	higher := b.higher()
	if b.now < b.nextHB || len(higher) == 0 {
		return nil
	}
	b.nextHB = satAdd(b.now, b.hbTicks)
	if b.cursor >= len(higher) {
		b.cursor = 0
	}
	p := int(higher[b.cursor])
	b.cursor++
	b.seq++
	return []Message{b.to(p, Message{Kind: Heartbeat, Seq: b.seq, Epoch: b.maxEpoch})}
}

// becomeLeader announces this node, after asking the lower members for their
// epochs if its own knowledge is unconfirmed.
func (b *Bully) becomeLeader() []Message {
	if !b.confirmed {
		if out := b.query(b.rank); len(out) > 0 {
			b.phase, b.deadline = waitQuery, satAdd(b.now, b.toTicks)
			return out
		}
		b.confirmed = true
	}
	return b.announce()
}

// query asks every member a new leader would tell, and does not know dead,
// for its highest epoch. cand is our rank when we are about to announce
// (receivers then expect our Coordinator), else the zero Rank.
func (b *Bully) query(cand Rank) []Message {
	var out []Message
	b.seq++
	b.querySeq = b.seq
	b.queryWait = map[int]struct{}{}
	for _, p := range b.audience() {
		if _, dead := b.dead[int(p)]; !dead {
			b.queryWait[int(p)] = struct{}{}
			out = append(out, b.to(int(p), Message{Kind: Heartbeat, Cand: cand, Seq: b.querySeq, Epoch: b.maxEpoch}))
		}
	}
	if len(out) == 0 {
		b.queryWait = nil
	}
	return out
}

// announce makes this node the leader and tells every lower member.
func (b *Bully) announce() []Message {
	b.phase = idle
	b.queryWait = nil
	epoch := b.maxEpoch + 1
	if b.isLeader() && b.leaderEpoch == b.maxEpoch {
		epoch = b.leaderEpoch // still leading: the leadership continues
	} else if b.maxEpoch == math.MaxUint64 {
		b.hasLeader = false // epochs exhausted: never reuse one
		return nil
	}
	b.maxEpoch, b.epochLeader = epoch, b.me.ID
	b.hasLeader, b.leader, b.leaderPos, b.leaderEpoch = true, b.me.ID, b.self, epoch
	b.confirmed = true
	b.probing = false
	audience := b.audience()
	out := make([]Message, 0, len(audience))
	for _, p := range audience {
		out = append(out, b.to(int(p), Message{Kind: Coordinator, Cand: b.rank, Epoch: epoch}))
	}
	return out
}

// audience returns the members a new leader tells: every lower member, and
// the higher members known alive but not standing.
func (b *Bully) audience() []int32 {
	lower := b.lower()
	if len(b.passive) == 0 {
		return lower
	}
	out := slices.Clip(lower)
	for _, p := range b.higher() {
		_, passive := b.passive[int(p)]
		_, dead := b.dead[int(p)]
		if passive && !dead {
			out = append(out, p)
		}
	}
	return out
}

// learn takes in the highest epoch a message carries and reports whether it
// makes our own leadership stale. With expect (a Heartbeat or Ack), an idle
// follower that knows of a later epoch than its leader's missed a
// Coordinator: it waits for one (a new leader may still be announcing) and
// elects if none comes.
func (b *Bully) learn(e uint64, expect bool) bool {
	stale := false
	if e > b.maxEpoch {
		b.maxEpoch, b.epochLeader = e, 0
		stale = b.isLeader()
	}
	if expect && b.hasLeader && !b.isLeader() && b.leaderEpoch < b.maxEpoch && b.phase == idle {
		b.phase, b.deadline = waitCoord, satAdd(b.now, satMul(3, b.toTicks))
	}
	return stale
}

func (b *Bully) isLeader() bool { return b.hasLeader && b.leader == b.me.ID }

// knowsHighest reports whether every member in higher is known dead. Members
// known not to stand are asked again: they may stand by now.
func (b *Bully) knowsHighest(higher []int32) bool {
	if len(higher) > len(b.dead) {
		return false
	}
	for _, p := range higher {
		if _, dead := b.dead[int(p)]; !dead {
			return false
		}
	}
	return true
}

// higher and lower return the positions of the members ranked above and
// below this node.
func (b *Bully) higher() []int32 { return b.mem.byRank[b.pos+1:] }
func (b *Bully) lower() []int32  { return b.mem.byRank[:b.pos] }

// above reports whether the member at position p ranks above this node.
func (b *Bully) above(p int) bool { return int(b.mem.rankPos[p]) > b.pos }

func (b *Bully) to(p int, m Message) Message {
	m.From, m.To = b.me.ID, b.mem.members[p].ID
	return m
}
