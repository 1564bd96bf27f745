package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/electkit/election/classic"
)

// Algorithm describes one election algorithm of package classic to the
// tools built on the simulator (elect sim, its message chart, the property
// and count tests): how to build its nodes, and which runs are its
// failure-free best and worst cases. Algorithms lists them all; adding an
// algorithm to that list is all it takes for the tools to run and chart it.
type Algorithm struct {
	// Name is what --algorithm takes: lower case, no spaces ("ring").
	Name string
	// Title names it for people: "ring election (Chang and Roberts)".
	Title string
	// New builds one node per member, in the members' order (the ring
	// order, for the ring algorithms). hb and timeout are the failure
	// detector's ticks (classic.Config).
	New func(members []classic.Member, hb, timeout int) ([]classic.Node, error)
	// Best and Worst return the failure-free runs with the fewest and the
	// most election messages among n nodes, as the seeds analyse them
	// (nil: none is known; the chart then leaves that line out).
	Best, Worst func(n int) Case
	// Typical draws one run for the chart's average: by default (nil) the
	// members N1..Nn in a random order and one random initiator.
	Typical func(n int, rng *rand.Rand) Case
	// Ticks says that even a failure-free election needs ticks: its nodes
	// act on timers (Chubby's replicas stand when their turn comes,
	// ZooKeeper's servers probe their successors), so a run must tick.
	Ticks bool
	// AnyLeader says that the algorithm elects some live eligible node, not
	// necessarily the best (Chubby: whoever wins a majority first); runs
	// set Config.AnyLeader.
	AnyLeader bool
	// MaxN bounds the sizes the chart runs (0: no bound), for algorithms
	// whose worst case costs N² messages.
	MaxN int
	// Topology, if set, returns the graph the nodes talk over, for
	// algorithms that run on an arbitrary graph: New builds the nodes on
	// it, RunCase passes it to the simulator (Config.Topology) and the run
	// picture lays the nodes out by it. Nil: everyone reaches everyone, and
	// nodes are drawn on a circle in the members' order.
	Topology func(members []classic.Member) (classic.Graph, error)
}

// Case is one failure-free run: who is there, in which order, and who
// initiates.
type Case struct {
	Members    []classic.Member // in order; nil means N1..Nn, rank = ID
	Initiators []classic.ID
	What       string // what makes it this case, for people
}

// Algorithms returns every algorithm the tools know, in the order they
// are listed and charted. It is a plain list (no registration from init
// functions): to add an algorithm, write a function returning its
// Algorithm next to the others and add one line here.
func Algorithms() []Algorithm {
	return []Algorithm{
		ringAlgorithm(),
		bullyAlgorithm(),
		// LCR (van Steen) and Hirschberg–Sinclair.
		lcrAlgorithm(),
		hsAlgorithm(),
		// The ad hoc tree, Chubby's quorum lease, ZooKeeper's
		// sequence/successor election.
		treeAlgorithm(),
		chubbyAlgorithm(),
		zabAlgorithm(),
	}
}

// Lookup returns the algorithm named name (case-insensitive).
func Lookup(name string) (Algorithm, error) {
	var names []string
	for _, a := range Algorithms() {
		if strings.EqualFold(a.Name, strings.TrimSpace(name)) {
			return a, nil
		}
		names = append(names, a.Name)
	}
	return Algorithm{}, fmt.Errorf("%w: no algorithm %q (known: %s)", ErrConfig, name, strings.Join(names, ", "))
}

// Seq returns the members N1..Nn, rank = ID.
func Seq(n int) []classic.Member {
	ms := make([]classic.Member, n)
	for i := range ms {
		ms[i] = classic.Member{ID: classic.ID(i + 1)}
	}
	return ms
}

// MembersOf returns c's members among n nodes: c.Members, or N1..Nn.
func (c Case) MembersOf(n int) []classic.Member {
	if c.Members != nil {
		return c.Members
	}
	return Seq(n)
}

