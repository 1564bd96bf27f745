package etcd

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// A candidacy is a context: done at its halt, and the contexts derived
// from it end with it, leaving no hook behind once they end first.
func TestCandidacyContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &candidacy{settled: make(chan struct{})}
		_ = c.Err()
		c.hookMu.Lock()
		made := c.done != nil
		c.hookMu.Unlock()
		if made {
			t.Error("Err made Done's channel")
		}
		if c.Err() != nil {
			t.Fatalf("Err before halt = %v", c.Err())
		}
		if _, ok := c.Deadline(); ok || c.Value("k") != nil {
			t.Error("a candidacy has a deadline or a value")
		}
		// A derived context that ends first takes its hook with it.
		for range 3 {
			ctx, cancel := context.WithTimeout(c.ctx(), time.Second)
			cancel()
			<-ctx.Done()
		}
		short, cancel := context.WithTimeout(c.ctx(), time.Millisecond)
		defer cancel()
		<-short.Done()
		synctest.Wait()
		c.hookMu.Lock()
		left := len(c.hooks)
		c.hookMu.Unlock()
		if left != 0 {
			t.Errorf("%d hooks left by derived contexts that ended", left)
		}
		// One still running ends with the halt, and so does a wait on
		// Done, whether it began before the halt or after.
		live, cancelLive := context.WithCancel(c.ctx())
		defer cancelLive()
		early := c.Done()
		c.halt()
		select {
		case <-live.Done():
		default:
			t.Error("a derived context outlived the halt")
		}
		if !errors.Is(live.Err(), context.Canceled) || !errors.Is(c.Err(), context.Canceled) {
			t.Errorf("after halt: derived Err %v, candidacy Err %v; want Canceled", live.Err(), c.Err())
		}
		for i, ch := range []<-chan struct{}{early, c.Done()} {
			select {
			case <-ch:
			default:
				t.Errorf("Done channel %d open after halt", i)
			}
		}
		select {
		case <-c.settled:
		default:
			t.Error("halt did not settle the candidacy")
		}
		// After the halt: a derived context is done at once, and
		// AfterFunc runs its func (in a goroutine of its own).
		late, cancelLate := context.WithCancel(c.ctx())
		defer cancelLate()
		if late.Err() == nil {
			t.Error("a context derived after the halt is not done")
		}
		ran := make(chan struct{})
		if stop := c.AfterFunc(func() { close(ran) }); stop() {
			t.Error("stop() after the halt reports it stopped the func")
		}
		synctest.Wait()
		select {
		case <-ran:
		default:
			t.Error("AfterFunc after the halt never ran its func")
		}
	})
}

// A request under a candidacy's context gets one of its own: ended by the
// halt, leaving no hook once answered, and no goroutine watching a
// wrapper of the candidacy (the client wraps what it is given in its
// metadata before gRPC derives the request's context).
func TestRequestContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &candidacy{settled: make(chan struct{})}
		hooks := func() int {
			c.hookMu.Lock()
			defer c.hookMu.Unlock()
			return len(c.hooks)
		}
		ctx, done := requestCtx(c.ctx())
		if _, ok := ctx.(*candidacy); ok {
			t.Fatal("requestCtx gave the candidacy itself")
		}
		// What gRPC does with it, after the client's metadata.
		type key struct{}
		grpcCtx, cancel := context.WithCancel(context.WithValue(ctx, key{}, "md"))
		if hooks() != 1 {
			t.Errorf("%d halt hooks during a request, want 1", hooks())
		}
		cancel()
		done()
		if hooks() != 0 {
			t.Errorf("%d halt hooks after the request, want 0", hooks())
		}
		_ = grpcCtx
		// A request in flight ends with the halt.
		ctx, done = requestCtx(c.ctx())
		defer done()
		c.halt()
		if ctx.Err() == nil {
			t.Error("a request's context outlived the candidacy's halt")
		}
		// Any other context is used as is.
		bg := context.Background()
		if got, done := requestCtx(bg); got != bg {
			t.Error("requestCtx replaced a context that is not a candidacy's")
		} else {
			done()
		}
	})
}

