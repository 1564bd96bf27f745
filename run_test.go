package election

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// eventLog is the ordered record of what the fake Elector and the callbacks
// did, shared by both.
type eventLog struct {
	mu sync.Mutex
	ev []string
}

func (l *eventLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ev = append(l.ev, fmt.Sprintf(format, args...))
}

func (l *eventLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.ev...)
}

// grant scripts one Campaign: it fails with err, or wins (err nil). during,
// if set, runs after the Term is made and before Campaign returns it.
type grant struct {
	err     error
	during  func()
	nilTerm bool // Campaign returns neither a Term nor an error
}

// fakeElector is a scripted Elector. Campaign blocks until the test sends it
// a grant (or ctx ends); a win hands out a Term made with NewTerm, which the
// test drives through the LeaseClock (clock()). Observe forwards what the
// test sends on feed.
type fakeElector struct {
	opts   Options
	log    *eventLog
	grants chan grant
	feed   chan Leader

	mu         sync.Mutex
	token      uint64
	clk        *leaseClock
	campaigns  []time.Time
	resigns    int
	resignNoop bool // Resign cannot reach the store: it blocks until its ctx ends
	// resignFails makes that many Resign calls fail without ending the
	// Term (a non-conforming backend, or a store error before the Term was
	// ended).
	resignFails int
	closed      bool
}

var _ Elector = (*fakeElector)(nil)

func newFake(t *testing.T, log *eventLog) *fakeElector {
	return &fakeElector{
		opts:   mustOptions(t, WithID("fake-1")),
		log:    log,
		grants: make(chan grant),
		feed:   make(chan Leader),
	}
}

func (f *fakeElector) Campaign(ctx context.Context) (*Term, error) {
	f.mu.Lock()
	f.campaigns = append(f.campaigns, time.Now())
	closed := f.closed
	f.mu.Unlock()
	f.log.add("campaign")
	if closed {
		return nil, fmt.Errorf("fake: %w", ErrClosed)
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case g := <-f.grants:
		if g.err != nil {
			return nil, g.err
		}
		if g.nilTerm {
			return nil, nil
		}
		f.mu.Lock()
		f.token++
		term, clk := newTerm(f.opts, Leader{ID: f.opts.ID, Token: f.token}, time.Now())
		f.clk = clk
		f.mu.Unlock()
		if g.during != nil {
			g.during()
		}
		return term, nil
	}
}

func (f *fakeElector) Resign(ctx context.Context) error {
	f.mu.Lock()
	f.resigns++
	clk, noop := f.clk, f.resignNoop
	fail := f.resignFails > 0
	if fail {
		f.resignFails--
	}
	f.mu.Unlock()
	f.log.add("resign")
	if fail {
		return errors.New("fake: leader changed, retry")
	}
	if noop {
		<-ctx.Done()
		return ctx.Err()
	}
	if clk != nil {
		clk.End(fmt.Errorf("fake: %w", ErrResigned))
	}
	return nil
}

func (f *fakeElector) Leader(context.Context) (Leader, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.clk == nil || f.clk.Term().Err() != nil {
		return Leader{}, ErrNoLeader
	}
	return f.clk.Term().Leader(), nil
}

func (f *fakeElector) Observe(ctx context.Context) <-chan Leader {
	out := make(chan Leader)
	go func() {
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				return
			case l := <-f.feed:
				select {
				case out <- l:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
}

func (f *fakeElector) Close() error {
	f.mu.Lock()
	f.closed = true
	clk := f.clk
	f.mu.Unlock()
	if clk != nil {
		clk.End(fmt.Errorf("fake: %w", ErrClosed))
		clk.Wait()
	}
	return nil
}

func (f *fakeElector) clock() *leaseClock {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.clk
}

func (f *fakeElector) campaignTimes() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.campaigns...)
}

func (f *fakeElector) resignCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.resigns
}

// runHarness runs Run on the fake with callbacks that check P5 as they are
// called: no overlap, token order, OnDemoted only after OnElected returned
// and the Term ended, and nothing after Run returned.
type runHarness struct {
	t      *testing.T
	f      *fakeElector
	log    *eventLog
	ctx    context.Context
	cancel context.CancelFunc

	// Optional behaviour of the callbacks, set before start.
	onElected func(ctx context.Context, t *Term)
	onDemoted func(t *Term)
	onLeader  func(Leader)

	mu              sync.Mutex
	active          *Term           // from OnElected's start to OnDemoted's end
	electedCtx      context.Context // OnElected's ctx of the active term
	electedReturned bool
	lastToken       uint64
	elected         []*Term
	demoted         []*Term
	demotedAt       []time.Time
	leaders         []Leader
	errs            []error
	returned        bool
	returnedAt      time.Time

	started  bool
	done     chan struct{}
	runErr   error
	panicVal any
}

func newHarness(t *testing.T) *runHarness {
	log := &eventLog{}
	ctx, cancel := context.WithCancel(context.Background())
	h := &runHarness{t: t, f: newFake(t, log), log: log, ctx: ctx, cancel: cancel, done: make(chan struct{})}
	// If the test stops early, end Run so that the bubble can finish.
	t.Cleanup(func() {
		cancel()
		if h.started {
			<-h.done
		}
	})
	return h
}

