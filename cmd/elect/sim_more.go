package main

import (
	"fmt"
	"math/bits"
	"os"
	"slices"
	"strings"

	"github.com/electkit/election/classic"
	"github.com/electkit/election/classic/sim"
)

// simMaxSVG bounds the nodes of a drawn run.
const simMaxSVG = 200

// algorithmNames lists the algorithms elect sim runs: every one classic/sim
// lists.
func algorithmNames() string {
	var names []string
	for _, a := range sim.Algorithms() {
		names = append(names, a.Name)
	}
	return strings.Join(names, ", ")
}

// knownKinds is the order of the count table's rows: the ring's and the
// bully's kinds (and HS's Reply) as the seeds list them, then the tree's,
// Chubby's and ZooKeeper's, each in the order an election sends them.
var knownKinds = []classic.Kind{classic.Election, classic.Reply, classic.Elected, classic.OK,
	classic.VoteRequest, classic.Vote, classic.Coordinator,
	classic.TreeElection, classic.TreeAck, classic.TreeLeader,
	classic.NewLeader, classic.LeaderAck, classic.Commit}

// electionKinds lists the kinds of the count table: the known kinds in
// their order, then any other election kind the run sent or a formula
// names.
func electionKinds(counts sim.Counts, expected map[classic.Kind]expectation) []classic.Kind {
	kinds := slices.Clone(knownKinds)
	for _, c := range counts {
		if c.Kind != classic.Heartbeat && c.Kind != classic.Ack && !slices.Contains(kinds, c.Kind) {
			kinds = append(kinds, c.Kind)
		}
	}
	var more []classic.Kind
	for k := range expected {
		if !slices.Contains(kinds, k) {
			more = append(more, k)
		}
	}
	slices.Sort(more)
	return append(kinds, more...)
}

// writeSVG draws the recorded run into p.svg.
func (p *simPlan) writeSVG(s *sim.Sim) error {
	f, err := os.Create(p.svg)
	if err != nil {
		return err
	}
	sub := fmt.Sprintf("%d nodes; initiators %s; down %s; seed %d", p.n, idList(p.initiators), idList(p.crashed), p.seed)
	// The nodes are laid out by the run's topology, if it has one (tree).
	pic := sim.Picture{Title: p.algo.Title, Subtitle: sub}
	if err := s.WriteSVG(f, pic); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", p.svg, err)
	}
	return f.Close()
}

// moreFormulas gives the seeds' formulas for the algorithms beyond ring and
// bully; g is the graph the nodes ran on (nil: complete).
func (p *simPlan) moreFormulas(f *simFormulas, g classic.Graph) {
	n := int64(p.n)
	one := len(p.initiators) == 1
	const crashedCase = "crashed nodes: the count depends on the failure detectors' timing; the seeds count failure-free runs"
	switch p.alg {
	case "lcr":
		f.notes = append(f.notes, fmt.Sprintf("LCR (van Steen), one election in progress: best case = worst case = 2N = %d", 2*n))
		switch {
		case len(p.crashed) > 0:
			f.caseName = crashedCase
		case one:
			f.caseName = "one initiator, no failure: one lap of Election, one of Coordinator, wherever it starts"
			f.kinds[classic.Election] = expectation{"N", n}
			f.kinds[classic.Coordinator] = expectation{"N", n}
			f.total = &expectation{"2N", 2 * n}
		default:
			f.caseName = "several initiators: the highest run goes round (N Election, N Coordinator); the lower runs stop where they meet it"
		}
	case "hs":
		log := int64(bits.Len64(uint64(n - 1)))
		f.notes = append(f.notes, fmt.Sprintf("Hirschberg-Sinclair: at most 8n(1+⌈log₂ n⌉) = 8·%d·%d = %d messages, for any initiators and any order of the IDs", n, 1+log, 8*n*(1+log)))
		if len(p.crashed) > 0 {
			f.caseName = crashedCase
			return
		}
		f.caseName = "no failure: the seeds' bound on tokens, replies and the announcement together; one Elected lap"
		f.kinds[classic.Elected] = expectation{"N", n}
		f.total = &expectation{"8n(1+⌈log₂ n⌉)", 8 * n * (1 + log)}
		f.atMost = true
	case "tree":
		e := int64(g.Edges())
		if g == nil {
			e = n * (n - 1) / 2
		}
		f.notes = append(f.notes, fmt.Sprintf("tree, one initiator, no failure: 2E-(N-1) TreeElection, as many TreeAck, N-1 TreeLeader: 4E-N+1, here E = %d edges (a ladder: N1-N2 on the first rung)", e))
		switch {
		case len(p.crashed) > 0:
			f.caseName = crashedCase
		case one:
			f.caseName = "one initiator, no failure (wherever it is)"
			f.kinds[classic.TreeElection] = expectation{"2E-(N-1)", 2*e - n + 1}
			f.kinds[classic.TreeAck] = expectation{"2E-(N-1)", 2*e - n + 1}
			f.kinds[classic.TreeLeader] = expectation{"N-1", n - 1}
			f.total = &expectation{"4E-N+1", 4*e - n + 1}
		default:
			f.caseName = "several initiators: the election with the highest ID absorbs the others; the counts depend on the interleaving"
		}
	case "chubby":
		f.notes = append(f.notes, "chubby: replicas stand when their promise runs out (the best first); --initiators only make them suspect the master early",
			"Heartbeat/Ack here are the master's lease renewals: 2(N-1) per round")
		if len(p.crashed) > 0 {
			f.caseName = "with crashes: dead replicas get requests but send no votes"
			return
		}
		f.caseName = "no failure: one replica stands first (an initiator, which suspects the master early, or else the best) and wins uncontended"
		f.kinds[classic.VoteRequest] = expectation{"N-1", n - 1}
		f.kinds[classic.Vote] = expectation{"N-1", n - 1}
		f.kinds[classic.Coordinator] = expectation{"N-1", n - 1}
		f.total = &expectation{"3(N-1)", 3 * (n - 1)}
	case "zab":
		f.notes = append(f.notes, "zab: the highest server stands alone; each server watches the next-higher one (Heartbeat/Ack, N-1 probes per round, counted apart); --initiators only make them check their successor early")
		if len(p.crashed) > 0 {
			f.caseName = "with crashes: the highest live server stands once it finds those above dead; dead servers get NEW_LEADER and COMMIT but send no ACK"
			return
		}
		f.caseName = "no failure: the highest server stands alone and wins"
		f.kinds[classic.NewLeader] = expectation{"N-1", n - 1}
		f.kinds[classic.LeaderAck] = expectation{"N-1", n - 1}
		f.kinds[classic.Commit] = expectation{"N-1", n - 1}
		f.total = &expectation{"3(N-1)", 3 * (n - 1)}
	default:
		f.caseName = "elect sim has no formula for this algorithm yet"
	}
}
