package sim

import (
	"fmt"

	"github.com/electkit/election/classic"
)

// A topology (Config.Topology) says who can send to whom: a message between
// two nodes that are not neighbours is dropped as it is sent ("no link").
// Without one, every node reaches every other. The live nodes may then fall
// apart into several connected components (crashes cut the graph, or the
// graph was never connected): each component can only elect its own leader,
// so while they are split the leader and liveness checks are off, as during
// a partition, and Components tells the components apart for tests.

type topology struct {
	graph classic.Graph
	adj   [][]int32 // by member index
	split bool      // the live nodes form more than one component
}

func (s *Sim) initTopology() error {
	g := s.cfg.Topology
	if g == nil {
		return nil
	}
	if err := g.Validate(s.members); err != nil {
		return fmt.Errorf("%w: Topology: %w", ErrConfig, err)
	}
	s.topo.graph = g
	s.topo.adj = make([][]int32, len(s.members))
	for i, m := range s.members {
		for _, nb := range g[m.ID] {
			j, _ := s.index.get(nb)
			s.topo.adj[i] = append(s.topo.adj[i], j)
		}
	}
	s.resplit()
	return nil
}

// linked reports whether node i can send to node j.
func (s *Sim) linked(i, j int32) bool {
	if s.topo.adj == nil {
		return true
	}
	for _, k := range s.topo.adj[i] {
		if k == j {
			return true
		}
	}
	return false
}

// resplit recomputes whether the live nodes are split, after a crash or a
// recovery.
func (s *Sim) resplit() {
	if s.topo.adj != nil {
		s.topo.split = len(s.Components()) > 1
	}
}

// divided reports whether the nodes cannot all reach each other: a
// partition, or a topology whose live part is not connected.
func (s *Sim) divided() bool { return s.parted || s.topo.split }

// Components returns the connected components of the live nodes under the
// topology (and the partition, if any), each sorted by ID, ordered by their
// smallest ID. Without a topology or partition it is one component of every
// live node.
func (s *Sim) Components() [][]classic.ID {
	var ids []classic.ID
	for i, m := range s.members {
		if s.up[i] {
			ids = append(ids, m.ID)
		}
	}
	g := s.topo.graph
	if g == nil {
		g = classic.CompleteGraph(ids)
	}
	if s.parted {
		cut := classic.Graph{}
		for a, nbs := range g {
			i, _ := s.index.get(a)
			for _, b := range nbs {
				if j, _ := s.index.get(b); s.group[i] == s.group[j] {
					cut[a] = append(cut[a], b)
				}
			}
		}
		g = cut
	}
	return g.Components(ids, nil)
}
