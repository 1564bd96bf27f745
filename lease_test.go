package election

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// mustOptions builds Options or fails the test.
func mustOptions(t *testing.T, opts ...Option) Options {
	t.Helper()
	o, err := NewOptions(opts...)
	if err != nil {
		t.Fatalf("NewOptions: %v", err)
	}
	return o
}

// isDone reports whether ch is closed, without blocking.
func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

var testLeader = Leader{ID: "node-1", Value: []byte("10.0.0.1:80"), Priority: 5, Token: 42}

// hand10s is the example worked by hand: TTL 10s, drift 0.01, margin 100ms.
// 10s/1.01 = 9.900990099009…s, truncated to 9 900 990 099ns; minus 100ms.
const hand10s = 9_800_990_099 * time.Nanosecond

func TestTermDeadlineFormula(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := mustOptions(t, WithTTL(10*time.Second), WithDrift(0.01), WithMargin(100*time.Millisecond))
		if o.Window() != hand10s {
			t.Fatalf("Window() = %v, want %v (by hand)", o.Window(), hand10s)
		}
		sent := time.Now()
		term, clk := newTerm(o, testLeader, sent)
		defer clk.End(ErrResigned)
		if got := term.Deadline(); !got.Equal(sent.Add(o.Window())) {
			t.Errorf("Deadline = %v, want sent+Window = %v", got, sent.Add(o.Window()))
		}
		if got, want := term.Deadline().Sub(sent), hand10s; got != want {
			t.Errorf("Deadline - sent = %v, want %v (by hand)", got, want)
		}
		if got := time.Until(term.Deadline()); got != hand10s {
			t.Errorf("time.Until(Deadline) = %v, want %v", got, hand10s)
		}
		if term.Err() != nil {
			t.Errorf("fresh Term: Err = %v, want nil", term.Err())
		}
		if clk.Term() != term {
			t.Errorf("LeaseClock.Term() is not the Term NewTerm returned")
		}
	})
}

func TestTermDeadlineFormulaTable(t *testing.T) {
	cases := [][]Option{
		nil,
		{WithTTL(MinTTL), WithDrift(0), WithMargin(0)},
		{WithTTL(MinTTL), WithDrift(MaxDrift), WithMargin(0)},
		{WithTTL(MaxTTL), WithDrift(MaxDrift), WithMargin(time.Minute)},
		{WithTTL(7 * time.Second), WithDrift(0.033), WithMargin(250 * time.Millisecond)},
	}
	for i, opts := range cases {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				o := mustOptions(t, opts...)
				// A send time in the past: the deadline counts from it, not from now.
				sent := time.Now()
				time.Sleep(o.Window() / 3)
				term, clk := newTerm(o, testLeader, sent)
				want := sent.Add(time.Duration(float64(o.TTL)/(1+o.Drift)) - o.Margin)
				if !term.Deadline().Equal(want) {
					t.Errorf("Deadline = %v, want %v", term.Deadline(), want)
				}
				time.Sleep(time.Until(want) - time.Nanosecond)
				synctest.Wait()
				if isDone(term.Done()) {
					t.Fatalf("Term ended 1ns before its deadline: %v", term.Err())
				}
				time.Sleep(time.Nanosecond)
				synctest.Wait()
				if !errors.Is(term.Err(), ErrLeaseExpired) {
					t.Errorf("at the deadline Err = %v, want ErrLeaseExpired", term.Err())
				}
				clk.Wait()
			})
		})
	}
}

func TestTermExpiresExactlyAtDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := mustOptions(t)
		sent := time.Now()
		term, clk := newTerm(o, testLeader, sent)
		deadline := term.Deadline()
		if term.Done() != term.Context().Done() {
			t.Errorf("Done() is not Context().Done()")
		}

		time.Sleep(o.Window() - time.Nanosecond)
		synctest.Wait()
		if isDone(term.Done()) {
			t.Fatalf("Done closed at deadline-1ns (%v)", term.Err())
		}
		if term.Err() != nil || term.Context().Err() != nil {
			t.Fatalf("at deadline-1ns Err = %v, Context().Err() = %v; want nil", term.Err(), term.Context().Err())
		}

		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if !time.Now().Equal(deadline) {
			t.Fatalf("test bug: now %v != deadline %v", time.Now(), deadline)
		}
		if !isDone(term.Done()) {
			t.Fatalf("Done not closed at the deadline")
		}
		if term.Err() != ErrLeaseExpired {
			t.Errorf("Err = %v, want ErrLeaseExpired", term.Err())
		}
		if !errors.Is(term.Context().Err(), context.Canceled) {
			t.Errorf("Context().Err() = %v, want context.Canceled", term.Context().Err())
		}
		if got := context.Cause(term.Context()); got != term.Err() {
			t.Errorf("context.Cause = %v, want Err = %v", got, term.Err())
		}
		if term.Done() != term.Context().Done() {
			t.Errorf("Done() is not Context().Done() after the end")
		}
		if !term.Deadline().Equal(deadline) {
			t.Errorf("Deadline moved at expiry: %v, was %v", term.Deadline(), deadline)
		}
		// Ending an expired Term again has no effect.
		if clk.End(ErrResigned) {
			t.Errorf("End after expiry returned true")
		}
		if term.Err() != ErrLeaseExpired {
			t.Errorf("after End: Err = %v, want ErrLeaseExpired", term.Err())
		}
		clk.Wait()
	})
}

func TestRenewedMovesDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := mustOptions(t)
		w := o.Window()
		sent0 := time.Now()
		term, clk := newTerm(o, testLeader, sent0)

		// A successful renewal sent 2s later moves the deadline to sent2+W.
		time.Sleep(2 * time.Second)
		sent2 := time.Now()
		time.Sleep(20 * time.Millisecond) // the reply's latency
		if got := clk.Renewed(sent2, nil); !got.Equal(sent2.Add(w)) {
			t.Errorf("Renewed(sent2, nil) = %v, want sent2+W = %v", got, sent2.Add(w))
		}
		if got := term.Deadline(); !got.Equal(sent2.Add(w)) {
			t.Errorf("Deadline = %v, want sent2+W = %v", got, sent2.Add(w))
		}

		// A failed renewal leaves the deadline.
		time.Sleep(time.Second)
		sent3 := time.Now()
		if got := clk.Renewed(sent3, errors.New("store unreachable")); !got.Equal(sent2.Add(w)) {
			t.Errorf("failed Renewed = %v, want the deadline unchanged at %v", got, sent2.Add(w))
		}
		if got := term.Deadline(); !got.Equal(sent2.Add(w)) {
			t.Errorf("Deadline after a failure = %v, want %v", got, sent2.Add(w))
		}

		// A successful renewal with an older send time (a reordered reply)
		// never moves the deadline backwards.
		if got := clk.Renewed(sent0.Add(time.Second), nil); !got.Equal(sent2.Add(w)) {
			t.Errorf("Renewed with an old send time = %v, want %v", got, sent2.Add(w))
		}
		if got := term.Deadline(); !got.Equal(sent2.Add(w)) {
			t.Errorf("Deadline moved backwards to %v, want %v", got, sent2.Add(w))
		}

		// The old deadline passes without ending the Term...
		time.Sleep(time.Until(sent0.Add(w)) + time.Millisecond)
		synctest.Wait()
		if term.Err() != nil {
			t.Fatalf("Term ended at its old deadline: %v", term.Err())
		}
		// ...and it ends exactly at the new one.
		time.Sleep(time.Until(sent2.Add(w)) - time.Nanosecond)
		synctest.Wait()
		if term.Err() != nil {
			t.Fatalf("Term ended 1ns before the renewed deadline: %v", term.Err())
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if term.Err() != ErrLeaseExpired {
			t.Errorf("at the renewed deadline Err = %v, want ErrLeaseExpired", term.Err())
		}
	})
}

func TestRenewedManyTimesKeepsTermAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := mustOptions(t, WithTTL(MinTTL))
		term, clk := newTerm(o, testLeader, time.Now())
		var last time.Time
		for range 100 { // 100 renewals a third of a TTL apart: ~33s of leadership
			time.Sleep(o.TTL / 3)
			last = time.Now()
			clk.Renewed(last, nil)
			synctest.Wait()
			if term.Err() != nil {
				t.Fatalf("Term ended while renewed in time: %v", term.Err())
			}
		}
		time.Sleep(time.Hour)
		if term.Err() != ErrLeaseExpired {
			t.Fatalf("Err = %v, want ErrLeaseExpired", term.Err())
		}
		if !term.Deadline().Equal(last.Add(o.Window())) {
			t.Errorf("Deadline = %v, want last send + W = %v", term.Deadline(), last.Add(o.Window()))
		}
	})
}

func TestLateReplyCountsFromSendTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := mustOptions(t)
		w := o.Window()
		t0 := time.Now()
		term, clk := newTerm(o, testLeader, t0)

		time.Sleep(time.Second)
		s := time.Now()
		// The reply arrives 1ms before the current deadline t0+W.
		time.Sleep(time.Until(t0.Add(w)) - time.Millisecond)
		now := time.Now()
		got := clk.Renewed(s, nil)
		if !got.Equal(s.Add(w)) {
			t.Errorf("late reply: deadline = %v, want send+W = %v (not now+W = %v)", got, s.Add(w), now.Add(w))
		}
		if got.Sub(s) != w {
			t.Errorf("deadline - send = %v, want W = %v", got.Sub(s), w)
		}
		time.Sleep(time.Until(s.Add(w)) - time.Nanosecond)
		synctest.Wait()
		if term.Err() != nil {
			t.Fatalf("ended before send+W: %v", term.Err())
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if term.Err() != ErrLeaseExpired {
			t.Errorf("at send+W Err = %v, want ErrLeaseExpired", term.Err())
		}
	})
}

func TestReplyAfterDeadlineDoesNotRevive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := mustOptions(t)
		w := o.Window()
		t0 := time.Now()
		term, clk := newTerm(o, testLeader, t0)
		time.Sleep(time.Second)
		s := time.Now() // a renewal sent well before the deadline...
		time.Sleep(w)   // ...whose reply arrives after it
		synctest.Wait()
		if term.Err() != ErrLeaseExpired {
			t.Fatalf("Err = %v, want ErrLeaseExpired", term.Err())
		}
		if got := clk.Renewed(s, nil); !got.Equal(t0.Add(w)) {
			t.Errorf("Renewed after expiry = %v, want the old deadline %v", got, t0.Add(w))
		}
		if term.Err() != ErrLeaseExpired || !isDone(term.Done()) {
			t.Errorf("late reply revived the Term: Err = %v", term.Err())
		}
		if !term.Deadline().Equal(t0.Add(w)) {
			t.Errorf("Deadline = %v, want %v", term.Deadline(), t0.Add(w))
		}
	})
}

// TestReplyAtDeadline records a successful reply at exactly the deadline,
// racing the expiry timer: whichever runs first, the Term ends expired.
func TestReplyAtDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := mustOptions(t)
		t0 := time.Now()
		term, clk := newTerm(o, testLeader, t0)
		time.Sleep(time.Second)
		s := time.Now()
		time.Sleep(time.Until(term.Deadline()))
		clk.Renewed(s, nil)
		synctest.Wait()
		if term.Err() != ErrLeaseExpired {
			t.Errorf("Err = %v, want ErrLeaseExpired", term.Err())
		}
		if !term.Deadline().Equal(t0.Add(o.Window())) {
			t.Errorf("Deadline = %v, want %v", term.Deadline(), t0.Add(o.Window()))
		}
	})
}

func TestNewTermAlreadyExpired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := mustOptions(t)
		w := o.Window()
		for _, age := range []time.Duration{w, w + time.Nanosecond, time.Hour} {
			term, clk := newTerm(o, testLeader, time.Now().Add(-age))
			if !isDone(term.Done()) || term.Err() != ErrLeaseExpired {
				t.Errorf("send time %v ago: Done closed = %v, Err = %v; want an ended Term with ErrLeaseExpired", age, isDone(term.Done()), term.Err())
			}
			clk.Wait()
		}
		// One nanosecond younger than the window: valid for one nanosecond.
		term, _ := newTerm(o, testLeader, time.Now().Add(-w+time.Nanosecond))
		if term.Err() != nil {
			t.Fatalf("send time W-1ns ago: Err = %v, want nil", term.Err())
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if term.Err() != ErrLeaseExpired {
			t.Errorf("1ns later: Err = %v, want ErrLeaseExpired", term.Err())
		}
		// With hooks set the hook goroutine exits as well.
		o.BeforeRenew = func(context.Context, *Term) error { return nil }
		term, clk := newTerm(o, testLeader, time.Now().Add(-time.Hour))
		if term.Err() != ErrLeaseExpired {
			t.Errorf("with hooks: Err = %v, want ErrLeaseExpired", term.Err())
		}
		if err := clk.BeforeRenew(); err != ErrLeaseExpired {
			t.Errorf("BeforeRenew on an expired Term = %v, want ErrLeaseExpired", err)
		}
		clk.Wait()
	})
}

func TestEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := mustOptions(t)
		term, clk := newTerm(o, testLeader, time.Now())
		deadline := term.Deadline()
		time.Sleep(time.Second)
		cause := fmt.Errorf("etcd: key /e/1: %w", ErrResigned)
		if !clk.End(cause) {
			t.Fatalf("first End returned false")
		}
		if !isDone(term.Done()) {
			t.Fatalf("Done not closed after End")
		}
		if !errors.Is(term.Err(), ErrResigned) || term.Err() != cause {
			t.Errorf("Err = %v, want %v", term.Err(), cause)
		}
		if context.Cause(term.Context()) != cause {
			t.Errorf("context.Cause = %v, want %v", context.Cause(term.Context()), cause)
		}
		if clk.End(ErrClosed) {
			t.Errorf("second End returned true")
		}
		if term.Err() != cause {
			t.Errorf("second End replaced the cause: %v", term.Err())
		}
		// Renewals after End are ignored.
		if got := clk.Renewed(time.Now(), nil); !got.Equal(deadline) {
			t.Errorf("Renewed after End = %v, want the old deadline %v", got, deadline)
		}
		if !term.Deadline().Equal(deadline) || term.Err() != cause {
			t.Errorf("Renewed after End changed the Term: deadline %v, Err %v", term.Deadline(), term.Err())
		}
		// The expiry timer no longer overwrites the cause.
		time.Sleep(time.Hour)
		synctest.Wait()
		if term.Err() != cause {
			t.Errorf("after the old deadline: Err = %v, want %v", term.Err(), cause)
		}
		clk.Wait()
	})
}

func TestWaitAfterEndWithoutHooks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		term, clk := newTerm(mustOptions(t), testLeader, time.Now())
		waited := make(chan struct{})
		go func() {
			clk.Wait()
			close(waited)
		}()
		time.Sleep(time.Second)
		synctest.Wait()
		if isDone(waited) {
			t.Fatalf("Wait returned while the Term is valid")
		}
		clk.End(ErrSessionLost)
		synctest.Wait()
		if !isDone(waited) {
			t.Fatalf("Wait did not return after End")
		}
		if !errors.Is(term.Err(), ErrSessionLost) {
			t.Errorf("Err = %v, want ErrSessionLost", term.Err())
		}
	})
}

func TestTermAccessors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := Leader{ID: "n", Value: []byte("abc"), Priority: 3, Token: 9}
		term, clk := newTerm(mustOptions(t), l, time.Now())
		defer clk.End(ErrResigned)
		l.Value[0] = 'X' // NewTerm copied the value
		got := term.Leader()
		if got.ID != "n" || string(got.Value) != "abc" || got.Priority != 3 || got.Token != 9 {
			t.Errorf("Leader() = %+v", got)
		}
		got.Value[0] = 'Y' // Leader() returns a copy
		if string(term.Leader().Value) != "abc" {
			t.Errorf("Leader().Value aliases the Term's: %q", term.Leader().Value)
		}
		if term.Token() != 9 {
			t.Errorf("Token() = %d, want 9", term.Token())
		}
		if s := term.String(); s != "term n@9" {
			t.Errorf("String() = %q, want %q", s, "term n@9")
		}
	})
}

// hookLog records hook calls in order.
type hookLog struct {
	mu       sync.Mutex
	events   []string
	renewals []Renewal
}

func (h *hookLog) add(e string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, e)
}

func (h *hookLog) snapshot() ([]string, []Renewal) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.events...), append([]Renewal(nil), h.renewals...)
}

func TestHooksCalledInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var h hookLog
		var term *Term
		o := mustOptions(t,
			WithBeforeRenew(func(ctx context.Context, got *Term) error {
				if got != term {
					t.Errorf("before hook got Term %p, want %p", got, term)
				}
				if ctx != term.Context() {
					t.Errorf("before hook ctx is not the Term's Context")
				}
				if ctx.Err() != nil {
					t.Errorf("before hook ctx already done: %v", ctx.Err())
				}
				h.add(fmt.Sprintf("before@%v", time.Since(got.Deadline())))
				return nil
			}),
			WithAfterRenew(func(r Renewal) {
				h.mu.Lock()
				h.renewals = append(h.renewals, r)
				h.mu.Unlock()
				h.add("after")
			}),
		)
		w := o.Window()
		term0, clk := newTerm(o, testLeader, time.Now())
		term = term0
		synctest.Wait()
		if ev, _ := h.snapshot(); len(ev) != 0 {
			t.Fatalf("hooks called before any renewal: %v", ev)
		}

		// Attempt 1: succeeds after 30ms.
		time.Sleep(time.Second)
		if err := clk.BeforeRenew(); err != nil {
			t.Fatalf("BeforeRenew = %v", err)
		}
		sent1 := time.Now()
		time.Sleep(30 * time.Millisecond)
		clk.Renewed(sent1, nil)
		synctest.Wait()

		// Attempt 2: fails after 200ms.
		time.Sleep(time.Second)
		if err := clk.BeforeRenew(); err != nil {
			t.Fatalf("BeforeRenew = %v", err)
		}
		sent2 := time.Now()
		time.Sleep(200 * time.Millisecond)
		errStore := errors.New("store: timeout")
		clk.Renewed(sent2, errStore)
		synctest.Wait()

		ev, rs := h.snapshot()
		wantEv := []string{
			fmt.Sprintf("before@%v", -(w - time.Second)), "after",
			fmt.Sprintf("before@%v", -(w - 1030*time.Millisecond)), "after",
		}
		if fmt.Sprint(ev) != fmt.Sprint(wantEv) {
			t.Errorf("hook calls = %v, want %v", ev, wantEv)
		}
		if len(rs) != 2 {
			t.Fatalf("got %d renewals, want 2", len(rs))
		}
		want := []Renewal{
			{Leader: testLeader, Sent: sent1, Latency: 30 * time.Millisecond, Err: nil, Deadline: sent1.Add(w)},
			{Leader: testLeader, Sent: sent2, Latency: 200 * time.Millisecond, Err: errStore, Deadline: sent1.Add(w)},
		}
		for i, r := range rs {
			wr := want[i]
			if !r.Leader.Equal(wr.Leader) || !r.Sent.Equal(wr.Sent) || r.Latency != wr.Latency || r.Err != wr.Err || !r.Deadline.Equal(wr.Deadline) {
				t.Errorf("renewal %d = %+v, want %+v", i+1, r, wr)
			}
		}
		if term.Err() != nil {
			t.Errorf("Term ended: %v", term.Err())
		}
		clk.End(ErrResigned)
		clk.Wait()
		// Ended: no more hook calls.
		if err := clk.BeforeRenew(); !errors.Is(err, ErrResigned) {
			t.Errorf("BeforeRenew after End = %v, want ErrResigned", err)
		}
		clk.Renewed(time.Now(), nil)
		synctest.Wait()
		if ev2, _ := h.snapshot(); len(ev2) != len(ev) {
			t.Errorf("hooks called after End: %v", ev2[len(ev):])
		}
	})
}

func TestAfterHookOrderOfAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var h hookLog
		release := make(chan struct{})
		first := true
		o := mustOptions(t, WithAfterRenew(func(r Renewal) {
			if first { // hold the hook goroutine so that attempts queue up
				first = false
				<-release
			}
			h.mu.Lock()
			h.renewals = append(h.renewals, r)
			h.mu.Unlock()
		}))
		_, clk := newTerm(o, testLeader, time.Now())
		var sent []time.Time
		for i := range 10 {
			time.Sleep(10 * time.Millisecond)
			s := time.Now()
			sent = append(sent, s)
			var err error
			if i%3 == 1 {
				err = fmt.Errorf("attempt %d failed", i)
			}
			clk.Renewed(s, err)
		}
		close(release)
		synctest.Wait()
		_, rs := h.snapshot()
		if len(rs) != len(sent) {
			t.Fatalf("after hook called %d times, want %d", len(rs), len(sent))
		}
		for i, r := range rs {
			if !r.Sent.Equal(sent[i]) {
				t.Errorf("call %d: Sent = %v, want %v (out of order)", i, r.Sent, sent[i])
			}
			if (r.Err != nil) != (i%3 == 1) {
				t.Errorf("call %d: Err = %v", i, r.Err)
			}
		}
		clk.End(ErrResigned)
		clk.Wait()
	})
}

func TestBeforeRenewErrorEndsTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		errDisk := errors.New("disk full")
		var after hookLog
		o := mustOptions(t,
			WithBeforeRenew(func(context.Context, *Term) error { return errDisk }),
			WithAfterRenew(func(r Renewal) { after.add("after") }),
		)
		term, clk := newTerm(o, testLeader, time.Now())
		err := clk.BeforeRenew()
		if err == nil {
			t.Fatalf("BeforeRenew = nil, want an error")
		}
		if !errors.Is(err, ErrUnhealthy) || !errors.Is(err, errDisk) {
			t.Errorf("BeforeRenew = %v, want ErrUnhealthy wrapping %v", err, errDisk)
		}
		if !isDone(term.Done()) {
			t.Fatalf("Term not ended by a failing before hook")
		}
		if !errors.Is(term.Err(), ErrUnhealthy) || !errors.Is(term.Err(), errDisk) {
			t.Errorf("Err = %v, want ErrUnhealthy wrapping %v", term.Err(), errDisk)
		}
		if err != term.Err() {
			t.Errorf("BeforeRenew returned %v, Term.Err is %v", err, term.Err())
		}
		clk.Wait()
		if ev, _ := after.snapshot(); len(ev) != 0 {
			t.Errorf("after hook called without a renewal: %v", ev)
		}
	})
}

