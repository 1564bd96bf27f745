// Ad hoc network tree election [VKT], following the rules of the sources:
// [Pedersen] "Election in mobile ad hoc (MAH) networks" ([VanSteen]'s
// Figure 6.22).
//
// The rules, as the sources state them:
//
//   - Nodes talk only to their neighbours "within range": a Graph, any
//     connected topology (NewTree's neighbours).
//   - "Any node can initiate an election by broadcasting an Election msg" to
//     its neighbours. "Each election is tagged with a unique ID. When multiple
//     elections are initiated, each node will decide to join only one
//     election, the one with the highest ID (stopping any running
//     participation in other elections)." The election ID is (Run,
//     Initiator): a node that initiates takes Run = highest run seen + 1.
//   - "When a node receives an Election msg for the first time it designates
//     the sender as its parent, sends out Election to its neighbours except
//     the parent, and waits for the acks to return before acking the Election
//     from its parent." That ack (TreeAck, Seq 1) "also contains a resource
//     status: the best of the incoming statuses", the subtree's best: here
//     its best eligible Rank, the election attribute.
//   - "When a node receives an Election msg from a non-parent node, it merely
//     acknowledges the receipt; the ack does not contain a resource status"
//     (TreeAck, Seq 0).
//   - The source, once every neighbour has acked, knows the best node of the
//     whole graph and announces it (van Steen: "reporting of best node to
//     source", then the source broadcasts it): TreeLeader goes down the tree
//     it built, parent to children.
//
// With one initiator and no failure this costs 2E − (N−1) TreeElection (every
// node sends to each neighbour but its parent), as many TreeAck (one per
// TreeElection) and N−1 TreeLeader: 4E − N + 1 in all, E the number of edges
// (tree_test.go asserts it on rings, grids and geometric graphs).
//
// What this file adds to the sources, and why:
//
//   - Superseded elections. A node that gets an Election older than the one
//     it took part in last answers TreeAck with Seq 2 and its own newer ID: a
//     node that recovered with an old run number learns it is behind and
//     initiates again above it, instead of waiting on neighbours that will
//     never join its election.
//   - Failure detection, as in the paper (Probe/Reply, here Heartbeat/Ack):
//     a node waiting for a neighbour's TreeAck probes it every HeartbeatTicks,
//     and a neighbour that leaves a probe unanswered for TimeoutTicks is taken
//     for dead (out of range) and dropped from the wait; a node that has
//     acked its parent probes the parent until the TreeLeader comes, and
//     initiates if the parent dies. An election that makes no progress for
//     (N+1)·TimeoutTicks (a lost message) is started again.
//   - The leader's heartbeat: the leader floods a beacon (Heartbeat carrying
//     its rank and epoch) every HeartbeatTicks, each node forwarding the
//     newest one once to its neighbours; a node that hears none for
//     2·TimeoutTicks initiates. A beacon of another leader with a later epoch
//     means two components merged (a node recovered between them): the node
//     initiates, and the merged component elects its best node.
//   - Eligibility: an ineligible node reports no status of its own (the zero
//     Rank); if no node of the graph stands, the source announces no leader.
//     A leader that turns ineligible steps down and initiates; a node that
//     turns eligible initiates if it ranks above the leader or there is none.
//
// Epochs (fencing tokens) are ballots, as Paxos numbers its proposals: the
// leader at position p of the N members gets the smallest epoch above every
// epoch the acks reported that is ≡ p mod N. So an epoch never names two
// leaders, even when a partition lets each component elect its own (a
// partition yields one leader per component), and epochs grow within a
// component. A leader re-elected with no later epoch known keeps its epoch.
// A node keeps its highest epoch and run across Recover, and forgets the
// rest.

package classic

import (
	"fmt"
	"math"
	"slices"
)

// electionID orders concurrent elections: the higher run wins, then the
// higher initiator ID.
type electionID struct {
	run  uint64
	init ID
}