// TypicalCase draws one run of a for the chart's average.
func (a Algorithm) TypicalCase(n int, rng *rand.Rand) Case {
	if a.Typical != nil {
		return a.Typical(n, rng)
	}
	ms := Seq(n)
	rng.Shuffle(n, func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
	return Case{Members: ms, Initiators: []classic.ID{ms[rng.IntN(n)].ID}, What: "random order, one random initiator"}
}

// RunCase runs c among n nodes of a, without failures, under cfg (its
// Seed, delays, Trace and Record are the caller's; the ticks, AnyLeader and
// Topology are set here: ticks off unless a.Ticks). It returns the
// simulator after Run, and how it stopped.
func (a Algorithm) RunCase(n int, c Case, cfg Config, hb, timeout int) (*Sim, Stop, error) {
	ms := c.MembersOf(n)
	nodes, err := a.New(ms, hb, timeout)
	if err != nil {
		return nil, 0, err
	}
	if cfg.Topology, err = a.Graph(ms); err != nil {
		return nil, 0, err
	}
	cfg.AnyLeader = a.AnyLeader
	cfg.NoTicks = !a.Ticks
	if a.Ticks && cfg.MaxTime == 0 {
		cfg.MaxTime = int64(n)*(cfg.MaxDelay+1)*16 + int64(timeout)*64
	}
	s, err := New(ms, nodes, cfg)
	if err != nil {
		return nil, 0, err
	}
	for _, id := range c.Initiators {
		if err := s.Start(id); err != nil {
			return nil, 0, err
		}
	}
	return s, s.Run(), nil
}

// Graph returns the graph a's nodes talk over among members (a.Topology),
// or nil when they all reach each other.
func (a Algorithm) Graph(members []classic.Member) (classic.Graph, error) {
	if a.Topology == nil {
		return nil, nil
	}
	return a.Topology(members)
}

// fromMembership builds the shared member table once for all nodes.
func fromMembership(members []classic.Member, build func(m *classic.Membership, id classic.ID) (classic.Node, error)) ([]classic.Node, error) {
	m, err := classic.NewMembership(members)
	if err != nil {
		return nil, err
	}
	nodes := make([]classic.Node, len(members))
	for i, mb := range members {
		if nodes[i], err = build(m, mb.ID); err != nil {
			return nil, err
		}
	}
	return nodes, nil
}

func one(id classic.ID, what string) Case {
	return Case{Initiators: []classic.ID{id}, What: what}
}

func ringAlgorithm() Algorithm {
	return Algorithm{
		Name:  "ring",
		Title: "ring election (Chang and Roberts)",
		New: func(ms []classic.Member, hb, to int) ([]classic.Node, error) {
			m, err := classic.NewMembership(ms)
			if err != nil {
				return nil, err
			}
			rings, err := classic.NewRingsFrom(m, hb, to)
			if err != nil {
				return nil, err
			}
			nodes := make([]classic.Node, len(rings))
			for i := range rings {
				nodes[i] = &rings[i]
			}
			return nodes, nil
		},
		Best:  func(n int) Case { return one(classic.ID(n), "the best node initiates: 2N") },
		Worst: func(n int) Case { return one(1, "the best node's successor initiates: 3N−1") },
	}
}

func bullyAlgorithm() Algorithm {
	return Algorithm{
		Name:  "bully",
		Title: "bully election (Garcia-Molina)",
		New: func(ms []classic.Member, hb, to int) ([]classic.Node, error) {
			return fromMembership(ms, func(m *classic.Membership, id classic.ID) (classic.Node, error) {
				return classic.NewBullyFrom(m, id, hb, to)
			})
		},
		Best:  func(n int) Case { return one(classic.ID(n), "the best node initiates: N−1 Coordinator") },
		Worst: func(n int) Case { return one(1, "the lowest node initiates, all up: N²−1") },
		// A failure-free election needs no timeout: every Election is
		// answered, and the best node's Coordinator ends the waits.
		MaxN: 512,
	}
}

func lcrAlgorithm() Algorithm {
	return Algorithm{
		Name:  "lcr",
		Title: "ring-collect election (LCR as van Steen tells it)",
		New: func(ms []classic.Member, hb, to int) ([]classic.Node, error) {
			return fromMembership(ms, func(m *classic.Membership, id classic.ID) (classic.Node, error) {
				return classic.NewLCRFrom(m, id, hb, to)
			})
		},
		// Always 2N: any initiator is best and worst.
		Best:  func(n int) Case { return one(classic.ID(n), "one initiator, anywhere: 2N") },
		Worst: func(n int) Case { return one(1, "one initiator, anywhere: 2N") },
	}
}

func hsAlgorithm() Algorithm {
	all := func(ms []classic.Member) []classic.ID {
		ids := make([]classic.ID, len(ms))
		for i, m := range ms {
			ids[i] = m.ID
		}
		return ids
	}
	return Algorithm{
		Name:  "hs",
		Title: "Hirschberg–Sinclair election (bidirectional ring)",
		New: func(ms []classic.Member, hb, to int) ([]classic.Node, error) {
			return fromMembership(ms, func(m *classic.Membership, id classic.ID) (classic.Node, error) {
				return classic.NewHSFrom(m, id, hb, to)
			})
		},
		// Ascending IDs: every node but the best loses phase 0 to its
		// right neighbour; the best alone goes round.
		Best: func(n int) Case {
			ms := Seq(n)
			return Case{Members: ms, Initiators: all(ms), What: "ascending IDs, all initiate"}
		},
		// Bit-reversed IDs spread each phase's winners evenly, so that
		// about n/2^k candidates survive phase k: the n log n case.
		// (No closed form is known for the order that costs most; random
		// orders come close.)
		Worst: func(n int) Case {
			ms := BitReversed(n)
			return Case{Members: ms, Initiators: all(ms), What: "bit-reversed IDs, all initiate"}
		},
		Typical: func(n int, rng *rand.Rand) Case {
			ms := Seq(n)
			rng.Shuffle(n, func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
			return Case{Members: ms, Initiators: all(ms), What: "random order, all initiate"}
		},
	}
}

// BitReversed returns N1..Nn ordered by the bit-reversal of their IDs.
func BitReversed(n int) []classic.Member {
	w := 0
	for 1<<w < n+1 {
		w++
	}
	rev := func(x classic.ID) uint64 {
		var r uint64
		for i := range w {
			r |= (uint64(x) >> i & 1) << (w - 1 - i)
		}
		return r
	}
	ms := Seq(n)
	slices.SortFunc(ms, func(a, b classic.Member) int {
		ra, rb := rev(a.ID), rev(b.ID)
		switch {
		case ra < rb:
			return -1
		case ra > rb:
			return 1
		}
		return 0
	})
	return ms
}

// ids returns the members' IDs, in order.
func ids(ms []classic.Member) []classic.ID {
	out := make([]classic.ID, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

// ladder is the tree's graph: the members two to a rung, in order (a grid
// of two columns: N1-N2 on the first rung, each linked to the one below),
// so that it is not a complete graph and the messages follow its 3N/2−2
// edges.
func ladder(ms []classic.Member) (classic.Graph, error) {
	return classic.GridGraph(ids(ms), 2)
}

func treeAlgorithm() Algorithm {
	count := func(n int) string {
		g, err := ladder(Seq(n))
		if err != nil {
			return ""
		}
		return fmt.Sprintf(": 4E−N+1 = %d, E = %d edges", 4*g.Edges()-n+1, g.Edges())
	}
	return Algorithm{
		Name:  "tree",
		Title: "ad hoc tree election (Vasudevan, Kurose and Towsley) on a ladder",
		New: func(ms []classic.Member, hb, to int) ([]classic.Node, error) {
			g, err := ladder(ms)
			if err != nil {
				return nil, err
			}
			return fromMembership(ms, func(m *classic.Membership, id classic.ID) (classic.Node, error) {
				return classic.NewTreeFrom(m, id, g[id], hb, to)
			})
		},
		// One initiator costs 4E−N+1 wherever it is: 2E−(N−1)
		// TreeElection, as many TreeAck, N−1 TreeLeader.
		Best:     func(n int) Case { return one(classic.ID(n), "one initiator, anywhere"+count(n)) },
		Worst:    func(n int) Case { return one(1, "one initiator, anywhere"+count(n)) },
		Topology: ladder,
	}
}

func chubbyAlgorithm() Algorithm {
	return Algorithm{
		Name:  "chubby",
		Title: "Chubby quorum-lease election (a majority elects a master)",
		New: func(ms []classic.Member, hb, to int) ([]classic.Node, error) {
			return fromMembership(ms, func(m *classic.Membership, id classic.ID) (classic.Node, error) {
				return classic.NewChubbyFrom(m, id, hb, to)
			})
		},
		// Without contention an election costs N−1 VoteRequest, N−1 Vote
		// and N−1 Coordinator; replicas stand in rank order when their
		// promise runs out, so a failure-free run has no contention.
		Best:      func(n int) Case { return one(classic.ID(n), "no contention: 3(N−1)") },
		Worst:     func(n int) Case { return one(1, "no contention: 3(N−1)") },
		Ticks:     true, // candidates stand when their turn comes
		AnyLeader: true,
	}
}

func zabAlgorithm() Algorithm {
	return Algorithm{
		Name:  "zab",
		Title: "ZooKeeper sequence/successor election (NEW_LEADER, ACK, COMMIT)",
		New: func(ms []classic.Member, hb, to int) ([]classic.Node, error) {
			return fromMembership(ms, func(m *classic.Membership, id classic.ID) (classic.Node, error) {
				return classic.NewZabFrom(m, id, hb, to)
			})
		},
		// The highest server stands alone: N−1 NewLeader, N−1 LeaderAck,
		// N−1 Commit, whoever noticed first.
		Best:  func(n int) Case { return one(classic.ID(n), "no contention: 3(N−1)") },
		Worst: func(n int) Case { return one(1, "no contention: 3(N−1)") },
		Ticks: true, // servers find their successors by probing them
	}
}
