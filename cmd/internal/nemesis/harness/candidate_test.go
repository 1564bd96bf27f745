package harness

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
	"github.com/electkit/election/cmd/internal/nemesis"
	"github.com/electkit/election/internal/mono"
)

// gatedSink holds every report until open is closed, and records writes.
type gatedSink struct {
	open chan struct{}

	mu       sync.Mutex
	reported []nemesis.Event
	writes   []int64 // call instants
	early    bool    // a write came before any report was taken
}

func (s *gatedSink) write(_ context.Context, _ uint64, _ string, call int64) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reported) == 0 {
		s.early = true
	}
	s.writes = append(s.writes, call)
	return true, nil
}

func (s *gatedSink) report(ctx context.Context, ev nemesis.Event) error {
	select {
	case <-s.open:
	case <-ctx.Done():
		return ctx.Err()
	}
	s.mu.Lock()
	s.reported = append(s.reported, ev)
	s.mu.Unlock()
	return nil
}

func (s *gatedSink) nWrites() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.writes)
}

// TestNoWriteBeforeElectedReported: a leader writes only once the register
// has its Elected event, so a process killed meanwhile leaves no write of a
// Term the history lacks; and every write's Call is no later than the end
// of its Term.
func TestNoWriteBeforeElectedReported(t *testing.T) {
	o, err := election.NewOptions(election.WithID("c1"), election.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	term, lc := backend.NewTerm(o, election.Leader{ID: "c1", Token: 7}, time.Now())
	s := &gatedSink{open: make(chan struct{})}
	c := newCandidate("c1", 1, time.Millisecond, s)
	defer c.rep.flush(time.Second)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.onElected(term.Context(), term)
	}()
	// While the Elected report is held, the leader must not write. Wait
	// for the report to be in flight, then check.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.rep.mu.Lock()
		n := len(c.rep.q)
		c.rep.mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the Elected event was never queued")
		}
		time.Sleep(time.Millisecond) // polling the queue
	}
	if n := s.nWrites(); n != 0 {
		t.Fatalf("%d writes before the Elected event was reported", n)
	}
	close(s.open)
	for s.nWrites() < 3 {
		if time.Now().After(deadline) {
			t.Fatal("no writes after the Elected event was reported")
		}
		time.Sleep(time.Millisecond) // polling the writes
	}
	lc.End(election.ErrResigned)
	endAt := mono.Now()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("onElected did not return after the Term ended")
	}
	lc.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.early {
		t.Error("a write reached the register before the Elected event")
	}
	for i, call := range s.writes {
		if call > endAt {
			t.Errorf("write %d: Call %d after the Term ended at %d", i, call, endAt)
		}
	}
	for i, ev := range s.reported {
		if ev.Seq != uint64(i+1) {
			t.Errorf("report %d (%s) has Seq %d, want %d", i, ev.Kind, ev.Seq, i+1)
		}
	}
	if !errors.Is(term.Err(), election.ErrResigned) {
		t.Errorf("Err = %v", term.Err())
	}
}

// TestNoWriteWhenTermEndsBeforeReport: a Term that ends while its Elected
// event waits for the register writes nothing.
func TestNoWriteWhenTermEndsBeforeReport(t *testing.T) {
	o, err := election.NewOptions(election.WithID("c1"), election.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	term, lc := backend.NewTerm(o, election.Leader{ID: "c1", Token: 7}, time.Now())
	s := &gatedSink{open: make(chan struct{})}
	c := newCandidate("c1", 1, time.Millisecond, s)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.onElected(term.Context(), term)
	}()
	lc.End(election.ErrResigned)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("onElected did not return after the Term ended")
	}
	lc.Wait()
	close(s.open)
	c.rep.flush(10 * time.Second)
	if n := s.nWrites(); n != 0 {
		t.Errorf("%d writes of a Term that ended before its Elected event was reported", n)
	}
}

// TestScheduleIgnoresTargets: the faults' kinds and durations a seed gives
// do not depend on how many target choices the run made (a reported leader
// or none), so a seed replays the same schedule.
func TestScheduleIgnoresTargets(t *testing.T) {
	schedule := func(targetDraws int) []string {
		h := &run{cfg: Config{Duration: 30 * time.Millisecond, TTL: time.Second, Gap: time.Millisecond,
			Faults: []string{Kill, Pause, Cut}}, rng: rand.New(rand.NewSource(5)), pick: rand.New(rand.NewSource(^5))}
		var got []string
		inject := func(_ context.Context, kind string) error {
			for range targetDraws {
				h.pick.Intn(5) // what target() draws when no leader is reported
			}
			got = append(got, fmt.Sprintf("%s %v", kind, h.between(0, time.Hour)))
			return nil
		}
		if err := h.mixWith(t.Context(), inject); err != nil {
			t.Fatal(err)
		}
		return got
	}
	a, b := schedule(0), schedule(3)
	n := min(len(a), len(b)) // the number of faults depends on time
	if n == 0 {
		t.Fatal("no fault injected")
	}
	for i := range n {
		if a[i] != b[i] {
			t.Fatalf("fault %d: %q with no target draws, %q with three", i, a[i], b[i])
		}
	}
}
