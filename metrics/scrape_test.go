package metrics_test

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/inmem"
	"github.com/electkit/election/metrics"
)

// One election on backend/inmem, driven through every way a Term ends
// that a process can cause or suffer — a transfer, a resign, a failing
// health hook, renewals that fail until the lease lapses, a close — and
// scraped from a real registry after each step. In fake time: the
// registry is gathered inside the bubble, after synctest.Wait has let the
// lease clocks' hook goroutines report.
func TestScrapeThroughTerms(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		set, err := metrics.NewSet()
		if err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(set)
		obs, err := set.Events("orders")
		if err != nil {
			t.Fatal(err)
		}

		c, err := inmem.NewCluster(inmem.Ring, inmem.WithLatency(5*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var sick atomic.Bool
		join := func(id string, opts ...election.Option) *inmem.Elector {
			e, err := c.Join(append([]election.Option{election.WithID(id), election.WithEvents(obs)}, opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			return e
		}
		a := join("a")
		b := join("b")
		h := join("h", election.WithBeforeRenew(func(context.Context, *election.Term) error {
			if sick.Load() {
				return errors.New("disk full")
			}
			return nil
		}))
		ctx := context.Background()
		orders := lbl("election", "orders")
		reason := func(r string) map[string]string { return lbl("election", "orders", "reason", r) }
		allReasons := []string{"resigned", "transferred", "preempted", "unhealthy", "session_lost", "lease_expired", "closed", "other"}
		lost := func(mfs []*dto.MetricFamily, counts map[string]float64) {
			t.Helper()
			for _, r := range allReasons {
				want(t, mfs, "election_leaderships_lost_total", reason(r), counts[r])
			}
		}

		// Before any Term: every series at 0, no per-Term gauge.
		mfs := scrape(t, reg)
		want(t, mfs, "election_leading", orders, 0)
		want(t, mfs, "election_token", orders, 0)
		want(t, mfs, "election_leaderships_gained_total", orders, 0)
		lost(mfs, nil)
		want(t, mfs, "election_renewals_total", lbl("election", "orders", "outcome", "ok"), 0)
		want(t, mfs, "election_renewals_total", lbl("election", "orders", "outcome", "failed"), 0)
		absent(t, mfs, "election_renewal_slack_ratio", orders)

		// a leads and renews for a second.
		ta, err := a.Campaign(ctx)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		mfs = scrape(t, reg)
		want(t, mfs, "election_leading", orders, 1)
		want(t, mfs, "election_token", orders, float64(ta.Token()))
		want(t, mfs, "election_leaderships_gained_total", orders, 1)
		ok := value(t, mfs, "election_renewals_total", lbl("election", "orders", "outcome", "ok"))
		if interval := c.Timing().RenewInterval(); ok < float64(time.Second/interval)/2 {
			t.Errorf("%v successful renewals in a second, want about %v", ok, time.Second/interval)
		}
		want(t, mfs, "election_renewals_total", lbl("election", "orders", "outcome", "failed"), 0)
		want(t, mfs, "election_renewal_slack_seconds", orders, ok)
		want(t, mfs, "election_renewal_latency_seconds", orders, ok)
		if lat := find(mfs, "election_renewal_latency_seconds", orders).GetHistogram(); lat.GetSampleSum() < ok*0.010-1e-9 {
			t.Errorf("renewal round trips sum to %vs over %v renewals, want at least 10ms each (2 × 5ms latency)", lat.GetSampleSum(), ok)
		}
		// The window learned from the renewals is the Term's exactly, and
		// a renewal every interval leaves window − interval.
		want(t, mfs, "election_lease_window_seconds", orders, ta.Window().Seconds())
		slack := value(t, mfs, "election_renewal_last_slack_seconds", orders)
		if w := ta.Window() - c.Timing().RenewInterval(); math.Abs(slack-w.Seconds()) > 0.001 {
			t.Errorf("last slack %vs, want %v (window − renewal interval)", slack, w)
		}
		ratio := value(t, mfs, "election_renewal_slack_ratio", orders)
		if want := slack / ta.Window().Seconds(); math.Abs(ratio-want) > 1e-9 || ratio < 0.8 {
			t.Errorf("slack ratio %v, want %v (above 0.8)", ratio, want)
		}

		// a transfers to b.
		won := make(chan *election.Term, 1)
		go func() {
			tb, err := b.Campaign(ctx)
			if err != nil {
				t.Error(err)
			}
			won <- tb
		}()
		waitQueued(t, a, "b")
		if err := election.Transfer(ctx, a, ta, "b", election.KeepLeading); err != nil {
			t.Fatalf("Transfer: %v", err)
		}
		tb := <-won
		synctest.Wait()
		mfs = scrape(t, reg)
		lost(mfs, map[string]float64{"transferred": 1})
		want(t, mfs, "election_leaderships_gained_total", orders, 2)
		want(t, mfs, "election_leading", orders, 1)
		want(t, mfs, "election_token", orders, float64(tb.Token()))

		// b resigns: nobody in this process leads; the per-Term gauges go.
		time.Sleep(300 * time.Millisecond)
		if err := b.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		mfs = scrape(t, reg)
		lost(mfs, map[string]float64{"transferred": 1, "resigned": 1})
		want(t, mfs, "election_leading", orders, 0)
		want(t, mfs, "election_token", orders, float64(tb.Token())) // the latest stays
		for _, g := range []string{"election_renewal_last_slack_seconds", "election_renewal_slack_ratio", "election_lease_window_seconds"} {
			absent(t, mfs, g, orders)
		}

		// h leads until its health hook fails: unhealthy.
		th, err := h.Campaign(ctx)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		sick.Store(true)
		<-th.Done()
		synctest.Wait()
		mfs = scrape(t, reg)
		lost(mfs, map[string]float64{"transferred": 1, "resigned": 1, "unhealthy": 1})
		want(t, mfs, "election_leading", orders, 0)
		want(t, mfs, "election_token", orders, float64(th.Token()))

		// a leads again, then is cut off: its renewals fail, the slack
		// ratio falls below the alert's 0.2 before the lease lapses.
		ta, err = a.Campaign(ctx)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(300 * time.Millisecond)
		synctest.Wait()
		if err := c.Partition([]*inmem.Elector{a}, []*inmem.Elector{b, h}); err != nil {
			t.Fatal(err)
		}
		before := value(t, scrape(t, reg), "election_renewals_total", lbl("election", "orders", "outcome", "failed"))
		time.Sleep(time.Until(ta.Deadline()) - 10*time.Millisecond)
		synctest.Wait()
		mfs = scrape(t, reg)
		if ta.Err() != nil {
			t.Fatalf("the Term ended before its deadline: %v", ta.Err())
		}
		if failed := value(t, mfs, "election_renewals_total", lbl("election", "orders", "outcome", "failed")); failed <= before {
			t.Errorf("failed renewals went from %v to %v while cut off, want more", before, failed)
		}
		if r := value(t, mfs, "election_renewal_slack_ratio", orders); r >= 0.2 {
			t.Errorf("slack ratio %v just before the lease lapsed, want below 0.2 (the alert)", r)
		}
		<-ta.Done()
		synctest.Wait()
		mfs = scrape(t, reg)
		lost(mfs, map[string]float64{"transferred": 1, "resigned": 1, "unhealthy": 1, "lease_expired": 1})
		if err := c.Heal(); err != nil {
			t.Fatal(err)
		}

		// b leads and closes.
		tb, err = b.Campaign(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		if !errors.Is(tb.Err(), election.ErrClosed) {
			t.Fatalf("b's Term ended with %v, want ErrClosed", tb.Err())
		}
		synctest.Wait()
		mfs = scrape(t, reg)
		lost(mfs, map[string]float64{"transferred": 1, "resigned": 1, "unhealthy": 1, "lease_expired": 1, "closed": 1})
		want(t, mfs, "election_leaderships_gained_total", orders, 5)
		want(t, mfs, "election_leading", orders, 0)
		// Every renewal attempt was observed once in each histogram.
		all := value(t, mfs, "election_renewals_total", lbl("election", "orders", "outcome", "ok")) +
			value(t, mfs, "election_renewals_total", lbl("election", "orders", "outcome", "failed"))
		want(t, mfs, "election_renewal_slack_seconds", orders, all)
		want(t, mfs, "election_renewal_latency_seconds", orders, all)
	})
}

// waitQueued waits (in fake time) until e's election lists the candidate
// id as waiting.
func waitQueued(t *testing.T, e *inmem.Elector, id string) {
	t.Helper()
	for range 100 {
		synctest.Wait()
		cs, err := e.Candidates(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			if c.ID == id {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s never became a waiting candidate", id)
}