func (a electionID) less(b electionID) bool {
	return a.run < b.run || (a.run == b.run && a.init < b.init)
}

// TreeAck's Seq.
const (
	treeReceipt    = 0 // from a non-parent: receipt only, no status
	treeChild      = 1 // from a child: the best status of its subtree
	treeSuperseded = 2 // "I am in a newer election": Run, Initiator name it
)

// Tree is one node of the ad hoc tree election. Build it with NewTree or
// NewTreeFrom. Methods are not safe for concurrent use.
type Tree struct {
	mem      *Membership
	self     int32
	rank     Rank
	nbrs     []int32 // neighbour positions
	hbTicks  uint64
	toTicks  uint64
	eligible bool

	// The only state that survives Recover.
	maxEpoch uint64
	maxRun   uint64

	hasLeader   bool
	leader      int32
	leaderEpoch uint64

	cur       electionID // the election taken part in last
	electing  bool
	reported  bool  // acked the parent; waiting for the TreeLeader
	parent    int32 // -1 for the source
	pending   []int32
	children  []int32
	best      Rank
	bestEpoch uint64
	deadline  uint64

	now        uint64
	seq        uint64
	probes     map[int32]uint64 // neighbour → send time of its oldest unanswered probe
	nextProbe  uint64
	beaconSeq  uint64
	lastBeacon uint64
	nextBeacon uint64
}

var _ Node = (*Tree)(nil)

// NewTree returns the tree node cfg.ID whose neighbours are given (IDs of
// members); nil neighbours means every other member (a complete graph, as
// backend/inmem runs it).
func NewTree(cfg Config, neighbours []ID) (*Tree, error) {
	m, err := NewMembership(cfg.Members)
	if err != nil {
		return nil, err
	}
	return NewTreeFrom(m, cfg.ID, neighbours, cfg.HeartbeatTicks, cfg.TimeoutTicks)
}

// NewTreeFrom is NewTree over a shared Membership.
func NewTreeFrom(m *Membership, id ID, neighbours []ID, heartbeatTicks, timeoutTicks int) (*Tree, error) {
	i, err := m.nodeConfig(id, heartbeatTicks, timeoutTicks)
	if err != nil {
		return nil, err
	}
	t := &Tree{
		mem: m, self: int32(i), rank: m.members[i].Rank(),
		hbTicks: uint64(heartbeatTicks), toTicks: uint64(timeoutTicks),
		eligible: true, parent: -1, probes: map[int32]uint64{},
	}
	if neighbours == nil {
		for p := range m.members {
			if p != i {
				t.nbrs = append(t.nbrs, int32(p))
			}
		}
		return t, nil
	}
	for _, nb := range neighbours {
		p, ok := m.index(nb)
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: N%d's neighbour N%d is not in Members", ErrInvalidConfig, id, nb)
		case p == i:
			return nil, fmt.Errorf("%w: N%d lists itself as a neighbour", ErrInvalidConfig, id)
		case slices.Contains(t.nbrs, int32(p)):
			return nil, fmt.Errorf("%w: N%d lists neighbour N%d twice", ErrInvalidConfig, id, nb)
		}
		t.nbrs = append(t.nbrs, int32(p))
	}
	return t, nil
}

// ID returns the node's ID.
func (t *Tree) ID() ID { return t.rank.ID }

// View reports whom the node believes leads, and in which epoch.
func (t *Tree) View() View {
	v := View{Electing: t.electing}
	if t.hasLeader {
		v.Leader, v.Epoch, v.HasLeader = t.mem.members[t.leader].ID, t.leaderEpoch, true
	}
	return v
}

// Start initiates an election: the node forgets its leader (a leader steps
// down).
func (t *Tree) Start() []Message {
	t.hasLeader = false
	return t.initiate()
}

