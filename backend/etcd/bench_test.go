package etcd_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/etcd"
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
// embedded single-member etcd, with the waiter having started waiting 20 ms
// or 300 ms before the Resign. Reported: p50 and p99 in milliseconds.
//
//	go test ./backend/etcd -run '^$' -bench Handover -benchtime 100x
func BenchmarkHandover(b *testing.B) {
	eps := startEtcd(b)
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
