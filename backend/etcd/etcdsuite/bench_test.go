package etcdsuite_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/etcd"
	"github.com/electkit/election/internal/rig/embedetcd"
	"github.com/electkit/election/internal/rig/etcdtest"
)

// candidate is what the handover benchmark needs of either library.
type candidate interface {
	campaign(ctx context.Context) error
	resign(ctx context.Context) error
}

type ours struct{ e *etcd.Elector }

func (c ours) campaign(ctx context.Context) error { _, err := c.e.Campaign(ctx); return err }
func (c ours) resign(ctx context.Context) error   { return c.e.Resign(ctx) }

type theirs struct{ e *concurrency.Election }

func (c theirs) campaign(ctx context.Context) error { return c.e.Campaign(ctx, "v") }
func (c theirs) resign(ctx context.Context) error   { return c.e.Resign(ctx) }

// BenchmarkHandover measures Resign → the waiting candidate's Campaign
// returning, for this package and etcd's concurrency.Election on the same
// embedded etcd (one member; three members, each client through all three
// members' proxies), with the waiter having started waiting 20 ms or 300 ms
// before the Resign. Reported: p50 and p99 in milliseconds.
//
//	go test ./backend/etcd -run '^$' -bench Handover -benchtime 100x
func BenchmarkHandover(b *testing.B) {
	b.Run("members=1", func(b *testing.B) { benchHandover(b, startEtcd(b)) })
	b.Run("members=3", func(b *testing.B) {
		benchHandover(b, etcdtest.NewCluster(b, 3, embedetcd.Config{}).Endpoints())
	})
}

func benchHandover(b *testing.B, eps []string) {
	for _, wait := range []time.Duration{20 * time.Millisecond, 300 * time.Millisecond} {
		for _, lib := range []string{"election", "concurrency"} {
			b.Run(fmt.Sprintf("waited=%v/%s", wait, lib), func(b *testing.B) {
				name := fmt.Sprintf("/bench/%s/%v", lib, wait)
				var cs [2]candidate
				for i := range cs {
					cli := newClient(b, eps)
					switch lib {
					case "election":
						e, err := etcd.New(cli, name, election.WithID(fmt.Sprintf("c%d", i)), election.WithTTL(5*time.Second))
						if err != nil {
							b.Fatal(err)
						}
						b.Cleanup(func() { e.Close() })
						cs[i] = ours{e}
					default:
						s, err := concurrency.NewSession(cli, concurrency.WithTTL(5))
						if err != nil {
							b.Fatal(err)
						}
						b.Cleanup(func() { s.Close() })
						cs[i] = theirs{concurrency.NewElection(s, name)}
					}
				}
				handover(b, cs, wait)
			})
		}
	}
}