// Recover restarts the node: it keeps its highest epoch and run, forgets the
// rest, and initiates an election (the slides: a recovered node holds one).
func (t *Tree) Recover() []Message {
	t.hasLeader, t.electing, t.reported = false, false, false
	t.cur = electionID{}
	t.pending, t.children = nil, nil
	clear(t.probes)
	t.beaconSeq = 0
	return t.initiate()
}

// SetEligible makes the node stand for election or not.
func (t *Tree) SetEligible(eligible bool) []Message {
	if eligible == t.eligible {
		return nil
	}
	t.eligible = eligible
	switch {
	case !eligible && t.isLeader():
		t.hasLeader = false
		return t.initiate()
	case !eligible && t.electing:
		return t.initiate() // our status may have gone up already
	case eligible && (t.electing || !t.hasLeader || t.mem.members[t.leader].Rank().Less(t.rank)):
		return t.initiate() // a running election may have passed us by
	}
	return nil
}

func (t *Tree) isLeader() bool { return t.hasLeader && t.leader == t.self }

func (t *Tree) status() Rank {
	if t.eligible {
		return t.rank
	}
	return Rank{}
}

// initiate starts a new election, above every one seen.
func (t *Tree) initiate() []Message {
	if t.maxRun == math.MaxUint64 {
		return nil
	}
	t.maxRun++
	return t.join(electionID{t.maxRun, t.rank.ID}, -1)
}

// join takes part in election id with the given parent (-1: the source).
func (t *Tree) join(id electionID, parent int32) []Message {
	t.cur, t.electing, t.reported, t.parent = id, true, false, parent
	t.children = t.children[:0]
	t.best, t.bestEpoch = t.status(), t.maxEpoch
	t.pending = t.pending[:0]
	clear(t.probes)
	t.nextProbe = satAdd(t.now, t.hbTicks)
	t.deadline = t.electDeadline()
	out := make([]Message, 0, len(t.nbrs))
	for _, p := range t.nbrs {
		if p != parent {
			t.pending = append(t.pending, p)
			out = append(out, t.to(p, Message{Kind: TreeElection, Run: id.run, Initiator: id.init, Epoch: t.maxEpoch}))
		}
	}
	if len(t.pending) == 0 {
		out = append(out, t.collected()...)
	}
	return out
}

func (t *Tree) electDeadline() uint64 {
	return satAdd(t.now, satMul(uint64(t.mem.Len())+1, t.toTicks))
}

// collected runs when every neighbour has acked: report to the parent, or,
// at the source, announce.
func (t *Tree) collected() []Message {
	if t.parent >= 0 {
		t.reported = true
		clear(t.probes)
		return []Message{t.to(t.parent, Message{Kind: TreeAck, Seq: treeChild, Cand: t.best,
			Epoch: t.bestEpoch, Run: t.cur.run, Initiator: t.cur.init})}
	}
	t.electing = false
	ann := Message{Kind: TreeLeader, Run: t.cur.run, Initiator: t.cur.init}
	if t.best == (Rank{}) {
		t.hasLeader = false // no node stands
	} else {
		p, _ := t.mem.index(t.best.ID)
		epoch, ok := t.ballot(int32(p))
		if !ok {
			t.hasLeader = false
			return nil
		}
		t.adopt(int32(p), epoch)
		ann.Cand, ann.Epoch = t.best, epoch
	}
	return t.down(ann)
}

// ballot returns the epoch the leader at position p gets: its current one if
// it leads already and no later one is known, else the smallest above every
// known epoch that is ≡ p mod N.
func (t *Tree) ballot(p int32) (uint64, bool) {
	known := max(t.bestEpoch, t.maxEpoch)
	if t.hasLeader && t.leader == p && t.leaderEpoch == known {
		return known, true
	}
	n := uint64(t.mem.Len())
	k := known/n + 1
	if k > (math.MaxUint64-uint64(p))/n {
		return 0, false // epochs exhausted: never reuse one
	}
	return k*n + uint64(p), true
}

