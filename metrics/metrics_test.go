package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/electkit/election"
	"github.com/electkit/election/metrics"
)

// renewal is a Renewal of the Term with token tok, sent at sent, with the
// deadline after it.
func renewal(tok uint64, sent time.Time, latency time.Duration, err error, deadline time.Time) election.Renewal {
	return election.Renewal{Leader: election.Leader{ID: "a", Token: tok}, Sent: sent, Latency: latency, Err: err, Deadline: deadline}
}

func newSet(t *testing.T, opts ...metrics.Option) (*metrics.Set, *prometheus.Registry) {
	t.Helper()
	s, err := metrics.NewSet(opts...)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(s)
	return s, reg
}

func observer(t *testing.T, s *metrics.Set, name string) *election.Events {
	t.Helper()
	o, err := s.Events(name)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// The end of one Term may be reported after the start of the next (each
// Term reports on its own goroutine): leading follows the Terms begun and
// not ended, not the latest call.
func TestOverlappingTerms(t *testing.T) {
	s, reg := newSet(t)
	o := observer(t, s, "x")
	x := lbl("election", "x")
	now := time.Now()
	o.Elected(election.Leader{ID: "a", Token: 1}, now.Add(time.Second))
	o.Elected(election.Leader{ID: "a", Token: 2}, now.Add(time.Second))
	o.Renewed(renewal(2, now, time.Millisecond, nil, now.Add(time.Second)), 800*time.Millisecond)
	o.Ended(election.Leader{ID: "a", Token: 1}, election.ErrResigned)
	mfs := scrape(t, reg)
	want(t, mfs, "election_leading", x, 1)
	want(t, mfs, "election_token", x, 2)
	want(t, mfs, "election_renewal_slack_ratio", x, 0.8)
	o.Ended(election.Leader{ID: "a", Token: 2}, election.ErrLeaseExpired)
	mfs = scrape(t, reg)
	want(t, mfs, "election_leading", x, 0)
	want(t, mfs, "election_token", x, 2)
	absent(t, mfs, "election_renewal_slack_ratio", x)
	absent(t, mfs, "election_renewal_last_slack_seconds", x)
	absent(t, mfs, "election_lease_window_seconds", x)
	want(t, mfs, "election_leaderships_lost_total", lbl("election", "x", "reason", "resigned"), 1)
	want(t, mfs, "election_leaderships_lost_total", lbl("election", "x", "reason", "lease_expired"), 1)
}

// The window is learned from the first successful renewal (Deadline −
// Sent, the smallest when a reply overtook an older request's); until
// then the slack ratio is not exported. A later Term of the election uses
// the window learned before from its first renewal on.
func TestWindowLearnedFromRenewals(t *testing.T) {
	s, reg := newSet(t)
	o := observer(t, s, "x")
	x := lbl("election", "x")
	t0 := time.Now()
	o.Elected(election.Leader{ID: "a", Token: 1}, t0.Add(4*time.Second))
	o.Renewed(renewal(1, t0.Add(time.Second), time.Second, errors.New("timeout"), t0.Add(4*time.Second)), 3*time.Second)
	mfs := scrape(t, reg)
	want(t, mfs, "election_renewal_last_slack_seconds", x, 3)
	absent(t, mfs, "election_renewal_slack_ratio", x)
	absent(t, mfs, "election_lease_window_seconds", x)

	// Sent at 3s, the deadline becomes 7s: the window is 4s; the slack
	// (1s) is a quarter of it.
	o.Renewed(renewal(1, t0.Add(3*time.Second), time.Millisecond, nil, t0.Add(7*time.Second)), time.Second)
	mfs = scrape(t, reg)
	want(t, mfs, "election_lease_window_seconds", x, 4)
	want(t, mfs, "election_renewal_slack_ratio", x, 0.25)
	// A reply to a request sent at 2.5s, overtaken by the one sent at 3s:
	// the deadline stays 7s; 4.5s is not the window.
	o.Renewed(renewal(1, t0.Add(2500*time.Millisecond), time.Second, nil, t0.Add(7*time.Second)), 1500*time.Millisecond)
	mfs = scrape(t, reg)
	want(t, mfs, "election_lease_window_seconds", x, 4)
	want(t, mfs, "election_renewal_slack_ratio", x, 0.375)
	o.Ended(election.Leader{ID: "a", Token: 1}, election.ErrResigned)

	// The next Term's first renewal fails, and is measured against the
	// window learned before.
	o.Elected(election.Leader{ID: "a", Token: 2}, t0.Add(14*time.Second))
	o.Renewed(renewal(2, t0.Add(13*time.Second), time.Second, errors.New("timeout"), t0.Add(14*time.Second)), time.Second)
	mfs = scrape(t, reg)
	want(t, mfs, "election_renewal_slack_ratio", x, 0.25)
	want(t, mfs, "election_renewals_total", lbl("election", "x", "outcome", "ok"), 2)
	want(t, mfs, "election_renewals_total", lbl("election", "x", "outcome", "failed"), 2)
	want(t, mfs, "election_renewal_slack_seconds", x, 4)
	want(t, mfs, "election_renewal_latency_seconds", x, 4)
	if sum := find(mfs, "election_renewal_latency_seconds", x).GetHistogram().GetSampleSum(); math.Abs(sum-3.001) > 1e-9 {
		t.Errorf("latency sum %v, want 3.001", sum)
	}
}

// The reason is the sentinel the Term's error wraps, the outermost when it
// wraps several; anything else is "other".
func TestLostReasons(t *testing.T) {
	wrapped := func(err error) error { return fmt.Errorf("etcd election jobs: key /x: %w", err) }
	for _, tc := range []struct {
		err    error
		reason string
	}{
		{election.ErrResigned, "resigned"},
		{wrapped(election.ErrTransferred), "transferred"},
		{fmt.Errorf("%w: node names b", election.ErrPreempted), "preempted"},
		{fmt.Errorf("%w: %w", election.ErrUnhealthy, election.ErrResigned), "unhealthy"}, // a hook's error wrapping a sentinel
		{fmt.Errorf("%w: %w: disconnected", election.ErrSessionLost, election.ErrLeaseExpired), "session_lost"},
		{fmt.Errorf("%w: %w: session ended", election.ErrSessionLost, election.ErrClosed), "session_lost"},
		{wrapped(fmt.Errorf("%w: the reply came late", election.ErrLeaseExpired)), "lease_expired"},
		{election.ErrClosed, "closed"},
		{errors.Join(errors.New("first"), election.ErrClosed), "closed"},
		{context.Canceled, "other"},
		{errors.New("election: something new"), "other"},
	} {
		t.Run(tc.reason+"/"+tc.err.Error(), func(t *testing.T) {
			s, reg := newSet(t)
			o := observer(t, s, "x")
			o.Elected(election.Leader{ID: "a", Token: 1}, time.Now().Add(time.Second))
			o.Ended(election.Leader{ID: "a", Token: 1}, tc.err)
			mfs := scrape(t, reg)
			for _, r := range []string{"resigned", "transferred", "preempted", "unhealthy", "session_lost", "lease_expired", "closed", "other"} {
				var n float64
				if r == tc.reason {
					n = 1
				}
				want(t, mfs, "election_leaderships_lost_total", lbl("election", "x", "reason", r), n)
			}
		})
	}
}

// Leader changes count each new value, a change to none included; the
// first report of no leader, and a value reported twice in a row (two
// Runs on one Events), do not count.
func TestLeaderChanges(t *testing.T) {
	s, reg := newSet(t)
	o := observer(t, s, "x")
	a := election.Leader{ID: "a", Token: 5, Value: []byte("a:80")}
	for _, l := range []election.Leader{{}, a, a, {}, {ID: "b", Token: 6}, {ID: "b", Token: 7}} {
		o.LeaderChanged(l)
	}
	want(t, scrape(t, reg), "election_leader_changes_total", lbl("election", "x"), 4)
}

// Two Collectors of different elections share a registry: a Collector's
// election is a constant label. A Set under the same namespace does not
// (client_golang refuses a family whose label is constant in one
// collector and variable in another); under another namespace it does.
func TestCollectorsShareARegistry(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	names := []string{"orders", "jobs"}
	for i, name := range names {
		m, err := metrics.New(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := reg.Register(m); err != nil {
			t.Fatalf("registering the Collector of %s: %v", name, err)
		}
		m.Events().Elected(election.Leader{ID: "a", Token: uint64(10 + i)}, time.Now().Add(time.Second))
	}
	s, err := metrics.NewSet()
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(s); err == nil {
		t.Error("a Set registered beside Collectors of the same namespace")
	}
	s, err = metrics.NewSet(metrics.WithNamespace("shards"))
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(s); err != nil {
		t.Fatalf("registering a Set of another namespace beside Collectors: %v", err)
	}
	observer(t, s, "shard-1")
	mfs := scrape(t, reg)
	want(t, mfs, "election_token", lbl("election", "orders"), 10)
	want(t, mfs, "election_token", lbl("election", "jobs"), 11)
	want(t, mfs, "election_leading", lbl("election", "jobs"), 1)
	want(t, mfs, "shards_leading", lbl("election", "shard-1"), 0)

	// The same election twice is refused: its series would collide.
	m, err := metrics.New("orders")
	if err != nil {
		t.Fatal(err)
	}
	var already prometheus.AlreadyRegisteredError
	if err := reg.Register(m); !errors.As(err, &already) {
		t.Errorf("registering a second Collector of orders: %v, want AlreadyRegisteredError", err)
	}
}

// Forget drops an election's series; its Events no longer change them;
// Events afresh starts them at 0.
func TestForget(t *testing.T) {
	s, reg := newSet(t)
	x, y := observer(t, s, "x"), observer(t, s, "y")
	if again := observer(t, s, "x"); again != x {
		t.Error("Events returned new Events for the same name")
	}
	now := time.Now()
	x.Elected(election.Leader{ID: "a", Token: 3}, now.Add(time.Second))
	x.Renewed(renewal(3, now, time.Millisecond, nil, now.Add(time.Second)), 900*time.Millisecond)
	x.Campaigned(time.Second, nil)
	y.Elected(election.Leader{ID: "a", Token: 4}, now.Add(time.Second))
	if !s.Forget("x") {
		t.Error("Forget(x) = false, want true")
	}
	if s.Forget("x") || s.Forget("z") {
		t.Error("Forget of an election the Set no longer has = true, want false")
	}
	x.Renewed(renewal(3, now, time.Millisecond, nil, now.Add(time.Second)), 900*time.Millisecond)
	x.Ended(election.Leader{ID: "a", Token: 3}, election.ErrResigned)
	mfs := scrape(t, reg)
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "election" && lp.GetValue() == "x" {
					t.Errorf("%s of the forgotten election is exported: %v", mf.GetName(), m)
				}
			}
		}
	}
	want(t, mfs, "election_leading", lbl("election", "y"), 1)
	x2 := observer(t, s, "x")
	if x2 == x {
		t.Error("Events after Forget returned the forgotten Events")
	}
	mfs = scrape(t, reg)
	want(t, mfs, "election_leaderships_gained_total", lbl("election", "x"), 0)
	want(t, mfs, "election_campaign_wait_seconds", lbl("election", "x", "outcome", "elected"), 0)
}

