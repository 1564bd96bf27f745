// Hirschberg–Sinclair election on a bidirectional ring [HirschbergSinclair],
// following [Pedersen] ("HS"): O(n log n) messages.
//
// The rules, as the sources state them:
//
//   - Elections run in phases k = 0, 1, 2, …; in phase k a candidate sends
//     a token (its ID, k, hop d) in both directions, to travel 2^k hops:
//     Election{Cand, Phase: k, Hop: d, Left}. The first hop has d = 1.
//   - "If the p_i receiving the election message has a greater ID, then it
//     swallows the message, otherwise it relays it in the same direction,
//     after incrementing d by 1."
//   - "If a p_j receives a message with (r, k, d) where d = 2^k, then it is
//     the last process in the 2^k-neighbourhood of p_r": it sends back a
//     reply (Reply), "forwarded till it reaches the candidate p_r".
//   - "If the candidate receives replies from both directions, then it is
//     the winner of its 2^k-neighbourhood" and goes on to phase k+1.
//   - "A p_i that receives an election message with its own ID is the leader
//     of the ring"; "the leader should also announce itself to all other
//     nodes": Elected goes once round the ring, clockwise.
//   - "Initially, all p's initiate a candidacy (phase 0), e.g. after having
//     received a broadcasted request for electing a leader": a node joins an
//     election when it first hears of it (any message of it), and stands in
//     phase 0 then. One Start wakes the whole ring.
//   - "Ring size initially unknown to the processes": nothing in the
//     election uses N. A node knows only its two neighbours (Config.Members
//     gives the ring order; the failure detector, below, also uses it to
//     find the next live one).
//
// Messages (hs_test.go checks them for every n up to 4,096): at most
// 8n(1 + ⌈log₂ n⌉) Election, Reply and Elected together, for any order of
// the IDs and any set of initiators. Phase 0 costs 4n; in phase k ≥ 1 at
// most n/(2^(k−1)+1) candidates remain (each beat its 2^(k−1)-neighbourhood),
// each costing at most 4·2^k, so at most 8n; the last phase is at most
// ⌈log₂ n⌉; the announcement adds n < 4n.
//
// The sources' HS assumes no failures. This node adds the ring's fault model
// (ring.go), so that it runs in classic/sim's property tests and in
// backend/inmem: crash-recovery nodes, a failure detector that is perfect
// while the network is whole (neighbours.go: heartbeats to both
// neighbours; a dead one is skipped, a message from a skipped node takes it
// back), lost and reordered messages. No majority is asked, so a partition
// elects a leader on each side, as for ring and bully. How:
//
//   - Runs. Every election is a run, numbered; Start opens run = highest
//     run seen + 1. Unlike the ring's runs, two nodes opening the same number
//     open the same run (HS lets every node stand anyway). A message of a
//     higher run makes a node leave its run and join that one (standing in
//     phase 0 anew); messages of lower runs are dropped. A node that has
//     passed on a run's Elected relays that run's leftover messages by the
//     rules above but stands in it no more.
//   - A node that has seen run r end and gets a token of an older run
//     opens a new run: its sender is behind (it recovered, or missed the
//     Elected), and cannot know which run numbers are used up. Leftovers of
//     run r itself are relayed as usual.
//   - A node that skips a dead neighbour while an election runs, or whose
//     leader died, opens a new run: tokens may have died with the node. An
//     election that sees no Elected within N·TimeoutTicks (re-armed by each
//     of its messages) opens a new run too.
//   - Epochs, as in ring.go: tokens and replies carry the highest epoch
//     along their path; the winner's own token has just gone round the whole
//     ring, so it announces the highest epoch of every live node + 1 (or
//     keeps its epoch if it already leads in the highest). Stale Elected
//     messages are not adopted: the receiver opens a run.
//   - Eligibility: an ineligible node never stands and never swallows; it
//     relays every token. As it sends no token of its own when it joins a
//     run, it passes the news on: a wake-up, Election{Hop: 0}, one hop in
//     the direction the news came from, relayed by ineligible nodes (awake
//     ones pass it on to its originator) and consumed by the first eligible
//     one, which stands. An ineligible node
//     that opens a run sends a wake-up clockwise with no candidate; if it
//     comes back to it still without one, no node is eligible, and it
//     closes the run with Elected{Cand: zero Rank}. With every node
//     eligible, no wake-up is ever sent.

package classic

import (
	"math"
)