func (h *runHarness) afterReturn(what string) {
	if h.returned {
		h.t.Errorf("%s called after Run returned", what)
	}
}

func (h *runHarness) callbacks() Callbacks {
	return Callbacks{
		OnElected: func(ctx context.Context, t *Term) {
			h.mu.Lock()
			h.afterReturn("OnElected")
			if h.active != nil {
				h.t.Errorf("OnElected(%v) while term %v is still active", t, h.active)
			}
			h.electedCtx = ctx
			if t.Token() <= h.lastToken {
				h.t.Errorf("OnElected token %d after token %d", t.Token(), h.lastToken)
			}
			h.active, h.electedReturned, h.lastToken = t, false, t.Token()
			h.elected = append(h.elected, t)
			h.log.add("elected %d", t.Token())
			h.mu.Unlock()
			defer func() {
				h.mu.Lock()
				h.afterReturn("OnElected (returning)")
				h.electedReturned = true
				h.log.add("elected-returned %d", t.Token())
				h.mu.Unlock()
			}()
			if h.onElected != nil {
				h.onElected(ctx, t)
			}
		},
		OnDemoted: func(t *Term) {
			h.mu.Lock()
			h.afterReturn("OnDemoted")
			if h.active != t {
				h.t.Errorf("OnDemoted(%v) but the active term is %v", t, h.active)
			}
			if !h.electedReturned {
				h.t.Errorf("OnDemoted(%v) before OnElected returned", t)
			}
			if h.electedCtx == nil || !isDone(h.electedCtx.Done()) {
				h.t.Errorf("OnDemoted(%v) while OnElected's ctx is not done", t)
			}
			if !isDone(t.Done()) || t.Err() == nil {
				h.t.Errorf("OnDemoted(%v) before Done closed (Err %v)", t, t.Err())
			}
			h.demoted = append(h.demoted, t)
			h.demotedAt = append(h.demotedAt, time.Now())
			h.log.add("demoted %d", t.Token())
			h.active = nil
			h.mu.Unlock()
			if h.onDemoted != nil {
				h.onDemoted(t)
			}
			h.mu.Lock()
			h.afterReturn("OnDemoted (returning)")
			h.mu.Unlock()
		},
		OnLeader: func(l Leader) {
			h.mu.Lock()
			h.afterReturn("OnLeader")
			h.leaders = append(h.leaders, l)
			h.log.add("leader %v", l)
			h.mu.Unlock()
			if h.onLeader != nil {
				h.onLeader(l)
			}
			h.mu.Lock()
			h.afterReturn("OnLeader (returning)")
			h.mu.Unlock()
		},
		OnError: func(err error) {
			h.mu.Lock()
			h.afterReturn("OnError")
			h.errs = append(h.errs, err)
			h.log.add("error %v", err)
			h.mu.Unlock()
		},
	}
}

// start runs Run on its own goroutine, recording its result or its panic.
func (h *runHarness) start() {
	h.started = true
	go func() {
		defer close(h.done)
		defer func() {
			v := recover()
			h.mu.Lock()
			h.returned, h.returnedAt, h.panicVal = true, time.Now(), v
			h.mu.Unlock()
		}()
		h.runErr = Run(h.ctx, h.f, h.callbacks())
	}()
}

// grant hands one outcome to the next Campaign, failing if Run ends first.
func (h *runHarness) grant(g grant) {
	h.t.Helper()
	select {
	case h.f.grants <- g:
	case <-h.done:
		h.t.Fatalf("Run returned (err %v, panic %v) while the test waited for a Campaign", h.runErr, h.panicVal)
	}
	synctest.Wait()
}

// win makes the next Campaign succeed and returns the Term's clock.
func (h *runHarness) win() *leaseClock {
	h.t.Helper()
	h.grant(grant{})
	return h.f.clock()
}

// wait waits until Run has returned or panicked.
func (h *runHarness) wait() {
	h.t.Helper()
	<-h.done
}

func (h *runHarness) isReturned() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.returned
}

func (h *runHarness) counts() (elected, demoted int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.elected), len(h.demoted)
}

// check runs after Run has returned: it lets any straggler run for an hour
// of fake time, then checks that every OnElected had exactly one OnDemoted,
// in the same order.
func (h *runHarness) check() {
	h.t.Helper()
	h.wait()
	time.Sleep(time.Hour)
	synctest.Wait()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.active != nil {
		h.t.Errorf("term %v was elected but never demoted", h.active)
	}
	if len(h.elected) != len(h.demoted) {
		h.t.Errorf("%d OnElected, %d OnDemoted", len(h.elected), len(h.demoted))
	}
	for i := range min(len(h.elected), len(h.demoted)) {
		if h.elected[i] != h.demoted[i] {
			h.t.Errorf("OnDemoted #%d is for %v, OnElected #%d was for %v", i, h.demoted[i], i, h.elected[i])
		}
	}
}