// With shared histograms, a Set's histograms sum all its elections and
// carry no election label; the counters stay per election.
func TestSharedHistograms(t *testing.T) {
	s, reg := newSet(t, metrics.WithSharedHistograms())
	now := time.Now()
	for i, name := range []string{"s1", "s2", "s3"} {
		o := observer(t, s, name)
		o.Elected(election.Leader{ID: "a", Token: uint64(i + 1)}, now.Add(time.Second))
		for range i + 1 {
			o.Renewed(renewal(uint64(i+1), now, time.Millisecond, nil, now.Add(time.Second)), time.Second/2)
		}
		o.Campaigned(time.Second, nil)
	}
	mfs := scrape(t, reg)
	for _, h := range []string{"election_renewal_latency_seconds", "election_renewal_slack_seconds", "election_campaign_wait_seconds"} {
		if find(mfs, h, lbl("election", "s1")) != nil {
			t.Errorf("%s carries the election label", h)
		}
	}
	want(t, mfs, "election_renewal_slack_seconds", nil, 6)
	want(t, mfs, "election_campaign_wait_seconds", lbl("outcome", "elected"), 3)
	want(t, mfs, "election_renewals_total", lbl("election", "s3", "outcome", "ok"), 3)
	if !s.Forget("s3") {
		t.Fatal("Forget(s3) = false")
	}
	want(t, scrape(t, reg), "election_renewal_slack_seconds", nil, 6) // kept
}

