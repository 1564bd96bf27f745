package simtest

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/electkit/election/classic"
	"github.com/electkit/election/classic/sim"
)

// graphArg reads a script's topology: graph=ring|complete|grid/COLS|
// geo/RADIUS/SEED (members in the order given) or edges=1-2,2-3. Nil when
// neither is given.
func graphArg(t *testing.T, td *datadriven.TestData, ms []classic.Member) classic.Graph {
	ids := make([]classic.ID, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	var edges string
	if td.MaybeScanArgs(t, "edges", &edges) {
		g := classic.Graph{}
		for _, e := range strings.Split(edges, ",") {
			a, b, ok := strings.Cut(e, "-")
			x, err1 := strconv.ParseUint(strings.TrimPrefix(a, "N"), 10, 64)
			y, err2 := strconv.ParseUint(strings.TrimPrefix(b, "N"), 10, 64)
			if !ok || err1 != nil || err2 != nil {
				t.Fatalf("%s: bad edge %q", td.Pos, e)
			}
			g[classic.ID(x)] = append(g[classic.ID(x)], classic.ID(y))
			g[classic.ID(y)] = append(g[classic.ID(y)], classic.ID(x))
		}
		return g
	}
	var spec string
	if !td.MaybeScanArgs(t, "graph", &spec) {
		return nil
	}
	g, err := parseGraph(spec, ids)
	if err != nil {
		t.Fatalf("%s: %v", td.Pos, err)
	}
	return g
}

func parseGraph(spec string, ids []classic.ID) (classic.Graph, error) {
	f := strings.Split(spec, "/")
	switch {
	case f[0] == "ring":
		return classic.RingGraph(ids), nil
	case f[0] == "complete":
		return classic.CompleteGraph(ids), nil
	case f[0] == "grid" && len(f) == 2:
		cols, err := strconv.Atoi(f[1])
		if err != nil {
			return nil, err
		}
		return classic.GridGraph(ids, cols)
	case f[0] == "geo" && len(f) == 3:
		r, err1 := strconv.ParseFloat(f[1], 64)
		seed, err2 := strconv.ParseUint(f[2], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("bad geo graph %q", spec)
		}
		g, _, err := classic.ConnectedGeometricGraph(ids, r, seed)
		return g, err
	}
	return nil, fmt.Errorf("unknown graph %q: want ring, complete, grid/COLS or geo/RADIUS/SEED", spec)
}

// nodeOn builds a node with alg, or, on a topology, a tree node that knows
// its neighbours.
func nodeOn(g classic.Graph, alg algorithm, cfg classic.Config) (classic.Node, error) {
	if g == nil {
		return alg(cfg)
	}
	nb := g[cfg.ID]
	if nb == nil {
		nb = []classic.ID{}
	}
	return classic.NewTree(cfg, nb)
}

// describeGraph is the header line of a topology.
func describeGraph(g classic.Graph) string {
	if g == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "topology: %d edges:", g.Edges())
	for _, a := range g.IDs() {
		nb := slices.Clone(g[a])
		slices.Sort(nb)
		for _, x := range nb {
			if a < x {
				fmt.Fprintf(&b, " N%d-N%d", a, x)
			}
		}
	}
	b.WriteByte('\n')
	return b.String()
}

// moreCommand runs the script commands components and leases.
func moreCommand(s *sim.Sim, cmd string) string {
	var b strings.Builder
	switch cmd {
	case "components":
		for _, comp := range s.Components() {
			leaders := map[string][]classic.ID{}
			var keys []string
			for _, id := range comp {
				v, _, _ := s.View(id)
				k := sim.FormatView(v)
				if leaders[k] == nil {
					keys = append(keys, k)
				}
				leaders[k] = append(leaders[k], id)
			}
			fmt.Fprintf(&b, "component %v:", comp)
			for _, k := range keys {
				fmt.Fprintf(&b, " [%s: %v]", k, leaders[k])
			}
			b.WriteByte('\n')
		}
	case "leases":
		ls := s.Leases()
		if len(ls) == 0 {
			b.WriteString("no lease\n")
		}
		for _, l := range ls {
			fmt.Fprintf(&b, "N%d term %d: t=%d..%d\n", l.Node, l.Term, l.From, l.Until)
		}
	}
	return b.String()
}
