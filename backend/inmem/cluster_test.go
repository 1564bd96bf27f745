package inmem

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/electkit/election"
)

var algorithms = []Algorithm{Ring, Bully, LCR, HS}

// forEach runs f for every algorithm, each in its own synctest bubble.
func forEach(t *testing.T, f func(t *testing.T, alg Algorithm)) {
	for _, alg := range algorithms {
		t.Run(alg.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { f(t, alg) })
		})
	}
}

func newCluster(t testing.TB, alg Algorithm, opts ...ClusterOption) *Cluster {
	t.Helper()
	c, err := NewCluster(alg, traceOpts(opts...)...)
	if err != nil {
		t.Fatalf("NewCluster: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// join adds members c1..cn with priority i (as the conformance suite does:
// later members rank higher).
func join(t testing.TB, c *Cluster, n int) []*Elector {
	t.Helper()
	var es []*Elector
	for i := 1; i <= n; i++ {
		e, err := c.Join(election.WithID(fmt.Sprintf("c%d", i)), election.WithPriority(int64(i)),
			election.WithValue([]byte(fmt.Sprintf("v%d", i))))
		if err != nil {
			t.Fatalf("Join: %v", err)
		}
		es = append(es, e)
	}
	return es
}

type won struct {
	e   *Elector
	t   *election.Term
	err error
}

// campaignBatch starts a Campaign for each of es and returns once all of
// them wait at the gate, so that they are admitted together, as one batch.
func campaignBatch(ctx context.Context, c *Cluster, es ...*Elector) chan won {
	ch := make(chan won, len(es)+1)
	c.ops.Lock() // the gate cannot open before every Campaign waits at it
	for _, e := range es {
		go func() {
			t, err := e.Campaign(ctx)
			ch <- won{e, t, err}
		}()
	}
	for {
		c.mu.Lock()
		n := 0
		for _, e := range es {
			if e.cand != nil && e.cand.state == pending {
				n++
			}
		}
		c.mu.Unlock()
		if n == len(es) {
			break
		}
		runtime.Gosched()
	}
	c.ops.Unlock()
	c.wakeController()
	return ch
}

func next(t testing.TB, ch <-chan won, within time.Duration, what string) won {
	t.Helper()
	select {
	case w := <-ch:
		if w.err != nil {
			t.Fatalf("%s: Campaign of %s: %v", what, w.e.ID(), w.err)
		}
		return w
	case <-time.After(within):
		t.Fatalf("%s: no leader within %v", what, within)
		return won{}
	}
}

func leaderOf(t *testing.T, e *Elector) election.Leader {
	t.Helper()
	l, err := e.Leader(context.Background())
	if err != nil && !errors.Is(err, election.ErrNoLeader) {
		t.Fatalf("Leader of %s: %v", e.ID(), err)
	}
	return l
}

// The seeds' algorithms assume a network that never splits. Split it, and
// each side elects its own leader: two valid Terms at once, with different
// tokens (P1 and P2 hold, P3 does not). Each member shows the leader of its
// own side. Healing makes the algorithm converge again, and both Terms end.
func TestPartitionElectsTwoLeaders(t *testing.T) {
	forEach(t, func(t *testing.T, alg Algorithm) {
		c := newCluster(t, alg)
		tm := c.Timing()
		es := join(t, c, 5)
		ch := campaignBatch(context.Background(), c, es...)
		first := next(t, ch, 10*time.Second, "first leader")
		if first.e != es[4] {
			t.Fatalf("first leader %s, want c5 (the best of the batch)", first.e.ID())
		}
		// c5 keeps c1 (its ring successor) on its side; c4, c5's ring
		// predecessor and the bully's next best, is on the other.
		side := []*Elector{es[4], es[0]}
		other := []*Elector{es[1], es[2], es[3]}
		if err := c.Partition(side, other); err != nil {
			t.Fatalf("Partition: %v", err)
		}
		second := next(t, ch, tm.LeaseTTL+4*tm.FailureTimeout(), "leader of the other side")
		if second.e != es[3] {
			t.Errorf("the other side elected %s, want c4", second.e.ID())
		}
		if err := first.t.Err(); err != nil {
			t.Fatalf("c5's Term ended (%v): its side should keep it", err)
		}
		if first.t.Token() == second.t.Token() {
			t.Errorf("two leaders share token %d (P1)", first.t.Token())
		}
		t.Logf("two valid Terms at once: %v and %v", first.t, second.t)
		// Hold on a while: both sides keep renewing their own leader.
		time.Sleep(3 * tm.LeaseTTL)
		for _, x := range []won{first, second} {
			if err := x.t.Err(); err != nil {
				t.Errorf("%v ended during the partition: %v", x.t, err)
			}
		}
		for _, e := range side {
			if l := leaderOf(t, e); l.Token != first.t.Token() {
				t.Errorf("%s shows %v, want its side's leader %v", e.ID(), l, first.t.Leader())
			}
		}
		for _, e := range other {
			if l := leaderOf(t, e); l.Token != second.t.Token() {
				t.Errorf("%s shows %v, want its side's leader %v", e.ID(), l, second.t.Leader())
			}
		}

		if err := c.Heal(); err != nil {
			t.Fatalf("Heal: %v", err)
		}
		// The older side's leader learns of the newer leadership from its
		// next renewal and loses its Term.
		select {
		case <-first.t.Done():
			if !errors.Is(first.t.Err(), election.ErrPreempted) {
				t.Errorf("%v ended with %v after Heal, want ErrPreempted", first.t, first.t.Err())
			}
		case <-time.After(2 * tm.RenewInterval()):
			t.Errorf("%v still valid after Heal", first.t)
		}
		// The members converge on one leader with a valid Term; on the way
		// (a ring's halves may elect again before they find each other)
		// another may lead, but in the healed network each Term is handed
		// out only after the one before ended.
		// A ring node whose election run died in the merge starts another
		// after N·TimeoutTicks: allow for that.
		valid := second
		within := tm.LeaseTTL + time.Duration(len(es)+3)*tm.FailureTimeout()
		deadline := time.Now().Add(within)
		for {
			select {
			case w := <-ch:
				if w.err != nil {
					t.Fatalf("Campaign of %s after Heal: %v", w.e.ID(), w.err)
				}
				if valid.t.Err() == nil {
					t.Errorf("%v handed out after Heal while %v is valid", w.t, valid.t)
				}
				if w.t.Token() <= valid.t.Token() {
					t.Errorf("token after Heal %d, not above %d", w.t.Token(), valid.t.Token())
				}
				valid = w
				continue
			case <-time.After(tm.Tick):
			}
			agreed := valid.t.Err() == nil
			for _, e := range es {
				if l := leaderOf(t, e); !l.Equal(valid.t.Leader()) {
					agreed = false
				}
			}
			if agreed {
				t.Logf("after Heal every member shows %v", valid.t)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no agreement on one leader %v after Heal", within)
			}
		}
	})
}

// A member cut off from every peer stops leading once its lease lapses: it
// may have been replaced.
func TestIsolatedLeaderStepsDown(t *testing.T) {
	forEach(t, func(t *testing.T, alg Algorithm) {
		c := newCluster(t, alg)
		es := join(t, c, 3)
		ch := campaignBatch(context.Background(), c, es[2])
		l := next(t, ch, 10*time.Second, "leader")
		if err := c.Partition([]*Elector{es[2]}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-l.t.Done():
		case <-time.After(c.Timing().LeaseTTL):
			t.Fatalf("isolated leader's Term still valid after the lease TTL")
		}
		if !errors.Is(l.t.Err(), election.ErrLeaseExpired) {
			t.Errorf("isolated leader's Term ended with %v, want ErrLeaseExpired", l.t.Err())
		}
		if !time.Now().Equal(l.t.Deadline()) {
			t.Errorf("isolated leader's Term ended at %v, its deadline is %v", time.Now(), l.t.Deadline())
		}
		// Its node steps down; its peers, which lost it, elect no one (no
		// one else campaigns) and show no leader.
		time.Sleep(c.Timing().FailureTimeout())
		for _, e := range es {
			if l := leaderOf(t, e); !l.IsZero() {
				t.Errorf("%s shows %v after the leader was cut off", e.ID(), l)
			}
		}
	})
}

// A leader crashes while other admitted candidates wait: the algorithm's
// failure detector elects the next, and its Term is handed out only after
// the crashed leader's Term has ended, whatever the crash's phase against
// the renewals and whatever the latency (P3 through the lease TTL derived
// from the failure detector, not through the gate).
func TestFailoverAfterLeaderCrash(t *testing.T) {
	for _, alg := range algorithms {
		for _, lat := range []time.Duration{0, 7 * time.Millisecond} {
			for offset := range DefaultHeartbeatTicks + 1 {
				name := fmt.Sprintf("%v/latency=%v/offset=%d", alg, lat, offset)
				t.Run(name, func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						c := newCluster(t, alg, WithLatency(lat))
						tm := c.Timing()
						es := join(t, c, 4)
						ch := campaignBatch(context.Background(), c, es...)
						first := next(t, ch, 10*time.Second, "first leader")
						time.Sleep(3*tm.RenewInterval() + time.Duration(offset)*tm.Tick + time.Duration(offset)*lat/3)
						crashed := time.Now()
						if err := c.Crash(first.e); err != nil {
							t.Fatal(err)
						}
						second := next(t, ch, tm.LeaseTTL+4*tm.FailureTimeout(), "leader after the crash")
						if err := first.t.Err(); err == nil {
							t.Fatalf("%v handed out while the crashed %v is still valid (deadline %v after the crash)",
								second.t, first.t, first.t.Deadline().Sub(crashed))
						} else if !errors.Is(err, election.ErrLeaseExpired) {
							t.Errorf("crashed leader's Term ended with %v, want ErrLeaseExpired", err)
						}
						if second.t.Token() <= first.t.Token() {
							t.Errorf("token after failover %d, not above %d", second.t.Token(), first.t.Token())
						}
						t.Logf("failover in %v; crashed Term ended %v after the crash",
							time.Since(crashed), first.t.Deadline().Sub(crashed))
					})
				})
			}
		}
	}
}

