// Package libs is the registry of the election libraries the benchmarks
// measure: ours (backend/etcd, backend/zk), the peers (etcd's
// concurrency.Election; client-go's leaderelection and Curator's
// LeaderLatch, plugged in in peers.go), and the naive
// everyone-watches-the-leader-key election the herd scenario compares
// against. A scenario asks the registry for the libraries of a store and
// makes each with the connections it needs (Env).
package libs

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/electkit/election/bench/internal/conns"
	"github.com/electkit/election/bench/internal/peer"
	"github.com/electkit/election/bench/internal/peers/concurrency"
	"github.com/electkit/election/bench/internal/peers/naive"
	"github.com/electkit/election/bench/internal/peers/ours"
)

// Store is the kind of store a library runs against.
type Store string

// The stores.
const (
	Etcd Store = "etcd"
	ZK   Store = "zk"
)

// Role is what a library is in a comparison.
type Role string

// The roles.
const (
	Ours  Role = "ours"  // this module's backend
	Peer  Role = "peer"  // another project's election library
	Naive Role = "naive" // the herd scenario's strawman
)

// Env is what a scenario hands a library's constructor: where the store is
// and how candidates must connect (conns.Options: Proxied for crash
// failover, Counted for the herd and scale scenarios, Pool for scale).
type Env struct {
	Endpoints []string // etcd client URLs
	Servers   []string // ZooKeeper host:port
	Conns     conns.Options
	Scenario  string // handover, crash, herd, scale
	Short     bool   // the -short smoke: keep set-up light
}

// Entry is one library in the registry.
type Entry struct {
	Name  string // as peer.Library.Name returns it
	Store Store
	Role  Role
	// Available reports why the library cannot run on this machine (a
	// missing JVM or jar); nil means it can. A nil func means always.
	Available func() error
	New       func(ctx context.Context, env Env) (peer.Library, error)
	// MaxCandidates, if positive, is the largest election the scale
	// scenario runs this library in (peer.Limited says the same from the
	// library itself).
	MaxCandidates int
	// OwnConnections says the library connects every candidate on its
	// own, whatever env.Conns.Pool asks (the scale table says so).
	OwnConnections bool
}

// Expected names every peer the reports compare against. One that is not
// registered (peers.go) or not available is reported loudly as not
// measured, never silently left out.
var Expected = []struct {
	Name  string
	Store Store
}{
	{ConcurrencyName, Etcd},
	{ClientGoName, Etcd},
	{CuratorName, ZK},
}

// Names of the peers plugged in by peers.go.
const (
	ConcurrencyName = concurrency.Name
	ClientGoName    = "client-go leaderelection"
	CuratorName     = "Curator LeaderLatch"
)

// builtin lists the libraries of this module.
func builtin() []Entry {
	return []Entry{
		{Name: "backend/etcd", Store: Etcd, Role: Ours, New: func(_ context.Context, env Env) (peer.Library, error) {
			return ours.NewEtcd(env.Endpoints, env.Conns), nil
		}},
		{Name: "backend/zk", Store: ZK, Role: Ours, New: func(_ context.Context, env Env) (peer.Library, error) {
			return ours.NewZK(env.Servers, env.Conns), nil
		}},
		{Name: concurrency.Name, Store: Etcd, Role: Peer, New: func(_ context.Context, env Env) (peer.Library, error) {
			return concurrency.New(env.Endpoints, env.Conns), nil
		}},
		{Name: "naive (etcd)", Store: Etcd, Role: Naive, New: func(_ context.Context, env Env) (peer.Library, error) {
			return naive.NewEtcd(env.Endpoints, env.Conns), nil
		}},
		{Name: "naive (zk)", Store: ZK, Role: Naive, New: func(_ context.Context, env Env) (peer.Library, error) {
			return naive.NewZK(env.Servers, env.Conns), nil
		}},
	}
}