func handover(b *testing.B, cs [2]candidate, wait time.Duration) {
	ctx := context.Background()
	if err := cs[0].campaign(ctx); err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	leader := 0
	b.ResetTimer()
	for range b.N {
		w := 1 - leader
		done := make(chan time.Time, 1)
		go func() {
			if err := cs[w].campaign(ctx); err != nil {
				b.Error(err)
			}
			done <- time.Now()
		}()
		time.Sleep(wait) // the regime: how long the waiter has waited
		start := time.Now()
		if err := cs[leader].resign(ctx); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, (<-done).Sub(start))
		leader = w
	}
	b.StopTimer()
	_ = cs[leader].resign(ctx)
	reportPercentiles(b, lat)
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	ms := func(q float64) float64 {
		return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(ms(0.50), "p50-ms")
	b.ReportMetric(ms(0.99), "p99-ms")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkCrashFailover measures a leader's crash (its client closed, no
// Resign) → the waiting candidate's Campaign returning, with TTL 2 s.
//
//	go test ./backend/etcd -run '^$' -bench CrashFailover -benchtime 20x
func BenchmarkCrashFailover(b *testing.B) {
	eps := startEtcd(b)
	ctx := context.Background()
	waiterCli := newClient(b, eps)
	lat := make([]time.Duration, 0, b.N)
	for i := range b.N {
		name := fmt.Sprintf("/bench/crash/%d", i)
		leaderCli := newClient(b, eps)
		l, err := etcd.New(leaderCli, name, election.WithID("l"), election.WithTTL(2*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		w, err := etcd.New(waiterCli, name, election.WithID("w"), election.WithTTL(2*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := l.Campaign(ctx); err != nil {
			b.Fatal(err)
		}
		done := make(chan time.Time, 1)
		go func() {
			if _, err := w.Campaign(ctx); err != nil {
				b.Error(err)
			}
			done <- time.Now()
		}()
		time.Sleep(100 * time.Millisecond) // let the waiter queue
		start := time.Now()
		leaderCli.Close()
		lat = append(lat, (<-done).Sub(start))
		l.Close()
		w.Close()
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)-1].Milliseconds()), "max-ms")
	reportPercentiles(b, lat)
}

// BenchmarkManyCandidates registers 500 candidates sharing one client,
// then hands over 20 times: it reports the registration time, the queue
// reads per handover (P9: one), and goroutines and heap per idle
// candidate.
//
//	go test ./backend/etcd -run '^$' -bench ManyCandidates -benchtime 1x
func BenchmarkManyCandidates(b *testing.B) {
	eps := startEtcd(b)
	const n, handovers = 500, 20
	for range b.N {
		cli := newClient(b, eps)
		ctx := context.Background()
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		g0 := runtime.NumGoroutine()
		es := make([]*etcd.Elector, n)
		won := make(chan int, n)
		start := time.Now()
		for i := range es {
			e, err := etcd.New(cli, "/bench/many", election.WithID(fmt.Sprintf("c%d", i)), election.WithTTL(10*time.Second))
			if err != nil {
				b.Fatal(err)
			}
			es[i] = e
			go func() {
				_, err := e.Campaign(ctx)
				if err != nil {
					if !errors.Is(err, election.ErrClosed) {
						b.Error(err)
					}
					return
				}
				won <- i
			}()
		}
		settle(b, es)
		register := time.Since(start)
		reads := probeReads(es...)
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		g1 := runtime.NumGoroutine()
		for range handovers + 1 { // the first leader, then one per handover
			if err := es[<-won].Resign(ctx); err != nil {
				b.Fatal(err)
			}
		}
		<-won // the last handover's leader
		b.ReportMetric(float64(register.Milliseconds()), "register-ms")
		b.ReportMetric(float64(probeReads(es...)-reads)/(handovers+1), "reads/handover")
		b.ReportMetric(float64(g1-g0)/n, "goroutines/candidate")
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/n/1024, "heap-KiB/candidate")
		b.ReportMetric(0, "ns/op")
		for _, e := range es {
			e.Close()
		}
	}
}

// BenchmarkOperatorNoticed measures how long a leader takes to notice that
// another client ended its leadership through etcd's API: from just before
// the admin client sends the delete (of the key, or of the whole prefix) or
// the lease revoke, to the leader's Term being Done. Side by side, in the
// same run on the same member: "watch", a plain clientv3 watch on the key
// opened beforehand (the floor: the event's own delivery), and, for the
// revoke, etcd's concurrency.Session, whose Done fires when its keepalive
// learns the lease is gone (concurrency.Election never notices a deleted
// key: there is no row for it). Reported: p50 and p99 in milliseconds.
//
//	go test ./backend/etcd -run '^$' -bench OperatorNoticed -benchtime 100x
func BenchmarkOperatorNoticed(b *testing.B) {
	b.Run("members=1", func(b *testing.B) { benchOperator(b, startEtcd(b)) })
	b.Run("members=3", func(b *testing.B) {
		benchOperator(b, etcdtest.NewCluster(b, 3, embedetcd.Config{}).Endpoints())
	})
}

func benchOperator(b *testing.B, eps []string) {
	acts := []struct {
		name string
		act  func(ctx context.Context, admin *clientv3.Client, prefix, key string, lease clientv3.LeaseID) error
	}{
		{"delete-key", func(ctx context.Context, admin *clientv3.Client, _, key string, _ clientv3.LeaseID) error {
			_, err := admin.Delete(ctx, key)
			return err
		}},
		{"delete-prefix", func(ctx context.Context, admin *clientv3.Client, prefix, _ string, _ clientv3.LeaseID) error {
			_, err := admin.Delete(ctx, prefix, clientv3.WithPrefix())
			return err
		}},
		{"revoke-lease", func(ctx context.Context, admin *clientv3.Client, _, _ string, lease clientv3.LeaseID) error {
			_, err := admin.Revoke(ctx, lease)
			return err
		}},
	}
	admin := newClient(b, eps)
	ctx := context.Background()
	for _, a := range acts {
		for _, who := range []string{"election", "watch", "concurrency"} {
			if who == "concurrency" && a.name != "revoke-lease" {
				continue
			}
			b.Run(a.name+"/"+who, func(b *testing.B) {
				name := "/bench-operator/" + a.name + "/" + who
				cli := newClient(b, eps)
				lat := make([]time.Duration, 0, b.N)
				for range b.N {
					var done <-chan struct{}
					var key string
					var lease clientv3.LeaseID
					var cleanup func()
					switch who {
					case "election":
						e, err := etcd.New(cli, name, election.WithTTL(5*time.Second))
						if err != nil {
							b.Fatal(err)
						}
						t, err := e.Campaign(ctx)
						if err != nil {
							b.Fatal(err)
						}
						key, lease = leaderKeyOf(b, admin, name+"/", t.Token())
						done, cleanup = t.Done(), func() { e.Close() }
					case "watch":
						gr, err := admin.Grant(ctx, 5)
						if err != nil {
							b.Fatal(err)
						}
						key, lease = fmt.Sprintf("%s/%016x", name, int64(gr.ID)), gr.ID
						resp, err := admin.Put(ctx, key, "v", clientv3.WithLease(lease))
						if err != nil {
							b.Fatal(err)
						}
						wctx, cancel := context.WithCancel(ctx)
						wch := cli.Watch(wctx, key, clientv3.WithRev(resp.Header.Revision+1), clientv3.WithFilterPut(), clientv3.WithCreatedNotify())
						if r := <-wch; !r.Created {
							b.Fatalf("watch: %v", r.Err())
						}
						ch := make(chan struct{})
						go func() {
							<-wch
							close(ch)
						}()
						done, cleanup = ch, func() { cancel(); _, _ = admin.Revoke(ctx, lease) }
					case "concurrency":
						s, err := concurrency.NewSession(cli, concurrency.WithTTL(5))
						if err != nil {
							b.Fatal(err)
						}
						el := concurrency.NewElection(s, name)
						if err := el.Campaign(ctx, "v"); err != nil {
							b.Fatal(err)
						}
						key, lease = el.Key(), s.Lease()
						done, cleanup = s.Done(), func() { s.Close() }
					}
					start := time.Now()
					if err := a.act(ctx, admin, name+"/", key, lease); err != nil {
						b.Fatal(err)
					}
					select {
					case <-done:
					case <-time.After(10 * time.Second):
						b.Fatalf("%s: not noticed within 10s", who)
					}
					lat = append(lat, time.Since(start))
					cleanup()
				}
				reportPercentiles(b, lat)
			})
		}
	}
}

// leaderKeyOf returns the key under prefix created at revision token, and
// its lease.
func leaderKeyOf(b *testing.B, admin *clientv3.Client, prefix string, token uint64) (string, clientv3.LeaseID) {
	resp, err := admin.Get(context.Background(), prefix, clientv3.WithPrefix())
	if err != nil {
		b.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		if uint64(kv.CreateRevision) == token {
			return string(kv.Key), clientv3.LeaseID(kv.Lease)
		}
	}
	b.Fatalf("no key under %s created at %d", prefix, token)
	return "", 0
}