// Crash and Recover: a crashed candidate's Campaign fails with
// ErrSessionLost, its calls too; recovered, it sees the leader again
// without disturbing it, and can campaign again.
func TestCrashAndRecover(t *testing.T) {
	forEach(t, func(t *testing.T, alg Algorithm) {
		c := newCluster(t, alg)
		tm := c.Timing()
		es := join(t, c, 3)
		ctx := context.Background()
		lead := next(t, campaignBatch(ctx, c, es[0]), 10*time.Second, "leader")
		ch := campaignBatch(ctx, c, es[1], es[2])
		if err := c.Crash(es[2]); err != nil {
			t.Fatal(err)
		}
		w := <-ch
		if w.e != es[2] || !errors.Is(w.err, election.ErrSessionLost) {
			t.Fatalf("Campaign of a crashed candidate: %s %v, want c3 ErrSessionLost", w.e.ID(), w.err)
		}
		if _, err := es[2].Leader(ctx); !errors.Is(err, election.ErrSessionLost) {
			t.Errorf("Leader of a crashed member: %v, want ErrSessionLost", err)
		}
		if _, err := es[2].Campaign(ctx); !errors.Is(err, election.ErrSessionLost) {
			t.Errorf("Campaign of a crashed member: %v, want ErrSessionLost", err)
		}
		if err := c.Crash(es[2]); err != nil {
			t.Errorf("second Crash: %v", err)
		}
		if err := c.Recover(es[2]); err != nil {
			t.Fatal(err)
		}
		if err := c.Recover(es[2]); err != nil {
			t.Errorf("Recover of a live member: %v", err)
		}
		// It learns the leader from the next renewal.
		time.Sleep(tm.RenewInterval() + tm.Tick)
		if l := leaderOf(t, es[2]); !l.Equal(lead.t.Leader()) {
			t.Errorf("recovered member shows %v, want %v", l, lead.t.Leader())
		}
		if err := lead.t.Err(); err != nil {
			t.Errorf("the leader's Term ended when c3 recovered: %v", err)
		}
		ch3 := campaignBatch(ctx, c, es[2])
		if err := es[0].Resign(ctx); err != nil {
			t.Fatal(err)
		}
		// c2 and the recovered c3 waited at the gate together: one batch,
		// and c3 ranks higher.
		w = next(t, ch3, 10*time.Second, "after c1 resigned")
		es[2].Resign(ctx)
		w = next(t, ch, 10*time.Second, "after c3 resigned")
		if w.e != es[1] {
			t.Errorf("%s leads, want c2", w.e.ID())
		}
	})
}