func (t *Tree) adopt(p int32, epoch uint64) {
	if !t.hasLeader || t.leader != p || t.leaderEpoch != epoch {
		t.beaconSeq = 0 // a new leadership numbers its beacons afresh
	}
	t.hasLeader, t.leader, t.leaderEpoch = true, p, epoch
	t.maxEpoch = max(t.maxEpoch, epoch)
	t.lastBeacon = t.now
	t.nextBeacon = satAdd(t.now, t.hbTicks)
}

// down sends m to the children of the current election's tree.
func (t *Tree) down(m Message) []Message {
	out := make([]Message, 0, len(t.children))
	for _, c := range t.children {
		out = append(out, t.to(c, m))
	}
	return out
}

// Tick advances time: probes while electing, the leader's beacon, and the
// timeouts.
func (t *Tree) Tick() []Message {
	t.now++
	var out []Message
	if t.electing {
		if t.now >= t.deadline {
			return t.initiate()
		}
		// Neighbours that left a probe unanswered too long are gone.
		for _, p := range slices.Clone(t.pending) {
			if at, ok := t.probes[p]; ok && t.now-at >= t.toTicks {
				delete(t.probes, p)
				if t.reported {
					continue
				}
				t.pending = slices.DeleteFunc(t.pending, func(q int32) bool { return q == p })
				if len(t.pending) == 0 {
					out = append(out, t.collected()...)
				}
			}
		}
		if t.reported && t.parent >= 0 {
			if at, ok := t.probes[t.parent]; ok && t.now-at >= t.toTicks {
				return append(out, t.initiate()...) // the parent died: the TreeLeader will not come
			}
		}
		if t.electing && t.now >= t.nextProbe {
			t.nextProbe = satAdd(t.now, t.hbTicks)
			targets := t.pending
			if t.reported {
				targets = []int32{t.parent}
			}
			for _, p := range targets {
				if _, ok := t.probes[p]; !ok {
					t.seq++
					t.probes[p] = t.now
					out = append(out, t.to(p, Message{Kind: Heartbeat, Seq: t.seq, Epoch: t.maxEpoch}))
				}
			}
		}
	}
	switch {
	case t.isLeader():
		if t.now >= t.nextBeacon {
			t.nextBeacon = satAdd(t.now, t.hbTicks)
			t.beaconSeq++
			out = append(out, t.flood(Message{Kind: Heartbeat, Cand: t.rank, Epoch: t.leaderEpoch, Seq: t.beaconSeq}, -1)...)
		}
	case t.hasLeader && !t.electing && t.now-t.lastBeacon >= satMul(2, t.toTicks):
		t.hasLeader = false
		out = append(out, t.initiate()...)
	}
	return out
}

func (t *Tree) flood(m Message, except int32) []Message {
	out := make([]Message, 0, len(t.nbrs))
	for _, p := range t.nbrs {
		if p != except {
			out = append(out, t.to(p, m))
		}
	}
	return out
}

// Step handles one message addressed to this node. Messages of an unknown
// kind, from non-neighbours, or otherwise malformed are ignored.
func (t *Tree) Step(m Message) []Message {
	if m.To != t.rank.ID {
		return nil
	}
	from, ok := t.mem.index(m.From)
	if !ok || !slices.Contains(t.nbrs, int32(from)) {
		return nil
	}
	p := int32(from)
	delete(t.probes, p) // it is alive
	switch m.Kind {
	case TreeElection:
		return t.onElection(m, p)
	case TreeAck:
		return t.onAck(m, p)
	case TreeLeader:
		return t.onLeader(m, p)
	case Heartbeat:
		if m.Cand != (Rank{}) {
			return t.onBeacon(m, p)
		}
		t.maxEpoch = max(t.maxEpoch, m.Epoch)
		return []Message{t.to(p, Message{Kind: Ack, Seq: m.Seq, Epoch: t.maxEpoch})}
	case Ack:
		t.maxEpoch = max(t.maxEpoch, m.Epoch)
	}
	return nil
}

