package metrics_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/inmem"
	"github.com/electkit/election/metrics"
)

// The metrics of one election, wired into election.Run and served by
// promhttp. The election runs on backend/inmem; with etcd or ZooKeeper
// only the constructor changes (etcd.New(cli, "/orders",
// election.WithEvents(m.Events()))).
func Example() {
	m, err := metrics.New("/orders")
	if err != nil {
		panic(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	// In a service: http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{})).
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()

	c, err := inmem.NewCluster(inmem.Ring)
	if err != nil {
		panic(err)
	}
	// The Elector reports its Terms and renewals, and under Run its
	// campaigns and the leader changes it observes.
	e, err := c.Join(election.WithID("replica-1"), election.WithEvents(m.Events()))
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	err = election.Run(ctx, e, election.Callbacks{
		OnElected: func(ctx context.Context, t *election.Term) {
			stop()       // the service shuts down...
			<-ctx.Done() // ...and Run resigns
		},
	})
	fmt.Println("Run:", err)
	c.Close() // waits until every Events call has returned

	printSeries(srv.URL,
		`election_campaign_wait_seconds_count{`,
		`election_leaderships_gained_total{`,
		`election_leaderships_lost_total{election="/orders",reason="resigned"}`,
		`election_leading{`)
	// Output:
	// Run: context canceled
	// election_campaign_wait_seconds_count{election="/orders",outcome="elected"} 1
	// election_campaign_wait_seconds_count{election="/orders",outcome="failed"} 0
	// election_leaderships_gained_total{election="/orders"} 1
	// election_leaderships_lost_total{election="/orders",reason="resigned"} 1
	// election_leading{election="/orders"} 0
}

// A service with one election per shard registers one Set and asks it for
// the Events of each shard; WithSharedHistograms keeps the series per shard
// few. Forget drops a shard that moved away.
func ExampleSet() {
	set, err := metrics.NewSet(metrics.WithSharedHistograms())
	if err != nil {
		panic(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(set)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()

	for _, shard := range []string{"/shards/0", "/shards/1", "/shards/2"} {
		ev, err := set.Events(shard)
		if err != nil {
			panic(err)
		}
		c, err := inmem.NewCluster(inmem.Ring) // one election per shard
		if err != nil {
			panic(err)
		}
		e, err := c.Join(election.WithID("replica-1"), election.WithEvents(ev))
		if err != nil {
			panic(err)
		}
		if _, err := e.Campaign(context.Background()); err != nil {
			panic(err)
		}
		c.Close()
	}
	set.Forget("/shards/1")

	printSeries(srv.URL, `election_leaderships_gained_total{`, `election_leaderships_lost_total{election="/shards/0",reason="closed"}`)
	// Output:
	// election_leaderships_gained_total{election="/shards/0"} 1
	// election_leaderships_gained_total{election="/shards/2"} 1
	// election_leaderships_lost_total{election="/shards/0",reason="closed"} 1
}

// printSeries scrapes url and prints the sample lines that start with one
// of prefixes, in the exposition's order (families sorted by name).
func printSeries(url string, prefixes ...string) {
	resp, err := http.Get(url)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		for _, p := range prefixes {
			if strings.HasPrefix(sc.Text(), p) {
				fmt.Println(sc.Text())
				break
			}
		}
	}
	if err := sc.Err(); err != nil {
		panic(err)
	}
}