// A leader that crashes and recovers before its Term lapsed loses the Term
// with ErrSessionLost: the process that held it is gone.
func TestRecoverEndsHeldTerm(t *testing.T) {
	forEach(t, func(t *testing.T, alg Algorithm) {
		c := newCluster(t, alg)
		es := join(t, c, 2)
		l := next(t, campaignBatch(context.Background(), c, es[0]), 10*time.Second, "leader")
		c.Crash(es[0])
		time.Sleep(c.Timing().RenewInterval())
		if err := l.t.Err(); err != nil {
			t.Fatalf("crashed leader's Term ended before its deadline: %v", err)
		}
		c.Recover(es[0])
		if !errors.Is(l.t.Err(), election.ErrSessionLost) {
			t.Errorf("Term after Recover: %v, want ErrSessionLost", l.t.Err())
		}
	})
}

// Latency slows the election down by whole message delays: leadership is
// confirmed by a round trip to the peers at least, and peers learn of it
// no sooner than one delay after the leader.
func TestLatency(t *testing.T) {
	forEach(t, func(t *testing.T, alg Algorithm) {
		const lat = 40 * time.Millisecond
		measure := func(lat time.Duration) time.Duration {
			c := newCluster(t, alg, WithLatency(lat))
			es := join(t, c, 3)
			start := time.Now()
			w := next(t, campaignBatch(context.Background(), c, es...), 10*time.Second, "leader")
			took := time.Since(start)
			for _, e := range es {
				if l := leaderOf(t, e); !l.Equal(w.t.Leader()) {
					t.Errorf("%s shows %v when Campaign returned, want %v", e.ID(), l, w.t.Leader())
				}
			}
			c.Close()
			return took
		}
		fast, slow := measure(0), measure(lat)
		t.Logf("first leader after %v with no latency, %v with %v", fast, slow, lat)
		if slow < fast+2*lat {
			t.Errorf("with latency %v the first leader took %v, not at least a round trip more than %v", lat, slow, fast)
		}
	})
}

