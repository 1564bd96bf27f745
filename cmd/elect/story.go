package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
	"github.com/electkit/election/internal/clock"
)

// demoCand is one candidate of the story.
type demoCand struct {
	id       string
	e        election.Elector // as the backend returned it
	silent   atomic.Bool      // crashed: its Campaign calls are not narrated
	errShown atomic.Bool      // one failed Campaign was narrated since it was last up
	// hold is locked while the story crashes this candidate: its
	// OnDemoted, which a backend may call as soon as the crash cuts its
	// link, waits for the crash line, so the story reads in order.
	hold   sync.Mutex
	cancel context.CancelFunc
	done   chan error // Run's result
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
	// The last ID is the preempting candidate's, which joins late.
	ids := make([]string, p.candidates+1)
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
	late := ids[len(ids)-1]
	ids = ids[:len(ids)-1]
	n.setDown(late, true) // not there yet
	s.heading("%d candidates campaign, each in election.Run", len(ids))
	for _, id := range ids {
		e, err := s.be.Candidate(ctx, id, election.WithPreemption(s.holdOff()))
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
	victim.hold.Lock()
	if err := s.be.Crash(victim.e); err != nil {
		victim.hold.Unlock()
		return fmt.Errorf("%s: crash: %w", victim.id, err)
	}
	// Read once it is down: no renewal can move the deadline any more.
	deadline := next.term.Deadline()
	crash := n.record(demoEvent{who: victim.id, kind: evCrash, detail: fmt.Sprintf("no Resign: its lease is valid until %s, and nobody else may lead before", n.stamp(deadline))})
	victim.hold.Unlock()
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
	if _, ok := s.cands[0].e.(backend.Transferer); !ok {
		return nil
	}
	if err := s.dwell(ctx); err != nil {
		return err
	}
	moved, err := s.transfer(ctx, after)
	if err != nil {
		return err
	}
	if err := s.dwell(ctx); err != nil {
		return err
	}
	return s.preempt(ctx, moved, late)
}

// holdOff is how long a candidate of higher priority waits before it
// preempts the leader.
func (s *story) holdOff() time.Duration { return s.ttl / 2 }

// transfer: the leader hands its leadership to the candidate that waited
// least (the last in the queue), ahead of the others.
func (s *story) transfer(ctx context.Context, cur demoEvent) (demoEvent, error) {
	n := s.n
	s.heading("transfer: the leader hands its leadership to a candidate it names")
	leader := s.cand(cur.who)
	// The last of the waiting candidates: the transfer passes over the
	// others.
	var target string
	err := pollUntil(ctx, s.limit, "waiting candidate", func() bool {
		cs, err := election.Candidates(ctx, leader.e)
		if err != nil || len(cs) == 0 {
			return false
		}
		target = cs[len(cs)-1].ID
		return true
	})
	if err != nil {
		return demoEvent{}, err
	}
	mark := n.mark()
	start := n.record(demoEvent{who: leader.id, kind: evTransfer,
		detail: fmt.Sprintf("Transfer to %s: its term ends now, and %s leads next, ahead of the others", target, target)})
	tctx, cancel := context.WithTimeout(ctx, s.limit)
	err = election.Transfer(tctx, leader.e, cur.term, target, election.KeepLeading)
	cancel()
	if err != nil {
		return demoEvent{}, fmt.Errorf("%s: Transfer to %s: %w", leader.id, target, err)
	}
	next, err := n.waitEvent(ctx, s.limit, mark, "leader after the transfer", func(ev demoEvent) bool {
		return ev.kind == evElected && ev.who == target
	})
	if err != nil {
		return demoEvent{}, err
	}
	n.record(demoEvent{who: next.who, kind: evHandover, detail: fmt.Sprintf("%s → %s in %s, from Transfer to OnElected",
		cur.who, next.who, fmtLatency(next.at-start.at))})
	if err := n.waitSeen(ctx, s.limit, s.live(), next.token); err != nil {
		return demoEvent{}, err
	}
	s.sum = append(s.sum, transition("transfer", cur.who, next.who, cur.token, next.token, next.at-start.at, "Transfer to OnElected"))
	return next, nil
}

// preempt: a candidate of higher priority joins; the leader, made
// WithPreemption, steps down for it once it has waited the hold-off.
func (s *story) preempt(ctx context.Context, cur demoEvent, id string) error {
	n := s.n
	s.heading("preemption: a candidate of higher priority joins")
	e, err := s.be.Candidate(ctx, id, election.WithPriority(10), election.WithPreemption(s.holdOff()))
	if err != nil {
		return fmt.Errorf("candidate %s: %w", id, err)
	}
	c := &demoCand{id: id, e: e, done: make(chan error, 1)}
	s.cands = append(s.cands, c)
	n.setDown(id, false)
	mark := n.mark()
	start := n.record(demoEvent{who: id, kind: evPreempt,
		detail: fmt.Sprintf("priority 10, above the others' 0: %s steps down for it after a hold-off of %v", cur.who, s.holdOff())})
	s.startRun(ctx, c)
	next, err := n.waitEvent(ctx, s.limit, mark, "leader after the preemption", func(ev demoEvent) bool {
		return ev.kind == evElected && ev.who == id
	})
	if err != nil {
		return err
	}
	n.record(demoEvent{who: id, kind: evHandover, detail: fmt.Sprintf("%s → %s in %s, from joining to OnElected",
		cur.who, id, fmtLatency(next.at-start.at))})
	if err := n.waitSeen(ctx, s.limit, s.live(), next.token); err != nil {
		return err
	}
	s.sum = append(s.sum, transition("preemption", cur.who, id, cur.token, next.token, next.at-start.at,
		fmt.Sprintf("joining to OnElected (hold-off %v)", s.holdOff())))
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
			c.hold.Lock()
			defer c.hold.Unlock()
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
	if !clock.Sleep(ctx, s.pause) {
		return ctx.Err()
	}
	return nil
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
		{election.ErrTransferred, "transferred"},
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

// pollUntil asks cond, a question to the store, every few milliseconds
// until it holds, for at most limit.
func pollUntil(ctx context.Context, limit time.Duration, what string, cond func() bool) error {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("no %s within %v", what, limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}