func wantLog(t *testing.T, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// Backoff bounds of the first retry: runInitialBackoff ± 50% jitter.
const (
	firstBackoffMin = runInitialBackoff / 2
	firstBackoffMax = runInitialBackoff*3/2 + time.Nanosecond
)

func TestRunOnePairPerTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.onElected = func(ctx context.Context, term *Term) {
			if term.Token() == 2 { // term 2 blocks for its whole term and returns late
				<-ctx.Done()
				time.Sleep(time.Second)
			}
		}
		h.start()

		// Term 1 ends by a lost session.
		clk1 := h.win()
		term1 := clk1.Term()
		clk1.End(fmt.Errorf("fake: %w", ErrSessionLost))
		synctest.Wait()
		if e, d := h.counts(); e != 1 || d != 1 {
			t.Fatalf("after term 1: %d elected, %d demoted; want 1, 1", e, d)
		}
		if !errors.Is(h.demoted[0].Err(), ErrSessionLost) || h.demoted[0] != term1 {
			t.Errorf("OnDemoted got %v (Err %v), want term 1 with ErrSessionLost", h.demoted[0], h.demoted[0].Err())
		}
		demoted1At := time.Now()

		// Term 2 expires while OnElected blocks; OnDemoted waits for OnElected.
		clk2 := h.win()
		term2 := clk2.Term()
		if camp := h.f.campaignTimes(); len(camp) != 2 || camp[1].Sub(demoted1At) < firstBackoffMin || camp[1].Sub(demoted1At) > firstBackoffMax {
			t.Errorf("re-campaign %v after term 1, want a backoff in [%v, %v]", camp[len(camp)-1].Sub(demoted1At), firstBackoffMin, firstBackoffMax)
		}
		deadline2 := term2.Deadline()
		time.Sleep(time.Until(deadline2))
		synctest.Wait()
		if term2.Err() != ErrLeaseExpired {
			t.Fatalf("term 2: Err = %v, want ErrLeaseExpired", term2.Err())
		}
		if _, d := h.counts(); d != 1 {
			t.Fatalf("OnDemoted(term 2) ran while OnElected(term 2) still runs")
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if _, d := h.counts(); d != 2 {
			t.Fatalf("OnDemoted(term 2) not called after OnElected returned")
		}
		if !h.demotedAt[1].Equal(deadline2.Add(time.Second)) {
			t.Errorf("OnDemoted(term 2) at %v, want when OnElected returned, %v", h.demotedAt[1], deadline2.Add(time.Second))
		}

		// Term 3 is renewed, then ctx ends.
		clk3 := h.win()
		term3 := clk3.Term()
		for range 5 {
			time.Sleep(time.Second)
			clk3.Renewed(time.Now(), nil)
		}
		h.cancel()
		h.wait()
		if h.runErr != context.Canceled {
			t.Errorf("Run = %v, want context.Canceled", h.runErr)
		}
		if !errors.Is(term3.Err(), ErrResigned) {
			t.Errorf("term 3: Err = %v, want ErrResigned", term3.Err())
		}
		if term1.Token() != 1 || term2.Token() != 2 || term3.Token() != 3 {
			t.Errorf("tokens %d %d %d", term1.Token(), term2.Token(), term3.Token())
		}
		h.check()
		wantLog(t, h.log.get(),
			"campaign", "elected 1", "elected-returned 1", "demoted 1",
			"campaign", "elected 2", "elected-returned 2", "demoted 2",
			"campaign", "elected 3", "elected-returned 3", "resign", "demoted 3",
		)
	})
}

func TestRunCancelWhileLeading(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.onElected = func(ctx context.Context, _ *Term) { <-ctx.Done() }
		h.start()
		clk := h.win()
		time.Sleep(3 * time.Second)
		cancelAt := time.Now()
		h.cancel()
		h.wait()
		if h.runErr != context.Canceled {
			t.Errorf("Run = %v, want context.Canceled", h.runErr)
		}
		if h.panicVal != nil {
			t.Errorf("Run panicked: %v", h.panicVal)
		}
		if !h.returnedAt.Equal(cancelAt) {
			t.Errorf("Run returned %v after the cancel, want at once", h.returnedAt.Sub(cancelAt))
		}
		if n := h.f.resignCount(); n != 1 {
			t.Errorf("Resign called %d times, want 1", n)
		}
		if !errors.Is(clk.Term().Err(), ErrResigned) {
			t.Errorf("Err = %v, want ErrResigned", clk.Term().Err())
		}
		h.check()
		wantLog(t, h.log.get(), "campaign", "elected 1", "elected-returned 1", "resign", "demoted 1")
		if n := len(h.f.campaignTimes()); n != 1 {
			t.Errorf("%d campaigns, want 1", n)
		}
	})
}

