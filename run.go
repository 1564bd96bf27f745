package election

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/electkit/election/internal/clock"
)

// Callbacks are the application's side of Run. Every field may be nil.
type Callbacks struct {
	// OnElected is called when this candidate becomes leader. Its ctx is
	// derived from t.Context(): it is canceled when the Term ends, and also
	// when Run must stop while leading (its ctx ended, or a callback
	// panicked) — then before Run resigns, so that the work stops before
	// the next leader starts (see Run). OnElected may return at once or
	// block for the whole Term; if it blocks it must return once ctx is
	// done, because the handover, OnDemoted and the next campaign wait for
	// it.
	//
	// To step down, call e.Resign(ctx) with this ctx: it returns nil, the
	// next candidate leads at once, and OnDemoted gets ErrResigned once
	// OnElected has returned; Run campaigns again after its backoff. To
	// leave the election, cancel Run's ctx instead.
	OnElected func(ctx context.Context, t *Term)
	// OnDemoted is called once per OnElected, after OnElected returned and
	// after t.Done closed; t.Err says why the term ended.
	OnDemoted func(t *Term)
	// OnLeader is called with every observed leader change (a zero Leader
	// means none), starting with the current state. Calls are sequential,
	// but may run concurrently with OnElected and OnDemoted; a slow OnLeader
	// skips intermediate values, never the newest.
	OnLeader func(Leader)
	// OnError is called with each Campaign error that Run retries after a
	// backoff (not ctx's end, not ErrClosed, which end Run).
	OnError func(error)
}

// Backoff between campaigns: after a Campaign error, and after a term ends
// before campaigning again. It grows from runInitialBackoff to
// runMaxBackoff with jitter, and is reset by each successful Campaign.
const (
	runInitialBackoff = 50 * time.Millisecond
	runMaxBackoff     = 5 * time.Second
)

// Run campaigns for leadership until ctx ends: Campaign → OnElected →
// wait until the Term ends or ctx ends → OnDemoted → backoff → Campaign
// again. If the Elector is closed, Run returns ErrClosed (wrapped).
//
// Run stops the work before it hands over. When ctx ends while leading,
// Run first cancels OnElected's ctx and waits for OnElected to return —
// for at most until the Term's deadline as it stands at that moment
// (renewals go on meanwhile), or until the Term ends — and only then
// resigns, so that the next candidate can lead; it then waits for
// OnElected to return in any case, calls OnDemoted and returns ctx.Err().
// A Term that ends by itself (its lease expired, its session was lost,
// another candidate preempted it, a transfer handed it on) cannot wait:
// the next leader may begin while OnElected is still returning. That is
// what the fencing token is for: pass t.Token() to every resource the
// leader writes, and let the resource refuse an older one.
//
// To step down from inside OnElected, call e.Resign(ctx) with OnElected's
// own ctx: it returns nil, the next candidate leads at once, OnDemoted
// gets a Term ended with ErrResigned once OnElected has returned, and Run
// campaigns again after its backoff. To leave the election, cancel Run's
// ctx.
//
// Guarantees (P5): exactly one OnDemoted per OnElected, in token order,
// never overlapping; OnDemoted only after OnElected returned and the Term
// ended. Callbacks run in goroutines Run owns and waits for: nothing runs
// after Run returns. A panic in a callback stops the run as the end of
// ctx does (OnElected's ctx first, then Run resigns), still calls
// OnDemoted for an OnElected that ran, and then propagates from Run with
// the original value.
func Run(ctx context.Context, e Elector, cb Callbacks) error {
	if err := checkArgs(ctx, e); err != nil {
		return err
	}
	r := &runner{e: e, cb: cb, ev: electorEvents(e)}
	rctx, stop := context.WithCancel(ctx)
	r.stop = stop
	defer r.wait()
	var campaigned func(time.Duration, error)
	if r.ev != nil {
		campaigned = r.ev.Campaigned
	}
	if cb.OnLeader != nil || (r.ev != nil && r.ev.LeaderChanged != nil) {
		r.observe(rctx)
	}
	b := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(runInitialBackoff),
		backoff.WithMaxInterval(runMaxBackoff),
		backoff.WithMaxElapsedTime(0),
	)
	for {
		started := clock.Now()
		t, err := e.Campaign(rctx)
		if campaigned != nil && rctx.Err() == nil {
			r.guard(func() { campaigned(clock.Since(started), err) })
		}
		switch {
		case rctx.Err() != nil:
			if t != nil { // won as ctx ended: step down without callbacks
				r.resign(ctx, t)
			}
			return r.finish(ctx)
		case errors.Is(err, ErrClosed):
			r.finish(ctx)
			return err
		case err == nil && t == nil:
			err = fmt.Errorf("election: Campaign of %T returned neither a Term nor an error", e)
			fallthrough
		case err != nil:
			if cb.OnError != nil {
				r.guard(func() { cb.OnError(err) })
			}
		default:
			b.Reset()
			r.lead(ctx, rctx, t)
		}
		if rctx.Err() != nil {
			return r.finish(ctx)
		}
		if !clock.Sleep(rctx, b.NextBackOff()) {
			return r.finish(ctx)
		}
	}
}