// All returns every registered library: this module's, then the peers of
// peers.go.
func All() []Entry {
	return append(builtin(), peerEntries()...)
}

// Filter keeps the entries whose name contains one of the
// comma-separated, case-insensitive terms of filter ("" keeps all).
func Filter(es []Entry, filter string) []Entry {
	if strings.TrimSpace(filter) == "" {
		return es
	}
	var out []Entry
	for _, e := range es {
		for _, t := range strings.Split(filter, ",") {
			if t = strings.TrimSpace(t); t != "" && strings.Contains(strings.ToLower(e.Name), strings.ToLower(t)) {
				out = append(out, e)
				break
			}
		}
	}
	return out
}

// Missing returns, for each expected peer that is not among es or cannot
// run here, a line saying so.
func Missing(es []Entry) []string {
	var out []string
	for _, x := range Expected {
		found := false
		for _, e := range es {
			if e.Name != x.Name {
				continue
			}
			found = true
			if e.Available != nil {
				if err := e.Available(); err != nil {
					out = append(out, fmt.Sprintf("%s (%s) is registered but cannot run here: %v", x.Name, x.Store, err))
				}
			}
		}
		if !found {
			out = append(out, fmt.Sprintf("%s (%s) is not registered: see bench/internal/libs/peers.go", x.Name, x.Store))
		}
	}
	return out
}

// Runnable keeps the entries whose Available is nil or returns nil.
func Runnable(es []Entry) []Entry {
	var out []Entry
	for _, e := range es {
		if e.Available == nil || e.Available() == nil {
			out = append(out, e)
		}
	}
	return out
}

// relative wraps a library whose election names are relative to its own
// prefix (Curator's latch path is its prefix + "/" + name): it strips the
// scenarios' leading "/" from every name.
type relative struct{ peer.Library }

func rel(name string) string { return strings.TrimLeft(name, "/") }

func (l relative) NewCandidate(ctx context.Context, name, id string, ttl time.Duration) (peer.Candidate, error) {
	return l.Library.NewCandidate(ctx, rel(name), id, ttl)
}

// Registered passes the census on, if the library takes one.
func (l relative) Registered(ctx context.Context, name string) (int, error) {
	c, ok := l.Library.(peer.Census)
	if !ok {
		return 0, fmt.Errorf("%s: no census", l.Name())
	}
	return c.Registered(ctx, rel(name))
}

// Fleet returns the library's peer.Fleet, its names relative as well, if
// it has one. relative does not implement peer.Fleet itself: a scenario
// that runs every Fleet (shards) leaves the wrapped library out; one that
// asks (burst) gets it.
func (l relative) Fleet() (peer.Fleet, bool) {
	f, ok := l.Library.(peer.Fleet)
	if !ok {
		return nil, false
	}
	return relativeFleet{f}, true
}

type relativeFleet struct{ f peer.Fleet }

func (f relativeFleet) NewProcess(ctx context.Context, ttl time.Duration) (peer.Process, error) {
	p, err := f.f.NewProcess(ctx, ttl)
	if err != nil {
		return nil, err
	}
	return relativeProcess{p}, nil
}

type relativeProcess struct{ peer.Process }

func (p relativeProcess) NewCandidate(ctx context.Context, name, id string) (peer.Candidate, error) {
	return p.Process.NewCandidate(ctx, rel(name), id)
}

// RSS passes the library's own process's resident memory on (a JVM's),
// if it reports one.
func (l relative) RSS() (int64, error) {
	r, ok := l.Library.(interface{ RSS() (int64, error) })
	if !ok {
		return 0, fmt.Errorf("%s: no process of its own", l.Name())
	}
	return r.RSS()
}

// MaxCandidates passes the library's limit on (0: none).
func (l relative) MaxCandidates() int {
	if m, ok := l.Library.(peer.Limited); ok {
		return m.MaxCandidates()
	}
	return 1 << 30
}
