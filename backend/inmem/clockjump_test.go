package inmem

import (
	"testing"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/electiontest"
)

// The machine's wall clock steps by hours while a member leads: its
// renewals go on, its Term stays valid, nobody else is elected. Real time,
// not synctest: a bubble's fake clock has no monotonic reading to keep.
func TestWallClockJumps(t *testing.T) {
	for _, alg := range []Algorithm{Ring, Bully} {
		t.Run(alg.String(), func(t *testing.T) {
			c := newCluster(t, alg)
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
