package simtest

import (
	"testing"
	"time"

	"github.com/electkit/election/classic"
	"github.com/electkit/election/classic/sim"
)

// benchElection runs one election per iteration and reports simulated
// messages (all kinds, delivered) per second of wall time. Building the
// nodes and the simulator is left out of the timing and reported apart.
func benchElection(b *testing.B, ms []classic.Member, build func([]classic.Member) []classic.Node, cfg sim.Config,
	initiator classic.ID, wantLeader classic.ID, wantMsgs int64) {
	b.ReportAllocs()
	var msgs int64
	var setup time.Duration
	for b.Loop() {
		b.StopTimer()
		t0 := time.Now()
		nodes := build(ms)
		s, err := sim.New(ms, nodes, cfg)
		if err != nil {
			b.Fatal(err)
		}
		setup += time.Since(t0)
		b.StartTimer()
		if err := s.Start(initiator); err != nil {
			b.Fatal(err)
		}
		if st := s.Run(); st != sim.StopQuiet {
			b.Fatalf("Run = %v at t=%d", st, s.Now())
		}
		b.StopTimer()
		if err := s.Err(); err != nil {
			b.Fatal(err)
		}
		if st, ok := s.Settled(); !ok || st.Leader != wantLeader {
			b.Fatalf("Settled %+v %v, want N%d", st, ok, wantLeader)
		}
		n := s.Counts().Election().Delivered
		if wantMsgs > 0 && n != wantMsgs {
			b.Fatalf("%d election messages, want %d", n, wantMsgs)
		}
		msgs += s.Counts().Total().Delivered
		b.StartTimer()
	}
	b.ReportMetric(float64(msgs)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(msgs)/float64(b.N), "msgs/op")
	// Building the nodes and the simulator is not timed above; this is it.
	b.ReportMetric(setup.Seconds()/float64(b.N), "setup-s/op")
}

func seqMembers(n int) []classic.Member {
	ms := make([]classic.Member, n)
	for i := range ms {
		ms[i] = classic.Member{ID: classic.ID(i + 1)}
	}
	return ms
}

// BenchmarkToyRing1M: the simulator's own cost on a million-node ring, worst
// case (the best node's successor initiates: 3N−1 messages), with the toy
// ring node.
func BenchmarkToyRing1M(b *testing.B) {
	const n = 1_000_000
	benchElection(b, seqMembers(n), toyRings, sim.Config{NoTicks: true, MinDelay: 1, MaxDelay: 1}, 1, n, 3*n-1)
}

// BenchmarkToyBully2000: the bully's worst case on the toy node: the best
// node has crashed and the lowest one initiates, so every node runs an
// election against all the nodes above it (O(N²) messages), and the
// second-best wins after a timeout.
func BenchmarkToyBully2000(b *testing.B) {
	const n = 2000
	ms := seqMembers(n)
	benchElection(b, ms, func(ms []classic.Member) []classic.Node { return toyBullies(ms, 0, 4) },
		sim.Config{MinDelay: 1, MaxDelay: 1, MaxTime: 1000, Schedule: []sim.Action{{At: 0, Op: sim.OpCrash, ID: n}}},
		1, n-1, 0)
}

// realNodes builds the nodes of package classic over one shared Membership,
// as a million-node ring needs (NewRing would index the members once per
// node).
func realNodes(kind string, hb, timeout int) func([]classic.Member) []classic.Node {
	return func(ms []classic.Member) []classic.Node {
		mem, err := classic.NewMembership(ms)
		if err != nil {
			panic(err)
		}
		ns := make([]classic.Node, len(ms))
		for i, m := range ms {
			var n classic.Node
			switch kind {
			case "ring":
				n, err = classic.NewRingFrom(mem, m.ID, hb, timeout)
			case "bully":
				n, err = classic.NewBullyFrom(mem, m.ID, hb, timeout)
			}
			if err != nil {
				panic(err)
			}
			ns[i] = n
		}
		return ns
	}
}

// BenchmarkRing1M: Chang–Roberts among a million nodes, worst case: the
// best node's successor initiates (3N−1 messages), no failures, every
// message one tick, no ticks (nothing times out).
func BenchmarkRing1M(b *testing.B) {
	const n = 1_000_000
	benchElection(b, seqMembers(n), realNodes("ring", 5, 20), sim.Config{NoTicks: true, MinDelay: 1, MaxDelay: 1}, 1, n, 3*n-1)
}

// BenchmarkBully2000: the bully's worst case among 2,000 nodes: the best
// has crashed and the lowest initiates, so each node runs an election
// against every node above it (O(N²) messages); the second best wins after
// its timeout. Nodes tick: the timeout is what ends the run.
func BenchmarkBully2000(b *testing.B) {
	const n = 2000
	benchElection(b, seqMembers(n), realNodes("bully", 2, 5),
		sim.Config{MinDelay: 1, MaxDelay: 1, MaxTime: 10_000, Schedule: []sim.Action{{At: 0, Op: sim.OpCrash, ID: n}}},
		1, n-1, 0)
}