// HS is one node of the Hirschberg–Sinclair election. Build it with NewHS
// or NewHSFrom.
type HS struct {
	mem  *Membership
	self int32
	rank Rank
	det  detector

	eligible    bool
	hasLeader   bool
	leader      int32
	leaderEpoch uint64
	maxEpoch    uint64
	epochLeader ID

	electing bool
	run      uint64
	maxRun   uint64
	doneRun  uint64 // the highest run whose Elected this node passed on
	active   bool   // standing in the current run
	phase    uint32
	back     uint8 // replies of this phase come back: 1 from the right, 2 from the left
	deadline uint64
}

var _ Node = (*HS)(nil)

// NewHS returns the HS node cfg.ID; Config.Members is the ring's order.
func NewHS(cfg Config) (*HS, error) {
	m, err := NewMembership(cfg.Members)
	if err != nil {
		return nil, err
	}
	return NewHSFrom(m, cfg.ID, cfg.HeartbeatTicks, cfg.TimeoutTicks)
}

// NewHSFrom returns the HS node id of membership m, sharing m.
func NewHSFrom(m *Membership, id ID, heartbeatTicks, timeoutTicks int) (*HS, error) {
	i, err := m.nodeConfig(id, heartbeatTicks, timeoutTicks)
	if err != nil {
		return nil, err
	}
	h := &HS{mem: m, self: int32(i), rank: m.members[i].Rank(), eligible: true}
	h.det.init(m, i, heartbeatTicks, timeoutTicks, +1, -1)
	h.det.epochOf = func() uint64 { return h.maxEpoch }
	return h, nil
}

// ID returns the node's ID.
func (h *HS) ID() ID { return h.rank.ID }

// View reports whom the node believes leads.
func (h *HS) View() View {
	v := View{Electing: h.electing}
	if h.hasLeader {
		v.Leader, v.Epoch, v.HasLeader = h.mem.members[h.leader].ID, h.leaderEpoch, true
	}
	return v
}

// Phase reports the node's phase in the current election and whether it
// still stands in it.
func (h *HS) Phase() (k uint32, standing bool) { return h.phase, h.active }

// Start opens an election: the node noticed the leader is gone.
func (h *HS) Start() []Message { return h.initiate(true) }

// Recover restarts the node: it keeps its highest epoch and eligibility,
// announces itself to its nearest members both ways and opens an election.
func (h *HS) Recover() []Message {
	h.epochLeader, h.hasLeader, h.electing, h.active = 0, false, false, false
	h.run, h.maxRun, h.doneRun = 0, 0, 0
	h.det.reset()
	return append(h.det.announce(), h.initiate(true)...)
}

// SetEligible makes the node stand for election or not.
func (h *HS) SetEligible(eligible bool) []Message {
	if eligible == h.eligible {
		return nil
	}
	h.eligible = eligible
	if !eligible {
		h.active = false
		if h.leads() {
			return h.initiate(true)
		}
		return nil
	}
	if !h.hasLeader || h.mem.members[h.leader].Rank().Less(h.rank) {
		return h.initiate(false)
	}
	return nil
}

// Tick advances time: heartbeats both ways, dead neighbours, the election
// timeout.
func (h *HS) Tick() []Message {
	out, lost := h.det.tick()
	leaderDead := h.hasLeader && h.det.dead(int(h.leader))
	if lost && (leaderDead || h.electing) {
		return append(out, h.initiate(leaderDead)...)
	}
	if h.electing && h.det.now >= h.deadline {
		out = append(out, h.initiate(false)...)
	}
	return out
}

// Step handles one message; malformed ones are ignored.
func (h *HS) Step(m Message) []Message {
	if m.To != h.rank.ID {
		return nil
	}
	switch m.Kind {
	case Election, Reply, Elected, Heartbeat, Ack:
	default:
		return nil
	}
	from, ok := h.mem.index(m.From)
	if !ok {
		return nil
	}
	var out []Message
	if h.det.heard(from) && !h.hasLeader && !h.electing {
		out = h.initiate(false) // the ring grew
	}
	switch m.Kind {
	case Election, Reply:
		return appendAll(out, h.onToken(m))
	case Elected:
		return appendAll(out, h.onElected(m))
	case Heartbeat:
		out = append(out, h.learn(m.Epoch)...)
		return append(out, Message{Kind: Ack, From: h.rank.ID, To: m.From, Seq: m.Seq, Epoch: h.maxEpoch})
	default:
		h.det.acked(from, m.Seq)
		return append(out, h.learn(m.Epoch)...)
	}
}

