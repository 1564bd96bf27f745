package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
)

// This file is how elect run, observe and leader pick a backend and reach
// the election. Each backend is one entry of storeBackends; its flags
// function defines the flags only it uses (etcd: --endpoints, the TLS files,
// --user) and returns the function that opens a candidate with them.
//
// Adding a backend is one entry and one flags function in a file of its
// own (store_etcd.go, store_zk.go). Flags of a backend not chosen are
// refused by name.

// storeBackend is a backend elect run, observe and leader can use.
type storeBackend struct {
	name    string
	summary string
	// shared says whether separate elect processes meet in one election on
	// this backend: observe and leader need it.
	shared bool
	// flags defines the backend's own flags on f and returns the function
	// that opens a candidate with their values once they are parsed.
	// candidate is true for a command that campaigns (elect run): only
	// then are the flags that shape a leadership defined.
	flags func(f *flagSet, candidate bool) opener
}

// opener opens a candidate of the election called name. The returned
// close function closes the candidate and everything opened for it (the
// client, the in-process cluster). Bad flag values are *usageErrors that
// name the flag; a store that cannot be reached is an ordinary error.
type opener func(ctx context.Context, f *flagSet, name string, opts []election.Option) (election.Elector, func() error, error)

// storeBackends lists the backends of run, observe and leader; the first
// is --backend's default.
var storeBackends = []storeBackend{
	{name: "etcd", shared: true, summary: "an etcd cluster (backend/etcd)", flags: etcdFlags},
	{name: "zk", shared: true, summary: "a ZooKeeper ensemble (backend/zk); --ttl is the session timeout", flags: zkFlags},
	{name: "postgres", shared: true, summary: "a PostgreSQL server (backend/postgres); --dsn and the PG* environment", flags: pgFlags},
	{name: "kube", shared: true, summary: "a Kubernetes Lease (backend/kube), named after --name (/services/demo is the Lease services.demo); --ttl in whole seconds", flags: kubeFlags},
	{name: "inmem", summary: "a one-candidate election inside this process, to try elect run without a server (backend/inmem)", flags: inmemFlags},
}

func storeBackendNames(sharedOnly bool) []string {
	var names []string
	for _, b := range storeBackends {
		if b.shared || !sharedOnly {
			names = append(names, b.name)
		}
	}
	return names
}

// electionFlags are the flags every command that joins an election has:
// which backend, which election, and the candidate's own settings.
type electionFlags struct {
	backend string
	name    string
	id      string
	value   string
	ttl     time.Duration
	prio    int
	preempt time.Duration

	sharedOnly bool                // observe, leader: only backends other processes can share
	openers    map[string]opener   // backend name → its opener
	owners     map[string][]string // backend name → the flags only it uses
}

// defineElectionFlags defines --backend, --name and, when candidate is
// true, --id, --value, --ttl, --priority and --preempt; then every
// backend's own flags (those that shape a leadership, such as --zk-hold,
// only when candidate is true).
func defineElectionFlags(f *flagSet, candidate, sharedOnly bool) *electionFlags {
	ef := &electionFlags{sharedOnly: sharedOnly, openers: map[string]opener{}, owners: map[string][]string{}}
	names := storeBackendNames(sharedOnly)
	f.String(&ef.backend, "backend", "NAME", names[0], "where the election lives: "+strings.Join(names, ", "))
	f.String(&ef.name, "name", "NAME", "", "the election's name, shared by its candidates: an absolute path such as /services/scheduler (on etcd the key prefix, on ZooKeeper the node's path); required")
	if candidate {
		f.String(&ef.id, "id", "ID", "", "this candidate's ID, unique in the election (default <host>-<pid>-<random>)")
		f.String(&ef.value, "value", "TEXT", "", "published with the leadership, e.g. the address to send requests to")
		f.Duration(&ef.ttl, "ttl", "D", election.DefaultTTL, fmt.Sprintf("lease TTL, %v to %v: how long a crashed leader keeps the election", election.MinTTL, election.MaxTTL))
		f.Int(&ef.prio, "priority", "N", 0, "this candidate's priority: among those waiting, the highest leads next (ties: first come)")
		f.Duration(&ef.preempt, "preempt", "D", 0, "while leading, step down for a candidate of higher priority once it has waited D (0: never; it waits for this one to go)")
	}
	for _, b := range storeBackends {
		if sharedOnly && !b.shared {
			continue
		}
		before := len(f.order)
		ef.openers[b.name] = b.flags(f, candidate)
		ef.owners[b.name] = slices.Clone(f.order[before:])
	}
	return ef
}

