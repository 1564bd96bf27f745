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

// obsLog records the calls of an Events.
type obsLog struct {
	mu  sync.Mutex
	evs []string
}

func (l *obsLog) add(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.evs = append(l.evs, fmt.Sprintf(format, args...))
}

func (l *obsLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.evs...)
}

func (l *obsLog) events() *Events {
	return &Events{
		Elected:       func(ld Leader, d time.Time) { l.add("elected %s until +%v", ld, time.Until(d).Round(time.Millisecond)) },
		Renewed:       func(r Renewal, slack time.Duration) { l.add("renewed err=%v slack=%v", r.Err != nil, slack) },
		Ended:         func(ld Leader, cause error) { l.add("ended %s: %v", ld, errors.Is(cause, ErrResigned)) },
		Campaigned:    func(wait time.Duration, err error) { l.add("campaigned %v %v", wait, err) },
		LeaderChanged: func(ld Leader) { l.add("leader %s", ld) },
	}
}

// The lease clock reports a Term's start, each renewal with its slack, and
// its end, in order; a Term already ended at creation is not reported.
func TestEventsTerm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log obsLog
		o := mustOptions(t, WithTTL(2*time.Second), WithDrift(0), WithMargin(0), WithEvents(log.events()))
		term, clk := newTerm(o, Leader{ID: "a", Token: 7}, time.Now())
		time.Sleep(500 * time.Millisecond)
		clk.Renewed(time.Now(), nil) // slack 1.5s: sent 0.5s into a 2s window
		time.Sleep(time.Second)
		clk.Renewed(time.Now(), errors.New("store down")) // slack 1s: deadline 2.5s, sent at 1.5s
		clk.End(ErrResigned)
		clk.Wait()
		want := []string{"elected a@7 until +2s", "renewed err=false slack=1.5s", "renewed err=true slack=1s", "ended a@7: true"}
		if got := log.get(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("observed %q, want %q", got, want)
		}
		if term.Window() != 2*time.Second {
			t.Errorf("Window() = %v, want 2s", term.Window())
		}

		var late obsLog
		o.Events = late.events()
		_, clk = newTerm(o, Leader{ID: "b", Token: 8}, time.Now().Add(-3*time.Second))
		clk.Wait()
		if got := late.get(); len(got) != 0 {
			t.Errorf("a Term ended at creation was observed: %q", got)
		}
	})
}

// withOptions shows an Elector's options, as the backends' Electors do.
type withOptions struct {
	*fakeElector
	o Options
}

func (w withOptions) Options() Options { return w.o }

// Run reports each Campaign's wait and every leader change to the Events
// of the Elector's options.
func TestEventsRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var elog eventLog
		f := newFake(t, &elog)
		var log obsLog
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		o := f.opts
		o.Events = log.events()
		go func() { done <- Run(ctx, withOptions{f, o}, Callbacks{}) }()
		synctest.Wait()
		f.feed <- Leader{ID: "x", Token: 3}
		time.Sleep(time.Second)
		f.grants <- grant{}
		synctest.Wait()
		cancel()
		<-done
		got := fmt.Sprint(log.get())
		for _, want := range []string{"leader x@3", "campaigned 1s <nil>"} {
			if !strings.Contains(got, want) {
				t.Errorf("observed %s, want %q among them", got, want)
			}
		}
	})
}
