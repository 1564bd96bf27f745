// Package classic holds the classic leader-election algorithms as pure
// state machines, in the style of etcd-io/raft: a node has no goroutines, no
// clock and no I/O. It takes a message or a tick (an abstract unit of time)
// and hands back the messages to send; its View says whom it believes
// leads, and in which epoch.
//
// Drivers own everything else: classic/sim runs nodes deterministically from
// a seed (delays, drops, crashes, partitions) and checks safety after every
// step; backend/inmem runs them live between goroutines. Both deliver a
// message only to the node named in its To field, and never to a crashed
// node.
//
// Every node has an ID and an election attribute (Attr); nodes are ranked by
// (Attr, ID) and the best live, eligible node wins, as in the sources. Each
// leadership carries an epoch that strictly increases: a new leader
// announces one more than the highest epoch it has seen, and a node keeps
// the highest epoch across crashes (its only stable state), so epochs can
// serve as fencing tokens.
//
// This package imports nothing of the project.
//
// # Algorithms
//
//   - [Ring]: Chang–Roberts on a unidirectional ring [ChangRoberts] as taught
//     in [Misra] and [Notebook]; 2N to 3N−1 messages.
//   - [LCR]: the ring election of [VanSteen] as the slides of [Pedersen]
//     adopt it; the Election message collects the live members; always 2N.
//   - [Bully]: Garcia-Molina's bully [GarciaMolina] as taught in [Misra],
//     [Notebook] and [Pedersen]; O(N²) worst, N−2 best.
//   - [HS]: Hirschberg–Sinclair on a bidirectional ring [HirschbergSinclair]
//     as in [Pedersen]; O(n log n).
//   - [Tree]: the ad hoc network tree election [VKT] as in [Pedersen].
//   - [Chubby]: a quorum-granted master lease [Burrows] as in [Gupta] and
//     [Notes].
//   - [Zab]: ZooKeeper's sequence/successor election [Hunt] as in [Gupta] and
//     [Notes].
//
// # Sources
//
// The files cite these by the key in brackets; "the sources" in a file's
// doc means the course material listed first, whose rules each algorithm
// follows to the letter (quoted where it matters).
//
//   - [Misra]: Rajiv Misra, "Leader Election (Ring LE & Bully LE)", lecture 8
//     of Cloud Computing and Distributed Systems, IIT Patna (transcript; times
//     such as "16:50" point into it).
//   - [Notebook]: "Leader Election", a course notebook on the ring and bully
//     algorithms with worked examples (sections "Ring Election", "Bully
//     Algorithm", "Predecessor Detection").
//   - [Gupta]: Indranil Gupta, "Leader Election, Lecture C: Election in Chubby
//     and ZooKeeper", Cloud Computing Concepts.
//   - [Notes]: lecture notes on leader election in the cloud ("Paxos-like
//     solution in Google Chubby", "Paxos-like solution in Zookeeper").
//   - [Pedersen]: Christian Fischer Pedersen, "Leader Election", slides of
//     Distributed Systems, Aarhus University, 2020 (bully, LeLann–Chang–Roberts,
//     election in mobile ad hoc networks, Hirschberg–Sinclair).
//   - [ChangRoberts]: Ernest Chang and Rosemary Roberts, "An improved
//     algorithm for decentralized extrema-finding in circular configurations
//     of processes", Communications of the ACM 22(5), 1979.
//   - [GarciaMolina]: Hector Garcia-Molina, "Elections in a Distributed
//     Computing System", IEEE Transactions on Computers C-31(1), 1982.
//   - [HirschbergSinclair]: D. S. Hirschberg and J. B. Sinclair,
//     "Decentralized extrema-finding in circular configurations of
//     processors", Communications of the ACM 23(11), 1980.
//   - [VKT]: Sudarshan Vasudevan, Jim Kurose and Don Towsley, "Design and
//     Analysis of a Leader Election Algorithm for Mobile Ad Hoc Networks",
//     ICNP 2004.
//   - [VanSteen]: Maarten van Steen and Andrew S. Tanenbaum, "Distributed
//     Systems", 3rd edition, 2017, section 6.4 (Figure 6.22: the ad hoc
//     network election).
//   - [Burrows]: Mike Burrows, "The Chubby lock service for loosely-coupled
//     distributed systems", OSDI 2006.
//   - [Hunt]: Patrick Hunt, Mahadev Konar, Flavio P. Junqueira and Benjamin
//     Reed, "ZooKeeper: Wait-free coordination for Internet-scale systems",
//     USENIX ATC 2010.
package classic

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
)

