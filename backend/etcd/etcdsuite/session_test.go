package etcdsuite_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/etcd"
	"github.com/electkit/election/internal/rig/faultproxy"
)

func newSession(t *testing.T, cli *clientv3.Client, opts ...election.Option) *etcd.Session {
	t.Helper()
	s, err := etcd.NewSession(ctxT(t), cli, append([]election.Option{election.WithTTL(2 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func onSession(t *testing.T, s *etcd.Session, name, id string, opts ...election.Option) *etcd.Elector {
	t.Helper()
	e, err := etcd.NewWithSession(s, name, append([]election.Option{election.WithID(id)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// One session carries the leaderships of many elections on one lease;
// each Elector keeps its own hooks: a failing before-renewal hook ends
// its own Term only, never the lease or the others' Terms; Close of the
// session ends every Term and takes every key.
func TestSessionCarriesManyElections(t *testing.T) {
	eps := startEtcd(t)
	admin := newClient(t, eps)
	s := newSession(t, newClient(t, eps))
	ctx := ctxT(t)
	const n = 20
	var sick atomic.Bool
	var renewals atomic.Int64
	terms := make([]*election.Term, n)
	for i := range terms {
		opts := []election.Option{election.WithAfterRenew(func(r election.Renewal) {
			if r.Err == nil {
				renewals.Add(1)
			}
		})}
		if i == 3 {
			opts = append(opts, election.WithBeforeRenew(func(context.Context, *election.Term) error {
				if sick.Load() {
					return errors.New("disk full")
				}
				return nil
			}))
		}
		e := onSession(t, s, fmt.Sprintf("/shard/%d", i), fmt.Sprintf("c%d", i), opts...)
		term, err := e.Campaign(ctx)
		if err != nil {
			t.Fatal(err)
		}
		terms[i] = term
	}
	resp, err := admin.Get(ctx, "/shard/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 2*n {
		t.Fatalf("%d keys, want %d (a queue key and a leader key per election)", len(resp.Kvs), 2*n)
	}
	for _, kv := range resp.Kvs {
		if kv.Lease != int64(s.Lease()) {
			t.Fatalf("key %s under lease %x, not the session's %x", kv.Key, kv.Lease, s.Lease())
		}
	}
	sick.Store(true)
	select {
	case <-terms[3].Done():
	case <-time.After(patience):
		t.Fatal("the Term whose hook fails never ended")
	}
	if !errors.Is(terms[3].Err(), election.ErrUnhealthy) {
		t.Errorf("Term ended with %v, want ErrUnhealthy", terms[3].Err())
	}
	// The others go on renewing on the lease.
	for seen := renewals.Load(); renewals.Load() < seen+2*(n-1); time.Sleep(10 * time.Millisecond) {
		if s.Err() != nil {
			t.Fatalf("the session ended: %v", s.Err())
		}
	}
	for i, term := range terms {
		if i != 3 && term.Err() != nil {
			t.Errorf("Term %d ended: %v", i, term.Err())
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for i, term := range terms {
		if i != 3 && !errors.Is(term.Err(), election.ErrClosed) {
			t.Errorf("Term %d after the session's Close: %v, want ErrClosed", i, term.Err())
		}
	}
	if resp, err := admin.Get(ctx, "/shard/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 0 {
		t.Errorf("keys after the session's Close: %v, %v", resp.Count, err)
	}
}

// A lost session ends every Term on it before any other candidate of
// those elections can lead; its Electors cannot campaign again.
func TestSessionLossEndsEveryTermFirst(t *testing.T) {
	eps := startEtcd(t)
	px := faultproxy.New(t, strings.TrimPrefix(eps[0], "http://"))
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + px.Addr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	s := newSession(t, cli)
	other := newClient(t, eps)
	ctx := ctxT(t)
	const n = 3
	type pair struct {
		e     *etcd.Elector
		term  *election.Term
		ended chan time.Time
		next  <-chan result
	}
	ps := make([]pair, n)
	for i := range ps {
		name := fmt.Sprintf("/loss/%d", i)
		e := onSession(t, s, name, "s")
		term, err := e.Campaign(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ended := make(chan time.Time, 1)
		go func() { <-term.Done(); ended <- time.Now() }()
		w := newElector(t, other, name, "w")
		ps[i] = pair{e, term, ended, campaignAsync(ctx, w)}
		waitQueue(t, other, name, 2)
	}
	px.Cut()
	for i, p := range ps {
		r := await(t, p.next)
		if r.err != nil {
			t.Fatal(r.err)
		}
		select {
		case at := <-p.ended:
			if !at.Before(r.at) {
				t.Errorf("election %d: the session's Term ended %v after the next leader's Campaign returned", i, at.Sub(r.at))
			}
			if !errors.Is(p.term.Err(), election.ErrLeaseExpired) {
				t.Errorf("election %d: Term ended with %v, want ErrLeaseExpired", i, p.term.Err())
			}
		default:
			t.Fatalf("election %d: the next candidate leads while the session's Term is valid", i)
		}
		if r.t.Token() <= p.term.Token() {
			t.Errorf("election %d: token %d after %d", i, r.t.Token(), p.term.Token())
		}
	}
	px.Heal()
	px.Reset()
	select {
	case <-s.Done():
	case <-time.After(patience):
		t.Fatal("the session never learned that its lease is gone")
	}
	if !errors.Is(s.Err(), election.ErrSessionLost) {
		t.Errorf("session ended with %v, want ErrSessionLost", s.Err())
	}
	_, err = ps[0].e.Campaign(ctx)
	if !errors.Is(err, election.ErrSessionLost) || !errors.Is(err, election.ErrClosed) {
		t.Errorf("Campaign on a lost session = %v, want ErrSessionLost and ErrClosed", err)
	}
}

func TestNewWithSessionRefusesBadInput(t *testing.T) {
	eps := startEtcd(t)
	s := newSession(t, newClient(t, eps))
	if _, err := etcd.NewWithSession(nil, "/x"); !errors.Is(err, election.ErrInvalidOption) {
		t.Errorf("NewWithSession(nil) = %v", err)
	}
	if _, err := etcd.NewWithSession(s, "/x", election.WithTTL(5*time.Second)); !errors.Is(err, election.ErrInvalidOption) || !strings.Contains(err.Error(), "session's TTL") {
		t.Errorf("NewWithSession(another TTL) = %v", err)
	}
	e, err := etcd.NewWithSession(s, "/x", election.WithTTL(2*time.Second))
	if err != nil {
		t.Fatalf("NewWithSession(the session's TTL) = %v", err)
	}
	e.Close()
	if _, err := etcd.NewSession(ctxT(t), nil); !errors.Is(err, election.ErrInvalidOption) {
		t.Errorf("NewSession(nil client) = %v", err)
	}
	if _, err := etcd.NewSession(ctxT(t), newClient(t, eps), election.WithTTL(time.Millisecond)); !errors.Is(err, election.ErrInvalidOption) {
		t.Errorf("NewSession(TTL 1ms) = %v", err)
	}
}

// A Session renews its lease once per tick however many elections it
// leads: every leader its tick wakes waits for the tick's renewal, even
// one that wakes after it was sent (with thousands of leaders, most do),
// rather than send one of its own.
func TestOneRenewalPerTick(t *testing.T) {
	const n = 3000
	eps := startEtcd(t)
	var keepalives atomic.Int64 // the renewals the client sends
	cli := dialClient(t, eps, grpc.WithChainStreamInterceptor(sendsOn(methodKeepAlive, &keepalives)))
	// A lease window that outlasts a loaded machine's stalls: with
	// thousands of leaders in a process under -race beside the other
	// suites, a 2 s TTL saw Terms expire, both before and after the
	// leaders' guards took their renewals over.
	ttl := 6 * time.Second
	s := newSession(t, cli, election.WithTTL(ttl))
	o, err := election.NewOptions(election.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	interval := o.Window() / 3
	ctx, cancel := context.WithTimeout(context.Background(), 3*patience)
	defer cancel()
	var wg sync.WaitGroup
	terms := make([]*election.Term, n)
	errs := make([]error, n)
	for i := range n {
		e := onSession(t, s, fmt.Sprintf("/tick/%d", i), "c")
		wg.Go(func() { terms[i], errs[i] = e.Campaign(ctx) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("election %d: %v", i, err)
		}
	}
	// Over a few ticks: at most one renewal per tick, and one for a tick
	// that falls at either end of the window.
	before, began := keepalives.Load(), time.Now()
	for keepalives.Load() < before+4 {
		if s.Err() != nil {
			t.Fatalf("the session ended: %v", s.Err())
		}
		if time.Since(began) > 2*patience {
			t.Fatalf("%d renewals in %v", keepalives.Load()-before, 2*patience)
		}
		time.Sleep(interval / 10)
	}
	sent, ticks := keepalives.Load()-before, int64(time.Since(began)/interval)
	if sent > ticks+2 {
		t.Errorf("%d renewals in %v, %d ticks of %v: a tick sent more than one", sent, time.Since(began).Round(time.Millisecond), ticks, interval)
	}
	for i, term := range terms {
		if term.Err() != nil {
			t.Fatalf("Term %d ended: %v", i, term.Err())
		}
	}
}

// A leader on a Session holds one goroutine, which guards its keys and
// renews its Term (an Elector without a before-renewal hook): a service
// with a leader per shard holds one per shard, not two.
func TestOneGoroutinePerLeader(t *testing.T) {
	const n = 200
	eps := startEtcd(t)
	s := newSession(t, newClient(t, eps))
	ctx := ctxT(t)
	// The client's watch stream and the session's ticks run already.
	if _, err := onSession(t, s, "/goroutines/0", "c").Campaign(ctx); err != nil {
		t.Fatal(err)
	}
	g0 := runtime.NumGoroutine()
	for i := range n {
		if _, err := onSession(t, s, fmt.Sprintf("/goroutines/%d", i+1), "c").Campaign(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// A renewal or a release in flight holds one for a while.
	for {
		g := runtime.NumGoroutine() - g0
		if g <= n+n/10 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%d goroutines more for %d leaders; want about one each", g, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