// TestRunStopsWorkBeforeResign: when ctx ends while leading, OnElected's
// ctx ends first, with the Term still valid; Resign comes only once
// OnElected has returned, 200 ms later.
func TestRunStopsWorkBeforeResign(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		var stopped time.Time
		var termErr, cause error
		h.onElected = func(ctx context.Context, term *Term) {
			<-ctx.Done()
			stopped, termErr, cause = time.Now(), term.Err(), context.Cause(ctx)
			time.Sleep(200 * time.Millisecond)
		}
		h.start()
		clk := h.win()
		time.Sleep(3 * time.Second)
		cancelAt := time.Now()
		h.cancel()
		synctest.Wait()
		if n := h.f.resignCount(); n != 0 {
			t.Errorf("Resign called while OnElected still stops")
		}
		if clk.Term().Err() != nil {
			t.Errorf("Term ended (%v) while OnElected still stops", clk.Term().Err())
		}
		h.wait()
		if !stopped.Equal(cancelAt) || termErr != nil || cause != context.Canceled {
			t.Errorf("OnElected's ctx ended %v after the cancel with cause %v, Term Err %v; want at once, context.Canceled, the Term valid",
				stopped.Sub(cancelAt), cause, termErr)
		}
		if h.runErr != context.Canceled || h.panicVal != nil {
			t.Errorf("Run = %v (panic %v), want context.Canceled", h.runErr, h.panicVal)
		}
		if got := h.returnedAt.Sub(cancelAt); got != 200*time.Millisecond {
			t.Errorf("Run returned %v after the cancel, want once OnElected returned, 200ms", got)
		}
		if !errors.Is(clk.Term().Err(), ErrResigned) {
			t.Errorf("Err = %v, want ErrResigned", clk.Term().Err())
		}
		h.check()
		wantLog(t, h.log.get(), "campaign", "elected 1", "elected-returned 1", "resign", "demoted 1")
	})
}

// TestRunStopBoundedByDeadline: an OnElected that does not return once its
// ctx ends holds the handover back until the Term's deadline as it stood
// when ctx ended, not longer, though renewals go on; OnDemoted still waits
// for OnElected.
func TestRunStopBoundedByDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		release := make(chan struct{})
		h.onElected = func(context.Context, *Term) { <-release }
		h.start()
		clk := h.win()
		term := clk.Term()
		renewals := make(chan struct{})
		go func() {
			defer close(renewals)
			for {
				select {
				case <-term.Done():
					return
				case <-time.After(time.Second):
					clk.Renewed(time.Now(), nil)
				}
			}
		}()
		time.Sleep(2500 * time.Millisecond)
		h.cancel()
		deadline := term.Deadline()
		time.Sleep(time.Until(deadline) - time.Nanosecond)
		synctest.Wait()
		if n := h.f.resignCount(); n != 0 || term.Err() != nil {
			t.Fatalf("before the deadline: %d Resign calls, Term Err %v; want none, valid", n, term.Err())
		}
		if !term.Deadline().After(deadline) {
			t.Fatalf("the renewals stopped: deadline %v", term.Deadline())
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if n := h.f.resignCount(); n != 1 || !errors.Is(term.Err(), ErrResigned) {
			t.Fatalf("at the deadline read when ctx ended: %d Resign calls, Term Err %v; want 1, ErrResigned", n, term.Err())
		}
		<-renewals
		time.Sleep(time.Minute)
		synctest.Wait()
		if _, d := h.counts(); d != 0 || h.isReturned() {
			t.Fatalf("OnDemoted called or Run returned while OnElected runs")
		}
		close(release)
		h.wait()
		if h.runErr != context.Canceled {
			t.Errorf("Run = %v, want context.Canceled", h.runErr)
		}
		h.check()
		wantLog(t, h.log.get(), "campaign", "elected 1", "resign", "elected-returned 1", "demoted 1")
	})
}

// TestRunTermEndsWhileWorkStops: a Term that ends while Run waits for
// OnElected to stop needs no Resign; OnDemoted gets its own cause.
func TestRunTermEndsWhileWorkStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		release := make(chan struct{})
		h.onElected = func(context.Context, *Term) { <-release }
		h.start()
		clk := h.win()
		h.cancel()
		time.Sleep(time.Second)
		clk.End(fmt.Errorf("fake: %w", ErrSessionLost))
		synctest.Wait()
		close(release)
		h.wait()
		if n := h.f.resignCount(); n != 0 {
			t.Errorf("Resign called %d times for an ended Term", n)
		}
		if !errors.Is(h.demoted[0].Err(), ErrSessionLost) {
			t.Errorf("OnDemoted saw %v, want ErrSessionLost", h.demoted[0].Err())
		}
		h.check()
		wantLog(t, h.log.get(), "campaign", "elected 1", "elected-returned 1", "demoted 1")
	})
}

// TestRunStepDownInOnElected: OnElected resigns with its own ctx; the Term
// ends with ErrResigned, OnDemoted follows OnElected's return, and Run
// campaigns again after its backoff.
func TestRunStepDownInOnElected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		var resignErr error
		h.onElected = func(ctx context.Context, term *Term) {
			if term.Token() != 1 {
				return
			}
			time.Sleep(time.Second)
			resignErr = h.f.Resign(ctx)
			<-ctx.Done()
		}
		h.start()
		clk := h.win()
		time.Sleep(time.Second)
		synctest.Wait()
		if resignErr != nil {
			t.Errorf("Resign(OnElected's ctx) = %v, want nil", resignErr)
		}
		if e, d := h.counts(); e != 1 || d != 1 || !errors.Is(clk.Term().Err(), ErrResigned) {
			t.Fatalf("after stepping down: %d elected, %d demoted, Err %v; want 1, 1, ErrResigned", e, d, clk.Term().Err())
		}
		demotedAt := time.Now()
		h.win()
		if camp := h.f.campaignTimes(); len(camp) != 2 || camp[1].Sub(demotedAt) < firstBackoffMin || camp[1].Sub(demotedAt) > firstBackoffMax {
			t.Errorf("campaigns %v; want a second one a backoff after the demotion", camp)
		}
		h.cancel()
		h.check()
		wantLog(t, h.log.get(),
			"campaign", "elected 1", "resign", "elected-returned 1", "demoted 1",
			"campaign", "elected 2", "elected-returned 2", "resign", "demoted 2")
	})
}

