package simtest

import (
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/electkit/election/classic"
	"github.com/electkit/election/classic/sim"
)

// TestLCRProperties: LCR (van Steen's ring-collect), 200 random runs per
// kind of fault: crashes and recoveries, false suspicions, eligibility
// flips; safety and fencing always, settlement on the best live eligible
// node once the faults stop.
func TestLCRProperties(t *testing.T) {
	checkProperties(t, algorithms["lcr"], propertySeeds(t), nil)
}

// TestHSProperties: Hirschberg–Sinclair under the same faults as the ring
// (hs.go: its fault model is the ring's: crash-recovery nodes, a failure
// detector that is perfect while the network is whole, lost and reordered
// messages).
func TestHSProperties(t *testing.T) {
	checkProperties(t, algorithms["hs"], propertySeeds(t), nil)
}

func mustAlg(t testing.TB, name string) sim.Algorithm {
	a, err := sim.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// runCase runs one failure-free case in the simulator and checks that it
// settled on the best node (any node, for an AnyLeader algorithm),
// returning the election messages sent.
func runCase(t testing.TB, a sim.Algorithm, n int, c sim.Case, seed uint64, maxDelay int64) int64 {
	t.Helper()
	s, st, err := a.RunCase(n, c, sim.Config{Seed: seed, MinDelay: 1, MaxDelay: maxDelay, Fencing: true}, 5, 20+4*int(maxDelay))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Err(); err != nil {
		t.Fatalf("%s n=%d %s: %v", a.Name, n, c.What, err)
	}
	settled, ok := s.Settled()
	if st != sim.StopQuiet || !ok || (settled.Leader != classic.ID(n) && !a.AnyLeader) {
		t.Fatalf("%s n=%d %s: stop %v, settled %+v %v, want N%d", a.Name, n, c.What, st, settled, ok, n)
	}
	return s.Counts().Election().Sent
}

// TestLCRCounts: the slides' analysis, "best case = worst case: always
// 2N", in the simulator, with delays drawn from 1..4 ticks, for every
// initiator and ring orders drawn with the seed.
func TestLCRCounts(t *testing.T) {
	a := mustAlg(t, "lcr")
	for _, n := range []int{2, 3, 7, 16, 50} {
		rng := rand.New(rand.NewPCG(uint64(n), 5))
		for init := 1; init <= n; init++ {
			c := a.TypicalCase(n, rng)
			c.Initiators = []classic.ID{classic.ID(init)}
			if got := runCase(t, a, n, c, uint64(init), 4); got != int64(2*n) {
				t.Fatalf("n=%d, N%d initiates: %d messages, want 2N = %d", n, init, got, 2*n)
			}
		}
	}
}

// TestHSCounts: the seeds' O(n log n), as 8n(1+⌈log₂ n⌉), in the
// simulator with messages reordered (delays 1..5 ticks): the registry's
// best, worst and random cases, for sizes up to 1,024.
func TestHSCounts(t *testing.T) {
	a := mustAlg(t, "hs")
	for _, n := range []int{1, 2, 3, 5, 8, 31, 64, 100, 257, 1024} {
		bound := int64(8 * n * (1 + bits.Len(uint(n-1))))
		rng := rand.New(rand.NewPCG(uint64(n), 6))
		for i, c := range []sim.Case{a.Best(n), a.Worst(n), a.TypicalCase(n, rng), a.TypicalCase(n, rng)} {
			if got := runCase(t, a, n, c, uint64(i), 5); got > bound {
				t.Fatalf("n=%d %s: %d messages > 8n(1+⌈log₂ n⌉) = %d", n, c.What, got, bound)
			}
		}
		// Ascending order, all initiate: phase 0 for all (4n), then the
		// best alone through ⌈log₂ n⌉ phases and the announcement.
		if n >= 8 {
			if got := runCase(t, a, n, a.Best(n), 1, 1); got >= runCase(t, a, n, a.Worst(n), 1, 1) {
				t.Fatalf("n=%d: the best case (%d) is not below the worst", n, got)
			}
		}
	}
}

// TestRegistry: every algorithm the tools list builds nodes, elects the
// best node in its best and worst cases (a live node, for Chubby: the
// simulator's AnyLeader check), and is found by name.
func TestRegistry(t *testing.T) {
	seen := map[string]bool{}
	for _, a := range sim.Algorithms() {
		if seen[a.Name] || a.Name == "" || a.Title == "" || a.New == nil {
			t.Fatalf("bad entry %+v", a)
		}
		seen[a.Name] = true
		if b, err := sim.Lookup(" " + a.Name + " "); err != nil || b.Name != a.Name {
			t.Fatalf("Lookup(%q): %v", a.Name, err)
		}
		for _, n := range []int{2, 9} {
			if a.Best != nil {
				runCase(t, a, n, a.Best(n), 1, 2)
			}
			if a.Worst != nil {
				runCase(t, a, n, a.Worst(n), 1, 2)
			}
			runCase(t, a, n, a.TypicalCase(n, rand.New(rand.NewPCG(1, 1))), 1, 2)
		}
	}
	if _, err := sim.Lookup("nope"); err == nil {
		t.Fatal("Lookup(nope) found something")
	}
}
