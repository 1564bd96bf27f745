package inmem

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/electkit/election"
)

// forEachAll runs f for every algorithm, Tree and Zab included, with
// messages at once and with a 5ms network, each in its own synctest bubble.
func forEachAll(t *testing.T, f func(t *testing.T, alg Algorithm, lat time.Duration)) {
	for _, alg := range Algorithms() {
		for _, lat := range []time.Duration{0, 5 * time.Millisecond} {
			t.Run(fmt.Sprintf("%v/latency=%v", alg, lat), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { f(t, alg, lat) })
			})
		}
	}
}

// queued returns the IDs Candidates lists, as e sees them.
func queued(t *testing.T, e *Elector) []string {
	t.Helper()
	cs, err := e.Candidates(context.Background())
	if err != nil {
		t.Fatalf("Candidates of %s: %v", e.ID(), err)
	}
	var ids []string
	for _, c := range cs {
		ids = append(ids, c.ID)
	}
	return ids
}

func wantQueued(t *testing.T, e *Elector, ids ...string) {
	t.Helper()
	synctest.Wait()
	if got := queued(t, e); !slices.Equal(got, ids) {
		t.Fatalf("Candidates = %v, want %v", got, ids)
	}
}

// quiet fails the test if a Campaign of ch has returned.
func quiet(t *testing.T, ch <-chan won, what string) {
	t.Helper()
	synctest.Wait()
	select {
	case w := <-ch:
		t.Fatalf("%s: %s's Campaign returned %v, %v", what, w.e.ID(), w.t, w.err)
	default:
	}
}

// Candidates lists the current batch first, in the algorithm's order, and
// then the next batch: a better candidate that campaigns while a batch is
// being served waits for the batch, and is listed after it. Resigns follow
// that order exactly.
func TestCandidatesFollowBatches(t *testing.T) {
	forEachAll(t, func(t *testing.T, alg Algorithm, lat time.Duration) {
		c := newCluster(t, alg, WithLatency(lat))
		es := join(t, c, 5)
		ctx := context.Background()
		ch := campaignBatch(ctx, c, es[0], es[1], es[2])
		lead := next(t, ch, 10*time.Second, "best of the batch")
		if lead.e != es[2] {
			t.Fatalf("%s leads, want c3", lead.e.ID())
		}
		wantQueued(t, es[0], "c2", "c1")
		late := campaignBatch(ctx, c, es[4], es[3])
		wantQueued(t, es[3], "c2", "c1", "c5", "c4")
		for _, want := range []struct {
			ch <-chan won
			id string
		}{{ch, "c2"}, {ch, "c1"}, {late, "c5"}, {late, "c4"}} {
			if err := lead.e.Resign(ctx); err != nil {
				t.Fatal(err)
			}
			lead = next(t, want.ch, 10*time.Second, "after a resign")
			if lead.e.ID() != want.id {
				t.Fatalf("%s leads after a resign, want %s (Candidates' order)", lead.e.ID(), want.id)
			}
		}
		wantQueued(t, es[0])
	})
}

// A Transfer to the worst waiting candidate, which the algorithm would
// elect last (the bully only after an OK timeout), takes a few message
// delays on every algorithm: the target's Term is handed out after the old
// one ended, with a larger token. Then the normal order resumes.
func TestTransferPromptly(t *testing.T) {
	forEachAll(t, func(t *testing.T, alg Algorithm, lat time.Duration) {
		c := newCluster(t, alg, WithLatency(lat))
		es := join(t, c, 4)
		ctx := context.Background()
		first := next(t, campaignBatch(ctx, c, es[0]), 10*time.Second, "first leader")
		ch := campaignBatch(ctx, c, es[1], es[2], es[3])
		wantQueued(t, es[0], "c4", "c3", "c2")
		start := time.Now()
		if err := election.Transfer(ctx, es[0], first.t, "c2", election.KeepLeading); err != nil {
			t.Fatalf("Transfer to c2: %v", err)
		}
		took := time.Since(start)
		if !errors.Is(first.t.Err(), election.ErrTransferred) {
			t.Errorf("the old Term ended with %v, want ErrTransferred", first.t.Err())
		}
		w := next(t, ch, time.Nanosecond, "the target") // returned already
		if w.e != es[1] {
			t.Fatalf("%s leads after the transfer, want c2", w.e.ID())
		}
		if w.t.Token() <= first.t.Token() {
			t.Errorf("the target's token %d is not above %d", w.t.Token(), first.t.Token())
		}
		if bound := 20*lat + c.Timing().Tick; took > bound {
			t.Errorf("the transfer took %v, want at most %v", took, bound)
		}
		t.Logf("transfer in %v", took)
		// Every member shows the new leader.
		for _, e := range es {
			if l := leaderOf(t, e); !l.Equal(w.t.Leader()) {
				t.Errorf("%s shows %v, want %v", e.ID(), l, w.t.Leader())
			}
		}
		wantQueued(t, es[0], "c4", "c3")
		if err := es[1].Resign(ctx); err != nil {
			t.Fatal(err)
		}
		if w := next(t, ch, 10*time.Second, "after the target resigned"); w.e != es[3] {
			t.Fatalf("%s leads after the target, want c4", w.e.ID())
		}
	})
}

