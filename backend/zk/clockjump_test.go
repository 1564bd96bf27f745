package zk_test

import (
	"testing"

	"github.com/electkit/election"
	"github.com/electkit/election/electiontest"
)

// The machine's wall clock steps by hours while a candidate leads: its
// heartbeats go on, its Term stays valid, nobody else is elected.
func TestWallClockJumps(t *testing.T) {
	path := newPath(t)
	electiontest.HoldsThroughClockJumps(t, ttl, patience, func(t *testing.T, opts ...election.Option) election.Elector {
		return newElector(t, newConn(t), path, "", opts...)
	})
}
