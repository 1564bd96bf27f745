package electiontest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/electkit/election"
)

// won is one Campaign result of a candidate campaigning among others.
type won struct {
	e election.Elector
	result
}

// campaignAll starts a Campaign for each of es, all reporting to one channel.
func (w *world) campaignAll(ctx context.Context, es ...election.Elector) chan won {
	ch := make(chan won, len(es)+1)
	for _, e := range es {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			t, err := w.campaign(ctx, e)
			ch <- won{e, result{t, err}}
		}()
	}
	return ch
}

func (w *world) awaitWon(ch <-chan won, d time.Duration, what string) won {
	w.t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			w.t.Fatalf("%s: Campaign failed: %v", what, r.err)
		}
		return r
	case <-time.After(d):
		w.t.Fatalf("%s: no candidate led within %v", what, d)
		return won{}
	}
}

// sentinel reports whether err, a Term's end, is one of package election's
// errors through errors.Is: what a caller switches on.
func sentinel(err error) bool {
	for _, s := range []error{election.ErrResigned, election.ErrClosed, election.ErrLeaseExpired,
		election.ErrSessionLost, election.ErrUnhealthy, election.ErrPreempted, election.ErrTransferred} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// OneLeader: five candidates campaign at once; one leads, and every other
// one leads only after its predecessor resigned; every candidate gets its
// turn; Leader and Observe name the one that leads.
func testOneLeader(w *world) {
	const n = 5
	var es []election.Elector
	for range n {
		es = append(es, w.candidate())
	}
	watcher := w.candidate()
	rec := w.observe(w.ctx, watcher)
	ch := w.campaignAll(w.ctx, es...)
	seen := map[election.Elector]bool{}
	for i := range n {
		r := w.awaitWon(ch, w.h.Patience, fmt.Sprintf("leader #%d of %d", i+1, n))
		if seen[r.e] {
			w.t.Fatalf("candidate %v led twice", r.term.Leader().ID)
		}
		seen[r.e] = true
		w.sees(rec, r.term.Leader())
		for _, e := range append(es, watcher) {
			l, err := e.Leader(w.ctx)
			if err != nil || !l.Equal(r.term.Leader()) {
				w.t.Errorf("Leader() = %v, %v; want %v", l, err, r.term.Leader())
			}
		}
		w.checkValid(r.term)
		w.resign(r.e, r.term)
	}
}

// ResignHandsOver: Resign ends the Term with ErrResigned before it returns,
// and the waiting candidate leads with a larger token. Resign when not a
// candidate is a no-op.
func testResignHandsOver(w *world) {
	a, b := w.candidate(), w.candidate()
	if err := b.Resign(w.ctx); err != nil {
		w.t.Errorf("Resign by a non-candidate: %v, want nil", err)
	}
	ta := w.lead(a)
	rb := w.campaignAsync(w.ctx, b)
	w.settle()
	w.resign(a, ta)
	r := w.await(rb, w.h.Patience, "Campaign of the waiting candidate after Resign")
	if r.err != nil {
		w.t.Fatalf("waiting candidate: %v", r.err)
	}
	if r.term.Token() <= ta.Token() {
		w.t.Errorf("token after handover %d, not larger than %d", r.term.Token(), ta.Token())
	}
	if got := r.term.Leader(); got.ID != "c2" || string(got.Value) != "v2" || got.Priority != 2 {
		w.t.Errorf("new leader %+v, want ID c2, Value v2, Priority 2", got)
	}
	// The resigned candidate can campaign again: it queues behind b and
	// leads with a new, larger token once b resigns.
	ra := w.campaignAsync(w.ctx, a)
	w.settle()
	w.resign(b, r.term)
	r2 := w.await(ra, w.h.Patience, "re-campaign after resigning")
	if r2.err != nil {
		w.t.Fatalf("re-campaign: %v", r2.err)
	}
	if r2.term.Token() <= r.term.Token() {
		w.t.Errorf("re-campaign token %d, not larger than %d", r2.term.Token(), r.term.Token())
	}
	if err := ta.Err(); !errors.Is(err, election.ErrResigned) {
		w.t.Errorf("old Term revived or changed: Err %v", err)
	}
}

// ResignHandsOverPromptly: after Resign returns, the waiting candidate leads
// within Handover (P6), not after a TTL: the resigned key is deleted, not
// left to expire.
func testResignHandsOverPromptly(w *world) {
	a, b := w.candidate(), w.candidate()
	ta := w.lead(a)
	rb := w.campaignAsync(w.ctx, b)
	w.settle()
	w.resign(a, ta)
	resigned := time.Now()
	r := w.await(rb, w.h.Failover+w.h.Patience, "Campaign of the waiting candidate after Resign")
	if r.err != nil {
		w.t.Fatalf("waiting candidate: %v", r.err)
	}
	if d := time.Since(resigned); d >= w.h.Handover {
		w.t.Errorf("handover took %v after Resign returned, want under %v (P6: one store round trip, not a TTL)", d, w.h.Handover)
	}
	// Close hands over as promptly.
	rc := w.campaignAsync(w.ctx, a)
	w.settle()
	if err := w.close(b); err != nil {
		w.t.Errorf("Close: %v", err)
	}
	closed := time.Now()
	r = w.await(rc, w.h.Failover+w.h.Patience, "Campaign of the waiting candidate after Close")
	if r.err != nil {
		w.t.Fatalf("waiting candidate: %v", r.err)
	}
	if d := time.Since(closed); d >= w.h.Handover {
		w.t.Errorf("handover took %v after Close returned, want under %v", d, w.h.Handover)
	}
}

// ResignWhileWaiting: Resign of a waiting candidate withdraws it: its
// Campaign returns an error wrapping ErrResigned and it never leads.
func testResignWhileWaiting(w *world) {
	a, b, c := w.candidate(), w.candidate(), w.candidate()
	ta := w.lead(a)
	rb := w.campaignAsync(w.ctx, b)
	w.settle()
	// Outside a bubble the Campaign may not have begun when Resign runs
	// (then Resign is a no-op): resign again until the Campaign reports.
	var r result
	retry := w.h.Handover
	if w.h.Bubble {
		retry = w.h.Patience // settled: one Resign is enough
	}
	deadline := time.After(w.h.Patience)
	for got := false; !got; {
		if err := b.Resign(w.ctx); err != nil {
			w.t.Errorf("Resign of a waiting candidate: %v", err)
		}
		select {
		case r = <-rb:
			got = true
		case <-time.After(retry):
		case <-deadline:
			w.t.Fatalf("Campaign of a candidate that resigned while waiting: no result within %v", w.h.Patience)
		}
	}
	if !errors.Is(r.err, election.ErrResigned) {
		w.t.Errorf("Campaign after Resign while waiting = %v, %v; want ErrResigned", r.term, r.err)
	}
	rc := w.campaignAsync(w.ctx, c)
	w.settle()
	w.resign(a, ta)
	r = w.await(rc, w.h.Failover+w.h.Patience, "Campaign behind the withdrawn candidate")
	if r.err != nil {
		w.t.Fatalf("candidate behind the withdrawn one: %v", r.err)
	}
	if id := r.term.Leader().ID; id != "c3" {
		w.t.Errorf("leader %s, want c3", id)
	}
}

// CampaignWhileLeading: Campaign by the leader returns its current Term.
func testCampaignWhileLeading(w *world) {
	a := w.candidate()
	ta := w.lead(a)
	t2, err := w.campaign(w.ctx, a)
	if err != nil || t2 != ta {
		w.t.Errorf("Campaign while leading = %v, %v; want the current Term %v", t2, err, ta)
	}
	w.checkValid(ta)
}

// LeaderStaysLeader: renewals keep a healthy leader's Term valid for many
// TTLs; each renewal moves the deadline forward and reaches the
// after-renewal hook (P7).
func testLeaderStaysLeader(w *world) {
	var (
		mu   sync.Mutex
		seen []election.Renewal
	)
	a := w.candidate(election.WithAfterRenew(func(r election.Renewal) {
		mu.Lock()
		seen = append(seen, r)
		mu.Unlock()
	}))
	ta := w.lead(a)
	first := ta.Deadline()
	hold := 2 * w.h.Failover
	select {
	case <-ta.Done():
		w.t.Fatalf("a healthy leader's Term ended after %v: %v", hold, ta.Err())
	case <-time.After(hold):
	}
	w.checkValid(ta)
	if !ta.Deadline().After(first) {
		w.t.Errorf("Deadline did not move in %v of renewals: %v", hold, ta.Deadline())
	}
	mu.Lock()
	defer mu.Unlock()
	ok := 0
	var last time.Time
	for _, r := range seen {
		if r.Err != nil {
			continue
		}
		ok++
		if r.Leader.Token != ta.Token() {
			w.t.Errorf("Renewal for token %d, want %d", r.Leader.Token, ta.Token())
		}
		if r.Deadline.Before(last) {
			w.t.Errorf("Renewal deadlines went backwards: %v after %v", r.Deadline, last)
		}
		last = r.Deadline
	}
	if ok < 2 {
		w.t.Errorf("after-renewal hook saw %d successful renewals in %v, want at least 2", ok, hold)
	}
}

// UnhealthyHook: a before-renewal hook that fails makes the leader step
// down with ErrUnhealthy, and a waiting candidate takes over.
func testUnhealthyHook(w *world) {
	var sick atomic.Bool
	a := w.candidate(election.WithBeforeRenew(func(context.Context, *election.Term) error {
		if sick.Load() {
			return errors.New("disk full")
		}
		return nil
	}))
	b := w.candidate()
	ta := w.lead(a)
	rb := w.campaignAsync(w.ctx, b)
	w.settle()
	sick.Store(true)
	w.waitDone(ta, w.h.Failover, "leader whose health check fails")
	w.checkEnded(ta, election.ErrUnhealthy)
	r := w.await(rb, w.h.Failover+w.h.Patience, "Campaign of the waiting candidate after the leader stepped down")
	if r.err != nil {
		w.t.Fatalf("waiting candidate: %v", r.err)
	}
}

// SuccessiveHandovers: three candidates pass leadership around Handovers
// times; tokens strictly increase; every observer sees every leader, in
// order; no two Terms are ever valid at once (checked at each Campaign).
func testSuccessiveHandovers(w *world) {
	es := []election.Elector{w.candidate(), w.candidate(), w.candidate()}
	var recs []*recorder
	for _, e := range es {
		recs = append(recs, w.observe(w.ctx, e))
	}
	ch := w.campaignAll(w.ctx, es...)
	var leaders []election.Leader
	for i := range w.h.Handovers + 1 {
		r := w.awaitWon(ch, w.h.Patience, fmt.Sprintf("leader #%d", i+1))
		leaders = append(leaders, r.term.Leader())
		for _, rec := range recs {
			w.sees(rec, r.term.Leader())
		}
		w.resign(r.e, r.term)
		if i < w.h.Handovers {
			w.wg.Add(1)
			go func() {
				defer w.wg.Done()
				t, err := w.campaign(w.ctx, r.e)
				ch <- won{r.e, result{t, err}}
			}()
		}
	}
	for i := 1; i < len(leaders); i++ {
		if leaders[i].Token <= leaders[i-1].Token {
			w.t.Errorf("handover %d: token %d after %d", i, leaders[i].Token, leaders[i-1].Token)
		}
	}
	for i, rec := range recs {
		vals, _, _ := rec.snapshot()
		var got []election.Leader
		for _, v := range vals {
			if !v.IsZero() {
				got = append(got, v)
			}
		}
		// After the last resign a queued candidate may lead: one more.
		if len(got) < len(leaders) || len(got) > len(leaders)+1 {
			w.t.Errorf("observer %d saw %d leaders, want %d: %v", i, len(got), len(leaders), got)
			continue
		}
		for j := range leaders {
			if !got[j].Equal(leaders[j]) {
				w.t.Errorf("observer %d: leader #%d is %v, want %v", i, j, got[j], leaders[j])
				break
			}
		}
	}
}

// CampaignHonoursContext: a Campaign whose ctx ends returns ctx.Err() and
// leaves no candidacy behind: the quitter never leads or shows as leader,
// and can campaign again later.
func testCampaignHonoursContext(w *world) {
	a, b, c := w.candidate(), w.candidate(), w.candidate()
	canceled, cancel := context.WithCancel(w.ctx)
	cancel()
	if t, err := w.campaign(canceled, b); err != context.Canceled || t != nil {
		w.t.Errorf("Campaign with a canceled ctx = %v, %v; want nil, context.Canceled", t, err)
	}
	if l, err := a.Leader(w.ctx); !errors.Is(err, election.ErrNoLeader) {
		w.t.Errorf("Leader after a canceled Campaign = %v, %v; want ErrNoLeader", l, err)
	}
	ta := w.lead(a)
	rec := w.observe(w.ctx, c)
	ctx, cancel := context.WithTimeout(w.ctx, w.h.Patience/20)
	defer cancel()
	r := w.await(w.campaignAsync(ctx, b), w.h.Patience, "Campaign with a ctx that times out")
	if r.err != ctx.Err() || !errors.Is(r.err, context.DeadlineExceeded) {
		w.t.Errorf("Campaign after its ctx ended = %v, %v; want ctx.Err() (context.DeadlineExceeded) as is", r.term, r.err)
	}
	rc := w.campaignAsync(w.ctx, c)
	w.settle()
	w.resign(a, ta)
	r = w.await(rc, w.h.Patience, "Campaign of the candidate behind the quitter")
	if r.err != nil {
		w.t.Fatalf("candidate behind the quitter: %v", r.err)
	}
	if id := r.term.Leader().ID; id != "c3" {
		w.t.Errorf("leader %s, want c3", id)
	}
	w.sees(rec, r.term.Leader())
	vals, _, _ := rec.snapshot()
	for _, v := range vals {
		if v.ID == "c2" {
			w.t.Errorf("Observe reported the quitter c2 as leader: %v", vals)
		}
	}
	rb := w.campaignAsync(w.ctx, b)
	w.settle()
	w.resign(c, r.term)
	r = w.await(rb, w.h.Patience, "Campaign of the quitter, again")
	if r.err != nil {
		w.t.Fatalf("the quitter campaigning again: %v", r.err)
	}
	w.resign(b, r.term)
}

// CloseWhileLeading: Close ends the Term with ErrClosed and hands over; a
// second Close is safe; every later call returns ErrClosed.
func testCloseWhileLeading(w *world) {
	a, b := w.candidate(), w.candidate()
	ta := w.lead(a)
	rb := w.campaignAsync(w.ctx, b)
	w.settle()
	if err := w.close(a); err != nil {
		w.t.Errorf("Close while leading: %v", err)
	}
	w.checkEnded(ta, election.ErrClosed)
	r := w.await(rb, w.h.Patience, "Campaign of the waiting candidate after the leader's Close")
	if r.err != nil {
		w.t.Fatalf("waiting candidate: %v", r.err)
	}
	if err := w.close(a); err != nil {
		w.t.Errorf("second Close: %v", err)
	}
	ctx := w.ctx
	if t, err := a.Campaign(ctx); !errors.Is(err, election.ErrClosed) || t != nil {
		w.t.Errorf("Campaign after Close = %v, %v; want ErrClosed", t, err)
	}
	if err := a.Resign(ctx); !errors.Is(err, election.ErrClosed) {
		w.t.Errorf("Resign after Close = %v; want ErrClosed", err)
	}
	if l, err := a.Leader(ctx); !errors.Is(err, election.ErrClosed) {
		w.t.Errorf("Leader after Close = %v, %v; want ErrClosed", l, err)
	}
	rec := w.observe(ctx, a)
	w.waitUntil(rec, w.h.Patience, "stream of a closed Elector closes", func(_ []election.Leader, closed bool) bool { return closed })
}

// CloseWhileWaiting: Close of a waiting candidate makes its Campaign return
// ErrClosed and withdraws it.
func testCloseWhileWaiting(w *world) {
	a, b, c := w.candidate(), w.candidate(), w.candidate()
	ta := w.lead(a)
	rb := w.campaignAsync(w.ctx, b)
	w.settle()
	if err := w.close(b); err != nil {
		w.t.Errorf("Close while waiting: %v", err)
	}
	r := w.await(rb, w.h.Patience, "Campaign of a candidate closed while waiting")
	if !errors.Is(r.err, election.ErrClosed) {
		w.t.Errorf("Campaign of a closed candidate = %v, %v; want ErrClosed", r.term, r.err)
	}
	rc := w.campaignAsync(w.ctx, c)
	w.settle()
	w.resign(a, ta)
	r = w.await(rc, w.h.Patience, "Campaign behind the closed candidate")
	if r.err != nil {
		w.t.Fatalf("candidate behind the closed one: %v", r.err)
	}
	if id := r.term.Leader().ID; id != "c3" {
		w.t.Errorf("leader %s, want c3", id)
	}
}

// Observe: the current state first (a zero Leader when none), then each
// change; the channel closes when ctx ends and when the Elector closes.
func testObserve(w *world) {
	a, b, o := w.candidate(), w.candidate(), w.candidate()
	ctx, cancel := context.WithCancel(w.ctx)
	rec := w.observe(ctx, o)
	w.waitUntil(rec, w.h.Patience, "first value is the zero Leader", func(vals []election.Leader, _ bool) bool { return len(vals) > 0 })
	if vals, _, _ := rec.snapshot(); !vals[0].IsZero() {
		w.t.Errorf("first value on an empty election = %v, want the zero Leader", vals[0])
	}
	ta := w.lead(a)
	w.sees(rec, ta.Leader())
	late := w.observe(w.ctx, b)
	w.waitUntil(late, w.h.Patience, "first value of a late observer", func(vals []election.Leader, _ bool) bool { return len(vals) > 0 })
	if vals, _, _ := late.snapshot(); !vals[0].Equal(ta.Leader()) {
		w.t.Errorf("first value of a late observer = %v, want the current leader %v", vals[0], ta.Leader())
	}
	w.resign(a, ta)
	w.sees(rec, election.Leader{})
	tb := w.lead(b)
	w.sees(rec, tb.Leader())
	w.sees(late, tb.Leader())
	vals, _, _ := rec.snapshot()
	want := []election.Leader{{}, ta.Leader(), {}, tb.Leader()}
	if len(vals) != len(want) {
		w.t.Errorf("observed %v, want %v", vals, want)
	} else {
		for i := range vals {
			if !vals[i].Equal(want[i]) {
				w.t.Errorf("observed %v, want %v", vals, want)
				break
			}
		}
	}
	cancel()
	w.waitUntil(rec, w.h.Patience, "stream closes when ctx ends", func(_ []election.Leader, closed bool) bool { return closed })
	if err := w.close(b); err != nil {
		w.t.Errorf("Close: %v", err)
	}
	w.waitUntil(late, w.h.Patience, "stream closes when the Elector closes", func(_ []election.Leader, closed bool) bool { return closed })
}

// LeaderAgreesWithObserve: Leader returns ErrNoLeader when there is none,
// and otherwise what Observe reports, with the leader's metadata.
func testLeaderAgreesWithObserve(w *world) {
	a, o := w.candidate(), w.candidate()
	ctx := w.ctx
	if l, err := o.Leader(ctx); !errors.Is(err, election.ErrNoLeader) || !l.IsZero() {
		w.t.Errorf("Leader on an empty election = %v, %v; want zero, ErrNoLeader", l, err)
	}
	rec := w.observe(ctx, o)
	ta := w.lead(a)
	w.sees(rec, ta.Leader())
	want := election.Leader{ID: "c1", Value: []byte("v1"), Priority: 1, Token: ta.Token()}
	if !ta.Leader().Equal(want) {
		w.t.Errorf("Term.Leader() = %+v, want %+v", ta.Leader(), want)
	}
	for _, e := range []election.Elector{a, o} {
		if l, err := e.Leader(ctx); err != nil || !l.Equal(want) {
			w.t.Errorf("Leader() = %+v, %v; want %+v", l, err, want)
		}
	}
	w.resign(a, ta)
	w.sees(rec, election.Leader{})
	if l, err := o.Leader(ctx); !errors.Is(err, election.ErrNoLeader) {
		w.t.Errorf("Leader after the only leader resigned = %v, %v; want ErrNoLeader", l, err)
	}
}

// LeaderCrash: the leader dies without resigning; its Term ends no later
// than its deadline; a waiting candidate leads within Failover, never while
// the crashed leader's Term is valid (checked at its Campaign).
func testLeaderCrash(w *world) {
	a, b := w.candidate(), w.candidate()
	ta := w.lead(a)
	rb := w.campaignAsync(w.ctx, b)
	w.settle()
	crashed := time.Now()
	w.el.Crash(w.t, a)
	doneAt := w.waitDone(ta, w.h.Failover, "crashed leader")
	if late := doneAt.Sub(ta.Deadline()); late > w.h.Lateness {
		w.t.Errorf("crashed leader's Term seen Done %v after its deadline (allowed %v)", late, w.h.Lateness)
	}
	w.checkEnded(ta, election.ErrLeaseExpired, election.ErrSessionLost)
	r := w.await(rb, w.h.Failover-time.Since(crashed), "new leader after the leader crashed")
	if r.err != nil {
		w.t.Fatalf("new leader after crash: %v", r.err)
	}
	if r.term.Token() <= ta.Token() {
		w.t.Errorf("token after failover %d, not larger than %d", r.term.Token(), ta.Token())
	}
	if err := w.close(a); err != nil {
		w.t.Logf("Close of the crashed candidate: %v", err)
	}
}

// TermExitPaths: on every exit path (Resign, Close, crash) Done, Context
// and Err agree, and Err names the path; while valid, all three say so.
func testTermExitPaths(w *world) {
	a, b, c := w.candidate(), w.candidate(), w.candidate()
	ta := w.lead(a)
	w.checkValid(ta)
	w.resign(a, ta)
	w.checkEnded(ta, election.ErrResigned)

	// Resign ends the Term before it talks to the store, even with a ctx
	// that is already done.
	ta = w.lead(a)
	done, cancel := context.WithCancel(w.ctx)
	cancel()
	_ = a.Resign(done)
	w.checkEnded(ta, election.ErrResigned)

	tb := w.lead(b)
	w.checkValid(tb)
	if err := w.close(b); err != nil {
		w.t.Errorf("Close: %v", err)
	}
	w.checkEnded(tb, election.ErrClosed)

	tc := w.lead(c)
	w.checkValid(tc)
	w.el.Crash(w.t, c)
	w.waitDone(tc, w.h.Failover, "crashed leader")
	w.checkEnded(tc, election.ErrLeaseExpired, election.ErrSessionLost)
	for _, t := range []*election.Term{ta, tb, tc} {
		if t.Deadline().After(time.Now()) && errors.Is(t.Err(), election.ErrLeaseExpired) {
			w.t.Errorf("Term %v expired before its deadline %v", t, t.Deadline())
		}
	}
}

// RunCallbacks: candidates under Run hand over (their Run's ctx ends) and
// crash; each Run's callbacks pair up (P5): elected, elected-returned,
// demoted, with the same token, in token order, never overlapping.
func testRunCallbacks(w *world) {
	var (
		mu     sync.Mutex
		events []event
		change = make(chan struct{}, 1)
	)
	record := func(ev event) {
		mu.Lock()
		events = append(events, ev)
		mu.Unlock()
		select {
		case change <- struct{}{}:
		default:
		}
	}
	type runner struct {
		e      election.Elector
		cancel context.CancelFunc
		done   chan error
	}
	start := func(e election.Elector, id string) *runner {
		ctx, cancel := context.WithCancel(w.ctx)
		r := &runner{e: e, cancel: cancel, done: make(chan error, 1)}
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			r.done <- election.Run(ctx, checked{e, w}, election.Callbacks{
				OnElected: func(ctx context.Context, t *election.Term) {
					record(event{id, "elected", t.Token()})
					<-ctx.Done()
					record(event{id, "elected-returned", t.Token()})
				},
				OnDemoted: func(t *election.Term) {
					if err := t.Err(); err == nil {
						w.t.Errorf("OnDemoted(%v) while its Term is valid", t)
					} else if !sentinel(err) {
						w.t.Errorf("OnDemoted(%v): the Term ended with %v, which is none of package election's errors", t, err)
					}
					record(event{id, "demoted", t.Token()})
				},
			})
		}()
		w.t.Cleanup(func() { cancel() })
		return r
	}
	// currentLeader waits for an "elected" event newer than the ones seen.
	seen := 0
	nextElected := func(d time.Duration) event {
		w.t.Helper()
		deadline := time.After(d)
		for {
			mu.Lock()
			for ; seen < len(events); seen++ {
				if events[seen].kind == "elected" {
					ev := events[seen]
					seen++
					mu.Unlock()
					return ev
				}
			}
			mu.Unlock()
			select {
			case <-change:
			case <-deadline:
				w.t.Fatalf("Run: no candidate elected within %v", d)
			}
		}
	}
	ids := []string{"c1", "c2", "c3"}
	runners := map[string]*runner{}
	for _, id := range ids {
		runners[id] = start(w.candidate(), id)
	}
	const handovers = 4
	for range handovers {
		ev := nextElected(w.h.Patience)
		r := runners[ev.who]
		r.cancel()
		select {
		case err := <-r.done:
			if !errors.Is(err, context.Canceled) {
				w.t.Errorf("Run after its ctx was canceled returned %v, want context.Canceled", err)
			}
		case <-time.After(w.h.Patience):
			w.t.Fatalf("Run of %s did not return within %v of its ctx's end", ev.who, w.h.Patience)
		}
		runners[ev.who] = start(r.e, ev.who)
	}
	ev := nextElected(w.h.Patience)
	w.el.Crash(w.t, runners[ev.who].e)
	nextElected(w.h.Failover)
	for _, r := range runners {
		r.cancel()
		select {
		case <-r.done:
		case <-time.After(w.h.Patience):
			w.t.Fatalf("Run did not return within %v of its ctx's end", w.h.Patience)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	w.checkCallbacks(events)
}

// CtxBound is how long after its ctx ends Campaign or Resign may return
// when the store does not answer.
const CtxBound = 100 * time.Millisecond

// SilentStore: while the store stops answering a candidate, its Campaign
// and Resign return within CtxBound of their ctx's end, whatever is left
// to release goes in the background, Resign ends the Term before it
// returns, and Close returns; once the store answers again, the election
// goes on. Needs a Silencer.
func testSilentStore(w *world) {
	s, ok := w.el.(Silencer)
	if !ok {
		w.t.Skip("the backend's Election does not implement electiontest.Silencer")
	}
	a, b := w.candidate(), w.candidate()
	ta := w.lead(a)

	// A waiter silenced while it waits; its ctx is canceled.
	ctx, cancel := context.WithCancel(w.ctx)
	defer cancel()
	rb := w.campaignAsync(ctx, b)
	w.settle()
	heal := s.Silence(w.t, b)
	cancel()
	w.withinCtx(rb, time.Now(), context.Canceled, "a silenced waiter's Campaign after its ctx was canceled")

	// A Campaign begun while silenced, with a deadline.
	dctx, dcancel := context.WithTimeout(w.ctx, w.h.Patience/20)
	defer dcancel()
	dl, _ := dctx.Deadline()
	w.withinCtx(w.campaignAsync(dctx, b), dl, context.DeadlineExceeded, "a silenced candidate's Campaign with a deadline")
	heal()

	// A silenced leader resigns: the Term ends before Resign returns, and
	// Resign returns with its ctx at the latest.
	heal = s.Silence(w.t, a)
	rctx, rcancel := context.WithTimeout(w.ctx, w.h.Patience/20)
	defer rcancel()
	done := make(chan error, 1)
	go func() { done <- a.Resign(rctx) }()
	dl, _ = rctx.Deadline()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			w.t.Errorf("Resign of a silenced leader = %v; want nil or context.DeadlineExceeded", err)
		}
		if late := time.Since(dl); late > CtxBound {
			w.t.Errorf("Resign of a silenced leader returned %v after its deadline (bound %v)", late, CtxBound)
		}
	case <-time.After(w.h.Patience):
		w.t.Fatalf("Resign of a silenced leader did not return within %v (ctx %v)", w.h.Patience, w.h.Patience/20)
	}
	w.checkEnded(ta, election.ErrResigned)
	heal()

	// Answered again, the election goes on: b leads (a's release reaches
	// the store in the background), then b, silenced, closes.
	r := w.await(w.campaignAsync(w.ctx, b), w.h.Failover+w.h.Patience, "Campaign once the store answers again")
	if r.err != nil {
		w.t.Fatalf("Campaign once the store answers again: %v", r.err)
	}
	heal = s.Silence(w.t, b)
	defer heal()
	w.close(b)
	w.checkEnded(r.term, election.ErrClosed)
}

