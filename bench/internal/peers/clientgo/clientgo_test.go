package clientgo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	election "github.com/electkit/election"
	"github.com/electkit/election/bench/internal/peer"
	"github.com/electkit/election/internal/rig/embedetcd"
	"github.com/electkit/election/internal/rig/etcdtest"
)

func endpoints(t *testing.T) []string {
	t.Helper()
	return etcdtest.New(t, embedetcd.Config{}).Endpoints()
}

func newLibrary(t *testing.T, eps []string, opts ...Option) peer.Library {
	t.Helper()
	l := New(eps, opts...)
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("library Close: %v", err)
		}
	})
	return l
}

// waiter is a candidate whose Get reports the holders it reads.
type waiter struct {
	*candidate
	sawOther chan struct{} // closed once Get read a record held by another
}

func newCandidate(t *testing.T, l peer.Library, name, id string, ttl time.Duration) waiter {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pc, err := l.NewCandidate(ctx, name, id, ttl)
	if err != nil {
		t.Fatalf("NewCandidate %s: %v", id, err)
	}
	t.Cleanup(func() { pc.Close() })
	c := pc.(*candidate)
	w := waiter{candidate: c, sawOther: make(chan struct{})}
	var once sync.Once
	c.lock.seen = func(holder string) {
		if holder != "" && holder != id {
			once.Do(func() { close(w.sawOther) })
		}
	}
	return w
}

type result struct {
	at  int64
	err error
}

func campaignAsync(ctx context.Context, c peer.Candidate) <-chan result {
	ch := make(chan result, 1)
	go func() {
		at, err := c.Campaign(ctx)
		ch <- result{at, err}
	}()
	return ch
}

func wait(t *testing.T, what string, ch <-chan struct{}, d time.Duration) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("%s: not within %v", what, d)
	}
}

// handover makes a lead, b wait (it has read a's record), then, after
// phase, ends a's leadership with end and returns end's instant and b's
// elected instant.
func handover(t *testing.T, a, b waiter, phase time.Duration, end func() (int64, error), within time.Duration) (int64, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within+30*time.Second)
	defer cancel()
	aAt, err := a.Campaign(ctx)
	if err != nil {
		t.Fatalf("a Campaign: %v", err)
	}
	bRes := campaignAsync(ctx, b)
	wait(t, "b reads a's record", b.sawOther, 30*time.Second)
	if phase > 0 {
		// Not a synchronization: it moves the end to a random point of
		// b's polling cycle, as in a system that runs for a while.
		time.Sleep(phase)
	}
	select {
	case r := <-bRes:
		t.Fatalf("b elected (%v) while a leads", r.err)
	default:
	}
	endAt, err := end()
	if err != nil {
		t.Fatalf("ending a's leadership: %v", err)
	}
	if endAt < aAt {
		t.Errorf("a's end instant %d before its elected instant %d", endAt, aAt)
	}
	select {
	case r := <-bRes:
		if r.err != nil {
			t.Fatalf("b Campaign: %v", r.err)
		}
		if r.at <= endAt {
			t.Errorf("b elected at %d, not after a's end at %d", r.at, endAt)
		}
		return endAt, r.at
	case <-time.After(within):
		t.Fatalf("b not elected within %v of a's end", within)
	}
	return 0, 0
}

// jittered is the longest wait of a waiter between two polls.
func jittered(t Timings) time.Duration {
	return t.RetryPeriod + time.Duration(1.2*float64(t.RetryPeriod))
}

func TestReleaseHandsOverAtDefaultTimings(t *testing.T) {
	l := newLibrary(t, endpoints(t))
	a := newCandidate(t, l, "release", "a", 2*time.Second)
	b := newCandidate(t, l, "release", "b", 2*time.Second)
	rel, el := handover(t, a, b, 0, func() (int64, error) { return a.Release(context.Background()) }, 2*jittered(DefaultTimings())+5*time.Second)
	t.Logf("release → b elected: %v", time.Duration(el-rel))
	if got := holder(t, b.candidate); got != "b" {
		t.Errorf("record holder after handover = %q, want b", got)
	}
	// a campaigns again and waits behind b.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	aRes := campaignAsync(ctx, a)
	if _, err := b.Release(ctx); err != nil {
		t.Fatalf("b Release: %v", err)
	}
	if r := <-aRes; r.err != nil {
		t.Fatalf("a campaigns again: %v", r.err)
	}
}

func TestCrashFailsOverAfterLease(t *testing.T) {
	const ttl = 2 * time.Second
	l := newLibrary(t, endpoints(t), WithTTLTimings())
	a := newCandidate(t, l, "crash", "a", ttl)
	b := newCandidate(t, l, "crash", "b", ttl)
	tm := TimingsFor(ttl)
	cut, el := handover(t, a, b, 0, a.Crash, tm.LeaseDuration+2*jittered(tm)+5*time.Second)
	t.Logf("crash → b elected: %v (LeaseDuration %v)", time.Duration(el-cut), tm.LeaseDuration)
	if _, err := a.Campaign(context.Background()); err == nil {
		t.Errorf("a crashed candidate campaigns again without error")
	}
}