// onToken handles Elections (tokens and wake-ups) and Replies.
func (h *HS) onToken(m Message) []Message {
	cand, ok := candidateOf(h.mem, m.Cand)
	if !ok || (m.Kind == Reply && cand < 0) || (m.Hop == 0 && m.Kind == Election && !h.knows(m.Initiator)) {
		return nil
	}
	if m.Epoch > h.maxEpoch {
		h.maxEpoch, h.epochLeader = m.Epoch, 0
		if h.leads() {
			h.hasLeader = false
		}
	}
	h.maxRun = max(h.maxRun, m.Run)
	var out []Message
	switch {
	case h.electing && m.Run < h.run:
		return nil // a run left behind
	case h.electing && m.Run == h.run:
	case !h.electing && m.Run < h.doneRun && m.Kind == Election:
		// Its sender is behind (it recovered, or missed an Elected): open
		// a run above every run it may know, which it will join.
		return h.initiate(false)
	case !h.electing && m.Run <= h.doneRun:
		// Leftovers of the run this node saw end: relay them, stand no more.
	default: // a newer run, or this node hears of one first: join it
		out = h.join(m.Run, m.Left, m)
		if m.Kind == Election && m.Hop == 0 {
			return out // the wake-up did its work
		}
	}
	if h.electing {
		h.arm()
	}
	m.Epoch = max(m.Epoch, h.maxEpoch)
	if m.Kind == Reply {
		if cand != int(h.self) {
			return append(out, h.pass(m)) // relay it towards its candidate
		}
		if !h.active || m.Run != h.run || m.Phase != h.phase {
			return out
		}
		if m.Left { // travelling left: it comes back from the right
			h.back |= 1
		} else {
			h.back |= 2
		}
		if h.back == 3 {
			if h.phase == math.MaxUint32 {
				return out
			}
			h.phase++
			out = append(out, h.stand()...)
		}
		return out
	}
	if m.Hop == 0 { // a wake-up to a node already awake
		if m.Initiator == h.rank.ID && cand < 0 && h.electing && m.Run == h.run && !h.eligible {
			// It went round: no node stands. Close the run with no leader.
			h.electing, h.hasLeader, h.doneRun = false, false, h.run
			return append(out, h.det.msg(h.det.peer(+1), Message{Kind: Elected, Run: h.run, Initiator: h.rank.ID}))
		}
		if !h.eligible && m.Initiator != h.rank.ID && m.Run == h.run && !h.det.dead(h.indexOf(m.Initiator)) {
			return append(out, h.pass(m)) // not standing: relay it to its originator
		}
		return out
	}
	switch {
	case cand == int(h.self):
		if h.active && m.Run == h.run && h.electing {
			return append(out, h.win()...)
		}
		return out
	case h.eligible && m.Cand.Less(h.rank):
		return out // swallowed: we rank above its candidate
	case m.Hop < hopLimit(m.Phase):
		m.Hop++
		return append(out, h.pass(m))
	default: // the 2^k-th node: echo it back
		r := Message{Kind: Reply, Cand: m.Cand, Run: m.Run, Phase: m.Phase, Hop: m.Hop, Left: !m.Left, Epoch: m.Epoch}
		return append(out, h.pass(r))
	}
}

func hopLimit(k uint32) uint64 {
	if k >= 63 {
		return math.MaxUint64
	}
	return 1 << k
}

func (h *HS) indexOf(id ID) int {
	i, _ := h.mem.index(id)
	return i
}

// knows reports whether id is a member.
func (h *HS) knows(id ID) bool {
	_, ok := h.mem.index(id)
	return ok
}

// pass sends m on in the direction it travels.
func (h *HS) pass(m Message) Message {
	dir := +1
	if m.Left {
		dir = -1
	}
	return h.det.msg(h.det.peer(dir), m)
}

// join makes the node take part in run, woken by msg (travelling left if
// left), which may be the zero Message when the node opens the run itself.
func (h *HS) join(run uint64, left bool, msg Message) []Message {
	h.electing, h.run, h.active, h.phase, h.back = true, run, false, 0, 0
	h.arm()
	if h.eligible {
		return h.stand()
	}
	// Not standing: pass the news on in its direction. A wake-up goes on
	// as it is; news from a token or reply carries that message's
	// candidate, so it never closes the run; our own run's wake-up carries
	// none.
	w := Message{Kind: Election, Run: run, Left: left, Epoch: h.maxEpoch, Initiator: h.rank.ID}
	switch {
	case msg.Kind == Election && msg.Hop == 0:
		w.Initiator, w.Cand = msg.Initiator, msg.Cand
	case msg.Kind != "":
		w.Cand = msg.Cand
	}
	return []Message{h.pass(w)}
}

