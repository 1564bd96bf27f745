package inmemsuite_test

import (
	"testing"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/inmem"
	"github.com/electkit/election/electiontest"
)

// TestMain fails the binary if a goroutine outlives the tests.
func TestMain(m *testing.M) { electiontest.Main(m) }

// clusterElection adapts a inmem.Cluster to the conformance suite.
type clusterElection struct{ c *inmem.Cluster }

func (ce *clusterElection) Candidate(t *testing.T, opts ...election.Option) election.Elector {
	e, err := ce.c.Join(opts...)
	if err != nil {
		t.Fatalf("Join: %v", err)
	}
	return e
}

func (ce *clusterElection) Crash(t *testing.T, e election.Elector) {
	if err := ce.c.Crash(e.(*inmem.Elector)); err != nil {
		t.Fatalf("Crash: %v", err)
	}
}

func harness(t *testing.T, alg inmem.Algorithm, opts ...inmem.ClusterOption) electiontest.Harness {
	probe, err := inmem.NewCluster(alg, opts...)
	if err != nil {
		t.Fatalf("inmem.NewCluster: %v", err)
	}
	tm := probe.Timing()
	probe.Close()
	return electiontest.Harness{
		NewElection: func(t *testing.T) electiontest.Election {
			c, err := inmem.NewCluster(alg, opts...)
			if err != nil {
				t.Fatalf("inmem.NewCluster: %v", err)
			}
			t.Cleanup(func() { c.Close() })
			return &clusterElection{c}
		},
		// A crashed leader's Term lapses within the lease TTL; then the
		// waiting candidates are admitted and the algorithm elects one,
		// which takes a few failure-detector timeouts at worst (a ring
		// skips each dead successor after one).
		Failover: tm.LeaseTTL + 4*tm.FailureTimeout(),
		// After Resign or Close the suite's waiting candidate is admitted
		// with a fresh build of the nodes and elected in a few message
		// delays; with no latency, no fake time passes at all. The bully's
		// next candidate waits one OK timeout when a member above it no
		// longer stands (the package doc, P6), so its bound is that.
		Handover: handoverBound(alg, tm),
		Bubble:   true,
	}
}

// The conformance suite, in fake time, for every algorithm, with messages
// delivered at once and with a 5ms network (ordering, confirmation and
// renewal arithmetic under latency).
func TestConformance(t *testing.T) {
	for _, alg := range []inmem.Algorithm{inmem.Ring, inmem.Bully, inmem.LCR, inmem.HS} {
		t.Run(alg.String(), func(t *testing.T) { electiontest.Run(t, harness(t, alg)) })
		t.Run(alg.String()+"/latency", func(t *testing.T) {
			electiontest.Run(t, harness(t, alg, inmem.WithLatency(5*time.Millisecond)))
		})
	}
}

// handoverBound is P6 after Resign for each algorithm, as the package doc
// states it.
func handoverBound(alg inmem.Algorithm, tm inmem.Timing) time.Duration {
	d := max(20*tm.Latency, time.Nanosecond)
	if alg.String() == inmem.Bully.String() {
		d += tm.FailureTimeout() + tm.Tick
	}
	return d
}

// The conformance suite on the ad hoc tree election, run on the complete
// graph of the members, with messages at once and with a 5ms network.
func TestConformanceTree(t *testing.T) {
	electiontest.Run(t, harness(t, inmem.Tree))
	t.Run("latency", func(t *testing.T) { electiontest.Run(t, harness(t, inmem.Tree, inmem.WithLatency(5*time.Millisecond))) })
}

// zabHarness runs the conformance suite on ZooKeeper's election with one
// more member that joins first and never campaigns: a witness. inmem.Zab needs
// a majority of the members to ACK a new leader, and the suite's
// LeaderCrash has two members of which one crashes: with two members the
// survivor is no majority and, rightly, never leads. With the witness it
// is two of three, ZooKeeper's smallest useful ensemble. The witness
// relays and ACKs but never stands, so every other subtest sees only its
// own candidates lead.
func zabHarness(t *testing.T, opts ...inmem.ClusterOption) electiontest.Harness {
	h := harness(t, inmem.Zab, opts...)
	inner := h.NewElection
	h.NewElection = func(t *testing.T) electiontest.Election {
		e := inner(t)
		if _, err := e.(*clusterElection).c.Join(election.WithID("witness")); err != nil {
			t.Fatalf("Join of the witness: %v", err)
		}
		return e
	}
	return h
}

// The conformance suite on ZooKeeper's sequence/successor election, with
// messages at once and with a 5ms network.
func TestConformanceZab(t *testing.T) {
	electiontest.Run(t, zabHarness(t))
	t.Run("latency", func(t *testing.T) { electiontest.Run(t, zabHarness(t, inmem.WithLatency(5*time.Millisecond))) })
}

// The machine's wall clock steps by hours while a member leads: its
// renewals go on, its Term stays valid, nobody else is elected. Real time,
// not synctest: a bubble's fake clock has no monotonic reading to keep.
func TestWallClockJumps(t *testing.T) {
	for _, alg := range []inmem.Algorithm{inmem.Ring, inmem.Bully} {
		t.Run(alg.String(), func(t *testing.T) {
			c, err := inmem.NewCluster(alg)
			if err != nil {
				t.Fatalf("NewCluster: %v", err)
			}
			t.Cleanup(func() { c.Close() })
			electiontest.HoldsThroughClockJumps(t, c.Timing().LeaseTTL, 10*time.Second, func(t *testing.T, opts ...election.Option) election.Elector {
				e, err := c.Join(opts...)
				if err != nil {
					t.Fatalf("Join: %v", err)
				}
				return e
			})
		})
	}
}
