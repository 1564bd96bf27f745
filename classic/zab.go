// ZooKeeper's sequence/successor election [Hunt], following the rules of the
// sources: [Gupta] "Election in Zookeeper" and [Notes] "Paxos-like solution
// in Zookeeper".
//
// The rules, as the sources state them:
//
//   - "Each server creates a new sequence number for itself … Elect the
//     highest-id server as leader." The sequence number is the server's rank
//     (Attr, ID), fixed by the configuration: the sources also say "let's say
//     the sequence numbers are ids".
//   - "Each process monitors its next-higher id process; if that successor
//     was the leader and it has failed, become the new leader; else wait for
//     a timeout, and check your successor again." A server probes the
//     server above it (Heartbeat; the answer is an Ack). One that does not
//     answer within TimeoutTicks is taken for dead: if it was the leader the
//     server stands at once; otherwise it watches the next server up. A
//     server that finds no live eligible server above it stands. After a
//     while it checks its immediate successor again (a dead one may have
//     recovered).
//   - The two-phase commit "run after the sequence/id": the would-be leader
//     sends NEW_LEADER (NewLeader{Epoch: e}, e one above the highest epoch
//     it has seen) to all; "each process responds with ACK to at most one
//     leader" (LeaderAck): a server ACKs at most one candidate per epoch,
//     and remembers that ACK across crashes; "the leader waits for a
//     majority of ACKs, and then sends COMMIT to all"; "on receiving
//     COMMIT, a process updates its leader variable".
//   - "i.e., the one with highest process id": a live eligible server that
//     outranks the candidate refuses it (a LeaderAck carrying its own rank,
//     as the bully's OK) and, if nothing eligible is alive above it, stands
//     itself; the candidate gives up.
//
// Why one leader per epoch: a candidate commits only with ACKs of a
// majority for its epoch, each server ACKs one candidate per epoch (itself
// included when it stands), and two majorities intersect. Epochs are the
// fencing tokens: a server's view only moves to a higher epoch, and it
// keeps its ACK, its highest epoch and its last view across crashes.
//
// The failure cases of the notes, shown in classic/sim/simtest/testdata/zab_*.txt:
// several servers send NEW_LEADER at once (in the same epoch, so none may
// get a majority: each retries after TimeoutTicks, the better ones first);
// some ACKs get lost (the candidate still needs only a majority, else it
// retries); some NEW_LEADER or COMMIT messages get lost (a server that
// missed the COMMIT learns the leader from the failure detector: every
// Heartbeat and Ack carries the newest leadership its sender knows).
//
// Message counts (classic/sim asserts them): an election without
// contention costs N−1 NewLeader, N−1 LeaderAck and N−1 Commit, 3(N−1);
// when the leader crashes only its predecessor stands, (N−1) + (N−2) +
// (N−1) = 3N−4, where "everyone monitors the master" would start N−1
// elections at once (the sources' "flood of elections"). Failure detection is
// one probe per server per HeartbeatTicks, N−1 Heartbeat and N−1 Ack per
// round, counted apart.
//
// What this file adds to the sources, and why:
//
//   - Message fields: NewLeader carries the candidate's rank (Cand) and
//     epoch; LeaderAck carries the epoch, Seq 1 for an ACK and 0 for a
//     refusal, and on a refusal the refuser's highest epoch (so the
//     candidate retries above it) and, if it outranks the candidate, its
//     rank; Commit carries the leader's rank and epoch, and a zero rank
//     when a leader resigns (it turned ineligible). Heartbeat and Ack carry
//     the newest (leader, epoch) the sender knows in Cand and Epoch, and Ack
//     says in Run whether the sender stands for election (1) or not (0); an
//     ineligible server is passed over like a dead one.
//   - A server does not take as leader one that it outranks while it is
//     eligible: it waits for (or stands in) the election that puts the best
//     in charge. A recovered server that outranks the leader thus takes
//     over, as "the highest id leads" says.
//   - A candidate without a majority within TimeoutTicks retries after
//     HeartbeatTicks·(1 + k), k the number of servers that outrank it, so
//     that the better retry first.

package classic

import "math"

type zabRole uint8

const (
	zabFollower zabRole = iota
	zabCandidate
	zabLeader
)