// TestRunCancelWhileLeadingStoreUnreachable: Resign cannot end the term (it
// blocks until its ctx ends); Run still returns, once the term has expired at
// its deadline, and not before.
func TestRunCancelWhileLeadingStoreUnreachable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.f.resignNoop = true
		h.start()
		clk := h.win()
		time.Sleep(time.Second)
		h.cancel()
		synctest.Wait()
		if h.isReturned() {
			t.Fatalf("Run returned while the term was still valid")
		}
		h.wait()
		deadline := clk.Term().Deadline()
		if !h.returnedAt.Equal(deadline) {
			t.Errorf("Run returned at %v, want at the term's deadline %v", h.returnedAt, deadline)
		}
		if h.runErr != context.Canceled {
			t.Errorf("Run = %v, want context.Canceled", h.runErr)
		}
		if clk.Term().Err() != ErrLeaseExpired {
			t.Errorf("Err = %v, want ErrLeaseExpired", clk.Term().Err())
		}
		h.check()
		wantLog(t, h.log.get(), "campaign", "elected 1", "elected-returned 1", "resign", "demoted 1")
	})
}

func TestRunExpiryRecampaignsAfterBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.start()
		clk := h.win()
		deadline := clk.Term().Deadline()
		time.Sleep(time.Until(deadline) - time.Nanosecond)
		synctest.Wait()
		if _, d := h.counts(); d != 0 {
			t.Fatalf("demoted before the deadline")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if _, d := h.counts(); d != 1 {
			t.Fatalf("not demoted at the deadline")
		}
		if !h.demotedAt[0].Equal(deadline) || h.demoted[0].Err() != ErrLeaseExpired {
			t.Errorf("OnDemoted at %v with %v, want at %v with ErrLeaseExpired", h.demotedAt[0], h.demoted[0].Err(), deadline)
		}
		if n := len(h.f.campaignTimes()); n != 1 {
			t.Fatalf("re-campaigned with no backoff (%d campaigns at the deadline)", n)
		}
		if n := h.f.resignCount(); n != 0 {
			t.Errorf("Resign called %d times for an expired term", n)
		}
		time.Sleep(firstBackoffMax)
		synctest.Wait()
		camp := h.f.campaignTimes()
		if len(camp) != 2 {
			t.Fatalf("%d campaigns after the backoff, want 2", len(camp))
		}
		if gap := camp[1].Sub(deadline); gap < firstBackoffMin || gap > firstBackoffMax {
			t.Errorf("re-campaign %v after the expiry, want in [%v, %v]", gap, firstBackoffMin, firstBackoffMax)
		}
		clk2 := h.win()
		if clk2.Term().Token() != 2 {
			t.Errorf("second term token %d, want 2", clk2.Term().Token())
		}
		h.cancel()
		h.check()
		wantLog(t, h.log.get(), "campaign", "elected 1", "elected-returned 1", "demoted 1",
			"campaign", "elected 2", "elected-returned 2", "resign", "demoted 2")
	})
}

func TestRunCampaignErrorsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.start()
		errs := []error{errors.New("store down"), errors.New("timeout"), fmt.Errorf("wrapped: %w", ErrSessionLost)}
		for _, err := range errs {
			h.grant(grant{err: err})
		}
		if len(h.errs) != len(errs) {
			t.Fatalf("OnError called %d times, want %d", len(h.errs), len(errs))
		}
		for i := range errs {
			if h.errs[i] != errs[i] {
				t.Errorf("OnError #%d = %v, want %v", i, h.errs[i], errs[i])
			}
		}
		if h.isReturned() {
			t.Fatalf("Run returned after a retriable error: %v", h.runErr)
		}
		// The 4th Campaign comes after the 3rd backoff, and wins.
		clk := h.win()
		camp := h.f.campaignTimes()
		if len(camp) != 4 {
			t.Fatalf("%d campaigns, want 4", len(camp))
		}
		// Growing backoff: 50ms, 75ms, 112.5ms, each ± 50%.
		bounds := [][2]time.Duration{{25 * time.Millisecond, 75 * time.Millisecond}, {37500 * time.Microsecond, 112500 * time.Microsecond}, {56250 * time.Microsecond, 168750 * time.Microsecond}}
		for i, b := range bounds {
			if gap := camp[i+1].Sub(camp[i]); gap < b[0] || gap > b[1]+time.Nanosecond {
				t.Errorf("backoff after error %d = %v, want in [%v, %v]", i+1, gap, b[0], b[1])
			}
		}

		// The win reset the backoff.
		clk.End(fmt.Errorf("fake: %w", ErrPreempted))
		endAt := time.Now()
		time.Sleep(time.Second)
		synctest.Wait()
		camp = h.f.campaignTimes()
		if gap := camp[len(camp)-1].Sub(endAt); len(camp) != 5 || gap < firstBackoffMin || gap > firstBackoffMax {
			t.Errorf("campaign %d came %v after the term, want a reset backoff in [%v, %v]", len(camp), gap, firstBackoffMin, firstBackoffMax)
		}

		// ctx's end while campaigning is not an error for OnError.
		h.cancel()
		h.wait()
		if h.runErr != context.Canceled {
			t.Errorf("Run = %v, want context.Canceled", h.runErr)
		}
		if len(h.errs) != len(errs) {
			t.Errorf("OnError called for ctx's end: %v", h.errs[len(errs):])
		}
		h.check()
	})
}

