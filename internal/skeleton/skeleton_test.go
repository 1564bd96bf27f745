package skeleton

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
)

func TestGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGate()
		ctx := context.Background()
		if err := g.Enter(ctx); err != nil {
			t.Fatal(err)
		}
		// A second Campaign waits for the first, or for its ctx.
		short, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if err := g.Enter(short); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Enter while another is in = %v, want DeadlineExceeded", err)
		}
		entered := make(chan error, 1)
		go func() { entered <- g.Enter(ctx) }()
		synctest.Wait()
		select {
		case err := <-entered:
			t.Fatalf("Enter returned %v before the first left", err)
		default:
		}
		g.Leave()
		if err := <-entered; err != nil {
			t.Fatal(err)
		}
		// Close wakes a waiter with ErrClosed, refuses new ones, and Drain
		// waits for the one inside.
		waiting := make(chan error, 1)
		go func() { waiting <- g.Enter(ctx) }()
		synctest.Wait()
		g.Close()
		g.Close() // again: nothing, no panic
		if err := <-waiting; !errors.Is(err, election.ErrClosed) {
			t.Errorf("Enter waiting at Close = %v, want ErrClosed", err)
		}
		if err := g.Enter(ctx); !errors.Is(err, election.ErrClosed) {
			t.Errorf("Enter after Close = %v, want ErrClosed", err)
		}
		drained := make(chan struct{})
		go func() { g.Drain(); close(drained) }()
		synctest.Wait()
		select {
		case <-drained:
			t.Fatal("Drain returned while a Campaign was inside")
		default:
		}
		g.Leave()
		<-drained
	})
}

func TestTerms(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		o, err := election.NewOptions(election.WithID("a"))
		if err != nil {
			t.Fatal(err)
		}
		var ts Terms
		t1, lc1 := backend.NewTerm(o, election.Leader{ID: "a", Token: 1}, time.Now())
		t2, lc2 := backend.NewTerm(o, election.Leader{ID: "a", Token: 2}, time.Now())
		ts.Add(lc1)
		ts.Add(lc2)
		ts.Forget(lc1) // still valid: kept for Close
		ts.Forget(nil)
		if n := ts.Len(); n != 2 {
			t.Fatalf("Len after forgetting a valid Term = %d, want 2", n)
		}
		lc1.End(election.ErrResigned)
		ts.Forget(lc1)
		if n := ts.Len(); n != 1 {
			t.Fatalf("Len after forgetting an ended Term = %d, want 1", n)
		}
		ts.EndAll(election.ErrClosed)
		if ts.Len() != 0 {
			t.Error("EndAll left Terms held")
		}
		if !errors.Is(t2.Err(), election.ErrClosed) {
			t.Errorf("a Term ended by EndAll: %v, want ErrClosed", t2.Err())
		}
		if !errors.Is(t1.Err(), election.ErrResigned) {
			t.Errorf("an ended Term's cause changed to %v", t1.Err())
		}
		t3, lc3 := backend.NewTerm(o, election.Leader{ID: "a", Token: 3}, time.Now())
		EndTerm(nil, nil) // no Term: nothing to do
		EndTerm(lc3, nil)
		if !errors.Is(t3.Err(), election.ErrResigned) {
			t.Errorf("EndTerm with no cause: %v, want ErrResigned", t3.Err())
		}
	})
}

func TestWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		closing, stop, lost := make(chan struct{}), make(chan struct{}), make(chan struct{})
		errLost := errors.New("lease gone")
		w := Waiting{Closing: closing, Stop: stop, Lost: lost, LostErr: func() error { return errLost }}
		ctx, cancel := context.WithCancel(context.Background())
		if err := w.Pause(ctx, time.Second); err != nil {
			t.Fatalf("Pause with nothing closed = %v", err)
		}
		close(stop)
		if err := w.Pause(ctx, time.Hour); !errors.Is(err, election.ErrResigned) {
			t.Errorf("after Stop: %v, want ErrResigned", err)
		}
		close(lost)
		if err := w.Interrupted(ctx); err != errLost {
			t.Errorf("after Lost: %v, want LostErr's", err)
		}
		close(closing)
		if err := w.Interrupted(ctx); !errors.Is(err, election.ErrClosed) {
			t.Errorf("after Close: %v, want ErrClosed", err)
		}
		// LostErr alone (no Lost channel): the loss counts once it says
		// one, ahead of Stop.
		var gone error
		w2 := Waiting{Stop: stop, LostErr: func() error { return gone }}
		if err := w2.Interrupted(context.Background()); !errors.Is(err, election.ErrResigned) {
			t.Errorf("LostErr nil, Stop closed: %v, want ErrResigned", err)
		}
		gone = errLost
		if err := w2.Pause(context.Background(), time.Hour); err != errLost {
			t.Errorf("LostErr set, Stop closed: %v, want LostErr's", err)
		}
		cancel()
		if err := (Waiting{}).Pause(ctx, time.Hour); !errors.Is(err, context.Canceled) {
			t.Errorf("zero Waiting, ctx canceled: %v", err)
		}
	})
}