// Zab is one server of the ZooKeeper sequence/successor election. Build it
// with NewZab or NewZabFrom. Methods are not safe for concurrent use.
type Zab struct {
	mem      *Membership
	self     int // position in configuration order
	pos      int // position in rank order (0: the worst)
	rank     Rank
	stagger  uint64
	hbTicks  uint64
	timeout  uint64
	eligible bool

	// Stable: survives Recover.
	maxEpoch   uint64
	ackedEpoch uint64
	ackedFor   ID
	viewEpoch  uint64 // the highest epoch of a leader this server held
	viewLeader int

	now uint64

	viewOver    bool // the leadership of viewEpoch has ended, as far as we know
	hasLeader   bool
	leader      int // configuration position
	leaderEpoch uint64
	newest      int // the newest leadership heard of (configuration position, epoch)
	newestEpoch uint64
	newestOver  bool // and it has ended (its leader died, resigned or was passed over)

	role    zabRole
	epoch   uint64 // as candidate or leader
	sentAt  uint64
	acks    []bool
	count   int
	standAt uint64 // a follower re-checks (and may stand) then; 0: not scheduled

	// The failure detector: w is the rank position watched (pos+1 … ; n
	// when no live eligible server is above).
	w         int
	probing   bool
	probeLead bool // the probe is for a leader this server outranks
	probed    int  // that leader (configuration position)
	probeSeq  uint64
	probeAt   uint64
	nextProbe uint64
	recheckAt uint64 // go back to the immediate successor then (0: not set)
}

var _ Node = (*Zab)(nil)

// NewZab returns the server cfg.ID.
func NewZab(cfg Config) (*Zab, error) {
	m, err := NewMembership(cfg.Members)
	if err != nil {
		return nil, err
	}
	return NewZabFrom(m, cfg.ID, cfg.HeartbeatTicks, cfg.TimeoutTicks)
}

// NewZabFrom is NewZab over a shared Membership.
func NewZabFrom(m *Membership, id ID, heartbeatTicks, timeoutTicks int) (*Zab, error) {
	i, err := m.nodeConfig(id, heartbeatTicks, timeoutTicks)
	if err != nil {
		return nil, err
	}
	m.ranks()
	z := &Zab{
		mem: m, self: i, pos: int(m.rankPos[i]), rank: m.members[i].Rank(),
		hbTicks: uint64(heartbeatTicks), timeout: uint64(timeoutTicks), eligible: true,
		acks: make([]bool, m.Len()),
	}
	z.stagger = uint64(heartbeatTicks) * uint64(m.Len()-z.pos)
	z.w = z.pos + 1
	return z, nil
}

// ID returns the server's ID.
func (z *Zab) ID() ID { return z.rank.ID }

// View reports the leader this server knows, in its epoch.
func (z *Zab) View() View {
	v := View{Electing: z.role == zabCandidate}
	if z.hasLeader {
		v.Leader, v.Epoch, v.HasLeader = z.mem.members[z.leader].ID, z.leaderEpoch, true
	}
	return v
}

func (z *Zab) majority() int { return z.mem.Len()/2 + 1 }

// at returns the configuration position of the server at rank position p.
func (z *Zab) at(p int) int { return int(z.mem.byRank[p]) }

// outranks reports whether the server at configuration position a ranks
// above the one at b.
func (z *Zab) outranks(a, b int) bool { return z.mem.rankPos[a] > z.mem.rankPos[b] }

// Start: the server suspects the leader. A leader holds a new election; a
// follower checks its successor at once.
func (z *Zab) Start() []Message {
	if z.role == zabLeader {
		return z.stand()
	}
	return z.climb()
}

// Recover restarts the server: it keeps its ACK, its highest epoch and its
// last view's epoch, forgets the leader, and checks its successor.
func (z *Zab) Recover() []Message {
	z.role, z.hasLeader, z.viewOver = zabFollower, false, false
	z.newestEpoch, z.standAt = 0, 0
	return z.climb()
}

