package electiontest

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
)

// lister returns e as a backend.Lister, or skips the subtest: the
// priority subtests need to know who waits.
func (w *world) lister(e election.Elector) backend.Lister {
	w.t.Helper()
	l, ok := e.(backend.Lister)
	if !ok {
		w.t.Skipf("%T does not implement backend.Lister: the priority subtests need it to see who waits", e)
	}
	return l
}

// waitQueued waits until the election's waiting candidates are exactly
// ids, in that order, as l lists them.
func (w *world) waitQueued(l backend.Lister, ids ...string) {
	w.t.Helper()
	deadline := time.Now().Add(w.h.Patience)
	for {
		w.settle()
		cs, err := l.Candidates(w.ctx)
		var got []string
		for _, c := range cs {
			got = append(got, c.ID)
		}
		if err == nil && slices.Equal(got, ids) {
			return
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("waiting candidates %v (error %v), want %v within %v", got, err, ids, w.h.Patience)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// pending fails the test if a Campaign has returned.
func (w *world) pending(ch <-chan result, what string) {
	w.t.Helper()
	select {
	case r := <-ch:
		w.t.Fatalf("%s returned %v, %v while it should still wait", what, r.term, r.err)
	default:
	}
}

// Priority: waiting candidates lead highest Priority first, ties first
// come, first served; a candidate of higher priority than the leader waits
// for it to go (no preemption without the option); Candidates lists the
// waiting ones in that order with their priorities.
func testPriority(w *world) {
	a := w.candidate(election.WithPriority(0))
	l := w.lister(a)
	ta := w.lead(a)
	b := w.candidate(election.WithPriority(1))
	rb := w.campaignAsync(w.ctx, b)
	w.waitQueued(l, "c2")
	c := w.candidate(election.WithPriority(5))
	rc := w.campaignAsync(w.ctx, c)
	w.waitQueued(l, "c3", "c2")
	d := w.candidate(election.WithPriority(5))
	rd := w.campaignAsync(w.ctx, d)
	w.waitQueued(l, "c3", "c4", "c2")
	cs, err := l.Candidates(w.ctx)
	if err != nil || len(cs) != 3 || cs[0].Priority != 5 || cs[1].Priority != 5 || cs[2].Priority != 1 ||
		string(cs[0].Value) != "v3" {
		w.t.Errorf("Candidates = %+v, %v; want c3 (priority 5, value v3), c4 (5), c2 (1)", cs, err)
	}
	w.checkValid(ta)
	w.pending(rc, "Campaign of a higher-priority candidate while the leader leads")
	for i, step := range []struct {
		e    election.Elector
		next <-chan result
		id   string
	}{{a, rc, "c3"}, {c, rd, "c4"}, {d, rb, "c2"}} {
		var t *election.Term
		if i == 0 {
			t = ta
		}
		w.resign(step.e, t)
		r := w.await(step.next, w.h.Patience, "Campaign of the best waiting candidate")
		if r.err != nil {
			w.t.Fatalf("Campaign of %s: %v", step.id, r.err)
		}
		if got := r.term.Leader(); got.ID != step.id {
			w.t.Fatalf("after a resign %s leads, want %s (highest priority, then first come)", got.ID, step.id)
		}
		if i < 2 {
			w.pending(rb, "Campaign of the lowest-priority candidate")
		}
	}
}

// Preemption: a leader made WithPreemption(hold) keeps leading while a
// candidate of equal priority waits, and steps down with ErrPreempted for
// one of strictly higher priority once that one has waited hold — not
// sooner — which then leads.
func testPreemption(w *world) {
	hold := w.h.Patience / 20
	a := w.candidate(election.WithPriority(1), election.WithPreemption(hold))
	l := w.lister(a)
	ta := w.lead(a)
	b := w.candidate(election.WithPriority(1))
	rb := w.campaignAsync(w.ctx, b)
	w.waitQueued(l, "c2")
	c := w.candidate(election.WithPriority(3))
	start := time.Now()
	rc := w.campaignAsync(w.ctx, c)
	r := w.await(rc, hold+w.h.Patience, "Campaign of the preempting candidate")
	if r.err != nil {
		w.t.Fatalf("Campaign of the preempting candidate: %v", r.err)
	}
	ended := w.waitDone(ta, w.h.Patience, "preempted leader")
	w.checkEnded(ta, election.ErrPreempted)
	if got := ended.Sub(start); got < hold {
		w.t.Errorf("the leader stepped down %v after the higher-priority candidate began campaigning, before the hold-off %v", got, hold)
	}
	if got := r.term.Leader(); got.ID != "c3" || got.Priority != 3 {
		w.t.Errorf("after preemption %v leads, want c3 (priority 3)", got)
	}
	w.pending(rb, "Campaign of the equal-priority candidate")
	w.waitQueued(l, "c2")
}

// Transfer: a leader hands its leadership to a named waiting candidate,
// ahead of a better one, and then to the best waiting one; the old Term
// ends with ErrTransferred by the time Transfer returns, and the target
// leads with a larger token (the suite's P1–P3 checks run at its
// Campaign's return). A target that is not waiting fails with
// ErrNoCandidate and, with KeepLeading, changes nothing; with StepDown the
// leader resigns.
func testTransfer(w *world) {
	a := w.candidate(election.WithPriority(0))
	if _, ok := a.(backend.Transferer); !ok {
		w.t.Skipf("%T does not implement backend.Transferer", a)
	}
	l := w.lister(a)
	ta := w.lead(a)
	b := w.candidate(election.WithPriority(1))
	rb := w.campaignAsync(w.ctx, b)
	w.waitQueued(l, "c2")
	c := w.candidate(election.WithPriority(5))
	rc := w.campaignAsync(w.ctx, c)
	w.waitQueued(l, "c3", "c2")

	ctx, cancel := context.WithTimeout(w.ctx, w.h.Patience)
	defer cancel()
	err := election.Transfer(ctx, a, ta, "nobody", election.KeepLeading)
	if errors.Is(err, errors.ErrUnsupported) {
		w.t.Skipf("Transfer: %v", err)
	}
	if !errors.Is(err, election.ErrNoCandidate) {
		w.t.Errorf("Transfer to a candidate that is not waiting = %v, want ErrNoCandidate", err)
	}
	w.checkValid(ta)
	if err := election.Transfer(ctx, a, ta, "bad id!", election.KeepLeading); !errors.Is(err, election.ErrInvalidOption) {
		w.t.Errorf("Transfer to an invalid ID = %v, want ErrInvalidOption", err)
	}
	w.checkValid(ta)

	// To a named candidate, ahead of a better one.
	if err := election.Transfer(ctx, a, ta, "c2", election.KeepLeading); err != nil {
		w.t.Fatalf("Transfer to c2: %v", err)
	}
	w.checkEnded(ta, election.ErrTransferred)
	r := w.await(rb, w.h.Patience, "Campaign of the transfer's target")
	if r.err != nil || r.term.Leader().ID != "c2" {
		w.t.Fatalf("the transfer's target: %v, %v", r.term, r.err)
	}
	tb := r.term
	w.pending(rc, "Campaign of the better candidate passed over by the transfer")
	if err := election.Transfer(ctx, a, ta, "c3", election.KeepLeading); !errors.Is(err, election.ErrNotLeader) {
		w.t.Errorf("Transfer of an ended Term = %v, want ErrNotLeader", err)
	}

	// To the best waiting one.
	w.waitQueued(l, "c3")
	if err := election.Transfer(ctx, b, tb, "", election.KeepLeading); err != nil {
		w.t.Fatalf("Transfer to the best: %v", err)
	}
	w.checkEnded(tb, election.ErrTransferred)
	r = w.await(rc, w.h.Patience, "Campaign of the best waiting candidate")
	if r.err != nil || r.term.Leader().ID != "c3" {
		w.t.Fatalf("the best waiting candidate: %v, %v", r.term, r.err)
	}
	tc := r.term

	// Nobody waits: KeepLeading keeps the Term, StepDown resigns it.
	w.waitQueued(l)
	if err := election.Transfer(ctx, c, tc, "", election.KeepLeading); !errors.Is(err, election.ErrNoCandidate) {
		w.t.Errorf("Transfer with nobody waiting = %v, want ErrNoCandidate", err)
	}
	w.checkValid(tc)
	if err := election.Transfer(ctx, c, tc, "c1", election.StepDown); !errors.Is(err, election.ErrNoCandidate) {
		w.t.Errorf("Transfer to a candidate that left, StepDown = %v, want ErrNoCandidate", err)
	}
	w.checkEnded(tc, election.ErrResigned)
	// The election goes on: a new candidate leads.
	w.lead(w.candidate())
}