func TestRunErrClosedFromCampaign(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.start()
		errClosed := fmt.Errorf("fake: endpoint x: %w", ErrClosed)
		h.grant(grant{err: errClosed})
		h.wait()
		if !errors.Is(h.runErr, ErrClosed) {
			t.Errorf("Run = %v, want an error wrapping ErrClosed", h.runErr)
		}
		if len(h.errs) != 0 {
			t.Errorf("OnError called for ErrClosed: %v", h.errs)
		}
		h.check()
		wantLog(t, h.log.get(), "campaign")
	})
}

// TestRunElectorClosedWhileLeading: Close ends the term with ErrClosed, Run
// demotes, campaigns again, gets ErrClosed and returns it.
func TestRunElectorClosedWhileLeading(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.onElected = func(ctx context.Context, _ *Term) { <-ctx.Done() }
		h.start()
		clk := h.win()
		time.Sleep(time.Second)
		if err := h.f.Close(); err != nil {
			t.Fatal(err)
		}
		h.wait()
		if !errors.Is(h.runErr, ErrClosed) {
			t.Errorf("Run = %v, want an error wrapping ErrClosed", h.runErr)
		}
		if !errors.Is(clk.Term().Err(), ErrClosed) {
			t.Errorf("term Err = %v, want ErrClosed", clk.Term().Err())
		}
		h.check()
		wantLog(t, h.log.get(), "campaign", "elected 1", "elected-returned 1", "demoted 1", "campaign")
	})
}

func TestRunPanicInOnElected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		boom := errors.New("boom in OnElected")
		h.onElected = func(context.Context, *Term) {
			time.Sleep(time.Second)
			panic(boom)
		}
		h.start()
		clk := h.win()
		h.wait()
		if h.panicVal != boom {
			t.Fatalf("Run panicked with %v (returned %v), want %v", h.panicVal, h.runErr, boom)
		}
		if n := h.f.resignCount(); n != 1 {
			t.Errorf("Resign called %d times, want 1", n)
		}
		if !errors.Is(clk.Term().Err(), ErrResigned) {
			t.Errorf("term Err = %v, want ErrResigned", clk.Term().Err())
		}
		h.check()
		wantLog(t, h.log.get(), "campaign", "elected 1", "elected-returned 1", "resign", "demoted 1")
	})
}

// TestRunPanicInOnElectedAfterTermEnded: OnElected panics once its term has
// ended: no Resign is needed, OnDemoted still runs, the panic propagates.
func TestRunPanicInOnElectedAfterTermEnded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.onElected = func(ctx context.Context, _ *Term) {
			<-ctx.Done()
			panic("late boom")
		}
		h.start()
		clk := h.win()
		clk.End(fmt.Errorf("fake: %w", ErrPreempted))
		h.wait()
		if h.panicVal != "late boom" {
			t.Fatalf("Run panicked with %v (returned %v), want %q", h.panicVal, h.runErr, "late boom")
		}
		if n := h.f.resignCount(); n != 0 {
			t.Errorf("Resign called %d times for an ended term", n)
		}
		if !errors.Is(h.demoted[0].Err(), ErrPreempted) {
			t.Errorf("OnDemoted saw Err %v, want ErrPreempted", h.demoted[0].Err())
		}
		h.check()
		wantLog(t, h.log.get(), "campaign", "elected 1", "elected-returned 1", "demoted 1")
	})
}

func TestRunPanicInOnDemoted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		type panicValue struct{ n int }
		pv := &panicValue{7}
		h.onDemoted = func(*Term) { panic(pv) }
		h.start()
		clk := h.win()
		clk.End(fmt.Errorf("fake: %w", ErrSessionLost))
		h.wait()
		if h.panicVal != pv {
			t.Fatalf("Run panicked with %v (returned %v), want %v", h.panicVal, h.runErr, pv)
		}
		h.check()
		wantLog(t, h.log.get(), "campaign", "elected 1", "elected-returned 1", "demoted 1")
		if n := len(h.f.campaignTimes()); n != 1 {
			t.Errorf("%d campaigns after a panic in OnDemoted, want 1", n)
		}
	})
}

