package simtest

import (
	"fmt"
	"testing"

	"github.com/electkit/election/classic"
	"github.com/electkit/election/classic/sim"
)

// TestZabProperties: ZooKeeper's sequence/successor election under crashes
// (a minority at a time), partitions, false suspicions and eligibility
// flips: one leader per epoch, fencing, and the best live eligible server
// leading within the bound once the faults stop and the network is whole.
func TestZabProperties(t *testing.T) {
	checkProperties(t, algorithms["zab"], propertySeeds(t), quorumTweak(false))
}

func zabSim(t *testing.T, n int, cfg sim.Config) *sim.Sim {
	t.Helper()
	ms := make([]classic.Member, n)
	nodes := make([]classic.Node, n)
	for i := range ms {
		ms[i] = classic.Member{ID: classic.ID(i + 1)}
	}
	for i := range ms {
		var err error
		if nodes[i], err = classic.NewZab(classic.Config{ID: ms[i].ID, Members: ms, HeartbeatTicks: 3, TimeoutTicks: 12}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := sim.New(ms, nodes, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestZabMessageCounts: the notes' two phases cost N−1 NEW_LEADER, N−1 ACK
// and N−1 COMMIT, 3(N−1), when the best server stands alone; when the
// leader crashes only its successor-watcher stands (one election, not the
// "flood of elections" of everyone monitoring the master): N−1 NEW_LEADER,
// N−2 ACK (the dead leader sends none), N−1 COMMIT.
func TestZabMessageCounts(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 8, 33} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			s := zabSim(t, n, sim.Config{MinDelay: 1, MaxDelay: 1, MaxTime: 1000, Fencing: true})
			if st := s.Run(); st != sim.StopQuiet || s.Err() != nil {
				t.Fatalf("stopped %v: %v", st, s.Err())
			}
			st, _ := s.Settled()
			if st.Leader != classic.ID(n) {
				t.Fatalf("leader N%d, want N%d (the highest sequence number)", st.Leader, n)
			}
			c := s.Counts()
			for _, k := range []classic.Kind{classic.NewLeader, classic.LeaderAck, classic.Commit} {
				if got := c.Of(k).Sent; got != int64(n-1) {
					t.Errorf("%s: %d sent, want N-1 = %d", k, got, n-1)
				}
			}
			if got := c.Election().Sent; got != 3*int64(n-1) {
				t.Errorf("election traffic %d, want 3(N-1) = %d", got, 3*(n-1))
			}
			if n < 3 {
				return
			}
			if err := s.Crash(classic.ID(n)); err != nil {
				t.Fatal(err)
			}
			if st := s.Run(); st != sim.StopQuiet || s.Err() != nil {
				t.Fatalf("after the crash: stopped %v: %v", st, s.Err())
			}
			st, _ = s.Settled()
			if st.Leader != classic.ID(n-1) {
				t.Fatalf("after the crash: leader N%d, want its watcher N%d", st.Leader, n-1)
			}
			c2 := s.Counts()
			want := map[classic.Kind]int64{classic.NewLeader: int64(n - 1), classic.LeaderAck: int64(n - 2), classic.Commit: int64(n - 1)}
			for k, w := range want {
				if got := c2.Of(k).Sent - c.Of(k).Sent; got != w {
					t.Errorf("after the crash: %s: %d sent, want %d", k, got, w)
				}
			}
		})
	}
}
