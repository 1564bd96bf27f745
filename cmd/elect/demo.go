package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
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
candidate, event, detail). Its sections, in order:

` + demoSectionHelp() + `

The story numbers its sections as it runs them; on each backend:

` + demoNumberingHelp() + `

Backends: ` + strings.Join(names, ", ") + `.`,
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

// demoSection is one section of the story, as the help describes it.
type demoSection struct {
	name  string // as the help's numbering names it
	about string
}

// demoStory lists every section the story can run, in order. Which ones
// a backend runs: demoBackendEntry.sections.
var demoStory = []demoSection{
	{"campaign", `the candidates campaign, each through election.Run with callbacks:
OnElected, OnDemoted and OnLeader are shown as they fire, and only
OnElected ever says "elected";`},
	{"handover", `the leader calls Resign, a graceful handover: the next candidate
leads at once (the latency is from Resign to its OnElected);`},
	{"crash", `the leader's process dies without resigning; its lease has to run
out before another candidate can lead (the latency is from the crash to
the new leader's OnElected);`},
	{"recovery", `on a backend that can restart a candidate (inmem): the crashed
candidate comes back and follows the new leader;`},
	{"transfer", `the leader hands its leadership to a candidate it names
(election.Transfer), which leads at once, ahead of the others;`},
	{"preemption", `a candidate of higher priority joins; the leader, made
WithPreemption, steps down for it after a hold-off of half the TTL;`},
	{"shutdown", `every candidate stops; then a summary lists each change of
leader with its tokens and latency.`},
}

// sections returns the names of the sections the story runs on b, in the
// order it numbers them.
func (b *demoBackendEntry) sections() []string {
	var out []string
	for _, sec := range demoStory {
		if sec.name == "recovery" && !b.recovers || sec.name == "transfer" && !b.transfers {
			continue
		}
		out = append(out, sec.name)
	}
	return out
}

// demoSectionHelp describes every section, for the help.
func demoSectionHelp() string {
	var b strings.Builder
	for i, sec := range demoStory {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(wrapWords(strings.Fields(sec.name+": "+sec.about), "  - ", "    ", 76))
	}
	return b.String()
}

// demoNumberingHelp lists, for each backend (those alike on one line),
// the sections of its story as the story numbers them.
func demoNumberingHelp() string {
	type group struct {
		names    []string
		sections []string
	}
	var groups []*group
next:
	for i := range demoBackends {
		b := &demoBackends[i]
		secs := b.sections()
		for _, g := range groups {
			if slices.Equal(g.sections, secs) {
				g.names = append(g.names, b.name)
				continue next
			}
		}
		groups = append(groups, &group{names: []string{b.name}, sections: secs})
	}
	width := 0
	for _, g := range groups {
		width = max(width, len(strings.Join(g.names, ", "))+1)
	}
	var b strings.Builder
	for i, g := range groups {
		if i > 0 {
			b.WriteByte('\n')
		}
		items := make([]string, len(g.sections))
		for j, sec := range g.sections {
			items[j] = strconv.Itoa(j+1) + ". " + sec
			if j < len(g.sections)-1 {
				items[j] += ","
			}
		}
		head := fmt.Sprintf("  %-*s ", width, strings.Join(g.names, ", ")+":")
		b.WriteString(wrapWords(items, head, strings.Repeat(" ", len(head)), 76))
	}
	return b.String()
}

// wrapWords fills words, separated by spaces, into lines of at most width
// bytes (a word is never split), the first beginning with first, the
// others with rest.
func wrapWords(words []string, first, rest string, width int) string {
	var b strings.Builder
	line := first
	start := true
	for _, w := range words {
		if !start && len(line)+1+len(w) > width {
			b.WriteString(line + "\n")
			line, start = rest, true
		}
		if !start {
			line += " "
		}
		line += w
		start = false
	}
	b.WriteString(line)
	return b.String()
}
