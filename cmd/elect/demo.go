package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/electkit/election"
)

// Bounds and defaults of elect demo.
const (
	demoMinCandidates = 2
	demoMaxCandidates = 20
	demoDefaultTTL    = 2 * time.Second
	demoShortTTL      = election.MinTTL // --short: the shortest lease there is
	demoMaxTTL        = 10 * time.Second
	// demoPause is how long the leader holds office between two steps,
	// except with --short.
	demoPause = time.Second
)

func demoCommand() *command {
	names := make([]string, len(demoBackends))
	for i, b := range demoBackends {
		names[i] = b.name
	}
	return &command{
		name:     "demo",
		summary:  "narrate an election in real time: campaign, handover, crash, failover",
		synopsis: "[--backend NAME] [--algorithm " + strings.Join(demoAlgorithms(), "|") + "] [--candidates N] [--ttl D] [--short]",
		about: `Runs a story in real time and narrates it, one line per event (elapsed time,
candidate, event, detail):

  1. the candidates campaign, each through election.Run with callbacks:
     OnElected, OnDemoted and OnLeader are shown as they fire, and only
     OnElected ever says "elected";
  2. graceful handover: the leader calls Resign, and the next candidate
     leads at once (the latency is from Resign to its OnElected);
  3. crash: the leader's process dies without resigning; its lease has to
     run out before another candidate can lead (the latency is from the
     crash to the new leader's OnElected);
  4. recovery, on backends that can restart a candidate: it comes back and
     follows the new leader;
  5. transfer: the leader hands its leadership to a candidate it names
     (election.Transfer), which leads at once, ahead of the others;
  6. preemption: a candidate of higher priority joins; the leader, made
     WithPreemption, steps down for it after a hold-off of half the TTL.

Then every candidate stops, and a summary lists each change of leader with
its tokens and latency. Backends: ` + strings.Join(names, ", ") + `.`,
		example: `elect demo
elect demo --algorithm bully --ttl 3s
ELECTION_CANDIDATES=3 elect demo --short`,
		setup: func(f *flagSet) func(context.Context, io.Writer) error {
			var df demoFlags
			f.String(&df.backend, "backend", "NAME", defaultDemoBackend, "backend to run the story on: "+strings.Join(names, ", "))
			f.String(&df.algorithm, "algorithm", "NAME", "", "algorithm of the inmem backend: "+strings.Join(demoAlgorithms(), ", ")+" (default "+demoAlgorithms()[0]+")")
			f.Int(&df.candidates, "candidates", "N", 5, fmt.Sprintf("number of candidates, %d to %d", demoMinCandidates, demoMaxCandidates))
			f.Duration(&df.ttl, "ttl", "D", 0, fmt.Sprintf("lease TTL, %v to %v (default %v; %v with --short)", demoShortTTL, demoMaxTTL, demoDefaultTTL, demoShortTTL))
			f.String(&df.servers, "servers", "LIST", "", "ZooKeeper servers of --backend zk, comma-separated host:port (a ZooKeeper you run)")
			f.Bool(&df.short, "short", false, "as fast as possible (for CI): the shortest lease, no pause between steps")
			return func(ctx context.Context, w io.Writer) error {
				p, err := df.plan(f)
				if err != nil {
					return err
				}
				ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
				defer stop()
				return runDemo(ctx, w, p)
			}
		},
	}
}

type demoFlags struct {
	backend, algorithm string
	candidates         int
	ttl                time.Duration
	servers            string
	short              bool
}

// demoPlan is a checked demo command line.
type demoPlan struct {
	backend    *demoBackendEntry
	cfg        demoConfig
	candidates int
	short      bool
}

func (df *demoFlags) plan(f *flagSet) (*demoPlan, error) {
	p := &demoPlan{backend: findDemoBackend(strings.TrimSpace(df.backend)), candidates: df.candidates, short: df.short}
	if p.backend == nil {
		names := make([]string, len(demoBackends))
		for i, b := range demoBackends {
			names[i] = b.name
		}
		return nil, f.Bad("backend", "unknown backend; choose %s", strings.Join(names, " or "))
	}
	alg := strings.ToLower(strings.TrimSpace(df.algorithm))
	switch {
	case alg == "" && len(p.backend.algorithms) > 0:
		p.cfg.Algorithm = p.backend.algorithms[0]
	case alg == "":
	case len(p.backend.algorithms) == 0:
		return nil, f.Bad("algorithm", "the %s backend has no choice of algorithm", p.backend.name)
	case !slices.Contains(p.backend.algorithms, alg):
		return nil, f.Bad("algorithm", "must be one of %s", strings.Join(p.backend.algorithms, ", "))
	default:
		p.cfg.Algorithm = alg
	}
	switch {
	case p.backend.name == "zk" && strings.TrimSpace(df.servers) == "":
		return nil, usagef("--servers: required with --backend zk: the ZooKeeper to run the story on (e.g. --servers 127.0.0.1:2181)")
	case p.backend.name != "zk" && f.Given("servers"):
		return nil, f.Bad("servers", "only for --backend zk (the backend is %s)", p.backend.name)
	}
	for _, srv := range strings.Split(df.servers, ",") {
		if srv = strings.TrimSpace(srv); srv != "" {
			if !strings.Contains(srv, ":") {
				return nil, f.Bad("servers", "%q is not host:port", srv)
			}
			p.cfg.Servers = append(p.cfg.Servers, srv)
		}
	}
	if p.candidates < demoMinCandidates || p.candidates > demoMaxCandidates {
		return nil, f.Bad("candidates", "must be between %d and %d", demoMinCandidates, demoMaxCandidates)
	}
	switch {
	case f.Given("ttl"):
		if df.ttl < demoShortTTL || df.ttl > demoMaxTTL {
			return nil, f.Bad("ttl", "must be between %v and %v", demoShortTTL, demoMaxTTL)
		}
		p.cfg.TTL = df.ttl
	case df.short:
		p.cfg.TTL = demoShortTTL
	default:
		p.cfg.TTL = demoDefaultTTL
	}
	return p, nil
}