// SetEligible makes the server stand for election or not. A leader that
// turns ineligible resigns (Commit with no rank); a server that turns
// eligible drops a leader it outranks and checks its successors at once:
// it stands if no eligible server above it answers.
func (z *Zab) SetEligible(eligible bool) []Message {
	if eligible == z.eligible {
		return nil
	}
	z.eligible = eligible
	if !eligible {
		z.role = zabFollower
		if z.hasLeader && z.leader == z.self {
			e := z.leaderEpoch
			z.ended(e)
			return z.all(Message{Kind: Commit, Epoch: e})
		}
		return nil
	}
	if z.hasLeader && z.outranks(z.self, z.leader) {
		z.hasLeader = false // we outrank it: the best must lead
	}
	return z.climb() // stand if no one eligible is alive above
}

// climb goes back to the immediate successor and probes it now.
func (z *Zab) climb() []Message {
	z.w, z.probing, z.recheckAt = z.pos+1, false, 0
	return z.probe()
}

// probe checks the watched server, or, when none is left above, stands if
// this server should lead.
func (z *Zab) probe() []Message {
	if z.w >= z.mem.Len() {
		z.nextProbe = satAdd(z.now, z.timeout)
		z.w = z.pos + 1 // then check the successor again
		var out []Message
		switch {
		case z.eligible && z.role == zabFollower && z.standAt == 0 && (!z.hasLeader || z.outranks(z.self, z.leader)):
			out = z.stand()
		case !z.eligible && z.hasLeader && z.leader != z.self && z.outranks(z.self, z.leader):
			// Nothing eligible above, and we are not: no one may watch
			// a leader ranked this low but us.
			z.probeSeq++
			z.probing, z.probeLead, z.probeAt, z.probed = true, true, z.now, z.leader
			m := Message{Kind: Heartbeat, Seq: z.probeSeq}
			z.news(&m)
			return []Message{z.to(z.leader, m)}
		}
		if z.w >= z.mem.Len() {
			z.nextProbe = satAdd(z.now, z.hbTicks)
		}
		return out
	}
	z.probeSeq++
	z.probing, z.probeLead, z.probeAt = true, false, z.now
	m := Message{Kind: Heartbeat, Seq: z.probeSeq}
	z.news(&m)
	return []Message{z.to(z.at(z.w), m)}
}

// news puts the newest leadership this server knows into m.
func (z *Zab) news(m *Message) {
	if z.newestEpoch > 0 {
		m.Epoch = z.newestEpoch
		if !z.newestOver {
			m.Cand = z.mem.members[z.newest].Rank()
		}
	}
}

// passOver moves past the watched server (dead, or not standing): if it
// was the leader and died, this server stands at once, as the sources say.
func (z *Zab) passOver(dead bool) []Message {
	p := z.at(z.w)
	z.probing, z.recheckAt = false, 0
	z.w++
	if z.hasLeader && z.leader == p && z.role == zabFollower {
		z.ended(z.leaderEpoch)
		if dead && z.eligible {
			z.w = z.pos + 1
			z.nextProbe = satAdd(z.now, z.timeout)
			return z.stand()
		}
	}
	return z.probe()
}

// Tick advances time: probes, probe timeouts, candidate timeouts.
func (z *Zab) Tick() []Message {
	z.now++
	var out []Message
	if z.role == zabCandidate && z.now-z.sentAt >= z.timeout {
		z.role = zabFollower // no majority: retry later, the better first
		z.standAt = satAdd(z.now, z.stagger)
	}
	if z.standAt != 0 && z.now >= z.standAt {
		z.standAt = 0
		if z.role == zabFollower && z.eligible && (!z.hasLeader || z.outranks(z.self, z.leader)) {
			return z.climb()
		}
	}
	switch {
	case z.probing && z.probeLead && z.now-z.probeAt >= z.timeout:
		z.probing = false // the leader we watched is gone
		if z.hasLeader && z.leader == z.probed && z.role == zabFollower {
			z.ended(z.leaderEpoch)
		}
	case z.probing && z.now-z.probeAt >= z.timeout:
		out = append(out, z.passOver(true)...)
	case !z.probing && z.now >= z.nextProbe:
		out = append(out, z.probe()...)
	}
	return out
}

