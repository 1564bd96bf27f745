package inmem

import (
	"testing"
	"time"

	"github.com/electkit/election/electiontest"
)

// The conformance suite on the ad hoc tree election, run on the complete
// graph of the members, with messages at once and with a 5ms network.
func TestConformanceTree(t *testing.T) {
	electiontest.Run(t, harness(t, Tree))
	t.Run("latency", func(t *testing.T) { electiontest.Run(t, harness(t, Tree, WithLatency(5*time.Millisecond))) })
}