// ID names a node.
type ID uint64

// Rank orders candidates: the higher Attr wins; ties go to the higher ID.
type Rank struct {
	Attr int64
	ID   ID
}

// Less reports whether r ranks below o.
func (r Rank) Less(o Rank) bool {
	if r.Attr != o.Attr {
		return r.Attr < o.Attr
	}
	return r.ID < o.ID
}

func (r Rank) String() string {
	if r.Attr == 0 {
		return fmt.Sprintf("N%d", r.ID)
	}
	return fmt.Sprintf("N%d(attr %d)", r.ID, r.Attr)
}

// Kind names a message type. Message counts are reported per Kind.
type Kind string

// The kinds of the sources' algorithms. Election traffic is what the sources
// count; Heartbeat and Ack are failure-detector traffic, counted apart.
const (
	Election    Kind = "Election"    // ring, bully: an election run
	Elected     Kind = "Elected"     // ring: announces the winner around the ring
	OK          Kind = "OK"          // bully: "I am better, I take over"
	Coordinator Kind = "Coordinator" // bully: announces the winner to all
	Heartbeat   Kind = "Heartbeat"   // failure detector: "are you alive?" / "I am alive"
	Ack         Kind = "Ack"         // failure detector: reply to a Heartbeat or a forwarded message
)

// The kinds of the ad hoc tree, Chubby and ZooKeeper elections (tree.go,
// chubby.go, zab.go). Their fields are described there, and printed by
// Message.String through detail.
const (
	TreeElection Kind = "TreeElection" // tree: builds the tree; the first one received names the parent
	TreeAck      Kind = "TreeAck"      // tree: acknowledges a TreeElection; a child's carries its subtree's best status
	TreeLeader   Kind = "TreeLeader"   // tree: the source announces the best node down the tree
	VoteRequest  Kind = "VoteRequest"  // chubby: a candidate (or the master, renewing) asks for votes in a term
	Vote         Kind = "Vote"         // chubby: a replica grants its one vote of the term
	NewLeader    Kind = "NewLeader"    // zab: NEW_LEADER, a would-be leader asks for ACKs
	LeaderAck    Kind = "LeaderAck"    // zab: ACK, to at most one leader per epoch
	Commit       Kind = "Commit"       // zab: COMMIT, after a quorum of ACKs
)

// The kinds added by LCR (ring-collect) and Hirschberg–Sinclair. LCR uses
// Election and Coordinator as van Steen names them; HS sends its tokens as
// Election, echoes them as Reply and announces the winner with Elected.
const (
	Reply Kind = "Reply" // hs: the 2^k-th node echoes a token back to its candidate
)

// Message is what nodes exchange. Fields beyond Kind, From and To are
// meaningful per Kind, as each algorithm's file says.
type Message struct {
	Kind      Kind
	From, To  ID
	Cand      Rank   // the candidate carried (ring: best so far; Elected/Coordinator: the winner)
	Initiator ID     // ring: whose election run this message belongs to
	Epoch     uint64 // Elected/Coordinator: the new leadership's epoch; others: the sender's highest epoch
	Seq       uint64 // failure detector: matches an Ack to what it acknowledges
	Run       uint64 // ring: the election run an Election/Elected belongs to; (Run, Initiator's rank) orders concurrent runs

	// LCR and Hirschberg–Sinclair.
	List  []Rank // lcr: the live members an Election gathered, in ring order; a Coordinator carries them. Read-only: nodes copy before appending
	Phase uint32 // hs: the token's phase k (it travels 2^k hops)
	Hop   uint64 // hs: hops travelled so far (1 on the first); 0 marks a wake-up. lcr: 1 on an Election whose candidate leads already, in the epoch it carries
	Left  bool   // hs: the message travels to predecessors (counterclockwise)
}