func TestPanickingHooks(t *testing.T) {
	for _, which := range []string{"before", "after"} {
		t.Run(which, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var buf bytes.Buffer
				var mu sync.Mutex
				log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, nil))
				opts := []Option{WithLogger(log)}
				if which == "before" {
					opts = append(opts, WithBeforeRenew(func(context.Context, *Term) error { panic("kaboom-" + which) }))
				} else {
					opts = append(opts, WithAfterRenew(func(Renewal) { panic("kaboom-" + which) }))
				}
				term, clk := newTerm(mustOptions(t, opts...), testLeader, time.Now())
				time.Sleep(time.Second)
				err := clk.BeforeRenew()
				if which == "before" {
					if !errors.Is(err, ErrUnhealthy) {
						t.Errorf("BeforeRenew = %v, want ErrUnhealthy", err)
					}
				} else {
					if err != nil {
						t.Fatalf("BeforeRenew = %v, want nil", err)
					}
					clk.Renewed(time.Now(), nil)
				}
				synctest.Wait()
				if !errors.Is(term.Err(), ErrUnhealthy) {
					t.Fatalf("Err = %v, want ErrUnhealthy", term.Err())
				}
				if !strings.Contains(term.Err().Error(), "kaboom-"+which) {
					t.Errorf("Err %q does not carry the panic value", term.Err())
				}
				clk.Wait()
				mu.Lock()
				logged := buf.String()
				mu.Unlock()
				if !strings.Contains(logged, "hook panicked") || !strings.Contains(logged, "kaboom-"+which) {
					t.Errorf("panic not logged: %q", logged)
				}
			})
		})
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func TestBlockingBeforeHookCannotExtendTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			started     = make(chan struct{})
			release     = make(chan struct{})
			ctxDoneAt   time.Time
			hookReturns = make(chan struct{})
		)
		var term *Term
		o := mustOptions(t, WithBeforeRenew(func(ctx context.Context, _ *Term) error {
			close(started)
			<-ctx.Done()
			ctxDoneAt = time.Now()
			<-release // keeps blocking after its ctx is done
			close(hookReturns)
			return nil
		}))
		t0 := time.Now()
		term0, clk := newTerm(o, testLeader, t0)
		term = term0
		deadline := term.Deadline()

		time.Sleep(time.Second)
		beforeErr := make(chan error, 1)
		var beforeReturnedAt time.Time
		go func() {
			err := clk.BeforeRenew()
			beforeReturnedAt = time.Now()
			beforeErr <- err
		}()
		<-started

		time.Sleep(time.Until(deadline) - time.Nanosecond)
		synctest.Wait()
		if term.Err() != nil {
			t.Fatalf("Term ended before its deadline: %v", term.Err())
		}
		select {
		case err := <-beforeErr:
			t.Fatalf("BeforeRenew returned %v while its hook blocks before the deadline", err)
		default:
		}

		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if term.Err() != ErrLeaseExpired {
			t.Fatalf("at the deadline Err = %v, want ErrLeaseExpired", term.Err())
		}
		if !ctxDoneAt.Equal(deadline) {
			t.Errorf("hook ctx canceled at %v, want at the deadline %v", ctxDoneAt, deadline)
		}
		select {
		case err := <-beforeErr:
			if err != ErrLeaseExpired {
				t.Errorf("BeforeRenew = %v, want ErrLeaseExpired", err)
			}
			if !beforeReturnedAt.Equal(deadline) {
				t.Errorf("BeforeRenew returned at %v, want at the deadline %v", beforeReturnedAt, deadline)
			}
		default:
			t.Fatalf("BeforeRenew did not return at the deadline while its hook blocks")
		}

		// Wait waits for the hook.
		waited := make(chan struct{})
		go func() {
			clk.Wait()
			select {
			case <-hookReturns:
			default:
				t.Errorf("Wait returned before the hook returned")
			}
			close(waited)
		}()
		time.Sleep(time.Minute)
		synctest.Wait()
		if isDone(waited) {
			t.Fatalf("Wait returned while the hook is still running")
		}
		// A successful reply arriving now does not revive the Term.
		clk.Renewed(t0.Add(2*time.Second), nil)
		close(release)
		synctest.Wait()
		if !isDone(waited) {
			t.Fatalf("Wait did not return after the hook returned")
		}
		if term.Err() != ErrLeaseExpired {
			t.Errorf("Err = %v, want ErrLeaseExpired", term.Err())
		}
	})
}

