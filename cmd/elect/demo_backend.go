package main

import (
	"context"
	"fmt"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/inmem"
)

// demoBackend is what the demo's story needs from a backend: candidates
// that are election.Electors of one election, and a way to kill one.
//
// A backend joins the demo with one open function in demoBackends. The
// embedded-etcd variant is meant to look like this: open starts an embedded
// etcd server (internal/rig/embedetcd) and keeps its endpoint; Candidate dials
// one clientv3.Client per candidate and returns etcd.New(cli, prefix,
// election.WithID(id), election.WithTTL(cfg.TTL)); Crash closes that
// candidate's client without resigning, so its lease dies with its session
// and the others wait out the TTL; Close closes the remaining clients and
// stops the server.
type demoBackend interface {
	// Name is the backend's name, as --backend takes it.
	Name() string
	// Describe says in a few words how the election is run, for the
	// story's header: "ring algorithm, lease TTL 2s, renewed every 100ms".
	Describe() string
	// Candidate returns a new candidate with the given ID and options. The
	// story calls Close on every candidate it got, before Close.
	Candidate(ctx context.Context, id string, opts ...election.Option) (election.Elector, error)
	// Crash makes e's process die as far as the election can tell, without
	// resigning: its leadership must end by its lease, not by a message.
	// e is a candidate this backend returned.
	Crash(e election.Elector) error
	// Close releases the backend. The story calls it last, once.
	Close() error
}

// demoRecoverer is implemented by backends that can bring a crashed
// candidate back; the story then shows the recovery.
type demoRecoverer interface {
	Recover(e election.Elector) error
}

// demoConfig is what the demo's flags ask of a backend.
type demoConfig struct {
	// Algorithm is the value of --algorithm, one of the entry's
	// algorithms; empty for a backend that has none.
	Algorithm string
	// TTL is the lease TTL the candidates should get.
	TTL time.Duration
	// Servers are the ZooKeeper servers of --backend zk.
	Servers []string
}

// demoBackendEntry is one backend the demo can run on.
type demoBackendEntry struct {
	name    string
	summary string
	// algorithms are the values --algorithm accepts, the first being the
	// default; nil when the backend has no choice of algorithm.
	algorithms []string
	// recovers and transfers say which of the optional sections the
	// story runs on this backend (a demoRecoverer; Electors that are
	// election.Transferers), for the help's numbering; the demo's tests
	// check them against the story.
	recovers, transfers bool
	open                func(ctx context.Context, cfg demoConfig) (demoBackend, error)
}

// defaultDemoBackend is --backend's default: an etcd member embedded in
// the process, so the demo needs no server installed.
const defaultDemoBackend = "etcd"

// demoBackends lists the backends of elect demo.
var demoBackends = []demoBackendEntry{
	{
		name:      "etcd",
		summary:   "an etcd member embedded in this process, in a temporary directory (backend/etcd)",
		transfers: true,
		open:      openEtcd,
	},
	{
		name:      "zk",
		summary:   "a ZooKeeper you run, at --servers (backend/zk)",
		transfers: true,
		open:      openZK,
	},
	{
		name:       "inmem",
		summary:    "the classic algorithms run live between goroutines (backend/inmem)",
		algorithms: demoAlgorithms(),
		recovers:   true,
		transfers:  true,
		open:       openInmem,
	},
}

func findDemoBackend(name string) *demoBackendEntry {
	for i := range demoBackends {
		if demoBackends[i].name == name {
			return &demoBackends[i]
		}
	}
	return nil
}

// inmemDemo runs the story on an inmem.Cluster.
type inmemDemo struct {
	c *inmem.Cluster
}

func openInmem(_ context.Context, cfg demoConfig) (demoBackend, error) {
	alg, err := inmem.AlgorithmNamed(cfg.Algorithm)
	if err != nil {
		return nil, err
	}
	// The cluster derives its lease TTL from the failure detector:
	// (TimeoutTicks − 2) ticks, with no network latency. Round the TTL up
	// to whole ticks.
	tick := inmem.DefaultTick
	ticks := int((cfg.TTL+tick-1)/tick) + 2
	c, err := inmem.NewCluster(alg, inmem.WithTick(tick), inmem.WithTimeoutTicks(ticks))
	if err != nil {
		return nil, err
	}
	return &inmemDemo{c: c}, nil
}

func (d *inmemDemo) Name() string { return "inmem" }

func (d *inmemDemo) Describe() string {
	t := d.c.Timing()
	return fmt.Sprintf("%v algorithm, lease TTL %v, renewed every %v", d.c.Algorithm(), t.LeaseTTL, t.RenewInterval())
}

func (d *inmemDemo) Candidate(_ context.Context, id string, opts ...election.Option) (election.Elector, error) {
	return d.c.Join(append([]election.Option{election.WithID(id)}, opts...)...)
}

func (d *inmemDemo) member(e election.Elector) (*inmem.Elector, error) {
	m, ok := e.(*inmem.Elector)
	if !ok {
		return nil, fmt.Errorf("inmem demo: %T is not a member of the cluster", e)
	}
	return m, nil
}

func (d *inmemDemo) Crash(e election.Elector) error {
	m, err := d.member(e)
	if err != nil {
		return err
	}
	return d.c.Crash(m)
}

func (d *inmemDemo) Recover(e election.Elector) error {
	m, err := d.member(e)
	if err != nil {
		return err
	}
	return d.c.Recover(m)
}

func (d *inmemDemo) Close() error { return d.c.Close() }

// demoAlgorithms are the inmem algorithms whose runs the story tells: all
// but the ad hoc tree, where a member that comes back starts an election
// of its own (its tree merges), so the leader is not kept on recovery as
// step 4 says.
func demoAlgorithms() []string {
	var names []string
	for _, a := range inmem.Algorithms() {
		if a.String() != inmem.Tree.String() {
			names = append(names, a.String())
		}
	}
	return names
}
