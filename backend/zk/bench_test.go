package zk_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/zk"
	"github.com/electkit/election/internal/rig/faultproxy"
	"github.com/electkit/election/internal/rig/zktest"
)

// BenchmarkHandover measures Resign → the waiting candidate's Campaign
// returning, on a standalone server and on a 3-node ensemble (each client
// connected to all three), with the waiter having started waiting 20 ms or
// 300 ms before the Resign; and, as the floor, a node's delete → the watch
// event on another connection, on the same servers in the same run.
// Reported: p50 and p99 in milliseconds.
//
//	go test ./backend/zk -run '^$' -bench Handover -benchtime 100x
func BenchmarkHandover(b *testing.B) {
	b.Run("servers=1", func(b *testing.B) { benchHandover(b, []string{server(b).Addr}) })
	b.Run("servers=3", func(b *testing.B) { benchHandover(b, zktest.NewEnsemble(b, 3).Addrs()) })
}

func benchHandover(b *testing.B, addrs []string) {
	for _, wait := range []time.Duration{20 * time.Millisecond, 300 * time.Millisecond} {
		b.Run(fmt.Sprintf("waited=%v/election", wait), func(b *testing.B) {
			path := newPath(b)
			var es [2]*zk.Elector
			for i := range es {
				e, err := zk.New(zktest.Conn(b, addrs, 5*time.Second), path, election.WithID(fmt.Sprintf("c%d", i)), election.WithTTL(5*time.Second))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { e.Close() })
				es[i] = e
			}
			handover(b, es, wait)
		})
	}
	b.Run("floor=delete-to-watch-event", func(b *testing.B) {
		c1, c2 := zktest.Conn(b, addrs, 5*time.Second), zktest.Conn(b, addrs, 5*time.Second)
		path := newPath(b)
		if _, err := c1.Create("/elections", nil, 0, gozk.WorldACL(gozk.PermAll)); err != nil && err != gozk.ErrNodeExists {
			b.Fatal(err)
		}
		lat := make([]time.Duration, 0, b.N)
		for range b.N {
			if _, err := c1.Create(path, nil, gozk.FlagEphemeral, gozk.WorldACL(gozk.PermAll)); err != nil {
				b.Fatal(err)
			}
			ok, _, ev, err := c2.ExistsW(path)
			if err != nil || !ok {
				b.Fatal(ok, err)
			}
			time.Sleep(20 * time.Millisecond) // as the election's churn regime
			start := time.Now()
			if err := c1.Delete(path, -1); err != nil {
				b.Fatal(err)
			}
			<-ev
			lat = append(lat, time.Since(start))
		}
		reportPercentiles(b, lat)
	})
}

func handover(b *testing.B, es [2]*zk.Elector, wait time.Duration) {
	ctx := context.Background()
	if _, err := es[0].Campaign(ctx); err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	leader := 0
	b.ResetTimer()
	for range b.N {
		w := 1 - leader
		done := make(chan time.Time, 1)
		go func() {
			if _, err := es[w].Campaign(ctx); err != nil {
				b.Error(err)
			}
			done <- time.Now()
		}()
		time.Sleep(wait) // the regime: how long the waiter has waited
		start := time.Now()
		if err := es[leader].Resign(ctx); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, (<-done).Sub(start))
		leader = w
	}
	b.StopTimer()
	_ = es[leader].Resign(ctx)
	reportPercentiles(b, lat)
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	ms := func(q float64) float64 {
		return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(ms(0.50), "p50-ms")
	b.ReportMetric(ms(0.99), "p99-ms")
	b.ReportMetric(ms(1), "max-ms")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkCrashFailover measures a leader's crash — its connection cut
// silently, its session left to expire — until the waiting candidate's
// Campaign returns, with a 2 s session timeout on a standalone server
// (tickTime 500 ms). The bound of the issue: session timeout + 0.5 s.
//
//	go test ./backend/zk -run '^$' -bench CrashFailover -benchtime 20x
func BenchmarkCrashFailover(b *testing.B) {
	addr := server(b).Addr
	path := newPath(b)
	ctx := context.Background()
	// Every candidate connects through its own proxy, so that cutting the
	// proxy is its crash.
	candidate := func(id string) *zk.Elector {
		px := faultproxy.New(b, addr)
		conn := zktest.Conn(b, []string{px.Addr}, ttl)
		b.Cleanup(px.Close) // before conn.Close: a cut connection closes at once
		e, err := zk.New(conn, path, election.WithID(id), election.WithTTL(ttl))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { e.Close() })
		proxies[e] = px
		return e
	}
	leader := candidate("c0")
	if _, err := leader.Campaign(ctx); err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		w := candidate(fmt.Sprintf("c%d", i+1))
		done := make(chan time.Time, 1)
		go func() {
			if _, err := w.Campaign(ctx); err != nil {
				b.Error(err)
			}
			done <- time.Now()
		}()
		time.Sleep(300 * time.Millisecond) // the waiter settles
		start := time.Now()
		proxies[leader].Cut()
		lat = append(lat, (<-done).Sub(start))
		leader = w
	}
	b.StopTimer()
	reportPercentiles(b, lat)
}

var proxies = map[*zk.Elector]*faultproxy.Proxy{}

// BenchmarkManyCandidates: 500 candidates wait on one connection; each
// handover wakes how many of them (listings and watches issued by the
// waiters), and how long registering all of them takes.
//
//	go test ./backend/zk -run '^$' -bench ManyCandidates -benchtime 1x
func BenchmarkManyCandidates(b *testing.B) {
	n := 500
	if s := os.Getenv("ZK_MANY"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	for range b.N {
		conn := zktest.Conn(b, []string{server(b).Addr}, 5*time.Second)
		path := newPath(b)
		ctx, cancel := context.WithCancel(context.Background())
		es := make([]*zk.Elector, n)
		for i := range es {
			e, err := zk.New(conn, path, election.WithID(fmt.Sprintf("c%d", i)), election.WithTTL(5*time.Second))
			if err != nil {
				b.Fatal(err)
			}
			es[i] = e
		}
		start := time.Now()
		if _, err := es[0].Campaign(ctx); err != nil {
			b.Fatal(err)
		}
		results := make(chan int, n)
		for i := 1; i < n; i++ {
			go func() {
				if _, err := es[i].Campaign(ctx); err == nil {
					results <- i
				}
			}()
		}
		for {
			names, _, err := conn.Children(path)
			if err != nil {
				b.Fatal(err)
			}
			k := 0
			for _, name := range names {
				if strings.HasPrefix(name, "_c_") && !strings.HasSuffix(name, "-lead") {
					k++ // a candidate node
				}
			}
			if k == n {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		registered := time.Since(start)
		reads := func() (s int64) {
			for _, e := range es {
				s += zk.Reads(e)
			}
			return s
		}
		time.Sleep(500 * time.Millisecond) // every waiter has set its watch
		const handovers = 10
		var woken int64
		cur := 0
		for range handovers {
			before := reads()
			if err := es[cur].Resign(ctx); err != nil {
				b.Fatal(err)
			}
			cur = <-results
			woken += reads() - before
		}
		b.ReportMetric(float64(registered.Milliseconds()), "register-ms")
		b.ReportMetric(float64(woken)/handovers, "waiter-requests/handover")
		cancel()
		for _, e := range es {
			e.Close()
		}
	}
}