// stand sends this node's tokens of its current phase both ways.
func (h *HS) stand() []Message {
	h.active, h.back = true, 0
	t := Message{Kind: Election, Cand: h.rank, Run: h.run, Phase: h.phase, Hop: 1, Epoch: h.maxEpoch}
	l := t
	l.Left = true
	return []Message{h.pass(t), h.pass(l)}
}

// win makes this node the leader: its own token came home.
func (h *HS) win() []Message {
	if !h.eligible {
		return h.initiate(false)
	}
	epoch := h.maxEpoch + 1
	if h.leads() && h.leaderEpoch == h.maxEpoch {
		epoch = h.leaderEpoch
	} else if h.maxEpoch == math.MaxUint64 {
		h.electing, h.active = false, false
		return nil
	}
	h.maxEpoch, h.epochLeader = epoch, h.rank.ID
	h.hasLeader, h.leader, h.leaderEpoch = true, h.self, epoch
	h.electing, h.active, h.doneRun = false, false, h.run
	return []Message{h.det.msg(h.det.peer(+1), Message{Kind: Elected, Cand: h.rank, Epoch: epoch, Run: h.run, Initiator: h.rank.ID})}
}

func (h *HS) onElected(m Message) []Message {
	lpos, ok := candidateOf(h.mem, m.Cand)
	if !ok || !h.knows(m.Initiator) {
		return nil
	}
	h.maxRun = max(h.maxRun, m.Run)
	fwd := func() []Message { return []Message{h.det.msg(h.det.peer(+1), m)} }
	if h.electing && m.Run < h.run {
		return nil // a newer run is under way: it will announce
	}
	if lpos < 0 { // closed with no eligible node
		if m.Initiator == h.rank.ID || !h.electing || m.Run != h.run {
			return nil
		}
		h.electing, h.hasLeader, h.active, h.doneRun = false, false, false, m.Run
		out := fwd()
		if h.eligible {
			out = append(out, h.initiate(false)...)
		}
		return out
	}
	if lpos == int(h.self) {
		return nil // our announcement has gone round
	}
	if h.det.dead(lpos) {
		return h.initiate(false)
	}
	if h.hasLeader && int(h.leader) == lpos && h.leaderEpoch == m.Epoch {
		if !h.electing && m.Run <= h.doneRun {
			return nil // passed on already
		}
		h.electing, h.active, h.doneRun = false, false, max(h.doneRun, m.Run)
		return h.preempt(fwd(), m.Cand)
	}
	if m.Epoch == 0 {
		return nil
	}
	if m.Epoch < h.maxEpoch || (m.Epoch == h.maxEpoch && h.epochLeader != 0 && h.epochLeader != m.Cand.ID) {
		if m.Epoch == h.maxEpoch && h.maxEpoch < math.MaxUint64 {
			h.maxEpoch, h.epochLeader = h.maxEpoch+1, 0
		}
		return h.initiate(h.leads() && h.leaderEpoch < h.maxEpoch)
	}
	h.maxEpoch, h.epochLeader = m.Epoch, m.Cand.ID
	h.hasLeader, h.leader, h.leaderEpoch = true, int32(lpos), m.Epoch
	h.electing, h.active, h.doneRun = false, false, max(h.doneRun, m.Run)
	return h.preempt(fwd(), m.Cand)
}

func (h *HS) preempt(out []Message, leader Rank) []Message {
	if h.eligible && leader.Less(h.rank) {
		out = append(out, h.initiate(false)...)
	}
	return out
}

// initiate opens a new run.
func (h *HS) initiate(leaderGone bool) []Message {
	if leaderGone {
		h.hasLeader = false
	}
	h.maxRun = max(h.maxRun, h.doneRun) + 1
	return h.join(h.maxRun, false, Message{})
}

func (h *HS) arm() {
	h.deadline = satAdd(h.det.now, satMul(h.det.to, uint64(h.mem.Len())))
}

// learn takes in the highest epoch a Heartbeat or Ack carries (ring.go).
func (h *HS) learn(e uint64) []Message {
	if e <= h.maxEpoch {
		return nil
	}
	h.maxEpoch, h.epochLeader = e, 0
	if h.leads() {
		return h.initiate(true)
	}
	if !h.electing {
		h.electing = true
		h.arm()
	}
	return nil
}

func (h *HS) leads() bool { return h.hasLeader && h.leader == h.self }
