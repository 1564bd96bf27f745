package inmem

import (
	"testing"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/electiontest"
)

// zabHarness runs the conformance suite on ZooKeeper's election with one
// more member that joins first and never campaigns: a witness. Zab needs
// a majority of the members to ACK a new leader, and the suite's
// LeaderCrash has two members of which one crashes: with two members the
// survivor is no majority and, rightly, never leads. With the witness it
// is two of three, ZooKeeper's smallest useful ensemble. The witness
// relays and ACKs but never stands, so every other subtest sees only its
// own candidates lead.
func zabHarness(t *testing.T, opts ...ClusterOption) electiontest.Harness {
	h := harness(t, Zab, opts...)
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
	t.Run("latency", func(t *testing.T) { electiontest.Run(t, zabHarness(t, WithLatency(5*time.Millisecond))) })
}