// stand makes this server a candidate in a new epoch: NEW_LEADER to all.
func (z *Zab) stand() []Message {
	if !z.eligible || z.maxEpoch == math.MaxUint64 {
		return nil
	}
	if z.hasLeader && z.outranks(z.self, z.leader) {
		z.hasLeader = false // we outrank it: no longer our leader
	}
	z.maxEpoch++
	z.epoch = z.maxEpoch
	z.ackedEpoch, z.ackedFor = z.epoch, z.rank.ID
	z.role, z.sentAt, z.standAt = zabCandidate, z.now, 0
	clear(z.acks)
	z.acks[z.self], z.count = true, 1
	out := z.all(Message{Kind: NewLeader, Cand: z.rank, Epoch: z.epoch})
	if z.count >= z.majority() {
		out = append(out, z.win()...)
	}
	return out
}

func (z *Zab) win() []Message {
	z.role = zabLeader
	z.hasLeader, z.leader, z.leaderEpoch = true, z.self, z.epoch
	z.viewEpoch, z.viewLeader, z.viewOver = z.epoch, z.self, false
	if z.epoch > z.newestEpoch {
		z.newest, z.newestEpoch, z.newestOver = z.self, z.epoch, false
	}
	return z.all(Message{Kind: Commit, Cand: z.rank, Epoch: z.epoch})
}

// learn takes in a committed leadership (r, e) heard of: from a COMMIT, or
// from the failure detector's messages.
func (z *Zab) learn(r Rank, e uint64) []Message {
	if e == 0 {
		return nil
	}
	if r == (Rank{}) {
		return z.heardEnded(e)
	}
	p, ok := z.mem.index(r.ID)
	if !ok || z.mem.members[p].Rank() != r {
		return nil
	}
	z.maxEpoch = max(z.maxEpoch, e)
	if e > z.newestEpoch {
		z.newest, z.newestEpoch, z.newestOver = p, e, false
	}
	if z.hasLeader && e <= z.leaderEpoch || e < z.viewEpoch || e == z.viewEpoch && (p != z.viewLeader || z.viewOver) {
		return nil // not newer than what we hold
	}
	if z.role == zabLeader || z.role == zabCandidate && e >= z.epoch {
		z.role = zabFollower // superseded
	}
	if p == z.self || z.eligible && z.outranks(z.self, p) {
		// Our own old leadership, or one we outrank: the best must lead.
		z.hasLeader = false
		if z.eligible && z.role == zabFollower && z.w >= z.mem.Len() {
			return z.stand()
		}
		return nil
	}
	z.hasLeader, z.leader, z.leaderEpoch = true, p, e
	z.viewEpoch, z.viewLeader, z.viewOver = e, p, false
	z.standAt = 0
	return nil
}

// ended drops the leadership of epoch e, which this server knows has
// ended, and remembers that, so that news of it is not taken in again.
func (z *Zab) ended(e uint64) {
	if z.hasLeader && z.leaderEpoch == e {
		z.hasLeader = false
	}
	if z.viewEpoch == e {
		z.viewOver = true
	}
	if z.newestEpoch == e {
		z.newestOver = true
	}
}

// heardEnded takes in news that the leadership of epoch e has ended; a
// leadership of an older epoch was superseded by it and has ended too. A
// leader told so (a watcher took it for dead, or a newer one came and went)
// holds a new election; a server left without leader that finds no one
// above it stands.
func (z *Zab) heardEnded(e uint64) []Message {
	z.maxEpoch = max(z.maxEpoch, e)
	if e > z.newestEpoch {
		z.newestEpoch, z.newestOver = e, true
	}
	if e == z.newestEpoch {
		z.newestOver = true
	}
	if e >= z.viewEpoch {
		z.viewOver = true
	}
	if !z.hasLeader || z.leaderEpoch > e {
		return nil
	}
	z.hasLeader = false
	if z.role == zabLeader {
		z.role = zabFollower
		return z.stand()
	}
	if z.eligible && z.role == zabFollower && z.w >= z.mem.Len() {
		return z.stand()
	}
	return nil
}