// electorEvents returns the Events of e's options, if e shows its options.
func electorEvents(e Elector) *Events {
	if oe, ok := e.(interface{ Options() Options }); ok {
		return oe.Options().Events
	}
	return nil
}

type runner struct {
	e     Elector
	cb    Callbacks
	ev    *Events // the Elector's Events, or nil
	stop  context.CancelFunc
	obs   chan struct{} // closed when the OnLeader goroutine has exited
	panic any           // the first panic of a callback; guarded by happens-before via stop/obs
	pch   chan any      // panic of the OnLeader goroutine
}

// observe feeds OnLeader from Observe on a goroutine of Run's.
func (r *runner) observe(ctx context.Context) {
	r.obs = make(chan struct{})
	r.pch = make(chan any, 1)
	ch := r.e.Observe(ctx)
	go func() {
		defer close(r.obs)
		defer func() {
			if v := recover(); v != nil {
				r.pch <- v
				r.stop() // end the run: resign, demote, then propagate
			}
		}()
		for l := range ch {
			if r.ev != nil && r.ev.LeaderChanged != nil {
				r.ev.LeaderChanged(l)
			}
			if r.cb.OnLeader != nil {
				r.cb.OnLeader(l)
			}
		}
	}()
}

// lead runs one term: OnElected on its own goroutine, wait for the term's
// end or rctx's; if rctx ended first, stop OnElected (cancel its ctx, wait
// for it until the Term's deadline) and resign; wait for OnElected,
// OnDemoted.
func (r *runner) lead(ctx, rctx context.Context, t *Term) {
	work, stopWork := context.WithCancelCause(t.Context())
	defer stopWork(nil)
	elected := make(chan any, 1)
	go func() {
		defer func() { elected <- recover() }()
		if r.cb.OnElected != nil {
			r.cb.OnElected(work, t)
		}
	}()
	pending := elected // nil once OnElected has returned
	collect := func(v any) {
		pending = nil
		if v != nil {
			r.setPanic(v) // cancels rctx
		}
	}
	for t.Err() == nil && rctx.Err() == nil {
		select {
		case <-t.Done():
		case <-rctx.Done():
		case v := <-pending:
			collect(v)
		}
	}
	if t.Err() == nil {
		// Run must stop while leading: the work stops before the handover.
		stopWork(context.Cause(rctx))
		if pending != nil {
			bound := time.NewTimer(clock.Until(t.Deadline()))
			select {
			case v := <-pending:
				collect(v)
			case <-t.Done():
			case <-bound.C:
			}
			bound.Stop()
		}
	}
	r.resign(ctx, t)
	if pending != nil {
		collect(<-pending)
	}
	if r.cb.OnDemoted != nil {
		r.guard(func() { r.cb.OnDemoted(t) })
	}
}

// resign ends t if it is still valid (ctx ended, or a callback panicked), so
// the next candidate takes over at once, and waits until it has ended. An
// Elector's Resign ends the Term before it talks to the store; if one
// returns with the Term still valid, Resign is retried with backoff until
// the Term ends, so Run never goes on leading after its ctx ended.
func (r *runner) resign(ctx context.Context, t *Term) {
	b := backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(runInitialBackoff),
		backoff.WithMaxInterval(time.Second),
		backoff.WithMaxElapsedTime(0),
	)
	for t.Err() == nil {
		rs, cancel := context.WithDeadline(context.WithoutCancel(ctx), t.Deadline())
		_ = r.e.Resign(rs)
		cancel()
		wait := time.NewTimer(b.NextBackOff())
		select {
		case <-t.Done():
		case <-wait.C:
		}
		wait.Stop()
	}
}

// guard runs a callback on Run's goroutine, recording a panic and ending
// the run.
func (r *runner) guard(f func()) {
	defer func() {
		if v := recover(); v != nil {
			r.setPanic(v)
		}
	}()
	f()
}

func (r *runner) setPanic(v any) {
	if r.panic == nil {
		r.panic = v
	}
	r.stop()
}

// finish stops the observer and propagates a callback's panic, or returns
// why the run ended.
func (r *runner) finish(ctx context.Context) error {
	r.wait()
	if r.panic != nil {
		panic(r.panic)
	}
	return ctx.Err()
}

// wait stops the observer goroutine and waits for it; it collects its panic.
func (r *runner) wait() {
	r.stop()
	if r.obs != nil {
		<-r.obs
		select {
		case v := <-r.pch:
			if r.panic == nil {
				r.panic = v
			}
		default:
		}
	}
}