// withinCtx waits for a Campaign that must fail with want within CtxBound
// of ended, the instant its ctx ended.
func (w *world) withinCtx(ch <-chan result, ended time.Time, want error, what string) {
	w.t.Helper()
	r := w.await(ch, w.h.Patience, what)
	at := time.Now()
	if !errors.Is(r.err, want) {
		w.t.Errorf("%s = %v, %v; want %v", what, r.term, r.err, want)
	}
	if late := at.Sub(ended); late > CtxBound {
		w.t.Errorf("%s returned %v after its ctx ended (bound %v)", what, late, CtxBound)
	}
}

// EvictedLeader: another client of the store removes the leader's
// candidacy through the store's own API (deletes its key or node); the
// leader's Term ends at once (the leader notices, its lease does not have
// to tell) with one of package election's errors, the waiting candidate
// leads, and the evicted candidate can campaign again. The leader and the
// waiter learn of the eviction from one store event, in no fixed order:
// that the old Term ends before the next is handed out is not required
// here (a store the leader writes to fences on the token). Needs an
// Evicter.
func testEvictedLeader(w *world) {
	ev, ok := w.el.(Evicter)
	if !ok {
		w.t.Skip("the backend's Election does not implement electiontest.Evicter")
	}
	// a renews its lease less often than every Patience: only noticing the
	// eviction can end its Term within Patience.
	a, b := w.candidate(election.WithTTL(min(4*w.h.Patience, election.MaxTTL))), w.candidate()
	ta := w.lead(a)
	rb := w.campaignAsync(w.ctx, b)
	w.settle()
	w.mu.Lock()
	w.evicted[ta] = true
	w.mu.Unlock()
	ev.Evict(w.t, a, ta)
	r := w.await(rb, w.h.Failover+w.h.Patience, "Campaign of the waiter after the leader was evicted")
	if r.err != nil {
		w.t.Fatalf("the waiter after the leader was evicted: %v", r.err)
	}
	// The evicted leader learns of it from the same store event as the
	// waiter, not by its lease: its Term ends at once, not at expiry.
	if ta.Err() == nil {
		w.t.Logf("the evicted Term was still valid when the next was handed out (one store event, two readers)")
	}
	w.waitDone(ta, w.h.Patience, "the evicted Term")
	w.checkEnded(ta, election.ErrSessionLost, election.ErrLeaseExpired)
	if !sentinel(ta.Err()) {
		w.t.Errorf("evicted Term ended with %v, none of package election's errors", ta.Err())
	}
	ra := w.campaignAsync(w.ctx, a)
	w.settle()
	w.resign(b, r.term)
	r = w.await(ra, w.h.Failover+w.h.Patience, "Campaign of the evicted candidate, again")
	if r.err != nil {
		w.t.Fatalf("the evicted candidate campaigning again: %v", r.err)
	}
	w.resign(a, r.term)
}

// NoGoroutineLeft: after Close, nothing the candidates started is still
// running, whatever they were doing (leading, waiting, observing).
func testNoGoroutineLeft(w *world) {
	a, b, c := w.candidate(), w.candidate(), w.candidate()
	ctx := w.ctx
	w.observe(ctx, a)
	w.observe(ctx, c)
	ta := w.lead(a)
	rb := w.campaignAsync(ctx, b)
	rc := w.campaignAsync(ctx, c)
	w.settle()
	for _, e := range []election.Elector{c, b, a} { // waiters first: no handover
		if err := w.close(e); err != nil {
			w.t.Errorf("Close: %v", err)
		}
	}
	w.checkEnded(ta, election.ErrClosed)
	for _, ch := range []<-chan result{rb, rc} {
		if r := w.await(ch, w.h.Patience, "Campaign of a closed candidate"); !errors.Is(r.err, election.ErrClosed) {
			w.t.Errorf("Campaign of a closed candidate = %v, %v; want ErrClosed", r.term, r.err)
		}
	}
	// The check itself runs after every cleanup (see checkLeaks), so that
	// what the harness releases with t.Cleanup is gone too.
}
