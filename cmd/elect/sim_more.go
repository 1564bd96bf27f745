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

// electionKinds lists the kinds of the count table, in the seeds' order
// first, then any other election kind the run sent.
func electionKinds(counts sim.Counts) []classic.Kind {
	kinds := []classic.Kind{classic.Election, classic.Reply, classic.Elected, classic.OK, classic.Coordinator}
	var more []classic.Kind
	for _, c := range counts {
		if c.Kind != classic.Heartbeat && c.Kind != classic.Ack && !slices.Contains(kinds, c.Kind) {
			more = append(more, c.Kind)
		}
	}
	return append(kinds, more...)
}

// writeSVG draws the recorded run into p.svg.
func (p *simPlan) writeSVG(s *sim.Sim) error {
	f, err := os.Create(p.svg)
	if err != nil {
		return err
	}
	sub := fmt.Sprintf("%d nodes; initiators %s; down %s; seed %d", p.n, idList(p.initiators), idList(p.crashed), p.seed)
	pic := sim.Picture{Title: p.algo.Title, Subtitle: sub}
	if p.algo.Topology != nil {
		pic.Edges = p.algo.Topology(s.Members())
	}
	if err := s.WriteSVG(f, pic); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", p.svg, err)
	}
	return f.Close()
}

// moreFormulas gives the seeds' formulas for the algorithms beyond ring and
// bully.
func (p *simPlan) moreFormulas(f *simFormulas) {
	n := int64(p.n)
	one := len(p.initiators) == 1
	switch p.alg {
	case "lcr":
		f.notes = append(f.notes, fmt.Sprintf("LCR (van Steen), one election in progress: best case = worst case = 2N = %d", 2*n))
		switch {
		case len(p.crashed) > 0:
			f.caseName = "crashed nodes: the count depends on the failure detectors' timing; the seeds count failure-free runs"
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
			f.caseName = "crashed nodes: the count depends on the failure detectors' timing; the seeds count failure-free runs"
			return
		}
		f.caseName = "no failure: the seeds' bound on tokens, replies and the announcement together; one Elected lap"
		f.kinds[classic.Elected] = expectation{"N", n}
		f.total = &expectation{"8n(1+⌈log₂ n⌉)", 8 * n * (1 + log)}
		f.atMost = true
	default:
		f.caseName = "elect sim has no formula for this algorithm yet"
	}
}