// A wait under a candidacy's context (limiter) gets a channel of its own,
// closed at the halt, and leaves neither a hook nor the candidacy's Done
// channel behind: a burst's creates all wait in the limiter.
func TestDoneOfACandidacy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &candidacy{settled: make(chan struct{})}
		state := func() (hooks int, done bool) {
			c.hookMu.Lock()
			defer c.hookMu.Unlock()
			return len(c.hooks), c.done != nil
		}
		ch, _, stop := doneOf(c.ctx())
		if h, _ := state(); h != 1 {
			t.Errorf("%d halt hooks during the wait, want 1", h)
		}
		select {
		case <-ch:
			t.Fatal("the wait's channel closed before the halt")
		default:
		}
		if !stop() {
			t.Error("stop found no hook to remove")
		}
		if h, d := state(); h != 0 || d {
			t.Errorf("after the wait: %d halt hooks, Done channel made %t; want none", h, d)
		}
		ch, _, stop = doneOf(c.ctx())
		c.halt()
		synctest.Wait()
		select {
		case <-ch:
		default:
			t.Fatal("the wait's channel is open after the halt")
		}
		if stop() {
			t.Error("stop removed a hook that had run")
		}
		// Halted already: the channel closes all the same.
		ch, _, _ = doneOf(c.ctx())
		synctest.Wait()
		select {
		case <-ch:
		default:
			t.Fatal("a wait begun after the halt is not done")
		}
		// Any other context: its own Done.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if ch, also, stop := doneOf(ctx); ch != ctx.Done() || also != nil || stop() {
			t.Error("doneOf replaced the Done of a context that is not a candidacy's")
		}
	})
}

// countingCtx counts the contexts that watch it through AfterFunc (its
// Value hides the cancelCtx within, so every one does).
type countingCtx struct {
	context.Context
	n atomic.Int32
}

func (c *countingCtx) Value(any) any { return nil }

func (c *countingCtx) AfterFunc(f func()) func() bool {
	c.n.Add(1)
	return context.AfterFunc(c.Context, f)
}

// A queue call's context waits in the limiter without watching its
// caller's context (the wait selects on its Done), stops on its own stop
// or its caller's end, and a context derived from it, as a request sent
// alone derives one, ends either way too.
func TestStopCtx(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner, cancelInner := context.WithCancel(context.Background())
		parent := &countingCtx{Context: inner}
		s := newStopCtx(parent)
		_, also, stop := doneOf(s)
		if n := parent.n.Load(); n != 0 || also != inner.Done() {
			t.Fatalf("a wait in the limiter watches the caller's context %d times (also %v), want 0 and its Done", n, also)
		}
		if !stop() {
			t.Error("stop found no hook to remove")
		}
		gone, _, _ := doneOf(s)
		child, cancelChild := requestCtx(s)
		defer cancelChild()
		if parent.n.Load() != 1 {
			t.Errorf("a request's context watches the caller's %d times, want once", parent.n.Load())
		}
		s.stop()
		s.stop() // again: nothing
		synctest.Wait()
		for i, ch := range []<-chan struct{}{gone, child.Done(), s.Done()} {
			select {
			case <-ch:
			default:
				t.Errorf("channel %d open after the stop", i)
			}
		}
		if !errors.Is(s.Err(), context.Canceled) || inner.Err() != nil {
			t.Errorf("after the stop: Err %v, the caller's %v", s.Err(), inner.Err())
		}
		// The caller's end: Done closes, Err is the caller's.
		s2 := newStopCtx(parent)
		done := s2.Done()
		req, cancelReq := requestCtx(s2)
		defer cancelReq()
		deadline, cancelDeadline := context.WithTimeout(context.Background(), time.Hour)
		defer cancelDeadline()
		s3 := newStopCtx(deadline)
		cancelInner()
		synctest.Wait()
		for i, ch := range []<-chan struct{}{done, req.Done()} {
			select {
			case <-ch:
			default:
				t.Errorf("channel %d open after the caller's end", i)
			}
		}
		if !errors.Is(s2.Err(), context.Canceled) {
			t.Errorf("Err after the caller's end = %v", s2.Err())
		}
		time.Sleep(2 * time.Hour)
		if !errors.Is(s3.Err(), context.DeadlineExceeded) {
			t.Errorf("Err after the caller's deadline = %v, want its DeadlineExceeded", s3.Err())
		}
		s2.stop()
		s3.stop()
	})
}
