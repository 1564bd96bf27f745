// Package peer is the one shape every measured election library takes in the
// benchmarks — ours and the peers' (etcd's concurrency.Election, client-go's
// leaderelection, Curator's LeaderLatch) — so that each scenario runs them
// all with the same code, interleaved, in the same run.
package peer

import (
	"context"
	"time"

	"golang.org/x/sys/unix"
)

// Mono reads CLOCK_MONOTONIC in nanoseconds. It is one clock for every
// process on the machine (Java's System.nanoTime reads the same clock on
// Linux), so instants taken in a JVM and in Go can be subtracted.
func Mono() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return time.Now().UnixNano() // not reached on Linux
	}
	return ts.Nano()
}

// Candidate is one contender of one library, on its own client or
// connection to the store.
type Candidate interface {
	// Campaign blocks until this candidate leads, and returns the Mono
	// instant at which the library told it so.
	Campaign(ctx context.Context) (int64, error)
	// Release gives leadership up the library's own way (Resign,
	// ReleaseOnCancel, LeaderLatch.close) and returns the Mono instant
	// taken just before the release began.
	Release(ctx context.Context) (int64, error)
	// Crash makes the candidate vanish without releasing: its connection to
	// the store goes dark (a proxy drops every byte both ways), so the store
	// must expire its lease or session. It returns the Mono instant of the cut.
	Crash() (int64, error)
	// Close releases everything the candidate holds.
	Close() error
}

// Library makes candidates of one election library against one store.
type Library interface {
	// Name is the library's name in reports, e.g. "backend/etcd",
	// "concurrency.Election", "client-go leaderelection", "Curator LeaderLatch".
	Name() string
	// NewCandidate makes a candidate for the election called name with the
	// given lease TTL or session timeout.
	NewCandidate(ctx context.Context, name, id string, ttl time.Duration) (Candidate, error)
	// Close releases what the library holds (a JVM, clients, proxies).
	Close() error
}