// WithNamespace and the bucket options shape the exported families.
func TestOptions(t *testing.T) {
	m, err := metrics.New("x", metrics.WithNamespace("myapp_election"), metrics.WithSlackBuckets(0, 1, 2), metrics.WithLatencyBuckets(0.5))
	if err != nil {
		t.Fatal(err)
	}
	o := m.Events()
	now := time.Now()
	o.Elected(election.Leader{ID: "a", Token: 1}, now.Add(time.Second))
	o.Renewed(renewal(1, now, time.Millisecond, nil, now.Add(3*time.Second)), 1500*time.Millisecond)
	const wantText = `
# HELP myapp_election_renewal_slack_seconds Deadline slack at each renewal attempt: the Term's deadline before it minus its send time (negative: sent too late).
# TYPE myapp_election_renewal_slack_seconds histogram
myapp_election_renewal_slack_seconds_bucket{election="x",le="0"} 0
myapp_election_renewal_slack_seconds_bucket{election="x",le="1"} 0
myapp_election_renewal_slack_seconds_bucket{election="x",le="2"} 1
myapp_election_renewal_slack_seconds_bucket{election="x",le="+Inf"} 1
myapp_election_renewal_slack_seconds_sum{election="x"} 1.5
myapp_election_renewal_slack_seconds_count{election="x"} 1
# HELP myapp_election_renewal_slack_ratio Deadline slack at the latest renewal attempt of the current Term, as a fraction of the lease window. Only while leading, from the election's first successful renewal on.
# TYPE myapp_election_renewal_slack_ratio gauge
myapp_election_renewal_slack_ratio{election="x"} 0.5
`
	if err := testutil.CollectAndCompare(m, strings.NewReader(wantText),
		"myapp_election_renewal_slack_seconds", "myapp_election_renewal_slack_ratio"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m, "myapp_election_renewal_latency_seconds"); n != 1 {
		t.Errorf("%d latency histograms, want 1", n)
	}
}

