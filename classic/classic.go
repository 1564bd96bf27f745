// Package classic holds the leader-election algorithms of the seeds as pure
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
// (Attr, ID) and the best live, eligible node wins, as in the seeds. Each
// leadership carries an epoch that strictly increases: a new leader
// announces one more than the highest epoch it has seen, and a node keeps
// the highest epoch across crashes (its only stable state), so epochs can
// serve as fencing tokens.
//
// This package imports nothing of the project.
package classic

import "fmt"

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

// The kinds of the seeds' algorithms. Election traffic is what the seeds
// count; Heartbeat and Ack are failure-detector traffic, counted apart.
const (
	Election    Kind = "Election"    // ring, bully: an election run
	Elected     Kind = "Elected"     // ring: announces the winner around the ring
	OK          Kind = "OK"          // bully: "I am better, I take over"
	Coordinator Kind = "Coordinator" // bully: announces the winner to all
	Heartbeat   Kind = "Heartbeat"   // failure detector: "are you alive?" / "I am alive"
	Ack         Kind = "Ack"         // failure detector: reply to a Heartbeat or a forwarded message
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
}

func (m Message) String() string {
	s := fmt.Sprintf("%s N%d→N%d", m.Kind, m.From, m.To)
	switch m.Kind {
	case Election:
		s += fmt.Sprintf(" cand=%v", m.Cand)
		if m.Initiator != 0 {
			s += fmt.Sprintf(" init=N%d", m.Initiator)
		}
	case Elected, Coordinator:
		s += fmt.Sprintf(" leader=%v epoch=%d", m.Cand, m.Epoch)
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
	// epoch and rejoins as the seeds say (the bully holds an election).
	Recover() []Message
	// SetEligible makes the node stand for election or not. An ineligible
	// node stays alive and relays messages but never becomes leader; when
	// the leader itself turns ineligible an election follows at once.
	SetEligible(eligible bool) []Message
	// View is what the node believes now.
	View() View
}
