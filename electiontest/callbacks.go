package electiontest

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/electkit/election"
)

// event is one callback of Run, as the suite records it.
type event struct {
	who   string
	kind  string // "elected", "elected-returned", "demoted"
	token uint64
}

// checked is an Elector whose Campaign goes through the world's checks, so
// that Terms won under Run are judged like every other.
type checked struct {
	election.Elector
	w *world
}

func (c checked) Campaign(ctx context.Context) (*election.Term, error) {
	return c.w.campaign(ctx, c.Elector)
}

// checkCallbacks checks P5 on a log of Run callbacks.
func (w *world) checkCallbacks(events []event) {
	w.t.Helper()
	type state struct {
		open     bool
		returned bool
		token    uint64
	}
	st := map[string]*state{}
	var lastElected uint64
	for i, ev := range events {
		s := st[ev.who]
		if s == nil {
			s = &state{}
			st[ev.who] = s
		}
		switch ev.kind {
		case "elected":
			if s.open {
				w.t.Errorf("event %d: %s OnElected(%d) while its term %d is open", i, ev.who, ev.token, s.token)
			}
			if ev.token <= lastElected {
				w.t.Errorf("event %d: OnElected token %d not above the previous %d", i, ev.token, lastElected)
			}
			lastElected = ev.token
			*s = state{open: true, token: ev.token}
		case "elected-returned":
			if !s.open || s.token != ev.token {
				w.t.Errorf("event %d: %s OnElected(%d) returned outside its term", i, ev.who, ev.token)
			}
			s.returned = true
		case "demoted":
			if !s.open || s.token != ev.token {
				w.t.Errorf("event %d: %s OnDemoted(%d) without a matching OnElected", i, ev.who, ev.token)
			}
			if !s.returned {
				w.t.Errorf("event %d: %s OnDemoted(%d) before OnElected returned", i, ev.who, ev.token)
			}
			s.open = false
		}
	}
	for who, s := range st {
		if s.open {
			w.t.Errorf("%s: OnElected(%d) never got its OnDemoted", who, s.token)
		}
	}
	if lastElected == 0 {
		w.t.Errorf("no OnElected at all")
	}
}

// StopTime is how long the OnElected of RunStopsWorkFirst takes to stop
// once its ctx has ended: work winding down, which the next leader must
// not overlap.
const StopTime = 200 * time.Millisecond

// runAsync runs election.Run for e on a goroutine of the suite's, its
// Campaigns checked like every other; the channel gets what Run returned.
func (w *world) runAsync(ctx context.Context, e election.Elector, cb election.Callbacks) <-chan error {
	done := make(chan error, 1)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		done <- election.Run(ctx, checked{e, w}, cb)
	}()
	return done
}

// awaitRun waits for Run to return context.Canceled after its ctx was
// canceled.
func (w *world) awaitRun(done <-chan error, d time.Duration, what string) {
	w.t.Helper()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			w.t.Errorf("%s: Run returned %v, want context.Canceled", what, err)
		}
	case <-time.After(d):
		w.t.Fatalf("%s: Run did not return within %v of its ctx's end", what, d)
	}
}

// awaitTerm waits for a Term sent by an OnElected.
func (w *world) awaitTerm(ch <-chan *election.Term, d time.Duration, what string) *election.Term {
	w.t.Helper()
	select {
	case t := <-ch:
		return t
	case <-time.After(d):
		w.t.Fatalf("%s: no OnElected within %v", what, d)
		return nil
	}
}