func TestNilContext(t *testing.T) {
	var nilCtx context.Context // a variable: a literal nil ctx is what vet tools flag
	g := NewGate()
	err := g.Enter(nilCtx)
	var oe *election.OptionError
	if !errors.Is(err, election.ErrInvalidOption) || !errors.As(err, &oe) || oe.Field != "ctx" || oe.Value != "nil" {
		t.Errorf("Enter(nil) = %v, want an *election.OptionError for ctx = nil", err)
	}
	if err := g.Enter(context.Background()); err != nil {
		t.Errorf("Enter after a refused Enter(nil) = %v, want nil: the gate was not taken", err)
	}
	if err := CheckContext(context.Background()); err != nil {
		t.Errorf("CheckContext(Background) = %v", err)
	}
}

// A Gate makes its channels only when something waits on it, and Closing
// is closed whether it was made before Close or after. It is four words.
func TestGateChannelsOnDemand(t *testing.T) {
	if size := unsafe.Sizeof(Gate{}); size > 32 {
		t.Errorf("a Gate is %d bytes, want at most 32", size)
	}
	g := NewGate()
	ctx := context.Background()
	for range 3 {
		if err := g.Enter(ctx); err != nil {
			t.Fatal(err)
		}
		g.Leave()
	}
	if g.waiters != nil || g.closing != nil || gateClosed(g) {
		t.Errorf("an uncontended Gate made channels (waiters %v, closing %v) or reads as closed", g.waiters != nil, g.closing != nil)
	}
	before := g.Closing()
	select {
	case <-before:
		t.Fatal("Closing is closed before Close")
	default:
	}
	g.Close()
	if !gateClosed(g) {
		t.Error("Closed() = false after Close")
	}
	for i, ch := range []<-chan struct{}{before, g.Closing(), closedGate(t).Closing()} {
		select {
		case <-ch:
		default:
			t.Errorf("Closing channel %d is open after Close", i)
		}
	}
}

// closedGate is a Gate closed before anything asked for Closing.
func closedGate(t *testing.T) *Gate {
	t.Helper()
	g := NewGate()
	g.Close()
	if g.closing != nil {
		t.Error("Close made a channel no one asked for")
	}
	return g
}

// The Campaign that has waited longest goes next; one that gives up
// leaves its place, and a handover it races with goes on to the next.
func TestGateFirstComeFirstServed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := NewGate()
		ctx := context.Background()
		if err := g.Enter(ctx); err != nil {
			t.Fatal(err)
		}
		order := make(chan int, 3)
		quit, cancel := context.WithCancel(ctx)
		for i := range 3 {
			c := ctx
			if i == 1 {
				c = quit // gives up while it waits
			}
			go func() {
				if err := g.Enter(c); err != nil {
					order <- -i
					return
				}
				order <- i
			}()
			synctest.Wait() // each queued before the next comes
		}
		cancel()
		if got := <-order; got != -1 {
			t.Fatalf("the canceled waiter: %d, want -1", got)
		}
		for _, want := range []int{0, 2} {
			g.Leave()
			if got := <-order; got != want {
				t.Fatalf("entered: %d, want %d", got, want)
			}
		}
		g.Leave()
		if err := g.Enter(ctx); err != nil {
			t.Fatalf("Enter on a free gate: %v", err)
		}
		g.Leave()
		if g.waiters != nil || g.busy {
			t.Errorf("after all left: waiters %v, busy %v", g.waiters != nil, g.busy)
		}
	})
}

// gateClosed reports whether Close has begun on g, without making a
// channel.
func gateClosed(g *Gate) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}
