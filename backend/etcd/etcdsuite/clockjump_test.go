package etcdsuite_test

import (
	"testing"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/electiontest"
)

// The machine's wall clock steps by hours while a candidate leads: its
// renewals go on, its Term stays valid, nobody else is elected.
func TestWallClockJumps(t *testing.T) {
	eps := startEtcd(t)
	name := "/jumps"
	electiontest.HoldsThroughClockJumps(t, 2*time.Second, patience, func(t *testing.T, opts ...election.Option) election.Elector {
		return newElector(t, newClient(t, eps), name, "", opts...)
	})
}
