package simtest

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/electkit/election/classic/sim"
)

// TestRegistryTreeChubbyZab: the list's cases for the tree, Chubby and
// ZooKeeper cost what the seeds say, in the simulator with reordering
// delays: the tree 4E−N+1 on its ladder (E = 3N/2−2 edges for even N),
// Chubby and ZooKeeper 3(N−1), for the best, worst and random cases.
func TestRegistryTreeChubbyZab(t *testing.T) {
	for _, name := range []string{"tree", "chubby", "zab"} {
		a := mustAlg(t, name)
		for _, n := range []int{2, 5, 16, 64} {
			want := int64(3 * (n - 1))
			if name == "tree" {
				g, err := a.Graph(sim.Seq(n))
				if err != nil {
					t.Fatal(err)
				}
				if e := g.Edges(); n%2 == 0 && e != 3*n/2-2 {
					t.Fatalf("tree n=%d: the ladder has %d edges, want 3N/2-2 = %d", n, e, 3*n/2-2)
				}
				want = int64(4*g.Edges() - n + 1)
			}
			rng := rand.New(rand.NewPCG(uint64(n), 9))
			for i, c := range []sim.Case{a.Best(n), a.Worst(n), a.TypicalCase(n, rng), a.TypicalCase(n, rng)} {
				if got := runCase(t, a, n, c, uint64(i), 3); got != want {
					t.Errorf("%s n=%d %s: %d election messages, want %d", name, n, c.What, got, want)
				}
			}
		}
	}
}

// TestTreePictureDrawsItsGraph: a recorded run of the tree draws the links
// of the graph it ran on (Config.Topology, set by RunCase), and no other.
func TestTreePictureDrawsItsGraph(t *testing.T) {
	a := mustAlg(t, "tree")
	const n = 10
	s, _, err := a.RunCase(n, a.Best(n), sim.Config{Seed: 1, MinDelay: 1, MaxDelay: 1, Record: true}, 5, 20)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := s.WriteSVG(&b, sim.Picture{Title: a.Title}); err != nil {
		t.Fatal(err)
	}
	g, _ := a.Graph(s.Members())
	if got := strings.Count(b.String(), `stroke="#ddd" stroke-width="2"`); got != g.Edges() {
		t.Errorf("%d links drawn, want the graph's %d", got, g.Edges())
	}
	ring := mustAlg(t, "ring")
	s, _, err = ring.RunCase(n, ring.Best(n), sim.Config{Seed: 1, MinDelay: 1, MaxDelay: 1, Record: true}, 5, 20)
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if err := s.WriteSVG(&b, sim.Picture{Title: ring.Title}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(b.String(), `stroke="#ddd" stroke-width="2"`); got != 0 {
		t.Errorf("ring: %d links drawn, want none (no topology)", got)
	}
}