// Step handles one message addressed to this server.
func (z *Zab) Step(m Message) []Message {
	if m.To != z.rank.ID {
		return nil
	}
	from, ok := z.mem.index(m.From)
	if !ok || from == z.self {
		return nil
	}
	switch m.Kind {
	case Heartbeat:
		out := z.learn(m.Cand, m.Epoch)
		a := Message{Kind: Ack, Seq: m.Seq}
		z.news(&a)
		if z.eligible {
			a.Run = 1
		}
		return append(out, z.to(from, a))
	case Ack:
		if z.probing && z.probeLead && m.Seq == z.probeSeq {
			z.probing = false
			return z.learn(m.Cand, m.Epoch)
		}
		if !z.probing || z.probeLead || m.Seq != z.probeSeq || z.w >= z.mem.Len() || z.at(z.w) != from {
			return z.learn(m.Cand, m.Epoch)
		}
		z.probing = false
		out := z.learn(m.Cand, m.Epoch)
		if m.Run == 0 {
			return append(out, z.passOver(false)...)
		}
		z.nextProbe = satAdd(z.now, z.hbTicks)
		if z.w != z.pos+1 { // we passed over some: check them again later
			if z.recheckAt == 0 {
				z.recheckAt = satAdd(z.now, 4*z.timeout)
			} else if z.now >= z.recheckAt {
				z.w, z.recheckAt = z.pos+1, 0
			}
		}
		return out
	case NewLeader:
		return z.newLeader(from, m)
	case LeaderAck:
		if z.role != zabCandidate || m.Epoch < z.epoch {
			return nil
		}
		if m.Seq == 0 { // refused
			z.maxEpoch = max(z.maxEpoch, m.Epoch)
			if m.Cand == z.mem.members[from].Rank() && z.outranks(from, z.self) {
				// A better server is alive and stands: give up, check
				// again later.
				z.role = zabFollower
				z.standAt = satAdd(z.now, satAdd(z.timeout, z.stagger))
			}
			return nil
		}
		if m.Epoch != z.epoch || z.acks[from] {
			return nil
		}
		z.acks[from] = true
		if z.count++; z.count == z.majority() {
			return z.win()
		}
	case Commit:
		if m.Cand == (Rank{}) { // the leader resigns
			if z.hasLeader && z.leader == from && z.leaderEpoch == m.Epoch {
				z.ended(m.Epoch)
			}
			if z.w < z.mem.Len() && z.at(z.w) == from {
				return z.passOver(false)
			}
			return nil
		}
		if m.Cand != z.mem.members[from].Rank() {
			return nil
		}
		return z.learn(m.Cand, m.Epoch)
	}
	return nil
}

// newLeader answers a NEW_LEADER: ACK at most one candidate per epoch, and
// none that this live eligible server outranks.
func (z *Zab) newLeader(from int, m Message) []Message {
	if m.Cand != z.mem.members[from].Rank() {
		return nil
	}
	z.maxEpoch = max(z.maxEpoch, m.Epoch)
	refuse := Message{Kind: LeaderAck, Epoch: max(z.ackedEpoch, z.viewEpoch, m.Epoch)}
	if z.eligible && z.outranks(z.self, from) {
		refuse.Cand = z.rank
		out := []Message{z.to(from, refuse)}
		if z.w >= z.mem.Len() && (z.role == zabFollower || z.role == zabLeader && m.Epoch > z.epoch) {
			out = append(out, z.stand()...) // nothing better above: we lead
		}
		return out
	}
	floor := max(z.ackedEpoch, z.viewEpoch)
	same := z.ackedEpoch == m.Epoch && z.ackedFor == m.From
	if m.Epoch < floor || m.Epoch == floor && !same {
		refuse.Epoch = floor
		if z.role == zabCandidate && z.outranks(from, z.self) {
			z.role = zabFollower // a better candidate stands: let it
			z.standAt = satAdd(z.now, satAdd(z.timeout, z.stagger))
		}
		return []Message{z.to(from, refuse)}
	}
	z.ackedEpoch, z.ackedFor = m.Epoch, m.From
	if z.role == zabCandidate {
		z.role = zabFollower // we ACKed a better candidate
		z.standAt = satAdd(z.now, satAdd(z.timeout, z.stagger))
	}
	return []Message{z.to(from, Message{Kind: LeaderAck, Epoch: m.Epoch, Seq: 1})}
}

func (z *Zab) all(m Message) []Message {
	out := make([]Message, 0, z.mem.Len()-1)
	for p := range z.mem.members {
		if p != z.self {
			out = append(out, z.to(p, m))
		}
	}
	return out
}

func (z *Zab) to(p int, m Message) Message {
	m.From, m.To = z.rank.ID, z.mem.members[p].ID
	return m
}