// A member that joins while a leader holds its Term takes no part in the
// algorithm until the next batch, but shows the leader from its next
// renewal. Campaigning, it waits for its batch although it ranks highest:
// the other candidate admitted with the leader goes first.
func TestLateJoiner(t *testing.T) {
	forEach(t, func(t *testing.T, alg Algorithm) {
		c := newCluster(t, alg)
		es := join(t, c, 2)
		ctx := context.Background()
		ch := campaignBatch(ctx, c, es...)
		l := next(t, ch, 10*time.Second, "leader")
		late, err := c.Join(election.WithID("late"), election.WithPriority(100))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(c.Timing().RenewInterval() + c.Timing().Tick)
		if got := leaderOf(t, late); !got.Equal(l.t.Leader()) {
			t.Errorf("late joiner shows %v, want %v", got, l.t.Leader())
		}
		chLate := campaignBatch(ctx, c, late)
		l.e.Resign(ctx)
		w := next(t, ch, 10*time.Second, "the rest of the first batch")
		if w.e == late || w.e == l.e {
			t.Fatalf("%s leads, want the other member of the first batch", w.e.ID())
		}
		w.e.Resign(ctx)
		w = next(t, chLate, 10*time.Second, "the late joiner's batch")
		if w.e != late {
			t.Errorf("%s leads, want late", w.e.ID())
		}
	})
}