func TestRunPanicInOnLeaderWhileLeading(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.onElected = func(ctx context.Context, _ *Term) { <-ctx.Done() }
		h.onLeader = func(l Leader) {
			if l.Token == 99 {
				panic("boom in OnLeader")
			}
		}
		h.start()
		clk := h.win()
		h.f.feed <- Leader{ID: "other", Token: 99}
		h.wait()
		if h.panicVal != "boom in OnLeader" {
			t.Fatalf("Run panicked with %v (returned %v), want the OnLeader panic", h.panicVal, h.runErr)
		}
		if !errors.Is(clk.Term().Err(), ErrResigned) {
			t.Errorf("term Err = %v, want ErrResigned", clk.Term().Err())
		}
		h.check()
		wantLog(t, h.log.get(), "campaign", "elected 1", "leader other@99", "elected-returned 1", "resign", "demoted 1")
	})
}

func TestRunPanicInOnLeaderWhileCampaigning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.onLeader = func(Leader) { panic("boom") }
		h.start()
		synctest.Wait()
		h.f.feed <- Leader{ID: "other", Token: 5}
		h.wait()
		if h.panicVal != "boom" {
			t.Fatalf("Run panicked with %v (returned %v), want the OnLeader panic", h.panicVal, h.runErr)
		}
		if n := h.f.resignCount(); n != 0 {
			t.Errorf("Resign called %d times while not leading", n)
		}
		h.check()
		wantLog(t, h.log.get(), "campaign", "leader other@5")
	})
}

func TestRunPanicInOnError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		cb := h.callbacks()
		cb.OnError = func(err error) { panic(err) }
		errStore := errors.New("store down")
		done := make(chan any)
		go func() {
			defer func() { done <- recover() }()
			_ = Run(h.ctx, h.f, cb)
		}()
		h.f.grants <- grant{err: errStore}
		if v := <-done; v != errStore {
			t.Errorf("Run panicked with %v, want %v", v, errStore)
		}
		if n := len(h.f.campaignTimes()); n != 1 {
			t.Errorf("%d campaigns after a panic in OnError, want 1", n)
		}
	})
}

func TestRunOnLeaderReceivesObserve(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.start()
		sent := []Leader{
			{ID: "a", Value: []byte("10.0.0.1:80"), Priority: 2, Token: 7},
			{},
			{ID: "b", Token: 8},
			{ID: "b", Value: []byte("v2"), Token: 8},
		}
		for _, l := range sent {
			h.f.feed <- l
			synctest.Wait()
		}
		h.mu.Lock()
		got := append([]Leader(nil), h.leaders...)
		h.mu.Unlock()
		if len(got) != len(sent) {
			t.Fatalf("OnLeader got %v, want %v", got, sent)
		}
		for i := range sent {
			if !got[i].Equal(sent[i]) {
				t.Errorf("OnLeader #%d = %+v, want %+v", i, got[i], sent[i])
			}
		}
		if !got[1].IsZero() {
			t.Errorf("zero Leader not passed through: %+v", got[1])
		}
		h.cancel()
		h.wait()
		if h.runErr != context.Canceled {
			t.Errorf("Run = %v, want context.Canceled", h.runErr)
		}
		h.check()
	})
}

func TestRunNilElector(t *testing.T) {
	called := false
	cb := Callbacks{
		OnElected: func(context.Context, *Term) { called = true },
		OnDemoted: func(*Term) { called = true },
		OnLeader:  func(Leader) { called = true },
		OnError:   func(error) { called = true },
	}
	err := Run(context.Background(), nil, cb)
	if !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("Run(nil Elector) = %v, want an error wrapping ErrInvalidOption", err)
	}
	var oe *OptionError
	if !errors.As(err, &oe) || oe.Field != "Elector" {
		t.Errorf("Run(nil Elector) = %v, want an *OptionError for Elector", err)
	}
	if called {
		t.Errorf("a callback ran")
	}
}

// TestRunWonAsCtxEnded: Campaign wins just as ctx ends; Run steps down
// without calling OnElected or OnDemoted.
func TestRunWonAsCtxEnded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.start()
		h.grant(grant{during: h.cancel})
		h.wait()
		if h.runErr != context.Canceled {
			t.Errorf("Run = %v, want context.Canceled", h.runErr)
		}
		if !errors.Is(h.f.clock().Term().Err(), ErrResigned) {
			t.Errorf("won term Err = %v, want ErrResigned", h.f.clock().Term().Err())
		}
		h.check()
		wantLog(t, h.log.get(), "campaign", "resign")
	})
}

func TestRunCtxAlreadyCanceled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.cancel()
		h.start()
		h.wait()
		if h.runErr != context.Canceled {
			t.Errorf("Run = %v, want context.Canceled", h.runErr)
		}
		h.check()
		if e, _ := h.counts(); e != 0 {
			t.Errorf("OnElected called with a canceled ctx")
		}
	})
}

