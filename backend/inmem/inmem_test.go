package inmem

import (
	"log/slog"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/electkit/election"
	"github.com/electkit/election/electiontest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// traceLogger prints every message and view change when INMEM_TRACE is set:
// the protocol unfolding, for a failing test.
func traceOpts(opts ...ClusterOption) []ClusterOption {
	if os.Getenv("INMEM_TRACE") == "" {
		return opts
	}
	l := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug - 4}))
	return append(opts, WithLogger(l))
}

// clusterElection adapts a Cluster to the conformance suite.
type clusterElection struct{ c *Cluster }

func (ce *clusterElection) Candidate(t *testing.T, opts ...election.Option) election.Elector {
	e, err := ce.c.Join(opts...)
	if err != nil {
		t.Fatalf("Join: %v", err)
	}
	return e
}

func (ce *clusterElection) Crash(t *testing.T, e election.Elector) {
	if err := ce.c.Crash(e.(*Elector)); err != nil {
		t.Fatalf("Crash: %v", err)
	}
}

func harness(t *testing.T, alg Algorithm, opts ...ClusterOption) electiontest.Harness {
	opts = traceOpts(opts...)
	probe, err := NewCluster(alg, opts...)
	if err != nil {
		t.Fatalf("NewCluster: %v", err)
	}
	tm := probe.Timing()
	probe.Close()
	return electiontest.Harness{
		NewElection: func(t *testing.T) electiontest.Election {
			c, err := NewCluster(alg, opts...)
			if err != nil {
				t.Fatalf("NewCluster: %v", err)
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
	for _, alg := range []Algorithm{Ring, Bully, LCR, HS} {
		t.Run(alg.String(), func(t *testing.T) { electiontest.Run(t, harness(t, alg)) })
		t.Run(alg.String()+"/latency", func(t *testing.T) {
			electiontest.Run(t, harness(t, alg, WithLatency(5*time.Millisecond)))
		})
	}
}

// handoverBound is P6 after Resign for each algorithm, as the package doc
// states it.
func handoverBound(alg Algorithm, tm Timing) time.Duration {
	d := max(20*tm.Latency, time.Nanosecond)
	if alg.String() == Bully.String() {
		d += tm.FailureTimeout() + tm.Tick
	}
	return d
}