// Refused options name the option and the value and wrap ErrInvalidOption.
func TestOptionsRefused(t *testing.T) {
	cases := []struct {
		alg  Algorithm
		opts []ClusterOption
		want string
	}{
		{Algorithm{}, nil, `inmem.Algorithm = ""`},
		{Ring, []ClusterOption{nil}, "inmem.ClusterOption = option #0 is nil"},
		{Ring, []ClusterOption{WithTick(0)}, "inmem.WithTick = 0s"},
		{Ring, []ClusterOption{WithTick(2 * time.Minute)}, "inmem.WithTick = 2m0s"},
		{Ring, []ClusterOption{WithHeartbeatTicks(0)}, "inmem.WithHeartbeatTicks = 0"},
		{Ring, []ClusterOption{WithTimeoutTicks(12)}, "inmem.WithTimeoutTicks = 12: must be more than HeartbeatTicks+2 (12)"},
		{Bully, []ClusterOption{WithTimeoutTicks(50)}, "inmem.WithTimeoutTicks = 50: gives a lease TTL of 480ms"},
		{Bully, []ClusterOption{WithLatency(-time.Millisecond)}, "inmem.WithLatency = -1ms"},
		{Bully, []ClusterOption{WithLatency(50 * time.Millisecond)}, "inmem.WithLatency = 50ms: a round trip must be shorter"},
		{Bully, []ClusterOption{WithLatency(100 * time.Millisecond), WithHeartbeatTicks(30)}, "inmem.WithTimeoutTicks = 120: gives a lease TTL of 980ms"},
		{Ring, []ClusterOption{WithHeartbeatTicks(40)}, "inmem.WithHeartbeatTicks = 40: renewal every 400ms"},
		{Ring, []ClusterOption{WithLogger(nil)}, "inmem.WithLogger = nil"},
	}
	for _, tc := range cases {
		c, err := NewCluster(tc.alg, tc.opts...)
		if err == nil {
			c.Close()
			t.Errorf("NewCluster(%v, %d options) accepted, want %q", tc.alg, len(tc.opts), tc.want)
			continue
		}
		if !errors.Is(err, election.ErrInvalidOption) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewCluster error %q, want ErrInvalidOption naming %q", err, tc.want)
		}
	}

	c, err := NewCluster(Ring)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	joins := []struct {
		opts []election.Option
		want string
	}{
		{[]election.Option{election.WithTTL(5 * time.Second)}, "TTL = 5s: the lease TTL of an inmem cluster is 1.18s"},
		{[]election.Option{election.WithID("bad id")}, `ID = "bad id"`},
		{[]election.Option{election.WithID("a"), election.WithMargin(time.Second)}, "Margin = 1s"},
	}
	for _, j := range joins {
		if _, err := c.Join(j.opts...); !errors.Is(err, election.ErrInvalidOption) || !strings.Contains(err.Error(), j.want) {
			t.Errorf("Join error %v, want ErrInvalidOption naming %q", err, j.want)
		}
	}
	if _, err := c.Join(election.WithID("a")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Join(election.WithID("a")); !errors.Is(err, election.ErrInvalidOption) || !strings.Contains(err.Error(), `ID = "a": is already a member`) {
		t.Errorf("Join with a taken ID: %v", err)
	}
	other, _ := NewCluster(Ring)
	defer other.Close()
	stranger, _ := other.Join(election.WithID("x"))
	for name, err := range map[string]error{
		"Crash":     c.Crash(stranger),
		"Recover":   c.Recover(stranger),
		"Partition": c.Partition([]*Elector{stranger}),
	} {
		if !errors.Is(err, election.ErrInvalidOption) || !strings.Contains(err.Error(), `Elector = "x": is not a member`) {
			t.Errorf("%s of a stranger: %v", name, err)
		}
	}
	a := c.members[0]
	if err := c.Partition([]*Elector{a}, []*Elector{a}); !errors.Is(err, election.ErrInvalidOption) {
		t.Errorf("Partition with a member in two groups: %v", err)
	}
}

