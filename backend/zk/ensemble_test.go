package zk_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/zk"
	"github.com/electkit/election/internal/rig/faultproxy"
	"github.com/electkit/election/internal/rig/zktest"
)

// The ensemble's own leader server is killed while candidates campaign and
// lead (handing over every 300 ms): the election goes on with the remaining
// majority, and tokens increase.
func TestEnsembleLeaderKilled(t *testing.T) {
	t.Parallel()
	ens := zktest.NewEnsemble(t, 3)
	path := newPath(t)
	var es []*zk.Elector
	for _, id := range []string{"a", "b", "c"} {
		es = append(es, newElector(t, zktest.Conn(t, ens.Addrs(), ttl), path, id))
	}
	var mu sync.Mutex
	var terms []*election.Term
	var wg sync.WaitGroup
	ctx := ctxT(t)
	for _, e := range es {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				tm, err := e.Campaign(ctx)
				if errors.Is(err, election.ErrClosed) {
					return
				}
				if err != nil {
					continue
				}
				mu.Lock()
				terms = append(terms, tm)
				mu.Unlock()
				select { // lead a while, then hand over
				case <-tm.Done():
				case <-time.After(300 * time.Millisecond):
					_ = e.Resign(ctx)
				case <-ctx.Done():
				}
			}
		}()
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(terms) }
	eventually(t, "a few leaderships", func() bool { return count() >= 3 })
	zl := ens.Leader()
	if zl == nil {
		t.Fatal("the ensemble has no leader")
	}
	zl.Kill()
	n := count()
	eventually(t, "leaderships after the ZooKeeper leader died", func() bool { return count() >= n+3 })
	for _, e := range es {
		e.Close()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(terms); i++ {
		if terms[i].Token() <= terms[i-1].Token() {
			t.Errorf("token %d after %d", terms[i].Token(), terms[i-1].Token())
		}
	}
	t.Logf("%d leaderships, %d after the ZooKeeper leader was killed", len(terms), len(terms)-n)
}

// P3 on an ensemble: the leading candidate cut off from every server ends
// its Term before another candidate's Campaign returns.
func TestEnsemblePartitionedLeader(t *testing.T) {
	t.Parallel()
	ens := zktest.NewEnsemble(t, 3)
	path := newPath(t)
	var pxs []*faultproxy.Proxy
	var addrs []string
	for _, s := range ens.Servers {
		px := faultproxy.New(t, s.Addr)
		pxs = append(pxs, px)
		addrs = append(addrs, px.Addr)
	}
	aconn := zktest.Conn(t, addrs, ttl)
	for _, px := range pxs {
		t.Cleanup(px.Close)
	}
	a := newElector(t, aconn, path, "a")
	b := newElector(t, zktest.Conn(t, ens.Addrs(), ttl), path, "b")
	ta := lead(t, a)
	ch := campaignAsync(ctxT(t), b)
	var done time.Time
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); <-ta.Done(); done = time.Now() }()
	for _, px := range pxs {
		px.Cut()
	}
	r := await(t, ch, patience, "next candidate")
	if r.err != nil {
		t.Fatal(r.err)
	}
	wg.Wait()
	if !done.Before(r.at) {
		t.Fatalf("partitioned leader's Term Done %v after the next Campaign returned", done.Sub(r.at))
	}
	if !errors.Is(ta.Err(), election.ErrSessionLost) && !errors.Is(ta.Err(), election.ErrLeaseExpired) {
		t.Fatalf("Term ended with %v", ta.Err())
	}
	if r.t.Token() <= ta.Token() {
		t.Fatalf("token %d not above %d", r.t.Token(), ta.Token())
	}
	t.Logf("old Term Done %v before the next Campaign returned", r.at.Sub(done))
}
