package backend

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/electkit/election"
)

type ctxKey struct{}

const bound = 3 * time.Second

// ended reports whether ctx is done, without waiting.
func ended(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

func TestResignContextCarriesValuesAndDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), ctxKey{}, "v"), time.Minute)
		defer cancel()
		rctx, rcancel := ResignContext(ctx, bound)
		defer rcancel()
		if v := rctx.Value(ctxKey{}); v != "v" {
			t.Errorf("Value = %v, want v", v)
		}
		want, _ := ctx.Deadline()
		if d, ok := rctx.Deadline(); !ok || !d.Equal(want) {
			t.Errorf("Deadline = %v, %v; want %v", d, ok, want)
		}
		start := time.Now()
		<-rctx.Done()
		if got := time.Since(start); got != time.Minute {
			t.Errorf("ended after %v, want at ctx's deadline, %v", got, time.Minute)
		}
		if rctx.Err() != context.DeadlineExceeded || context.Cause(rctx) != context.DeadlineExceeded {
			t.Errorf("Err = %v, Cause = %v; want context.DeadlineExceeded", rctx.Err(), context.Cause(rctx))
		}
	})
}

// A ctx canceled for any other reason than a Term's end cancels the
// returned one at once, with ctx.Err() as its cause.
func TestResignContextCanceledWithCtx(t *testing.T) {
	for _, cause := range []error{nil, errors.New("shutting down"), fmt.Errorf("wrapped: %w", context.Canceled)} {
		t.Run(fmt.Sprint(cause), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancelCause(context.Background())
				rctx, rcancel := ResignContext(ctx, bound)
				defer rcancel()
				synctest.Wait()
				if ended(rctx) {
					t.Fatal("returned ctx ended while ctx lives")
				}
				cancel(cause)
				synctest.Wait()
				if !ended(rctx) {
					t.Fatal("returned ctx lives on after ctx was canceled")
				}
				if rctx.Err() != context.Canceled || context.Cause(rctx) != context.Canceled {
					t.Errorf("Err = %v, Cause = %v; want context.Canceled", rctx.Err(), context.Cause(rctx))
				}
			})
		})
	}
}

// A ctx canceled already, not by a Term's end, gives a context that has
// ended when ResignContext returns: no request may go out on it first.
func TestResignContextCanceledAlready(t *testing.T) {
	for range 100 {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		rctx, rcancel := ResignContext(ctx, bound)
		err, cause := rctx.Err(), context.Cause(rctx)
		rcancel()
		if err != context.Canceled || cause != context.Canceled {
			t.Fatalf("Err = %v, Cause = %v at return; want context.Canceled", err, cause)
		}
	}
}

// A ctx canceled because a Term ended leaves the returned one alive for
// bound from that moment.
func TestResignContextOutlivesTheTerm(t *testing.T) {
	for _, sentinel := range termEnding {
		t.Run(sentinel.Error(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				term, end := context.WithCancelCause(context.Background())
				ctx, cancel := context.WithCancel(term) // OnElected's ctx, say
				defer cancel()
				rctx, rcancel := ResignContext(ctx, bound)
				defer rcancel()
				time.Sleep(time.Second)
				end(fmt.Errorf("backend: %w", sentinel))
				ended := time.Now()
				<-rctx.Done()
				if got := time.Since(ended); got != bound {
					t.Errorf("returned ctx ended %v after the Term, want %v", got, bound)
				}
				if rctx.Err() == nil || !errors.Is(context.Cause(rctx), context.DeadlineExceeded) {
					t.Errorf("Err = %v, Cause = %v; want a cause wrapping context.DeadlineExceeded", rctx.Err(), context.Cause(rctx))
				}
			})
		})
	}
}

func TestResignContextTermAlreadyEnded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(fmt.Errorf("backend: %w", election.ErrResigned))
		time.Sleep(time.Hour)
		start := time.Now()
		rctx, rcancel := ResignContext(ctx, bound)
		defer rcancel()
		synctest.Wait()
		if ended(rctx) {
			t.Fatal("returned ctx ended at once for a ctx the Term's end canceled")
		}
		<-rctx.Done()
		if got := time.Since(start); got != bound {
			t.Errorf("returned ctx ended after %v, want %v", got, bound)
		}
	})
}

// ctx's deadline still counts after the Term ended.
func TestResignContextTermEndedDeadlineFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		term, end := context.WithCancelCause(context.Background())
		ctx, cancel := context.WithTimeout(term, time.Second)
		defer cancel()
		rctx, rcancel := ResignContext(ctx, bound)
		defer rcancel()
		start := time.Now()
		end(election.ErrLeaseExpired)
		<-rctx.Done()
		if got := time.Since(start); got != time.Second {
			t.Errorf("returned ctx ended after %v, want at ctx's deadline, %v", got, time.Second)
		}
		if rctx.Err() != context.DeadlineExceeded {
			t.Errorf("Err = %v, want context.DeadlineExceeded", rctx.Err())
		}
	})
}

func TestResignContextCancelFunc(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		term, end := context.WithCancelCause(context.Background())
		rctx, rcancel := ResignContext(term, bound)
		end(election.ErrResigned)
		synctest.Wait()
		if ended(rctx) {
			t.Fatal("returned ctx ended at the Term's end")
		}
		rcancel()
		if !ended(rctx) {
			t.Fatal("returned ctx not canceled by its CancelFunc")
		}
		rcancel() // twice is fine
		ctx, cancel := context.WithCancel(context.Background())
		rctx, rcancel = ResignContext(ctx, bound)
		rcancel()
		cancel()
		if rctx.Err() != context.Canceled {
			t.Errorf("Err = %v, want context.Canceled", rctx.Err())
		}
	})
}
