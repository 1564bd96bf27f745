package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
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
		synopsis: "[--backend NAME] [--algorithm ring|bully] [--candidates N] [--ttl D] [--short]",
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
     follows the new leader.

Then every candidate stops, and a summary lists each change of leader with
its tokens and latency. Backends: ` + strings.Join(names, ", ") + `.`,
		example: `elect demo
elect demo --algorithm bully --ttl 3s
ELECTION_CANDIDATES=3 elect demo --short`,
		setup: func(f *flagSet) func(context.Context, io.Writer) error {
			var df demoFlags
			f.String(&df.backend, "backend", "NAME", defaultDemoBackend, "backend to run the story on: "+strings.Join(names, ", "))
			f.String(&df.algorithm, "algorithm", "NAME", "", "algorithm of the inmem backend: ring or bully (default ring)")
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
		return nil, f.Bad("algorithm", "must be %s", strings.Join(p.backend.algorithms, " or "))
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

// Event kinds of the story. The first five come from the library: Campaign
// calls and Run's callbacks; the others are the story's own actions and
// measurements.
const (
	evCampaign = "campaign" // Campaign was called
	evElected  = "elected"  // OnElected
	evDemoted  = "demoted"  // OnDemoted
	evLeader   = "leader"   // OnLeader
	evError    = "error"    // OnError: a Campaign failed and Run retries
	evResign   = "resign"
	evHandover = "handover"
	evCrash    = "crash"
	evFailover = "failover"
	evRecover  = "recover"
	evShutdown = "shutdown"
)

// demoEvent is one line of the story.
type demoEvent struct {
	at     time.Duration // since the story started
	who    string        // a candidate's ID, or "" for the story itself
	kind   string
	detail string
	token  uint64          // elected, demoted: the term's token
	leader election.Leader // leader: what OnLeader reported
	term   *election.Term  // elected: the term
}

// narrator records the story's events and prints them. Callbacks call it
// from their own goroutines; the story waits on it for what it needs.
//
// OnLeader reports are not printed one by one (every candidate reports
// every change): a line is printed when a report makes every live
// candidate's latest report name the same leader (or none) and they did
// not all agree on it just before.
type narrator struct {
	w     io.Writer
	color bool
	start time.Time
	whoW  int      // width of the candidate column
	order []string // candidate IDs, in order

	mu      sync.Mutex
	events  []demoEvent
	changed chan struct{}              // closed and replaced at every event
	seen    map[string]election.Leader // the latest OnLeader report of each candidate
	down    map[string]bool            // crashed candidates: left out of the agreement
	quiet   bool                       // OnLeader reports are no longer printed
}

func newNarrator(w io.Writer, color bool, ids []string) *narrator {
	n := &narrator{w: w, color: color, start: time.Now(), whoW: len("who"), order: ids,
		changed: make(chan struct{}), seen: map[string]election.Leader{}, down: map[string]bool{}}
	for _, id := range ids {
		n.whoW = max(n.whoW, len(id))
	}
	return n
}

// record adds an event, prints it and wakes the waiters. It returns the
// event with its time.
func (n *narrator) record(ev demoEvent) demoEvent {
	n.mu.Lock()
	defer n.mu.Unlock()
	ev.at = time.Since(n.start)
	n.events = append(n.events, ev)
	close(n.changed)
	n.changed = make(chan struct{})
	if ev.kind != evLeader {
		n.printLocked(ev.at, ev.who, ev.kind, ev.detail)
		return ev
	}
	before, agreed := n.agreedLocked()
	n.seen[ev.who] = ev.leader
	now, agree := n.agreedLocked()
	if n.quiet || !agree || (agreed && before.Equal(now)) {
		return ev
	}
	what := "none"
	if !now.IsZero() {
		what = fmt.Sprintf("%s (token %d)", now.ID, now.Token)
	}
	at := "every candidate"
	if live := n.liveLocked(); len(live) < len(n.order) {
		at = "every live candidate: " + strings.Join(live, " ")
	}
	n.printLocked(ev.at, "*", evLeader, fmt.Sprintf("%s, as OnLeader now reports at %s", what, at))
	return ev
}

// agreedLocked returns the leader that every live candidate's latest
// OnLeader report names, if they have all reported and agree.
func (n *narrator) agreedLocked() (election.Leader, bool) {
	var l election.Leader
	first := true
	for _, id := range n.liveLocked() {
		got, ok := n.seen[id]
		if !ok || (!first && !got.Equal(l)) {
			return election.Leader{}, false
		}
		l, first = got, false
	}
	return l, !first
}

func (n *narrator) liveLocked() []string {
	var ids []string
	for _, id := range n.order {
		if !n.down[id] {
			ids = append(ids, id)
		}
	}
	return ids
}

// setDown marks a candidate crashed (or back up).
func (n *narrator) setDown(id string, down bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.down[id] = down
}

// ANSI colours, used only when stdout is a terminal.
const (
	ansiReset  = "\x1b[0m"
	ansiBold   = "\x1b[1m"
	ansiDim    = "\x1b[2m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiCyan   = "\x1b[36m"
)

func (n *narrator) paint(code, s string) string {
	if !n.color || code == "" {
		return s
	}
	return code + s + ansiReset
}

var eventColors = map[string]string{
	evElected: ansiGreen, evDemoted: ansiYellow, evLeader: ansiDim, evError: ansiRed,
	evCrash: ansiRed, evResign: ansiCyan, evHandover: ansiCyan, evFailover: ansiCyan, evRecover: ansiCyan,
}

func (n *narrator) printLocked(at time.Duration, who, kind, detail string) {
	if who == "" {
		who = "-"
	}
	fmt.Fprintf(n.w, "%7.3fs  %-*s  %s  %s\n", at.Seconds(), n.whoW, who,
		n.paint(eventColors[kind], fmt.Sprintf("%-8s", kind)), detail)
}

// heading prints the title of a step of the story.
func (n *narrator) heading(format string, args ...any) {
	n.mu.Lock()
	defer n.mu.Unlock()
	fmt.Fprintf(n.w, "\n%s\n", n.paint(ansiBold, fmt.Sprintf("── "+format, args...)))
}

// columns prints the header of the event columns.
func (n *narrator) columns() {
	n.mu.Lock()
	defer n.mu.Unlock()
	fmt.Fprintf(n.w, "%8s  %-*s  %-8s  %s\n", "elapsed", n.whoW, "who", "event", "detail")
}

// stamp formats a point in time relative to the story's start: "+1.234s".
func (n *narrator) stamp(t time.Time) string {
	return fmt.Sprintf("+%.3fs", t.Sub(n.start).Seconds())
}

// mark returns the number of events so far: waits look at later ones.
func (n *narrator) mark() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.events)
}

// leading returns the candidates whose OnElected has no OnDemoted yet.
func (n *narrator) leading() map[string]bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	terms := map[uint64]string{}
	for _, ev := range n.events {
		switch ev.kind {
		case evElected:
			terms[ev.token] = ev.who
		case evDemoted:
			delete(terms, ev.token)
		}
	}
	out := map[string]bool{}
	for _, who := range terms {
		out[who] = true
	}
	return out
}

// silence stops printing OnLeader reports (they are still recorded).
func (n *narrator) silence() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.quiet = true
}

// waitUntil waits until cond, called with the narrator locked after every
// event, holds; or fails after limit, naming what it waited for.
func (n *narrator) waitUntil(ctx context.Context, limit time.Duration, what string, cond func() bool) error {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		n.mu.Lock()
		ok, ch := cond(), n.changed
		n.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return fmt.Errorf("no %s within %v", what, limit)
		}
	}
}

// waitEvent waits for the first event at or after index from that matches.
func (n *narrator) waitEvent(ctx context.Context, limit time.Duration, from int, what string, match func(demoEvent) bool) (demoEvent, error) {
	var got demoEvent
	err := n.waitUntil(ctx, limit, what, func() bool {
		for _, ev := range n.events[from:] {
			if match(ev) {
				got = ev
				return true
			}
		}
		return false
	})
	return got, err
}

// waitSeen waits until every candidate in ids reports the leadership of
// token through OnLeader.
func (n *narrator) waitSeen(ctx context.Context, limit time.Duration, ids []string, token uint64) error {
	return n.waitUntil(ctx, limit, fmt.Sprintf("OnLeader report of token %d at %s", token, strings.Join(ids, " ")), func() bool {
		for _, id := range ids {
			if n.seen[id].Token != token {
				return false
			}
		}
		return true
	})
}

// demoCand is one candidate of the story.
type demoCand struct {
	id       string
	e        election.Elector // as the backend returned it
	silent   atomic.Bool      // crashed: its Campaign calls are not narrated
	errShown atomic.Bool      // one failed Campaign was narrated since it was last up
	cancel   context.CancelFunc
	done     chan error // Run's result
}

// narrated is the Elector that Run gets: it narrates each Campaign call.
type narrated struct {
	election.Elector
	c *demoCand
	n *narrator
}

func (ne narrated) Campaign(ctx context.Context) (*election.Term, error) {
	if !ne.c.silent.Load() && ctx.Err() == nil {
		ne.n.record(demoEvent{who: ne.c.id, kind: evCampaign, detail: "Campaign: stands for election"})
	}
	return ne.Elector.Campaign(ctx)
}

// summaryRow is one line of the summary table.
type summaryRow struct {
	event, change, tokens string
	latency               time.Duration
	note                  string
}

// transition describes a change of leader for the summary: from → to and
// token before → after; from is "" (and before 0) when there was none.
func transition(event, from, to string, before, after uint64, latency time.Duration, note string) summaryRow {
	if from == "" {
		from = "-"
	}
	tb := "-"
	if before != 0 {
		tb = strconv.FormatUint(before, 10)
	}
	return summaryRow{event: event, change: from + " → " + to, tokens: tb + " → " + strconv.FormatUint(after, 10), latency: latency, note: note}
}

// story is one run of the demo.
type story struct {
	be    demoBackend
	n     *narrator
	cands []*demoCand
	ttl   time.Duration // the lease TTL asked of the backend
	pause time.Duration // between two steps: the leader holds office meanwhile
	limit time.Duration // the longest any one step may take
	step  int           // the number of the last step begun
	sum   []summaryRow

	stopOnce sync.Once
	stopErr  error
}

// runDemo runs the story on the plan's backend.
func runDemo(ctx context.Context, w io.Writer, p *demoPlan) error {
	be, err := p.backend.open(ctx, p.cfg)
	if err != nil {
		return fmt.Errorf("starting the %s backend: %w", p.backend.name, err)
	}
	ids := make([]string, p.candidates)
	for i := range ids {
		ids[i] = "c" + strconv.Itoa(i+1)
	}
	s := &story{
		be:  be,
		n:   newNarrator(w, isTerminal(w), ids),
		ttl: p.cfg.TTL,
		// A failover takes the lease TTL plus the backend's detection;
		// anything beyond a few TTLs is a failure, not a slow step.
		limit: 5*p.cfg.TTL + 10*time.Second,
	}
	if !p.short {
		s.pause = demoPause
	}
	fmt.Fprintf(w, "elect demo: %d candidates on the %s backend (%s)\n\n", p.candidates, be.Name(), be.Describe())
	s.n.columns()
	err = s.play(ctx, ids)
	if serr := s.shutdown(); err == nil {
		err = serr
	}
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return errors.New("interrupted")
		}
		return err
	}
	s.writeSummary(w)
	return nil
}

// play runs the steps of the story.
func (s *story) play(ctx context.Context, ids []string) error {
	n := s.n
	s.heading("%d candidates campaign, each in election.Run", len(ids))
	for _, id := range ids {
		e, err := s.be.Candidate(ctx, id)
		if err != nil {
			return fmt.Errorf("candidate %s: %w", id, err)
		}
		s.cands = append(s.cands, &demoCand{id: id, e: e, done: make(chan error, 1)})
	}
	mark, t0 := n.mark(), time.Since(n.start)
	for _, c := range s.cands {
		s.startRun(ctx, c)
	}
	first, err := n.waitEvent(ctx, s.limit, mark, "leader", func(ev demoEvent) bool { return ev.kind == evElected })
	if err != nil {
		return err
	}
	if err := n.waitSeen(ctx, s.limit, s.live(), first.token); err != nil {
		return err
	}
	s.sum = append(s.sum, transition("election", "", first.who, 0, first.token, first.at-t0, "Run to OnElected"))

	if err := s.dwell(ctx); err != nil {
		return err
	}
	s.heading("graceful handover: the leader resigns")
	leader := s.cand(first.who)
	mark = n.mark()
	resign := n.record(demoEvent{who: leader.id, kind: evResign, detail: "Resign: its term ends now, so the next candidate can lead at once"})
	rctx, cancel := context.WithTimeout(ctx, s.limit)
	err = leader.e.Resign(rctx)
	cancel()
	if err != nil {
		return fmt.Errorf("%s: Resign: %w", leader.id, err)
	}
	next, err := n.waitEvent(ctx, s.limit, mark, "leader after the handover", func(ev demoEvent) bool {
		return ev.kind == evElected && ev.token != first.token
	})
	if err != nil {
		return err
	}
	n.record(demoEvent{who: next.who, kind: evHandover, detail: fmt.Sprintf("%s → %s in %s, from Resign to OnElected",
		first.who, next.who, fmtLatency(next.at-resign.at))})
	if err := n.waitSeen(ctx, s.limit, s.live(), next.token); err != nil {
		return err
	}
	s.sum = append(s.sum, transition("handover", first.who, next.who, first.token, next.token, next.at-resign.at, "Resign to OnElected"))

	if err := s.dwell(ctx); err != nil {
		return err
	}
	s.heading("crash: the leader's process dies without resigning")
	victim := s.cand(next.who)
	mark = n.mark()
	victim.silent.Store(true)
	n.setDown(victim.id, true)
	if err := s.be.Crash(victim.e); err != nil {
		return fmt.Errorf("%s: crash: %w", victim.id, err)
	}
	// Read once it is down: no renewal can move the deadline any more.
	deadline := next.term.Deadline()
	crash := n.record(demoEvent{who: victim.id, kind: evCrash, detail: fmt.Sprintf("no Resign: its lease is valid until %s, and nobody else may lead before", n.stamp(deadline))})
	after, err := n.waitEvent(ctx, s.limit, mark, "leader after the crash", func(ev demoEvent) bool {
		return ev.kind == evElected && ev.token != next.token
	})
	if err != nil {
		return err
	}
	margin := after.at - deadline.Sub(n.start)
	relation := fmt.Sprintf("%s after the old lease ended", fmtLatency(margin))
	if margin < 0 {
		relation = fmt.Sprintf("%s BEFORE the old lease ended", fmtLatency(-margin))
	}
	n.record(demoEvent{who: after.who, kind: evFailover, detail: fmt.Sprintf("%s → %s in %s, from the crash to OnElected: %s",
		victim.id, after.who, fmtLatency(after.at-crash.at), relation)})
	if err := n.waitSeen(ctx, s.limit, s.live(), after.token); err != nil {
		return err
	}
	s.sum = append(s.sum, transition("failover", victim.id, after.who, next.token, after.token, after.at-crash.at,
		fmt.Sprintf("crash to OnElected (lease TTL %v)", s.ttl)))

	if rec, ok := s.be.(demoRecoverer); ok {
		if err := s.dwell(ctx); err != nil {
			return err
		}
		s.heading("recovery: the crashed candidate's process restarts")
		// Back in the agreement before it is back up: its first OnLeader
		// report after the recovery must count.
		n.setDown(victim.id, false)
		start := n.record(demoEvent{who: victim.id, kind: evRecover, detail: "back up: its Run campaigns again, and it follows the leader"})
		if err := rec.Recover(victim.e); err != nil {
			return fmt.Errorf("%s: recover: %w", victim.id, err)
		}
		victim.errShown.Store(false)
		victim.silent.Store(false)
		if err := n.waitSeen(ctx, s.limit, []string{victim.id}, after.token); err != nil {
			return err
		}
		seenAt := s.seenAt(victim.id, after.token)
		s.sum = append(s.sum, summaryRow{event: "recovery", change: victim.id + " back, " + after.who + " leads on",
			tokens: strconv.FormatUint(after.token, 10) + " kept", latency: seenAt - start.at,
			note: fmt.Sprintf("Recover until %s's OnLeader reports %s", victim.id, after.who)})
	}
	return nil
}

// startRun starts election.Run for c, with callbacks that narrate. The Run
// ends only when shutdown cancels it, even if ctx ends first: shutdown
// stops the Runs in an order that elects no one on the way out.
func (s *story) startRun(ctx context.Context, c *demoCand) {
	n := s.n
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.cancel = cancel
	cb := election.Callbacks{
		OnElected: func(_ context.Context, t *election.Term) {
			n.record(demoEvent{who: c.id, kind: evElected, token: t.Token(), term: t,
				detail: fmt.Sprintf("token %d, lease valid until %s (OnElected)", t.Token(), n.stamp(t.Deadline()))})
		},
		OnDemoted: func(t *election.Term) {
			n.record(demoEvent{who: c.id, kind: evDemoted, token: t.Token(),
				detail: fmt.Sprintf("token %d is over: %s (OnDemoted)", t.Token(), why(t.Err()))})
		},
		OnLeader: func(l election.Leader) {
			n.record(demoEvent{who: c.id, kind: evLeader, leader: l})
		},
		OnError: func(err error) {
			if c.errShown.CompareAndSwap(false, true) {
				n.record(demoEvent{who: c.id, kind: evError, detail: fmt.Sprintf("Campaign failed: %v; Run retries with backoff", err)})
			}
		},
	}
	go func() { c.done <- election.Run(rctx, narrated{Elector: c.e, c: c, n: n}, cb) }()
}

// shutdown stops every Run, closes every candidate and the backend. It
// runs once, on every path out of the story. The followers' Runs stop
// first: when the leader's Run then resigns, nobody is campaigning, and no
// one is elected on the way out.
func (s *story) shutdown() error {
	s.stopOnce.Do(func() {
		n := s.n
		s.heading("shutdown")
		n.silence()
		n.record(demoEvent{kind: evShutdown, detail: "the followers' Runs are canceled, then the leader's: it resigns"})
		leading := n.leading()
		var followers, leaders []*demoCand
		for _, c := range s.cands {
			switch {
			case c.cancel == nil:
			case leading[c.id]:
				leaders = append(leaders, c)
			default:
				followers = append(followers, c)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.limit)
		defer cancel()
		errs := append(stopRuns(ctx, followers), stopRuns(ctx, leaders)...)
		for _, c := range s.cands {
			if err := c.e.Close(); err != nil {
				errs = append(errs, fmt.Errorf("%s: Close: %w", c.id, err))
			}
		}
		if err := s.be.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing the %s backend: %w", s.be.Name(), err))
		}
		s.stopErr = errors.Join(errs...)
		if s.stopErr == nil {
			n.record(demoEvent{kind: evShutdown, detail: "every Run returned; candidates and backend closed"})
		}
	})
	return s.stopErr
}

// stopRuns cancels the Runs of cs and waits until they return, or ctx ends.
func stopRuns(ctx context.Context, cs []*demoCand) []error {
	for _, c := range cs {
		c.cancel()
	}
	var errs []error
	for _, c := range cs {
		select {
		case err := <-c.done:
			if err != nil && !errors.Is(err, context.Canceled) {
				errs = append(errs, fmt.Errorf("%s: Run: %w", c.id, err))
			}
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("%s: Run did not return after its cancellation", c.id))
		}
	}
	return errs
}

// heading begins the next step of the story.
func (s *story) heading(format string, args ...any) {
	s.step++
	s.n.heading("%d. %s", s.step, fmt.Sprintf(format, args...))
}

// dwell lets the leader hold office for a while between two steps (not
// with --short), renewing its lease meanwhile.
func (s *story) dwell(ctx context.Context) error {
	if s.pause <= 0 {
		return nil
	}
	t := time.NewTimer(s.pause)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *story) cand(id string) *demoCand {
	for _, c := range s.cands {
		if c.id == id {
			return c
		}
	}
	return nil
}

// live returns the IDs of the candidates that are not crashed.
func (s *story) live() []string {
	s.n.mu.Lock()
	defer s.n.mu.Unlock()
	return s.n.liveLocked()
}

// seenAt returns when id's OnLeader first reported token.
func (s *story) seenAt(id string, token uint64) time.Duration {
	s.n.mu.Lock()
	defer s.n.mu.Unlock()
	for _, ev := range s.n.events {
		if ev.kind == evLeader && ev.who == id && ev.leader.Token == token {
			return ev.at
		}
	}
	return 0
}

func (s *story) writeSummary(w io.Writer) {
	fmt.Fprintf(w, "\n%s\n", s.n.paint(ansiBold, "summary"))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  event\tfrom → to\ttoken before → after\tlatency\tmeasured")
	for _, r := range s.sum {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", r.event, r.change, r.tokens, fmtLatency(r.latency), r.note)
	}
	tw.Flush()
}

// why says in words why a term ended.
func why(err error) string {
	for _, c := range []struct {
		err  error
		text string
	}{
		{election.ErrResigned, "resigned"},
		{election.ErrLeaseExpired, "lease expired (no renewal within the lease)"},
		{election.ErrSessionLost, "session lost"},
		{election.ErrPreempted, "preempted"},
		{election.ErrClosed, "closed"},
		{election.ErrUnhealthy, "unhealthy"},
	} {
		if errors.Is(err, c.err) {
			return c.text
		}
	}
	if err == nil {
		return "ended"
	}
	return err.Error()
}

// fmtLatency rounds d for reading: 1.2ms, 35ms, 1.32s.
func fmtLatency(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < 10*time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(10 * time.Millisecond).String()
}

// isTerminal reports whether w is a terminal that takes colours: a
// character device, with NO_COLOR unset.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	if _, set := os.LookupEnv("NO_COLOR"); set {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
