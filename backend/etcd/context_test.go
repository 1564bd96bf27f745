package etcd

import (
	"context"
	"errors"
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
