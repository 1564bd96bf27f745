package metrics_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/inmem"
	"github.com/electkit/election/metrics"
)

// Under election.Run, the Collector whose Events the Electors were given
// times each Campaign by its outcome, counts the leader changes Observe
// reports and follows the Terms.
func TestRunCampaignsAndLeaderChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, err := metrics.New("jobs")
		if err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(m)
		c, err := inmem.NewCluster(inmem.Bully)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		a, err := c.Join(election.WithID("a"), election.WithEvents(m.Events()))
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.Join(election.WithID("b"), election.WithEvents(m.Events()))
		if err != nil {
			t.Fatal(err)
		}
		run := func(ctx context.Context, e election.Elector, elected chan<- *election.Term) <-chan error {
			done := make(chan error, 1)
			go func() {
				done <- election.Run(ctx, e, election.Callbacks{
					OnElected: func(_ context.Context, t *election.Term) { elected <- t },
				})
			}()
			return done
		}
		jobs := lbl("election", "jobs")
		elected := lbl("election", "jobs", "outcome", "elected")
		failed := lbl("election", "jobs", "outcome", "failed")

		ctxA, stopA := context.WithCancel(context.Background())
		defer stopA()
		ctxB, stopB := context.WithCancel(context.Background())
		defer stopB()
		termsA, termsB := make(chan *election.Term, 1), make(chan *election.Term, 1)
		doneA := run(ctxA, a, termsA)
		<-termsA
		doneB := run(ctxB, b, termsB)
		time.Sleep(2 * time.Second)
		// b's Campaign, withdrawn after 2s of waiting, fails; Run retries.
		if err := b.Resign(context.Background()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		mfs := scrape(t, reg)
		want(t, mfs, "election_campaign_wait_seconds", elected, 1)
		want(t, mfs, "election_campaign_wait_seconds", failed, 1)
		if s := find(mfs, "election_campaign_wait_seconds", failed).GetHistogram().GetSampleSum(); s < 2 {
			t.Errorf("the withdrawn Campaign waited %vs, want at least 2s", s)
		}
		want(t, mfs, "election_leader_changes_total", jobs, 1) // none → a, reported by both Runs
		want(t, mfs, "election_leading", jobs, 1)

		// a's Run ends: it resigns, and b's Run leads.
		stopA()
		if err := <-doneA; !errors.Is(err, context.Canceled) {
			t.Errorf("a's Run returned %v, want context.Canceled", err)
		}
		tb := <-termsB
		synctest.Wait()
		mfs = scrape(t, reg)
		want(t, mfs, "election_campaign_wait_seconds", elected, 2)
		want(t, mfs, "election_campaign_wait_seconds", failed, 1)
		if n := value(t, mfs, "election_leader_changes_total", jobs); n < 2 {
			t.Errorf("%v leader changes after a handed over to b, want at least 2", n)
		}
		want(t, mfs, "election_leading", jobs, 1)
		want(t, mfs, "election_token", jobs, float64(tb.Token()))
		want(t, mfs, "election_leaderships_gained_total", jobs, 2)
		want(t, mfs, "election_leaderships_lost_total", lbl("election", "jobs", "reason", "resigned"), 1)

		stopB()
		<-doneB
		synctest.Wait()
		mfs = scrape(t, reg)
		want(t, mfs, "election_leading", jobs, 0)
		want(t, mfs, "election_leaderships_lost_total", lbl("election", "jobs", "reason", "resigned"), 2)
	})
}