// A Transfer's target that crashes before it leads: Transfer fails with
// ErrTransferFailed (the old Term has ended all the same: a leadership
// handed on is not taken back), and the waiting candidates lead in the
// normal order.
func TestTransferTargetCrashes(t *testing.T) {
	forEachAll(t, func(t *testing.T, alg Algorithm, lat time.Duration) {
		if lat == 0 {
			t.Skip("the target leads before anything can crash it")
		}
		c := newCluster(t, alg, WithLatency(lat))
		es := join(t, c, 4)
		ctx := context.Background()
		first := next(t, campaignBatch(ctx, c, es[0]), 10*time.Second, "first leader")
		ch := campaignBatch(ctx, c, es[1], es[2])
		errc := make(chan error, 1)
		go func() { errc <- election.Transfer(ctx, es[0], first.t, "c2", election.KeepLeading) }()
		synctest.Wait() // the hand-over's messages are in flight
		quiet(t, ch, "before the crash")
		if !errors.Is(first.t.Err(), election.ErrTransferred) {
			t.Fatalf("the old Term: %v, want ErrTransferred", first.t.Err())
		}
		wantQueued(t, es[3], "c2", "c3")
		if err := c.Crash(es[1]); err != nil {
			t.Fatal(err)
		}
		if err := <-errc; !errors.Is(err, election.ErrTransferFailed) {
			t.Fatalf("Transfer to a target that crashed = %v, want ErrTransferFailed", err)
		}
		if w := <-ch; w.e != es[1] || !errors.Is(w.err, election.ErrSessionLost) {
			t.Errorf("the crashed target's Campaign: %v, %v; want ErrSessionLost", w.t, w.err)
		}
		if w := next(t, ch, 10*time.Second, "after the failed transfer"); w.e != es[2] || w.t.Token() <= first.t.Token() {
			t.Fatalf("%v leads after the failed transfer, want c3 with a token above %d", w.t, first.t.Token())
		}
		wantQueued(t, es[3])
	})
}