// TestBlockingAfterHookDoesNotDelayExpiry: an after hook that blocks keeps
// neither the Term alive nor BeforeRenew from returning at the deadline.
func TestBlockingAfterHookDoesNotDelayExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		beforeCalls := 0
		o := mustOptions(t,
			WithAfterRenew(func(Renewal) { <-release }),
			WithBeforeRenew(func(context.Context, *Term) error { beforeCalls++; return nil }),
		)
		term, clk := newTerm(o, testLeader, time.Now())
		time.Sleep(time.Second)
		s := time.Now()
		clk.Renewed(s, nil) // its after hook blocks
		res := make(chan error, 1)
		go func() { res <- clk.BeforeRenew() }() // queued behind the blocked hook
		time.Sleep(time.Until(s.Add(o.Window())))
		synctest.Wait()
		if term.Err() != ErrLeaseExpired {
			t.Fatalf("Err = %v, want ErrLeaseExpired at send+W", term.Err())
		}
		select {
		case err := <-res:
			if err != ErrLeaseExpired {
				t.Errorf("BeforeRenew = %v, want ErrLeaseExpired", err)
			}
		default:
			t.Fatalf("BeforeRenew still blocked after the deadline")
		}
		close(release)
		clk.Wait()
		if beforeCalls != 0 {
			t.Errorf("before hook ran for a renewal queued until after the Term ended")
		}
	})
}

// stopTimer simulates a deadline timer that runs late (a loaded machine):
// it stops it, so that only the other paths can end the Term.
func stopTimer(term *Term) {
	term.mu.Lock()
	defer term.mu.Unlock()
	term.timer.Stop()
}

// TestRenewedAfterDeadlineWithLateTimer: a successful reply recorded at the
// deadline, before the deadline timer has run, must not revive the Term:
// Renewed itself ends it.
func TestRenewedAfterDeadlineWithLateTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := mustOptions(t)
		t0 := time.Now()
		term, clk := newTerm(o, testLeader, t0)
		stopTimer(term)
		time.Sleep(time.Second)
		s := time.Now()
		time.Sleep(time.Until(t0.Add(o.Window()))) // now == the deadline
		if got := clk.Renewed(s, nil); !got.Equal(t0.Add(o.Window())) {
			t.Errorf("Renewed at the deadline = %v, want the old deadline %v (not revived to %v)", got, t0.Add(o.Window()), s.Add(o.Window()))
		}
		if !isDone(term.Done()) {
			t.Fatalf("Renewed at the deadline did not end the Term")
		}
		if c := context.Cause(term.Context()); c != ErrLeaseExpired {
			t.Errorf("cause = %v, want ErrLeaseExpired", c)
		}
	})
}

// TestErrReadsTheClock: Err reports ErrLeaseExpired, and ends the Term, once
// the deadline has passed even if the deadline timer has not run.
func TestErrReadsTheClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := mustOptions(t)
		term, _ := newTerm(o, testLeader, time.Now())
		stopTimer(term)
		time.Sleep(o.Window() - time.Nanosecond)
		if err := term.Err(); err != nil {
			t.Fatalf("Err 1ns before the deadline = %v", err)
		}
		time.Sleep(time.Nanosecond)
		if isDone(term.Done()) {
			t.Fatalf("test bug: Done closed with the timer stopped")
		}
		if err := term.Err(); err != ErrLeaseExpired {
			t.Fatalf("Err at the deadline = %v, want ErrLeaseExpired", err)
		}
		if !isDone(term.Done()) || context.Cause(term.Context()) != ErrLeaseExpired {
			t.Errorf("Err reported expiry but the Term's context is not canceled with it")
		}
	})
}

// TestExpiryRearmsExactly: a renewal that moves the deadline by 1ns past the
// pending timer keeps the Term valid at the old deadline; it ends exactly at
// the new one.
func TestExpiryRearmsExactly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := mustOptions(t)
		t0 := time.Now()
		term, clk := newTerm(o, testLeader, t0)
		time.Sleep(time.Nanosecond)
		clk.Renewed(time.Now(), nil) // deadline t0+W+1ns; the timer still says t0+W
		time.Sleep(time.Until(t0.Add(o.Window())))
		synctest.Wait()
		if isDone(term.Done()) {
			t.Fatalf("Term ended at the old deadline: %v", context.Cause(term.Context()))
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if !isDone(term.Done()) || term.Err() != ErrLeaseExpired {
			t.Fatalf("Term not expired at the new deadline: %v", term.Err())
		}
	})
}

