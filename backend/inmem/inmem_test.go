package inmem

import (
	"log/slog"
	"os"
	"testing"

	"github.com/electkit/election/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// traceLogger prints every message and view change when INMEM_TRACE is set:
// the protocol unfolding, for a failing test.
func traceOpts(opts ...ClusterOption) []ClusterOption {
	if os.Getenv("INMEM_TRACE") == "" {
		return opts
	}
	l := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug - 4}))
	return append(opts, WithLogger(l))
}