func (m Message) String() string {
	s := fmt.Sprintf("%s N%d→N%d", m.Kind, m.From, m.To)
	if d, ok := m.detail(); ok { // the kinds of tree.go, chubby.go, zab.go
		return s + d
	}
	switch m.Kind {
	case Election:
		s += fmt.Sprintf(" cand=%v", m.Cand)
		if m.Initiator != 0 {
			s += fmt.Sprintf(" init=N%d", m.Initiator)
		}
	case Elected, Coordinator:
		s += fmt.Sprintf(" leader=%v epoch=%d", m.Cand, m.Epoch)
	}
	s += m.extra()
	return s
}

// extra formats the LCR and HS fields, when set.
func (m Message) extra() string {
	var s string
	if m.List != nil {
		s += " list=["
		for i, r := range m.List {
			if i > 0 {
				s += " "
			}
			s += r.String()
		}
		s += "]"
		if m.Kind == Election && m.Hop == 1 {
			s += " (cand leads)"
		}
		return s
	}
	if m.Hop != 0 || m.Phase != 0 || m.Left {
		dir := "→"
		if m.Left {
			dir = "←"
		}
		if m.Kind == Reply {
			s += fmt.Sprintf(" cand=%v", m.Cand)
		}
		s += fmt.Sprintf(" k=%d hop=%d %s", m.Phase, m.Hop, dir)
	}
	return s
}

// View is what a node believes.
type View struct {
	Leader    ID     // the leader it knows of; meaningful only if HasLeader
	Epoch     uint64 // the epoch of that leadership
	HasLeader bool
	Electing  bool // an election this node takes part in has not finished
}

// Member is one node of the configuration, as every node knows it.
type Member struct {
	ID   ID
	Attr int64
}

// Rank returns m's rank.
func (m Member) Rank() Rank { return Rank{Attr: m.Attr, ID: m.ID} }

// Config configures one node.
type Config struct {
	ID ID
	// Members lists every node, this one included. For the ring it is the
	// ring's order: each node's successor is the next member, the last
	// member's is the first.
	Members []Member
	// HeartbeatTicks is how often the failure detector probes; a peer that
	// has not answered within TimeoutTicks is taken for dead. The algorithm
	// files say which peers each one probes.
	HeartbeatTicks int
	TimeoutTicks   int
}

// Node is one participant of an algorithm. Methods are not safe for
// concurrent use: a driver calls them from one goroutine per node.
type Node interface {
	ID() ID
	// Start makes the node initiate an election (it noticed the leader is
	// gone, or it joined).
	Start() []Message
	// Step handles a message addressed to this node.
	Step(m Message) []Message
	// Tick advances the node's time by one tick: timeouts, heartbeats.
	Tick() []Message
	// Recover restarts the node after a crash: it keeps only its highest
	// epoch and rejoins as the sources say (the bully holds an election).
	Recover() []Message
	// SetEligible makes the node stand for election or not. An ineligible
	// node stays alive and relays messages but never becomes leader; when
	// the leader itself turns ineligible an election follows at once.
	SetEligible(eligible bool) []Message
	// View is what the node believes now.
	View() View
}

// ErrInvalidConfig is wrapped by every constructor error of this package; the
// message names the bad field and value.
var ErrInvalidConfig = errors.New("classic: invalid config")

// Membership is a validated member list with its lookups precomputed once:
// ID → position, and the rank order. Nodes built from one Membership
// (NewRingFrom, NewRingsFrom, NewBullyFrom) share it read-only and keep only
// a pointer, so a million ring nodes cost one table, not a million copies. It
// is safe for concurrent use by nodes driven from different goroutines.
type Membership struct {
	members []Member
	dense   []int32      // dense[id] = position+1 when IDs are small; else nil
	sparse  map[ID]int32 // ID → position when IDs are large
	once    sync.Once    // builds the rank order on first use (bully only)
	byRank  []int32      // positions, lowest rank first
	rankPos []int32      // rankPos[i]: where member i stands in byRank
}