// A Transfer whose target cannot lead (it is cut off from every peer, so
// no peer confirms it) lapses after the old Term's lease window: the
// target goes back to the gate and the next leader comes from the normal
// order.
func TestTransferLapses(t *testing.T) {
	forEachAll(t, func(t *testing.T, alg Algorithm, lat time.Duration) {
		c := newCluster(t, alg, WithLatency(lat))
		es := join(t, c, 4)
		ctx := context.Background()
		first := next(t, campaignBatch(ctx, c, es[0]), 10*time.Second, "first leader")
		ch := campaignBatch(ctx, c, es[1], es[2])
		wantQueued(t, es[0], "c3", "c2")
		if err := c.Partition([]*Elector{es[1]}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err := election.Transfer(ctx, es[0], first.t, "c2", election.KeepLeading)
		if !errors.Is(err, election.ErrTransferFailed) {
			t.Fatalf("Transfer to a cut-off target = %v, want ErrTransferFailed", err)
		}
		if took, bound := time.Since(start), es[0].o.Window()+c.Timing().FailureTimeout(); took != bound {
			t.Errorf("the transfer lapsed after %v, want the lease window plus the failure timeout, %v", took, bound)
		}
		if !errors.Is(first.t.Err(), election.ErrTransferred) {
			t.Errorf("the old Term: %v, want ErrTransferred", first.t.Err())
		}
		tm := c.Timing()
		w := next(t, ch, tm.LeaseTTL+4*tm.FailureTimeout(), "after the lapsed transfer")
		if w.e != es[2] {
			t.Fatalf("%s leads after the lapse, want c3", w.e.ID())
		}
		wantQueued(t, es[0], "c2")
		if err := c.Heal(); err != nil {
			t.Fatal(err)
		}
	})
}

// Transfer's refusals: a Term that is not the member's valid one, a target
// that does not wait (the leader itself included), nobody waiting; with
// StepDown the leader resigns.
func TestTransferRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, Ring)
		es := join(t, c, 3)
		ctx := context.Background()
		first := next(t, campaignBatch(ctx, c, es[0]), 10*time.Second, "leader")
		if err := election.Transfer(ctx, es[1], first.t, "", election.KeepLeading); !errors.Is(err, election.ErrNotLeader) {
			t.Errorf("Transfer of another member's Term = %v, want ErrNotLeader", err)
		}
		for _, to := range []string{"", "c1", "c2", "c9"} {
			if err := election.Transfer(ctx, es[0], first.t, to, election.KeepLeading); !errors.Is(err, election.ErrNoCandidate) {
				t.Errorf("Transfer to %q = %v, want ErrNoCandidate", to, err)
			}
		}
		if err := first.t.Err(); err != nil {
			t.Fatalf("the Term ended on a refused transfer: %v", err)
		}
		if err := election.Transfer(ctx, es[0], first.t, "c2", election.StepDown); !errors.Is(err, election.ErrNoCandidate) {
			t.Errorf("Transfer to c2 with StepDown = %v, want ErrNoCandidate", err)
		}
		if !errors.Is(first.t.Err(), election.ErrResigned) {
			t.Errorf("after a refused transfer with StepDown the Term is %v, want ErrResigned", first.t.Err())
		}
		if err := c.Crash(es[0]); err != nil {
			t.Fatal(err)
		}
		if _, err := es[0].Candidates(ctx); !errors.Is(err, election.ErrSessionLost) {
			t.Errorf("Candidates while crashed = %v, want ErrSessionLost", err)
		}
		es[1].Close()
		if _, err := es[1].Candidates(ctx); !errors.Is(err, election.ErrClosed) {
			t.Errorf("Candidates after Close = %v, want ErrClosed", err)
		}
		if err := election.Transfer(ctx, es[1], first.t, "", election.KeepLeading); !errors.Is(err, election.ErrClosed) {
			t.Errorf("Transfer after Close = %v, want ErrClosed", err)
		}
	})
}

// A nil ctx is refused with an error naming it, and changes nothing.
func TestNilContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var nilCtx context.Context // a variable: a literal nil ctx is what vet tools flag
		c := newCluster(t, Ring)
		es := join(t, c, 2)
		first := next(t, campaignBatch(context.Background(), c, es[0]), 10*time.Second, "leader")
		_, err := es[0].Candidates(nilCtx)
		for what, err := range map[string]error{
			"Candidates(nil)": err,
			"Transfer(nil)":   es[0].Transfer(nilCtx, first.t, "", election.KeepLeading),
			"Resign(nil)":     es[0].Resign(nilCtx),
		} {
			var oe *election.OptionError
			if !errors.Is(err, election.ErrInvalidOption) || !errors.As(err, &oe) || oe.Field != "ctx" {
				t.Errorf("%s = %v, want an *election.OptionError for ctx", what, err)
			}
		}
		if err := first.t.Err(); err != nil {
			t.Errorf("the Term ended after calls with a nil ctx: %v", err)
		}
	})
}