// RunStopsWorkFirst: when the ctx of election.Run ends while its candidate
// leads, the work stops before the leadership is handed over: OnElected's
// ctx ends, OnElected takes StopTime to return, and only then does the
// waiting candidate's Campaign return; Run returns.
func testRunStopsWorkFirst(w *world) {
	a, b := w.candidate(), w.candidate()
	var (
		mu    sync.Mutex
		order []string
	)
	note := func(what string) {
		mu.Lock()
		order = append(order, what)
		mu.Unlock()
	}
	elected := make(chan *election.Term, 1)
	ctx, cancel := context.WithCancel(w.ctx)
	defer cancel()
	done := w.runAsync(ctx, a, election.Callbacks{
		OnElected: func(ctx context.Context, t *election.Term) {
			select {
			case elected <- t:
			default:
			}
			<-ctx.Done()
			<-time.After(StopTime) // the work winds down
			note("OnElected returned")
		},
	})
	ta := w.awaitTerm(elected, w.h.Patience, "Run of the first candidate")
	rb := make(chan result, 1)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		t, err := w.campaign(w.ctx, b)
		note("Campaign returned")
		rb <- result{t, err}
	}()
	w.settle()
	cancel()
	r := w.await(rb, w.h.Failover+w.h.Patience+StopTime, "Campaign of the waiting candidate after the leader's Run ended")
	if r.err != nil {
		w.t.Fatalf("waiting candidate: %v", r.err)
	}
	w.awaitRun(done, w.h.Patience+StopTime, "leader")
	w.checkEnded(ta, election.ErrResigned)
	mu.Lock()
	defer mu.Unlock()
	if len(order) != 2 || order[0] != "OnElected returned" {
		w.t.Errorf("order of events %q; want the leader's OnElected to return before the waiting candidate's Campaign does", order)
	}
}

// StepDownInOnElected: under election.Run, OnElected steps down with
// e.Resign(ctx), its own ctx: Resign returns nil, the waiting candidate
// leads within Handover, OnDemoted sees ErrResigned, and Run goes on
// campaigning until its ctx ends.
func testStepDownInOnElected(w *world) {
	a, b := w.candidate(), w.candidate()
	elected := make(chan *election.Term, 1)
	stepDown := make(chan struct{})
	resigned := make(chan error, 1)
	demoted := make(chan error, 1)
	ctx, cancel := context.WithCancel(w.ctx)
	defer cancel()
	done := w.runAsync(ctx, a, election.Callbacks{
		OnElected: func(ctx context.Context, t *election.Term) {
			select {
			case elected <- t:
			default:
				return // a later term: nothing to do
			}
			select {
			case <-stepDown:
				resigned <- a.Resign(ctx)
			case <-ctx.Done():
			}
			<-ctx.Done()
		},
		OnDemoted: func(t *election.Term) {
			select {
			case demoted <- t.Err():
			default:
			}
		},
	})
	ta := w.awaitTerm(elected, w.h.Patience, "Run of the first candidate")
	rb := w.campaignAsync(w.ctx, b)
	w.settle()
	close(stepDown)
	var at time.Time
	select {
	case err := <-resigned:
		at = time.Now()
		if err != nil {
			w.t.Errorf("Resign with OnElected's ctx = %v, want nil", err)
		}
	case <-time.After(w.h.Patience):
		w.t.Fatalf("Resign with OnElected's ctx did not return within %v", w.h.Patience)
	}
	r := w.await(rb, w.h.Failover+w.h.Patience, "Campaign of the waiting candidate after the leader stepped down")
	if r.err != nil {
		w.t.Fatalf("waiting candidate: %v", r.err)
	}
	if d := time.Since(at); d >= w.h.Handover {
		w.t.Errorf("handover took %v after Resign returned, want under %v (P6: one store round trip, not a TTL)", d, w.h.Handover)
	}
	select {
	case err := <-demoted:
		if !errors.Is(err, election.ErrResigned) {
			w.t.Errorf("OnDemoted after stepping down: the Term ended with %v, want ErrResigned", err)
		}
	case <-time.After(w.h.Patience):
		w.t.Fatalf("no OnDemoted within %v of stepping down", w.h.Patience)
	}
	w.checkEnded(ta, election.ErrResigned)
	cancel()
	w.awaitRun(done, w.h.Patience, "after stepping down")
}
