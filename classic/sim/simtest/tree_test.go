package simtest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/electkit/election/classic"
	"github.com/electkit/election/classic/sim"
)

func ids(n int) []classic.ID {
	out := make([]classic.ID, n)
	for i := range out {
		out[i] = classic.ID(i + 1)
	}
	return out
}

// treeSim builds the tree nodes of g over members and a simulator.
func treeSim(t *testing.T, ms []classic.Member, g classic.Graph, cfg sim.Config, hb, to int) *sim.Sim {
	t.Helper()
	mem, err := classic.NewMembership(ms)
	if err != nil {
		t.Fatal(err)
	}
	nodes := make([]classic.Node, len(ms))
	for i, m := range ms {
		nb := g[m.ID]
		if nb == nil {
			nb = []classic.ID{}
		}
		if nodes[i], err = classic.NewTreeFrom(mem, m.ID, nb, hb, to); err != nil {
			t.Fatal(err)
		}
	}
	cfg.Topology = g
	s, err := sim.New(ms, nodes, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTreeMessageCounts: one initiator, no failure, on rings, grids and
// random geometric graphs, with random attributes and any initiator: every
// node sends a TreeElection to each neighbour but its parent (2E−(N−1)), each
// is acked once, and the announcement goes down the N−1 tree edges:
// 4E − N + 1 messages; the best node leads.
func TestTreeMessageCounts(t *testing.T) {
	type graphCase struct {
		name string
		g    func(ids []classic.ID, seed uint64) (classic.Graph, error)
	}
	graphs := []graphCase{
		{"ring", func(ids []classic.ID, _ uint64) (classic.Graph, error) { return classic.RingGraph(ids), nil }},
		{"grid", func(ids []classic.ID, _ uint64) (classic.Graph, error) { return classic.GridGraph(ids, 5) }},
		{"complete", func(ids []classic.ID, _ uint64) (classic.Graph, error) { return classic.CompleteGraph(ids), nil }},
		{"geometric", func(ids []classic.ID, seed uint64) (classic.Graph, error) {
			g, _, err := classic.ConnectedGeometricGraph(ids, 0.35, seed)
			return g, err
		}},
	}
	for _, gc := range graphs {
		for _, n := range []int{2, 5, 16, 40} {
			for seed := range uint64(5) {
				t.Run(fmt.Sprintf("%s/N=%d/seed=%d", gc.name, n, seed), func(t *testing.T) {
					r := rand.New(rand.NewPCG(seed, 7))
					ms := make([]classic.Member, n)
					for i := range ms {
						ms[i] = classic.Member{ID: classic.ID(i + 1), Attr: int64(r.IntN(10))}
					}
					g, err := gc.g(ids(n), seed)
					if err != nil {
						t.Fatal(err)
					}
					s := treeSim(t, ms, g, sim.Config{Seed: seed, MinDelay: 1, MaxDelay: 3, NoTicks: true, Fencing: true}, 5, 20)
					if err := s.Start(ms[r.IntN(n)].ID); err != nil {
						t.Fatal(err)
					}
					if st := s.Run(); st != sim.StopQuiet {
						t.Fatalf("stopped %v", st)
					}
					if err := s.Err(); err != nil {
						t.Fatal(err)
					}
					e := int64(g.Edges())
					c := s.Counts()
					want := map[classic.Kind]int64{classic.TreeElection: 2*e - int64(n-1), classic.TreeAck: 2*e - int64(n-1), classic.TreeLeader: int64(n - 1)}
					for k, w := range want {
						if got := c.Of(k).Sent; got != w {
							t.Errorf("%s: %d sent, want %d (E=%d, N=%d)", k, got, w, e, n)
						}
					}
					if got := c.Election().Sent; got != 4*e-int64(n)+1 {
						t.Errorf("%d election messages, want 4E-N+1 = %d", got, 4*e-int64(n)+1)
					}
					st, ok := s.Settled()
					best := slices.MaxFunc(ms, func(a, b classic.Member) int {
						if a.Rank().Less(b.Rank()) {
							return -1
						}
						return 1
					})
					if !ok || st.Leader != best.ID {
						t.Errorf("settled %v %+v, want leader N%d", ok, st, best.ID)
					}
				})
			}
		}
	}
}

// checkComponents fails unless every component of the live nodes agrees on
// one live leader of its own, its best node, and no two components share an
// epoch.
func checkComponents(t *testing.T, s *sim.Sim, ms []classic.Member) {
	t.Helper()
	attr := map[classic.ID]int64{}
	for _, m := range ms {
		attr[m.ID] = m.Attr
	}
	epochs := map[uint64]bool{}
	for _, comp := range s.Components() {
		best := comp[0]
		for _, id := range comp {
			if (classic.Rank{Attr: attr[best], ID: best}).Less(classic.Rank{Attr: attr[id], ID: id}) {
				best = id
			}
		}
		var first classic.View
		for k, id := range comp {
			v, _, _ := s.View(id)
			if k == 0 {
				first = v
			}
			if !v.HasLeader || v.Electing || v != first || v.Leader != best {
				t.Fatalf("component %v: N%d's view is %s, want leader N%d agreed by all", comp, id, sim.FormatView(v), best)
			}
		}
		if epochs[first.Epoch] {
			t.Fatalf("epoch %d names two leaders", first.Epoch)
		}
		epochs[first.Epoch] = true
	}
}

// TestTreePartitions: a graph given in several components, and one cut by
// crashes, elects one leader per component, the component's best, with
// distinct epochs; the simulator's safety and fencing checks hold throughout.
func TestTreePartitions(t *testing.T) {
	for seed := range uint64(30) {
		r := rand.New(rand.NewPCG(seed, 11))
		n := 8 + r.IntN(20)
		ms := make([]classic.Member, n)
		for i := range ms {
			ms[i] = classic.Member{ID: classic.ID(i + 1), Attr: int64(r.IntN(4))}
		}
		// A sparse geometric graph: usually several components.
		g, _, err := classic.GeometricGraph(ids(n), 0.25, seed)
		if err != nil {
			t.Fatal(err)
		}
		s := treeSim(t, ms, g, sim.Config{Seed: seed, MinDelay: 1, MaxDelay: 2, MaxTime: 5000, Fencing: true, StopOnViolation: true}, 3, 12)
		for _, comp := range s.Components() {
			if err := s.Start(comp[r.IntN(len(comp))]); err != nil {
				t.Fatal(err)
			}
		}
		s.RunUntil(600)
		if err := s.Err(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		checkComponents(t, s, ms)
		// Crash two nodes: the graph may split further; each part elects.
		for range 2 {
			live := slices.Concat(s.Components()...)
			if err := s.Crash(live[r.IntN(len(live))]); err != nil {
				t.Fatal(err)
			}
		}
		s.RunUntil(1500)
		if err := s.Err(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		checkComponents(t, s, ms)
	}
}

// TestTreeProperties: the tree on a complete graph, under the shared
// property harness (crashes, false suspicions, eligibility flips).
func TestTreeProperties(t *testing.T) {
	checkProperties(t, algorithms["tree"], propertySeeds(t), func(pc *propertyCase) {
		pc.to += 2 * int(pc.cfg.MaxDelay) // the leader's beacons cross a hop more
	})
}

// TestTreeGraphProperties: the tree on random connected geometric graphs
// with crashes that may cut them; safety and fencing always, and one best
// leader per component once the faults stop.
func TestTreeGraphProperties(t *testing.T) {
	seeds := propertySeeds(t)
	for seed := range uint64(seeds) {
		r := rand.New(rand.NewPCG(seed, 13))
		n := 4 + r.IntN(12)
		ms := make([]classic.Member, n)
		for i := range ms {
			ms[i] = classic.Member{ID: classic.ID(i + 1), Attr: int64(r.IntN(3))}
		}
		g, _, err := classic.ConnectedGeometricGraph(ids(n), 0.5, seed)
		if err != nil {
			t.Fatal(err)
		}
		maxDelay := int64(1 + r.IntN(3))
		hb := 2 + r.IntN(3)
		to := hb + int(4*maxDelay) + 2*n*int(maxDelay-1) + 2
		cfg := sim.Config{Seed: seed, MinDelay: 1, MaxDelay: maxDelay, Fencing: true, StopOnViolation: true,
			MaxTime:  5000,
			Schedule: []sim.Action{{At: 0, Op: sim.OpStart, ID: ms[r.IntN(n)].ID}},
			Chaos:    &sim.Chaos{From: 1, Until: chaosUntil, MeanGap: int64(10 + r.IntN(20)), MaxDown: r.IntN(n), Starts: seed%2 == 0},
		}
		s := treeSim(t, ms, g, cfg, hb, to)
		s.RunUntil(chaosUntil + int64(n*to*6) + 400)
		if err := s.Err(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		checkComponents(t, s, ms)
	}
}