// TestLateReplyReachesAfterHook: the renewal whose reply comes at or after
// the deadline (before the timer ran) is the one that loses the lease: the
// after-renewal hook must hear of it (P7), and the Term ends.
func TestLateReplyReachesAfterHook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		got := make(chan Renewal, 4)
		o := mustOptions(t, WithAfterRenew(func(r Renewal) { got <- r }))
		t0 := time.Now()
		term, clk := newTerm(o, testLeader, t0)
		stopTimer(term)
		time.Sleep(o.Window())
		clk.Renewed(t0.Add(time.Second), nil)
		clk.Wait()
		select {
		case r := <-got:
			if !errors.Is(r.Err, ErrLeaseExpired) {
				t.Errorf("late reply reported with Err %v, want ErrLeaseExpired", r.Err)
			}
			if !r.Deadline.Equal(t0.Add(o.Window())) {
				t.Errorf("late reply reported deadline %v, want the unchanged %v", r.Deadline, t0.Add(o.Window()))
			}
		default:
			t.Fatal("the late reply never reached the after-renewal hook")
		}
		if !errors.Is(term.Err(), ErrLeaseExpired) {
			t.Errorf("Term Err %v, want ErrLeaseExpired", term.Err())
		}
	})
}

// TestFutureSendTimeCountsAsNow: a send time after the moment Renewed runs
// cannot push the deadline past now + Window.
func TestFutureSendTimeCountsAsNow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o := mustOptions(t)
		t0 := time.Now()
		_, clk := newTerm(o, testLeader, t0)
		time.Sleep(time.Second)
		now := time.Now()
		if d := clk.Renewed(now.Add(time.Hour), nil); !d.Equal(now.Add(o.Window())) {
			t.Errorf("deadline %v after a future send time, want now+Window %v", d, now.Add(o.Window()))
		}
		clk.End(ErrResigned)
		term, _ := newTerm(o, testLeader, now.Add(time.Hour))
		if d := term.Deadline(); !d.Equal(now.Add(o.Window())) {
			t.Errorf("NewTerm deadline %v with a future send time, want now+Window %v", d, now.Add(o.Window()))
		}
	})
}

// A renewal that several Terms share is taken by each in its turn, after
// its reply came: RenewedAt reports the renewal's own latency (reply −
// send) to the hooks and Events, not the time until the Term took it; the
// deadline counts from the send as with Renewed, and a late taker still
// finds a lapsed Term lapsed.
func TestRenewedAtReportsTheRepliesLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var got []Renewal
		o := mustOptions(t, WithAfterRenew(func(r Renewal) {
			mu.Lock()
			got = append(got, r)
			mu.Unlock()
		}))
		w := o.Window()
		term, clk := newTerm(o, testLeader, time.Now())
		time.Sleep(time.Second)
		sent := time.Now()
		time.Sleep(20 * time.Millisecond)
		replied := time.Now()
		time.Sleep(300 * time.Millisecond) // taken late
		if d := clk.RenewedAt(sent, replied, nil); !d.Equal(sent.Add(w)) {
			t.Errorf("deadline %v after the renewal, want sent + window %v", d, sent.Add(w))
		}
		// A reply time in the future counts as now, none (zero) as now.
		sent2 := time.Now()
		time.Sleep(10 * time.Millisecond)
		clk.RenewedAt(sent2, time.Now().Add(time.Hour), nil)
		sent3 := time.Now()
		time.Sleep(5 * time.Millisecond)
		clk.RenewedAt(sent3, time.Time{}, nil)
		synctest.Wait()
		mu.Lock()
		want := []time.Duration{20 * time.Millisecond, 10 * time.Millisecond, 5 * time.Millisecond}
		if len(got) != len(want) {
			t.Fatalf("%d renewals reported, want %d", len(got), len(want))
		}
		for i, r := range got {
			if r.Latency != want[i] {
				t.Errorf("renewal %d: Latency %v, want %v", i+1, r.Latency, want[i])
			}
		}
		mu.Unlock()
		// Taken after the deadline, a reply that came before it does not
		// revive the Term.
		last := time.Now()
		time.Sleep(w + time.Second)
		clk.RenewedAt(last, last.Add(time.Millisecond), nil)
		if !errors.Is(term.Err(), ErrLeaseExpired) {
			t.Errorf("Term after a renewal taken past its deadline: %v, want ErrLeaseExpired", term.Err())
		}
		clk.End(ErrResigned)
		clk.Wait()
	})
}