// Tokens strictly increase across handovers within a batch and across
// batches (each batch builds fresh nodes whose epochs count on from the
// last), and the low 16 bits name the leader's node.
func TestTokensIncrease(t *testing.T) {
	forEach(t, func(t *testing.T, alg Algorithm) {
		c := newCluster(t, alg)
		es := join(t, c, 3)
		ctx := context.Background()
		var last uint64
		for round := range 3 {
			ch := campaignBatch(ctx, c, es...)
			for i := range es {
				w := next(t, ch, 10*time.Second, fmt.Sprintf("batch %d, leader %d", round, i))
				if tok := w.t.Token(); tok <= last {
					t.Errorf("token %d after %d", tok, last)
				} else if tok>>16 <= last>>16 {
					t.Errorf("token %d: epoch part %d not above %d", tok, tok>>16, last>>16)
				}
				last = w.t.Token()
				w.e.Resign(ctx)
			}
		}
	})
}

// Close of the cluster closes every member: Terms end with ErrClosed,
// waiting Campaigns return ErrClosed, later calls fail, nothing is left
// running (TestMain checks).
func TestClusterClose(t *testing.T) {
	forEach(t, func(t *testing.T, alg Algorithm) {
		c := newCluster(t, alg)
		es := join(t, c, 3)
		ctx := context.Background()
		obs := es[0].Observe(ctx)
		ch := campaignBatch(ctx, c, es...)
		l := next(t, ch, 10*time.Second, "leader")
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if !errors.Is(l.t.Err(), election.ErrClosed) {
			t.Errorf("leader's Term after Close: %v", l.t.Err())
		}
		for range 2 {
			if w := <-ch; !errors.Is(w.err, election.ErrClosed) {
				t.Errorf("waiting Campaign after Close: %v", w.err)
			}
		}
		for range obs {
		}
		if _, err := c.Join(); !errors.Is(err, election.ErrClosed) {
			t.Errorf("Join after Close: %v", err)
		}
		if err := c.Crash(es[0]); !errors.Is(err, election.ErrClosed) {
			t.Errorf("Crash after Close: %v", err)
		}
		if err := c.Heal(); !errors.Is(err, election.ErrClosed) {
			t.Errorf("Heal after Close: %v", err)
		}
		if err := c.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	})
}

// A renewal hook may call Resign (lease.go allows it): the Term ends with
// ErrResigned and nothing waits for the hook that is calling.
func TestHookResigns(t *testing.T) {
	forEach(t, func(t *testing.T, alg Algorithm) {
		c := newCluster(t, alg)
		for _, which := range []string{"before", "after"} {
			var e *Elector
			ready := make(chan struct{})
			resign := func() { <-ready; e.Resign(context.Background()) }
			var err error
			if which == "before" {
				e, err = c.Join(election.WithID(which), election.WithBeforeRenew(func(context.Context, *election.Term) error {
					resign()
					return nil
				}))
			} else {
				e, err = c.Join(election.WithID(which), election.WithAfterRenew(func(election.Renewal) { resign() }))
			}
			if err != nil {
				t.Fatal(err)
			}
			close(ready)
			w := next(t, campaignBatch(context.Background(), c, e), 10*time.Second, which)
			select {
			case <-w.t.Done():
			case <-time.After(2 * c.Timing().RenewInterval()):
				t.Fatalf("%s-renewal hook calling Resign: Term still valid", which)
			}
			if !errors.Is(w.t.Err(), election.ErrResigned) {
				t.Errorf("%s-renewal hook calling Resign: Term ended with %v", which, w.t.Err())
			}
			if err := e.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		}
	})
}