// A refused name or option is an OptionError wrapping ErrInvalidOption
// that names the value.
func TestInvalid(t *testing.T) {
	s, err := metrics.NewSet()
	if err != nil {
		t.Fatal(err)
	}
	setEvents := func(name string) error { _, err := s.Events(name); return err }
	newWith := func(opts ...metrics.Option) error { _, err := metrics.New("x", opts...); return err }
	for _, tc := range []struct {
		what  string
		err   error
		names string
	}{
		{"New empty name", func() error { _, err := metrics.New(""); return err }(), `election name = ""`},
		{"New invalid UTF-8", func() error { _, err := metrics.New("a\xff"); return err }(), `"a\xff"`},
		{"Set.Events empty name", setEvents(""), `election name = ""`},
		{"empty namespace", newWith(metrics.WithNamespace("")), `WithNamespace = ""`},
		{"namespace with a dash", newWith(metrics.WithNamespace("my-app")), `"my-app"`},
		{"namespace starting with a digit", newWith(metrics.WithNamespace("1x")), `"1x"`},
		{"no buckets", newWith(metrics.WithLatencyBuckets()), "WithLatencyBuckets = []"},
		{"buckets not increasing", newWith(metrics.WithSlackBuckets(0, 1, 1)), "WithSlackBuckets = [0 1 1]"},
		{"NaN bucket", newWith(metrics.WithCampaignBuckets(1, math.NaN())), "WithCampaignBuckets = [1 NaN]"},
		{"nil option", newWith(nil), "option #0 is nil"},
		{"NewSet nil option", func() error { _, err := metrics.NewSet(metrics.WithSharedHistograms(), nil); return err }(), "option #1 is nil"},
	} {
		if !errors.Is(tc.err, election.ErrInvalidOption) {
			t.Errorf("%s: %v, want an error wrapping ErrInvalidOption", tc.what, tc.err)
			continue
		}
		if !strings.Contains(tc.err.Error(), tc.names) {
			t.Errorf("%s: %q does not name %s", tc.what, tc.err, tc.names)
		}
	}
}

// The Events of many elections, called from many goroutines while the
// registry is gathered, lose no event (run with -race).
func TestConcurrentUse(t *testing.T) {
	s, reg := newSet(t)
	const elections, terms, renewals = 8, 50, 4
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var gathers sync.WaitGroup
	gathers.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				if _, err := reg.Gather(); err != nil {
					t.Error(err)
					return
				}
			}
		}
	})
	for e := range elections {
		o := observer(t, s, fmt.Sprintf("e%d", e))
		for g := range 2 { // two candidates of the election in this process
			wg.Go(func() {
				now := time.Now()
				for i := range terms {
					tok := uint64(1 + 2*i + g)
					o.Elected(election.Leader{ID: "a", Token: tok}, now.Add(time.Second))
					for range renewals {
						o.Renewed(renewal(tok, now, time.Millisecond, nil, now.Add(time.Second)), time.Second/2)
					}
					o.Ended(election.Leader{ID: "a", Token: tok}, election.ErrResigned)
					o.Campaigned(time.Millisecond, nil)
					o.LeaderChanged(election.Leader{ID: "a", Token: tok})
				}
			})
		}
	}
	wg.Wait()
	close(stop)
	gathers.Wait()
	mfs := scrape(t, reg)
	for e := range elections {
		l := lbl("election", fmt.Sprintf("e%d", e))
		want(t, mfs, "election_leaderships_gained_total", l, 2*terms)
		want(t, mfs, "election_leaderships_lost_total", lbl("election", l["election"], "reason", "resigned"), 2*terms)
		want(t, mfs, "election_renewals_total", lbl("election", l["election"], "outcome", "ok"), 2*terms*renewals)
		want(t, mfs, "election_leading", l, 0)
		want(t, mfs, "election_token", l, 2*terms)
		absent(t, mfs, "election_renewal_slack_ratio", l)
	}
}
