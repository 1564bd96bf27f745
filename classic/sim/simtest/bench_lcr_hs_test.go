package simtest

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/electkit/election/classic"
	"github.com/electkit/election/classic/sim"
)

// allDescending is Chang and Roberts' classic worst case: every node
// initiates at once, the IDs decrease along the ring.
func allDescending(n int) sim.Case {
	ms := sim.Seq(n)
	ids := make([]classic.ID, n)
	for i := range ms {
		ms[i].ID = classic.ID(n - i)
		ids[i] = ms[i].ID
	}
	return sim.Case{Members: ms, Initiators: ids, What: "all initiate, IDs descending"}
}

// BenchmarkHSvsRing: Hirschberg–Sinclair (every node initiates, bit-reversed
// IDs, the registry's worst case) against the ring's worst cases — with one
// initiator, the best node's successor (3N−1), and with every node
// initiating at once in descending order (Chang and Roberts' O(N²) case,
// "ring-all") — and LCR (2N), per N. The metric msgs/(N·log₂N) shows the
// shapes: flat for HS (n log n), falling for one-initiator rings (linear),
// growing for ring-all.
//
//	go test ./classic/sim -run '^$' -bench HSvsRing -benchtime 3x
func BenchmarkHSvsRing(b *testing.B) {
	for _, name := range []string{"hs", "ring", "ring-all", "lcr"} {
		a := mustAlg(b, strings.TrimSuffix(name, "-all"))
		for _, n := range []int{256, 1024, 4096, 16384} {
			if (name == "lcr" || name == "ring-all") && n > 4096 {
				continue // O(N²): bytes of lists, or messages
			}
			b.Run(fmt.Sprintf("%s/N=%d", name, n), func(b *testing.B) {
				c := a.Worst(n)
				if name == "ring-all" {
					c = allDescending(n)
				}
				var msgs int64
				for b.Loop() {
					s, st, err := a.RunCase(n, c, sim.Config{MinDelay: 1, MaxDelay: 1}, 5, 20)
					if err != nil || st != sim.StopQuiet || s.Err() != nil {
						b.Fatalf("%v %v %v", err, st, s.Err())
					}
					msgs = s.Counts().Election().Sent
				}
				b.ReportMetric(float64(msgs), "msgs/op")
				b.ReportMetric(float64(msgs)/(float64(n)*math.Log2(float64(n))), "msgs/(N·log₂N)")
			})
		}
	}
}