// NewMembership validates members (non-empty, no ID 0, no duplicate ID) and
// indexes them. It copies the slice once; later changes to members do not
// affect it.
func NewMembership(members []Member) (*Membership, error) {
	if len(members) == 0 {
		return nil, fmt.Errorf("%w: Members is empty", ErrInvalidConfig)
	}
	if len(members) > math.MaxInt32-1 {
		return nil, fmt.Errorf("%w: %d Members is too many", ErrInvalidConfig, len(members))
	}
	m := &Membership{members: slices.Clone(members)}
	var maxID ID
	for i, mb := range m.members {
		if mb.ID == 0 {
			return nil, fmt.Errorf("%w: Members[%d]: ID 0 is reserved", ErrInvalidConfig, i)
		}
		maxID = max(maxID, mb.ID)
	}
	dup := func(i int, j int32) error {
		return fmt.Errorf("%w: Members[%d]: duplicate ID %d (also Members[%d])", ErrInvalidConfig, i, m.members[i].ID, j)
	}
	if uint64(maxID) < 4*uint64(len(members))+64 {
		m.dense = make([]int32, maxID+1)
		for i, mb := range m.members {
			if j := m.dense[mb.ID]; j != 0 {
				return nil, dup(i, j-1)
			}
			m.dense[mb.ID] = int32(i) + 1
		}
		return m, nil
	}
	m.sparse = make(map[ID]int32, len(members))
	for i, mb := range m.members {
		if j, ok := m.sparse[mb.ID]; ok {
			return nil, dup(i, j)
		}
		m.sparse[mb.ID] = int32(i)
	}
	return m, nil
}

// Len reports the number of members.
func (m *Membership) Len() int { return len(m.members) }

// Member returns the i-th member in configuration (ring) order.
func (m *Membership) Member(i int) Member { return m.members[i] }

// index returns id's position, in O(1).
func (m *Membership) index(id ID) (int, bool) {
	if m.dense != nil {
		if uint64(id) < uint64(len(m.dense)) {
			if j := m.dense[id]; j != 0 {
				return int(j - 1), true
			}
		}
		return 0, false
	}
	j, ok := m.sparse[id]
	return int(j), ok
}

// ranks builds the rank order once.
func (m *Membership) ranks() {
	m.once.Do(func() {
		m.byRank = make([]int32, len(m.members))
		for i := range m.byRank {
			m.byRank[i] = int32(i)
		}
		slices.SortFunc(m.byRank, func(a, b int32) int {
			ra, rb := m.members[a].Rank(), m.members[b].Rank()
			switch {
			case ra.Less(rb):
				return -1
			case rb.Less(ra):
				return 1
			}
			return 0
		})
		m.rankPos = make([]int32, len(m.members))
		for p, i := range m.byRank {
			m.rankPos[i] = int32(p)
		}
	})
}

// nodeConfig checks what NewRingFrom and NewBullyFrom share.
func (m *Membership) nodeConfig(id ID, heartbeatTicks, timeoutTicks int) (int, error) {
	switch {
	case m == nil:
		return 0, fmt.Errorf("%w: nil Membership", ErrInvalidConfig)
	case id == 0:
		return 0, fmt.Errorf("%w: ID 0 is reserved", ErrInvalidConfig)
	case heartbeatTicks <= 0:
		return 0, fmt.Errorf("%w: HeartbeatTicks %d must be positive", ErrInvalidConfig, heartbeatTicks)
	case timeoutTicks <= 0:
		return 0, fmt.Errorf("%w: TimeoutTicks %d must be positive", ErrInvalidConfig, timeoutTicks)
	case heartbeatTicks >= timeoutTicks:
		return 0, fmt.Errorf("%w: HeartbeatTicks %d must be less than TimeoutTicks %d", ErrInvalidConfig, heartbeatTicks, timeoutTicks)
	}
	i, ok := m.index(id)
	if !ok {
		return 0, fmt.Errorf("%w: own ID %d is not in Members", ErrInvalidConfig, id)
	}
	return i, nil
}

// satAdd and satMul saturate instead of wrapping: tick deadlines never
// overflow into the past.
func satAdd(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}

func satMul(a, b uint64) uint64 {
	if a != 0 && b > math.MaxUint64/a {
		return math.MaxUint64
	}
	return a * b
}
