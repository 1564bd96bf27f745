package simtest

import (
	"fmt"
	"testing"

	"github.com/electkit/election/classic"
	"github.com/electkit/election/classic/sim"
)

// quorumTweak fits the property harness to the quorum algorithms: fewer
// than half the nodes down at once (a majority must be able to meet),
// partitions, and for Chubby any live eligible leader.
func quorumTweak(anyLeader bool) func(pc *propertyCase) {
	return func(pc *propertyCase) {
		n := len(pc.members)
		pc.cfg.Chaos.MaxDown = min(pc.cfg.Chaos.MaxDown, (n-1)/2)
		pc.cfg.Chaos.Partitions = true
		pc.cfg.AnyLeader = anyLeader
		pc.to = max(pc.to, pc.hb+4*int(pc.cfg.MaxDelay)+3)
		pc.cfg.SettleWithin += int64(n * pc.hb * 4)
		pc.settleIn = pc.cfg.SettleWithin
		pc.cfg.MaxTime = chaosUntil + 2*pc.cfg.SettleWithin
	}
}

// TestChubbyProperties: Chubby under crashes (a minority at a time),
// partitions, false suspicions and eligibility flips: one master per term,
// master leases that never overlap on the simulated clock (CheckLease),
// fencing, and a master within the bound once the faults stop and the
// network is whole.
func TestChubbyProperties(t *testing.T) {
	checkProperties(t, algorithms["chubby"], propertySeeds(t), quorumTweak(true))
}

// TestChubbyMessageCounts: an uncontended election costs N−1 VoteRequest,
// N−1 Vote and N−1 Coordinator, 3(N−1); each renewal round 2(N−1)
// Heartbeat/Ack.
func TestChubbyMessageCounts(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 8, 33} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			ms := make([]classic.Member, n)
			nodes := make([]classic.Node, n)
			for i := range ms {
				ms[i] = classic.Member{ID: classic.ID(i + 1)}
			}
			for i := range ms {
				var err error
				if nodes[i], err = classic.NewChubby(classic.Config{ID: ms[i].ID, Members: ms, HeartbeatTicks: 3, TimeoutTicks: 12}); err != nil {
					t.Fatal(err)
				}
			}
			s, err := sim.New(ms, nodes, sim.Config{MinDelay: 1, MaxDelay: 1, MaxTime: 1000, AnyLeader: true, Fencing: true})
			if err != nil {
				t.Fatal(err)
			}
			if st := s.Run(); st != sim.StopQuiet || s.Err() != nil {
				t.Fatalf("stopped %v: %v", st, s.Err())
			}
			st, _ := s.Settled()
			c := s.Counts()
			for _, k := range []classic.Kind{classic.VoteRequest, classic.Vote, classic.Coordinator} {
				if got := c.Of(k).Sent; got != int64(n-1) {
					t.Errorf("%s: %d sent, want N-1 = %d", k, got, n-1)
				}
			}
			if st.Leader != classic.ID(n) {
				t.Errorf("master N%d, want N%d (the best stands first)", st.Leader, n)
			}
			// Three renewal rounds.
			s.RunUntil(s.Now() + 9)
			c2 := s.Counts()
			if hb := c2.Of(classic.Heartbeat).Sent; hb != 3*int64(n-1) {
				t.Errorf("%d renewal requests in 3 rounds, want 3(N-1) = %d", hb, 3*(n-1))
			}
			if c2.Election().Sent != c.Election().Sent {
				t.Errorf("renewals sent election traffic: %v", c2)
			}
			if s.Err() != nil {
				t.Fatal(s.Err())
			}
		})
	}
}

// TestChubbyLeaseCheckerCatches shows the lease checker at work: a Chubby
// whose master counted its lease from the last vote instead of the request
// would overlap; here we fake it with two cells sharing no replica, which is
// exactly what quorum intersection forbids: each elects a master, and the
// simulator reports the overlap.
func TestChubbyLeaseCheckerCatches(t *testing.T) {
	ms := []classic.Member{{ID: 1}, {ID: 2}, {ID: 3}, {ID: 4}}
	cellA, cellB := ms[:2], ms[2:]
	var nodes []classic.Node
	for _, cell := range [][]classic.Member{cellA, cellB} {
		for _, m := range cell {
			n, err := classic.NewChubby(classic.Config{ID: m.ID, Members: cell, HeartbeatTicks: 3, TimeoutTicks: 12})
			if err != nil {
				t.Fatal(err)
			}
			nodes = append(nodes, n)
		}
	}
	s, err := sim.New(ms, nodes, sim.Config{MinDelay: 1, MaxDelay: 1, MaxTime: 100, AnyLeader: true})
	if err != nil {
		t.Fatal(err)
	}
	s.RunUntil(50)
	found := false
	for _, v := range s.Violations() {
		found = found || v.Check == sim.CheckLease
	}
	if !found {
		t.Fatalf("two disjoint cells' masters overlap, but no lease violation: %v", s.Leases())
	}
}
