// Package peer is the one shape every measured election library takes in the
// benchmarks — ours and the peers' (etcd's concurrency.Election, client-go's
// leaderelection, Curator's LeaderLatch) — so that each scenario runs them
// all with the same code, interleaved, in the same run.
package peer

import (
	"context"
	"time"
)

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

// Counts is what a candidate's (or a library's) connections to the store
// carried, counted on the wire by the adapter's client: requests it sent
// (reads, writes, watch registrations; not renewals), watch events the
// store delivered to it, and renewals (lease keepalives, session pings).
type Counts struct {
	Requests int64 `json:"requests"`
	Events   int64 `json:"events"`
	Renewals int64 `json:"renewals"`
}

// Sub returns c − o.
func (c Counts) Sub(o Counts) Counts {
	return Counts{Requests: c.Requests - o.Requests, Events: c.Events - o.Events, Renewals: c.Renewals - o.Renewals}
}

// Add returns c + o.
func (c Counts) Add(o Counts) Counts {
	return Counts{Requests: c.Requests + o.Requests, Events: c.Events + o.Events, Renewals: c.Renewals + o.Renewals}
}

// Counter is implemented by a Candidate whose own connection is counted
// (the herd scenario needs it to tell which candidates a handover woke), and
// by a Library that counts all its connections together (the scale
// scenario's steady-state request rate). A library without it is reported
// as "not counted" in those columns.
type Counter interface {
	Counts() Counts
}

// Census is implemented by a Library that can tell how many candidates of
// the election called name are registered in the store now (keys under the
// prefix, children of the path). The scale scenario uses it for "time until
// all are registered"; without it only "time until one leads" is reported.
type Census interface {
	Registered(ctx context.Context, name string) (int, error)
}

// Limited is implemented by a Library that cannot run more than
// MaxCandidates candidates in one election in the benchmark (a JVM's
// threads, a polling rate that would swamp the store); the scale scenario
// skips larger sizes for it, with a note in the report.
type Limited interface {
	MaxCandidates() int
}

// Fleet is implemented by a Library whose candidates of many elections
// can share one session per process (an etcd lease, a ZooKeeper
// session): the shards scenario runs a leader per shard this way.
type Fleet interface {
	// NewProcess opens one process's connection and session of ttl.
	NewProcess(ctx context.Context, ttl time.Duration) (Process, error)
}

// Process is one process of a sharded service: one connection, one
// session, any number of candidates of any elections.
type Process interface {
	// NewCandidate makes a candidate of the election called name on the
	// process's session.
	NewCandidate(ctx context.Context, name, id string) (Candidate, error)
	// Counts is what the process's connection carried.
	Counts() Counts
	// Close closes the session and the connection (the candidates first).
	Close() error
}

// FleetOf is implemented by a Library wrapper whose library may be a
// Fleet, for the scenarios that ask for one explicitly (burst) rather than
// run every Fleet (shards).
type FleetOf interface {
	Fleet() (Fleet, bool)
}

// Connector is implemented by a Library that shares a pool of clients
// among its candidates (conns.Options.Pool) and can dial them before the
// first candidate asks for one, so that a measurement begins with its
// clients connected (the burst scenario's baseline).
type Connector interface {
	Connect(ttl time.Duration) error
}
