package classic

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// Graph is who can talk to whom: an undirected graph over member IDs, as
// adjacency lists. The ad hoc tree election (NewTree) runs on any connected
// graph; the simulator (classic/sim, Config.Topology) delivers a message only
// along an edge. A node missing from the map has no neighbours.
type Graph map[ID][]ID

// Validate checks that every neighbour is a member, that no node lists
// itself or a neighbour twice, and that edges go both ways.
func (g Graph) Validate(members []Member) error {
	known := make(map[ID]bool, len(members))
	for _, m := range members {
		known[m.ID] = true
	}
	for _, id := range g.IDs() {
		if !known[id] {
			return fmt.Errorf("%w: Graph has node N%d, which is not a member", ErrInvalidConfig, id)
		}
		seen := map[ID]bool{}
		for _, nb := range g[id] {
			switch {
			case nb == id:
				return fmt.Errorf("%w: Graph: N%d lists itself as a neighbour", ErrInvalidConfig, id)
			case !known[nb]:
				return fmt.Errorf("%w: Graph: N%d's neighbour N%d is not a member", ErrInvalidConfig, id, nb)
			case seen[nb]:
				return fmt.Errorf("%w: Graph: N%d lists N%d twice", ErrInvalidConfig, id, nb)
			case !slices.Contains(g[nb], id):
				return fmt.Errorf("%w: Graph: edge N%d–N%d goes one way only", ErrInvalidConfig, id, nb)
			}
			seen[nb] = true
		}
	}
	return nil
}

// IDs returns the nodes that have neighbours, sorted.
func (g Graph) IDs() []ID {
	ids := make([]ID, 0, len(g))
	for id := range g {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Edges counts the undirected edges.
func (g Graph) Edges() int {
	n := 0
	for _, nb := range g {
		n += len(nb)
	}
	return n / 2
}

// Linked reports whether a and b are neighbours.
func (g Graph) Linked(a, b ID) bool { return slices.Contains(g[a], b) }

// Components returns the connected components among ids, keeping only the
// nodes for which keep is true (nil keeps all): each component sorted, the
// components ordered by their smallest ID.
func (g Graph) Components(ids []ID, keep func(ID) bool) [][]ID {
	in := make(map[ID]bool, len(ids))
	for _, id := range ids {
		if keep == nil || keep(id) {
			in[id] = true
		}
	}
	sorted := slices.Sorted(func(yield func(ID) bool) {
		for id := range in {
			if !yield(id) {
				return
			}
		}
	})
	done := map[ID]bool{}
	var out [][]ID
	for _, start := range sorted {
		if done[start] {
			continue
		}
		comp := []ID{start}
		done[start] = true
		for k := 0; k < len(comp); k++ {
			for _, nb := range g[comp[k]] {
				if in[nb] && !done[nb] {
					done[nb] = true
					comp = append(comp, nb)
				}
			}
		}
		slices.Sort(comp)
		out = append(out, comp)
	}
	return out
}

func (g Graph) link(a, b ID) {
	if a != b && !slices.Contains(g[a], b) {
		g[a] = append(g[a], b)
		g[b] = append(g[b], a)
	}
}

// CompleteGraph links every node to every other.
func CompleteGraph(ids []ID) Graph {
	g := Graph{}
	for i, a := range ids {
		for _, b := range ids[i+1:] {
			g.link(a, b)
		}
	}
	return g
}

// RingGraph links ids[i] to ids[i+1] and the last to the first.
func RingGraph(ids []ID) Graph {
	g := Graph{}
	for i, a := range ids {
		if len(ids) > 1 {
			g.link(a, ids[(i+1)%len(ids)])
		}
	}
	return g
}

// GridGraph lays ids out row by row, cols to a row, and links each node to
// the one on its right and the one below.
func GridGraph(ids []ID, cols int) (Graph, error) {
	if cols < 1 {
		return nil, fmt.Errorf("%w: grid of %d columns", ErrInvalidConfig, cols)
	}
	g := Graph{}
	for i, a := range ids {
		if (i+1)%cols != 0 && i+1 < len(ids) {
			g.link(a, ids[i+1])
		}
		if i+cols < len(ids) {
			g.link(a, ids[i+cols])
		}
	}
	return g, nil
}

// Point is a node's place in the unit square of a geometric graph.
type Point struct{ X, Y float64 }

// GeometricGraph is a random geometric graph, the usual model of a wireless
// ad hoc network: the nodes are placed uniformly at random in the unit
// square (drawn from seed), and two nodes are linked when they lie within
// radius of each other (radio range). It also returns the positions. The
// graph may be disconnected; ConnectedGeometricGraph retries until not.
func GeometricGraph(ids []ID, radius float64, seed uint64) (Graph, map[ID]Point, error) {
	if !(radius > 0 && radius <= math.Sqrt2) {
		return nil, nil, fmt.Errorf("%w: radius %v is not in (0, √2]", ErrInvalidConfig, radius)
	}
	r := rand.New(rand.NewPCG(seed, 0x67656f)) // "geo"
	pos := make(map[ID]Point, len(ids))
	for _, id := range ids {
		pos[id] = Point{r.Float64(), r.Float64()}
	}
	g := Graph{}
	for i, a := range ids {
		for _, b := range ids[i+1:] {
			pa, pb := pos[a], pos[b]
			if math.Hypot(pa.X-pb.X, pa.Y-pb.Y) <= radius {
				g.link(a, b)
			}
		}
	}
	return g, pos, nil
}

// ConnectedGeometricGraph draws geometric graphs from seed, seed+1, … until
// one is connected (at most 1,000 tries).
func ConnectedGeometricGraph(ids []ID, radius float64, seed uint64) (Graph, map[ID]Point, error) {
	for k := range uint64(1000) {
		g, pos, err := GeometricGraph(ids, radius, seed+k)
		if err != nil {
			return nil, nil, err
		}
		if len(g.Components(ids, nil)) <= 1 {
			return g, pos, nil
		}
	}
	return nil, nil, fmt.Errorf("%w: no connected geometric graph of %d nodes with radius %v in 1000 draws", ErrInvalidConfig, len(ids), radius)
}
