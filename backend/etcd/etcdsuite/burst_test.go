package etcdsuite_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/etcd"
)

// requestCount counts what a client sends: each unary request and each
// message sent on a stream (a watch's create or cancel, a lease renewal),
// and the most unary requests it had in flight at once.
type requestCount struct {
	sent     atomic.Int64
	inFlight atomic.Int64
	most     atomic.Int64
}

func (r *requestCount) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	r.sent.Add(1)
	n := r.inFlight.Add(1)
	defer r.inFlight.Add(-1)
	for m := r.most.Load(); n > m && !r.most.CompareAndSwap(m, n); m = r.most.Load() {
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (r *requestCount) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return s, err
	}
	return &countedSends{ClientStream: s, r: r}, nil
}

type countedSends struct {
	grpc.ClientStream
	r *requestCount
}

func (s *countedSends) SendMsg(m any) error {
	s.r.sent.Add(1)
	return s.ClientStream.SendMsg(m)
}

// A service with a leader per shard starts a Campaign per shard, all at
// once, on a Session per process: a few hundred elections × 3 candidates
// on three Sessions (three clients, TTL 5 s), every Campaign started
// together.
// Every election leads, within a generous deadline; each client keeps at
// most a bounded number of requests in flight, whatever the number of
// Campaigns; and the requests sent until every candidate leads or waits on
// its watch stay within a bound per election (etcd's concurrency.Election
// sends 8 per election in this shape: a transaction and a read per
// candidate, a watch per waiter). Sent all at once, the Campaigns' requests would pile up in
// the member, whose lease renewals then come back too late: the Sessions'
// leases would lapse under the load, and every candidacy on them would
// retry.
func TestBurstOfElectionsOnSessions(t *testing.T) {
	const (
		n           = 300
		clients     = 3
		perElection = 20 // requests sent per election, at most
		inFlight    = 40 // unary requests in flight per client, at most: the limiter's 32 and a few others
	)
	eps := startEtcd(t)
	counts := make([]*requestCount, clients)
	sessions := make([]*etcd.Session, clients)
	for i := range counts {
		counts[i] = new(requestCount)
		cli := dialClient(t, eps, grpc.WithChainUnaryInterceptor(counts[i].unary), grpc.WithChainStreamInterceptor(counts[i].stream))
		// TTL 5 s: the burst keeps both cores busy under the race
		// detector, and a machine shared with other work can stall a
		// renewal for longer than a 2 s lease allows.
		sessions[i] = newSession(t, cli, election.WithTTL(5*time.Second))
	}
	es := make([]*etcd.Elector, 0, n*clients)
	for j := range n {
		for i := range clients {
			es = append(es, onSession(t, sessions[i], fmt.Sprintf("/burst/%d", j), fmt.Sprintf("c%d", i)))
		}
	}
	sent := func() int64 {
		var s int64
		for _, c := range counts {
			s += c.sent.Load()
		}
		return s
	}
	before := sent() // the Sessions' grants
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	var (
		wg       sync.WaitGroup
		led      = make([]atomic.Bool, n)
		returned = make([]atomic.Bool, len(es))
		leading  atomic.Int64
		failed   atomic.Int64
		firstErr atomic.Value
	)
	began := time.Now()
	for k, e := range es {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				_, err := e.Campaign(ctx)
				if err == nil {
					break
				}
				if ctx.Err() != nil {
					return
				}
				if failed.Add(1) == 1 {
					firstErr.Store(err)
				}
				if errors.Is(err, election.ErrClosed) {
					return // the Session is gone
				}
				// A Term that ended as it began: campaign again, as
				// election.Run does.
			}
			returned[k].Store(true)
			if led[k/clients].CompareAndSwap(false, true) {
				leading.Add(1)
			}
		}()
	}
	// Settled: every election has led, and every candidate leads or waits
	// on its watch.
	settled := func() bool {
		if leading.Load() < n {
			return false
		}
		for k, e := range es {
			if !returned[k].Load() && !probeSettled(e) {
				return false
			}
		}
		return true
	}
	for !settled() && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	took, requests := time.Since(began), sent()-before
	var most int64
	for _, c := range counts {
		most = max(most, c.most.Load())
	}
	t.Logf("%d elections × %d: %d led, settled after %v; %d requests (%.1f per election); at most %d in flight per client",
		n, clients, leading.Load(), took.Round(time.Millisecond), requests, float64(requests)/n, most)
	cancel()
	wg.Wait()
	if failed.Load() > 0 {
		t.Logf("%d Campaigns failed; the first: %v", failed.Load(), firstErr.Load())
	}
	if l := leading.Load(); l < n {
		t.Errorf("%d of %d elections led within the deadline", l, n)
	}
	if per := float64(requests) / n; per > perElection {
		t.Errorf("%.1f requests per election, want at most %d", per, perElection)
	}
	if most > inFlight {
		t.Errorf("a client had %d requests in flight at once, want at most %d", most, inFlight)
	}
	for _, s := range sessions {
		if err := s.Err(); err != nil {
			t.Errorf("a Session ended: %v", err)
		}
	}
}