// check validates the flags common to every backend and returns the
// candidate options they give.
func (ef *electionFlags) check(f *flagSet, candidate bool) ([]election.Option, error) {
	ef.backend = strings.ToLower(strings.TrimSpace(ef.backend))
	if _, ok := ef.openers[ef.backend]; !ok {
		choose := strings.Join(storeBackendNames(ef.sharedOnly), " or ")
		if slices.Contains(storeBackendNames(false), ef.backend) {
			return nil, f.Bad("backend", "its election lives inside one elect process, where no other process can see it; choose %s", choose)
		}
		return nil, f.Bad("backend", "unknown backend; choose %s", choose)
	}
	for b, flags := range ef.owners {
		if b == ef.backend {
			continue
		}
		for _, name := range flags {
			if f.Given(name) && !slices.Contains(ef.owners[ef.backend], name) {
				return nil, f.Bad(name, "only for --backend %s (the backend is %s)", b, ef.backend)
			}
		}
	}
	if strings.TrimSpace(ef.name) == "" {
		return nil, usagef("--name: required: the election's name, the same for all its candidates (e.g. --name /services/scheduler)")
	}
	if err := backend.ValidateName(strings.TrimSpace(ef.name)); err != nil {
		return nil, f.Bad("name", "%s", reason(err))
	}
	if !candidate {
		return nil, nil
	}
	var opts []election.Option
	if f.Given("id") {
		if err := backend.ValidateID(ef.id); err != nil {
			return nil, f.Bad("id", "%v", reason(err))
		}
		opts = append(opts, election.WithID(ef.id))
	}
	if len(ef.value) > election.MaxValueSize {
		return nil, usagef("--value: %d bytes, more than the %d allowed", len(ef.value), election.MaxValueSize)
	}
	if ef.value != "" {
		opts = append(opts, election.WithValue([]byte(ef.value)))
	}
	if ef.ttl < election.MinTTL || ef.ttl > election.MaxTTL {
		return nil, f.Bad("ttl", "must be between %v and %v", election.MinTTL, election.MaxTTL)
	}
	if ef.preempt < 0 || ef.preempt > 10*election.MaxTTL {
		return nil, f.Bad("preempt", "must be between 0 (never) and %v", 10*election.MaxTTL)
	}
	opts = append(opts, election.WithPriority(int64(ef.prio)), election.WithPreemption(ef.preempt))
	return opts, nil
}

// open opens a candidate of the chosen backend.
func (ef *electionFlags) open(ctx context.Context, f *flagSet, opts []election.Option) (election.Elector, func() error, error) {
	return ef.openers[ef.backend](ctx, f, strings.TrimSpace(ef.name), opts)
}

// reason is the part of an *election.OptionError after the value: what is
// wrong with it.
func reason(err error) string {
	if oe, ok := err.(*election.OptionError); ok && oe.Reason != "" {
		return oe.Reason
	}
	return err.Error()
}

// warnLogger logs the library's warnings to w, for an operator to read.
func warnLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// inmemFlags: the in-process backend has no flags. It opens a cluster of
// the ring algorithm with one member: it leads at once, which is enough to
// try elect run's handling of the command.
func inmemFlags(*flagSet, bool) opener {
	return func(ctx context.Context, _ *flagSet, _ string, opts []election.Option) (election.Elector, func() error, error) {
		o, err := election.NewOptions(opts...)
		if err != nil {
			return nil, nil, err
		}
		b, err := openInmem(ctx, demoConfig{Algorithm: "ring", TTL: o.TTL})
		if err != nil {
			return nil, nil, err
		}
		d := b.(*inmemDemo)
		// The cluster's failure detector decides the TTL: drop --ttl's.
		e, err := d.c.Join(append(opts, election.WithTTL(d.c.Timing().LeaseTTL))...)
		if err != nil {
			d.c.Close()
			return nil, nil, err
		}
		return e, func() error {
			e.Close()
			return d.c.Close()
		}, nil
	}
}