// Preemption takes the preemptor alone: the other admitted candidates of
// the leader's batch go back to the gate and lead after it, in the normal
// order. A challenger that withdraws before the hold-off starts its wait
// anew when it campaigns again ("without a break"); one of equal priority
// never preempts.
func TestPreemption(t *testing.T) {
	forEachAll(t, func(t *testing.T, alg Algorithm, lat time.Duration) {
		c := newCluster(t, alg, WithLatency(lat))
		const hold = 2 * time.Second
		var es []*Elector
		for i, p := range []int64{2, 1, 2, 5} {
			opts := []election.Option{election.WithID(fmt.Sprintf("c%d", i+1)), election.WithPriority(p)}
			if i == 0 {
				opts = append(opts, election.WithPreemption(hold))
			}
			e, err := c.Join(opts...)
			if err != nil {
				t.Fatal(err)
			}
			es = append(es, e)
		}
		ctx := context.Background()
		batch := campaignBatch(ctx, c, es[0], es[1])
		first := next(t, batch, 10*time.Second, "first leader")
		if first.e != es[0] {
			t.Fatalf("%s leads, want c1", first.e.ID())
		}
		equal := campaignBatch(ctx, c, es[2])
		// A challenger that gives up halfway, then comes back.
		cctx, cancel := context.WithCancel(ctx)
		gaveUp := campaignBatch(cctx, c, es[3])
		time.Sleep(hold / 2)
		cancel()
		if w := <-gaveUp; !errors.Is(w.err, context.Canceled) {
			t.Fatalf("the withdrawn Campaign: %v, %v", w.t, w.err)
		}
		time.Sleep(hold / 4)
		back := time.Now()
		ch := campaignBatch(ctx, c, es[3])
		wantQueued(t, es[0], "c2", "c4", "c3")
		w := next(t, ch, hold+10*time.Second, "the preemptor")
		if w.e != es[3] {
			t.Fatalf("%s leads, want c4", w.e.ID())
		}
		if !errors.Is(first.t.Err(), election.ErrPreempted) {
			t.Errorf("the preempted Term: %v, want ErrPreempted", first.t.Err())
		}
		if waited := time.Since(back); waited < hold || waited > hold+20*lat+c.Timing().Tick {
			t.Errorf("c4 led %v after it came back, want the hold-off %v and a few message delays", waited, hold)
		}
		quiet(t, batch, "c2, of the preempted batch")
		quiet(t, equal, "c3, of equal priority")
		wantQueued(t, es[0], "c3", "c2")
		if err := es[3].Resign(ctx); err != nil {
			t.Fatal(err)
		}
		if w := next(t, equal, 10*time.Second, "after the preemptor"); w.e != es[2] {
			t.Fatalf("%s leads after the preemptor, want c3", w.e.ID())
		}
	})
}

// The gate, not the leader, watches for preemptors: a leader cut off from
// the better candidate still steps down for it once the hold-off has
// passed, and the preemptor leads on its side of the partition. Not within
// the hand-over's bound, though: a new leader's Term is handed out only
// once every peer has answered or had TimeoutTicks to, longer than the
// lease window, so the hand-over lapses and the preemptor, the best
// waiting candidate, leads from the normal order.
func TestPreemptionAcrossPartition(t *testing.T) {
	forEachAll(t, func(t *testing.T, alg Algorithm, lat time.Duration) {
		c := newCluster(t, alg, WithLatency(lat))
		tm := c.Timing()
		const hold = time.Second
		a, err := c.Join(election.WithID("a"), election.WithPreemption(hold))
		if err != nil {
			t.Fatal(err)
		}
		es := append([]*Elector{a}, join(t, c, 4)...) // c1..c4, priorities 1..4
		ctx := context.Background()
		first := next(t, campaignBatch(ctx, c, a), 10*time.Second, "first leader")
		// The preemptor's side has a majority, which Zab needs.
		if err := c.Partition([]*Elector{a, es[1]}, []*Elector{es[2], es[3], es[4]}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		ch := campaignBatch(ctx, c, es[4])
		select {
		case <-first.t.Done():
		case <-time.After(2 * hold):
			t.Fatalf("the leader did not step down for c4 across the partition")
		}
		if took := time.Since(start); took != hold {
			t.Errorf("the leader stepped down after %v, want the hold-off %v", took, hold)
		}
		if !errors.Is(first.t.Err(), election.ErrPreempted) {
			t.Errorf("the preempted Term: %v", first.t.Err())
		}
		// A ring skips each cut-off successor after TimeoutTicks.
		w := next(t, ch, a.o.Window()+time.Duration(len(es)+2)*tm.FailureTimeout(), "the preemptor")
		if w.t.Token() <= first.t.Token() {
			t.Errorf("the preemptor's token %d, not above %d", w.t.Token(), first.t.Token())
		}
		t.Logf("c4 led %v after the preemption", time.Since(start)-hold)
		for _, e := range es[2:] {
			if l := leaderOf(t, e); !l.Equal(w.t.Leader()) {
				t.Errorf("%s shows %v, want %v", e.ID(), l, w.t.Leader())
			}
		}
	})
}