func holder(t *testing.T, c *candidate) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, _, err := c.lock.Get(ctx)
	if err != nil {
		t.Fatalf("reading the record: %v", err)
	}
	return r.HolderIdentity
}

func TestCampaignCanceledWithdraws(t *testing.T) {
	l := newLibrary(t, endpoints(t), WithTTLTimings())
	a := newCandidate(t, l, "cancel", "a", 2*time.Second)
	b := newCandidate(t, l, "cancel", "b", 2*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := a.Campaign(ctx); err != nil {
		t.Fatalf("a Campaign: %v", err)
	}
	bctx, bcancel := context.WithCancel(ctx)
	bRes := campaignAsync(bctx, b)
	wait(t, "b reads a's record", b.sawOther, 30*time.Second)
	bcancel()
	if r := <-bRes; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("b Campaign after cancel: %v, want context.Canceled", r.err)
	}
	if _, err := b.Release(ctx); !errors.Is(err, election.ErrNotLeader) {
		t.Errorf("Release of a withdrawn candidate: %v, want ErrNotLeader", err)
	}
}

func TestBadInput(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name string
		l    peer.Library
		ttl  time.Duration
	}{
		{"no endpoints", New(nil), time.Second},
		{"https endpoint", New([]string{"https://127.0.0.1:2379"}), time.Second},
		{"bad timings", New([]string{"127.0.0.1:2379"}, WithTimings(Timings{LeaseDuration: time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Second})), time.Second},
		{"short ttl", New([]string{"127.0.0.1:2379"}, WithTTLTimings()), 500 * time.Millisecond},
		{"empty prefix", New([]string{"127.0.0.1:2379"}, WithPrefix("")), time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer c.l.Close()
			cand, err := c.l.NewCandidate(ctx, "e", "a", c.ttl)
			if !errors.Is(err, election.ErrInvalidOption) {
				if cand != nil {
					cand.Close()
				}
				t.Fatalf("NewCandidate: %v, want ErrInvalidOption", err)
			}
		})
	}
}

func TestTimings(t *testing.T) {
	for _, tm := range []Timings{DefaultTimings(), TimingsFor(time.Second), TimingsFor(2 * time.Second), TimingsFor(15 * time.Second)} {
		if err := tm.Validate(); err != nil {
			t.Errorf("%+v: %v", tm, err)
		}
	}
	if got := TimingsFor(15 * time.Second); got != DefaultTimings() {
		t.Errorf("TimingsFor(15s) = %+v, want the defaults %+v", got, DefaultTimings())
	}
}

// TestFigures measures release handover at client-go's default timings and
// crash failover at a 2 s TTL. Run with -v; skipped with -short.
func TestFigures(t *testing.T) {
	if testing.Short() {
		t.Skip("measurement; run without -short")
	}
	eps := endpoints(t)
	const n = 10
	// Each end comes at a uniformly random delay within one longest polling
	// cycle after b first read a's record: about a random phase of b's
	// polling, where the end of a system that has run for a while falls.
	measure := func(l peer.Library, what string, ttl time.Duration, cycle, within time.Duration, crash bool) []time.Duration {
		var out []time.Duration
		for i := range n {
			name := fmt.Sprintf("%s-%d", what, i)
			a := newCandidate(t, l, name, "a", ttl)
			b := newCandidate(t, l, name, "b", ttl)
			end := func() (int64, error) { return a.Release(context.Background()) }
			if crash {
				end = a.Crash
			}
			from, to := handover(t, a, b, time.Duration(rand.Int64N(int64(cycle))), end, within)
			out = append(out, time.Duration(to-from))
			a.Close()
			b.Close()
		}
		return out
	}
	rel := measure(newLibrary(t, eps), "release", 2*time.Second, jittered(DefaultTimings()), 2*jittered(DefaultTimings())+5*time.Second, false)
	report(t, "client-go release handover, default timings (15s/10s/2s)", rel)
	tm := TimingsFor(2 * time.Second)
	crash := measure(newLibrary(t, eps, WithTTLTimings()), "crash", 2*time.Second, jittered(tm), tm.LeaseDuration+2*jittered(tm)+5*time.Second, true)
	report(t, "client-go crash failover, ttl 2s (2s/1.33s/267ms)", crash)
}

func report(t *testing.T, what string, ds []time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	q := func(p float64) time.Duration { return s[int(p*float64(len(s)-1)+0.5)] }
	t.Logf("%s: n=%d min=%v p50=%v p90=%v max=%v", what, len(s), s[0].Round(time.Millisecond), q(0.5).Round(time.Millisecond), q(0.9).Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond))
}