// TestRunWaitsForCallbacks: Run does not return before a slow OnElected has
// returned and OnDemoted has run; nothing runs after it returns (the
// harness's callbacks fail the test if called after Run returned).
func TestRunWaitsForCallbacks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.onElected = func(ctx context.Context, _ *Term) {
			<-ctx.Done()
			time.Sleep(5 * time.Second)
		}
		h.onDemoted = func(*Term) { time.Sleep(2 * time.Second) }
		h.start()
		h.f.feed <- Leader{ID: "x", Token: 1}
		h.win()
		cancelAt := time.Now()
		h.cancel()
		time.Sleep(7*time.Second - time.Nanosecond)
		synctest.Wait()
		if h.isReturned() {
			t.Fatalf("Run returned while a callback still ran")
		}
		h.wait()
		if got := h.returnedAt.Sub(cancelAt); got != 7*time.Second {
			t.Errorf("Run returned %v after the cancel, want 7s (5s OnElected + 2s OnDemoted)", got)
		}
		h.check()
	})
}

func TestRunNilCallbacks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &eventLog{}
		f := newFake(t, log)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- Run(ctx, f, Callbacks{}) }()
		f.grants <- grant{err: errors.New("transient")}
		f.grants <- grant{}
		synctest.Wait()
		f.clock().End(fmt.Errorf("fake: %w", ErrSessionLost))
		f.grants <- grant{}
		synctest.Wait()
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("Run = %v, want context.Canceled", err)
		}
		wantLog(t, log.get(), "campaign", "campaign", "campaign", "resign")
		if tok := f.clock().Term().Token(); tok != 2 {
			t.Errorf("last term token %d, want 2", tok)
		}
	})
}

// TestRunWaitsForOnLeader: Run does not return while OnLeader runs.
func TestRunWaitsForOnLeader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.onLeader = func(Leader) { time.Sleep(3 * time.Second) }
		h.start()
		h.f.feed <- Leader{ID: "x", Token: 1}
		fedAt := time.Now()
		time.Sleep(time.Second)
		h.cancel()
		synctest.Wait()
		if h.isReturned() {
			t.Fatalf("Run returned while OnLeader still ran")
		}
		h.wait()
		if got := h.returnedAt.Sub(fedAt); got != 3*time.Second {
			t.Errorf("Run returned %v after OnLeader started, want 3s (when it returned)", got)
		}
		if h.runErr != context.Canceled {
			t.Errorf("Run = %v, want context.Canceled", h.runErr)
		}
		h.check()
	})
}

// TestRunFirstPanicWins: OnElected panics, then OnDemoted panics too; Run
// propagates the first panic.
func TestRunFirstPanicWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.onElected = func(context.Context, *Term) { panic("first") }
		h.onDemoted = func(*Term) { panic("second") }
		h.start()
		h.win()
		h.wait()
		if h.panicVal != "first" {
			t.Errorf("Run panicked with %v, want the first panic", h.panicVal)
		}
		h.check()
		wantLog(t, h.log.get(), "campaign", "elected 1", "elected-returned 1", "resign", "demoted 1")
	})
}

// TestRunRetriesFailedResign: when Resign fails and the Term stays valid
// (renewals keep succeeding), Run retries Resign with backoff until the
// Term ends, instead of leading on after its ctx ended.
func TestRunRetriesFailedResign(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &eventLog{}
		f := newFake(t, log)
		f.resignFails = 2
		ctx, cancel := context.WithCancel(context.Background())
		elected := make(chan *Term, 1)
		done := make(chan error, 1)
		go func() {
			done <- Run(ctx, f, Callbacks{
				OnElected: func(ctx context.Context, t *Term) { elected <- t; <-ctx.Done() },
			})
		}()
		f.grants <- grant{}
		term := <-elected
		f.mu.Lock()
		clk := f.clk
		f.mu.Unlock()
		stopRenew := make(chan struct{})
		renewing := make(chan struct{})
		go func() { // a healthy session: renewed every second
			defer close(renewing)
			for {
				select {
				case <-stopRenew:
					return
				case <-time.After(time.Second):
					clk.Renewed(time.Now(), nil)
				}
			}
		}()
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Run = %v, want context.Canceled", err)
			}
		case <-time.After(time.Hour):
			t.Fatalf("Run still leading an hour after its ctx ended (Err %v)", term.Err())
		}
		close(stopRenew)
		<-renewing
		f.mu.Lock()
		resigns := f.resigns
		f.mu.Unlock()
		if resigns != 3 {
			t.Errorf("Resign called %d times, want 3 (two failures, then success)", resigns)
		}
		if !errors.Is(term.Err(), ErrResigned) {
			t.Errorf("Term ended with %v, want ErrResigned", term.Err())
		}
	})
}

// TestRunNilTermFromCampaign: a Campaign that returns neither a Term nor
// an error is reported through OnError and retried, not dereferenced.
func TestRunNilTermFromCampaign(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(t, &eventLog{})
		ctx, cancel := context.WithCancel(context.Background())
		errs := make(chan error, 1)
		done := make(chan error, 1)
		go func() {
			done <- Run(ctx, f, Callbacks{OnError: func(err error) { errs <- err }})
		}()
		f.grants <- grant{nilTerm: true}
		err := <-errs
		if err == nil || !strings.Contains(err.Error(), "neither a Term nor an error") || !strings.Contains(err.Error(), "fakeElector") {
			t.Errorf("OnError got %v, want an error naming the Elector's type", err)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v, want context.Canceled", err)
		}
	})
}
