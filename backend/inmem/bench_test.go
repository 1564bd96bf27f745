package inmem

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"
)

// BenchmarkHandover measures, in real time with no latency, how long it
// takes from a leader's Resign until the next leader's Campaign returns
// (P6). Every candidate campaigns again as soon as its Term ends, so the
// handovers cycle through the batches: most are within a batch (the
// algorithm's own step-down and election), one per batch admits the next
// batch (a rebuild of every node). ns/op is the mean; p50 and p99 are
// reported as well.
func BenchmarkHandover(b *testing.B) {
	for _, alg := range algorithms {
		for _, n := range []int{5, 100} {
			b.Run(fmt.Sprintf("%v/N=%d", alg, n), func(b *testing.B) { benchHandover(b, alg, n) })
		}
	}
}

func benchHandover(b *testing.B, alg Algorithm, n int) {
	c := newCluster(b, alg)
	es := join(b, c, n)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch := make(chan won, n)
	campaign := func(e *Elector) {
		go func() {
			t, err := e.Campaign(ctx)
			ch <- won{e, t, err}
		}()
	}
	for _, e := range es {
		campaign(e)
	}
	const patience = time.Minute
	w := next(b, ch, patience, "first leader")
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		w.e.Resign(ctx)
		campaign(w.e)
		w = next(b, ch, patience, "next leader")
		ds = append(ds, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(ds)
	pct := func(p float64) float64 { return float64(ds[int(p*float64(len(ds)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.5), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	cancel()
	c.Close()
	for range len(es) - 1 {
		<-ch
	}
}