func (t *Tree) onElection(m Message, p int32) []Message {
	if m.Initiator == 0 || m.Run == 0 {
		return nil
	}
	t.maxEpoch = max(t.maxEpoch, m.Epoch)
	t.maxRun = max(t.maxRun, m.Run)
	id := electionID{m.Run, m.Initiator}
	switch {
	case t.cur.less(id):
		return t.join(id, p)
	case id == t.cur:
		return []Message{t.to(p, Message{Kind: TreeAck, Seq: treeReceipt, Run: id.run, Initiator: id.init, Epoch: t.maxEpoch})}
	default:
		return []Message{t.to(p, Message{Kind: TreeAck, Seq: treeSuperseded, Run: t.cur.run, Initiator: t.cur.init, Epoch: t.maxEpoch})}
	}
}

func (t *Tree) onAck(m Message, p int32) []Message {
	id := electionID{m.Run, m.Initiator}
	if m.Seq == treeSuperseded {
		t.maxEpoch = max(t.maxEpoch, m.Epoch)
		t.maxRun = max(t.maxRun, m.Run)
		if t.cur.less(id) {
			return t.initiate() // our election is behind: start one above it
		}
		return nil
	}
	if id != t.cur || !t.electing || t.reported || !slices.Contains(t.pending, p) {
		return nil
	}
	t.pending = slices.DeleteFunc(t.pending, func(q int32) bool { return q == p })
	t.deadline = t.electDeadline()
	if m.Seq == treeChild {
		t.children = append(t.children, p)
		t.bestEpoch = max(t.bestEpoch, m.Epoch)
		if t.validRank(m.Cand) && t.best.Less(m.Cand) {
			t.best = m.Cand
		}
	}
	if len(t.pending) == 0 {
		return t.collected()
	}
	return nil
}

func (t *Tree) onLeader(m Message, p int32) []Message {
	if (electionID{m.Run, m.Initiator}) != t.cur || !t.electing || !t.reported || p != t.parent {
		return nil
	}
	t.electing, t.reported = false, false
	clear(t.probes)
	if m.Cand == (Rank{}) {
		t.hasLeader = false
		return t.down(m)
	}
	if !t.validRank(m.Cand) || m.Epoch == 0 {
		return nil
	}
	l, _ := t.mem.index(m.Cand.ID)
	if m.Epoch < t.maxEpoch || (l == int(t.self) && !t.eligible) {
		// A later leadership was heard of meanwhile, or we were chosen
		// after turning ineligible: elect again.
		return t.initiate()
	}
	t.adopt(int32(l), m.Epoch)
	return t.down(m)
}

func (t *Tree) onBeacon(m Message, p int32) []Message {
	if !t.validRank(m.Cand) {
		return nil
	}
	l, _ := t.mem.index(m.Cand.ID)
	t.maxEpoch = max(t.maxEpoch, m.Epoch)
	switch {
	case t.hasLeader && int32(l) == t.leader && m.Epoch == t.leaderEpoch:
		if m.Seq <= t.beaconSeq || t.isLeader() {
			return nil
		}
		t.beaconSeq, t.lastBeacon = m.Seq, t.now
		return t.flood(m, p)
	case !t.hasLeader && !t.electing && m.Epoch >= t.maxEpoch:
		t.adopt(int32(l), m.Epoch)
		t.beaconSeq = m.Seq
		return t.flood(m, p)
	case t.hasLeader && m.Epoch > t.leaderEpoch && !t.electing:
		// Another, later leadership: two components met. Elect over both.
		t.hasLeader = false
		return t.initiate()
	}
	return nil
}

func (t *Tree) validRank(r Rank) bool {
	p, ok := t.mem.index(r.ID)
	return ok && t.mem.members[p].Attr == r.Attr
}

func (t *Tree) to(p int32, m Message) Message {
	m.From, m.To = t.rank.ID, t.mem.members[p].ID
	return m
}
