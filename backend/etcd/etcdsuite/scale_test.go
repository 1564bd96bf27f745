package etcdsuite_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/etcd"
	"github.com/electkit/election/internal/record"
)

// The scale smoke: 2,000 candidates of one election on one member, half
// with a lease each and half on four shared Sessions, campaign as a fleet
// rolls out (at most 50 started and not yet queued). All queue, exactly one
// leads, and each handover at the head of the full queue goes to the
// queue's head, costs one queue request in all (the next candidate's
// claim: no herd) and raises the token. Closing every Elector and Session
// leaves no key behind. Time and memory at scale are the bench's (make
// bench, "Scale"); this checks the behaviour.
func TestScaleSmoke(t *testing.T) {
	const (
		n         = 2000
		clients   = 4
		window    = 50
		handovers = 5
		name      = "/scale"
	)
	eps := startEtcd(t)
	admin := newClient(t, eps)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ttl := election.WithTTL(10 * time.Second) // a busy machine under -race must not expire the early ones
	sessions := make([]*etcd.Session, clients)
	clis := make([]*clientv3.Client, clients)
	for i := range clis {
		clis[i] = newClient(t, eps)
		sessions[i] = newSession(t, clis[i], ttl)
	}
	es := make([]*etcd.Elector, n)
	for i := range es {
		id := election.WithID(fmt.Sprintf("c%04d", i))
		var err error
		if i%2 == 0 {
			es[i], err = etcd.New(clis[i%clients], name, id, ttl)
		} else {
			es[i], err = etcd.NewWithSession(sessions[i%clients], name, id)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	closed := false
	closeAll := func() {
		if closed {
			return
		}
		closed = true
		var wg sync.WaitGroup
		sem := make(chan struct{}, 64)
		for _, e := range es {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				e.Close()
			}()
		}
		wg.Wait()
	}
	defer closeAll()

	// queued counts the queue keys, less the leader's hand-over mark
	// (the key beside its queue key a hand-over put).
	queued := func() int {
		resp, err := admin.Txn(ctx).Then(
			clientv3.OpGet(name+"/_c/", clientv3.WithPrefix(), clientv3.WithCountOnly()),
			clientv3.OpGet(name+"/_l/", clientv3.WithPrefix(), clientv3.WithLimit(1))).Commit()
		if err != nil {
			t.Fatal(err)
		}
		n := resp.Responses[0].GetResponseRange().Count
		if l := resp.Responses[1].GetResponseRange().GetKvs(); len(l) > 0 {
			m, err := admin.Get(ctx, record.Key(l[0].Value)+"/h", clientv3.WithCountOnly(), clientv3.WithRev(resp.Header.Revision))
			if err != nil {
				t.Fatal(err)
			}
			n -= m.Count
		}
		return int(n)
	}
	type won struct {
		i    int
		term *election.Term
		err  error
	}
	results := make(chan won, n)
	have := 0
	for i, e := range es {
		for i-have >= window {
			if have = queued(); i-have >= window {
				time.Sleep(5 * time.Millisecond)
			}
		}
		go func() {
			term, err := e.Campaign(ctx)
			results <- won{i, term, err}
		}()
	}
	for have = queued(); have < n; have = queued() {
		if ctx.Err() != nil {
			t.Fatalf("%d of %d queued", have, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	next := func() won {
		t.Helper()
		select {
		case w := <-results:
			if w.err != nil {
				t.Fatalf("candidate %d: Campaign: %v", w.i, w.err)
			}
			return w
		case <-ctx.Done():
			t.Fatal("no Campaign returned")
		}
		return won{}
	}
	// headLeads checks that the leader key names w and the head of the
	// queue (its largest key). The first leader need not head the queue:
	// a candidate that read the same revision before the claim and wrote
	// its key after it may sort ahead (ties go by lease); it goes next.
	headLeads := func(w won, first bool) bool {
		t.Helper()
		resp, err := admin.Txn(ctx).Then(
			clientv3.OpGet(name+"/_l/", clientv3.WithPrefix(), clientv3.WithLimit(1)),
			clientv3.OpGet(name+"/_c/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(2), clientv3.WithKeysOnly()),
		).Commit()
		if err != nil {
			t.Fatal(err)
		}
		l, head := resp.Responses[0].GetResponseRange().GetKvs(), resp.Responses[1].GetResponseRange().GetKvs()
		if len(head) > 0 && strings.HasSuffix(string(head[0].Key), "/h") {
			head = head[1:] // the head's hand-over mark, which sorts just after it
		}
		head = head[:min(len(head), 1)]
		if len(l) != 1 || len(head) != 1 {
			t.Fatalf("leader key %v, queue head %v", l, head)
		}
		if id, key := record.ID(l[0].Value), record.Key(l[0].Value); id != es[w.i].ID() || key != string(head[0].Key) && !first {
			t.Fatalf("the leader key names %s (queue key %s); candidate %s leads and the queue's head is %s", id, key, es[w.i].ID(), head[0].Key)
		}
		if uint64(l[0].CreateRevision) != w.term.Token() {
			t.Fatalf("leader key created at revision %d, token %d", l[0].CreateRevision, w.term.Token())
		}
		return record.Key(l[0].Value) == string(head[0].Key)
	}
	reads := func() int64 { return probeReads(es...) }
	settle(t, es)
	leader := next()
	// A first leader that does not head the queue hands over to the head
	// and moves the key ahead of the candidate just behind it: two wake.
	most := int64(2)
	if !headLeads(leader, true) {
		most = 4
	}
	resigned := map[int]bool{}
	live := func() []*etcd.Elector {
		var out []*etcd.Elector
		for i, e := range es {
			if !resigned[i] {
				out = append(out, e)
			}
		}
		return out
	}
	for k := range handovers {
		settle(t, live())
		before := reads()
		own := make([]int64, len(es))
		for i, e := range es {
			own[i] = probeReads(e)
		}
		awaitNextNoted(t, es[leader.i])
		if err := es[leader.i].Resign(ctx); err != nil {
			t.Fatal(err)
		}
		resigned[leader.i] = true
		w := next()
		if w.term.Token() <= leader.term.Token() {
			t.Fatalf("handover %d: token %d after %d", k, w.term.Token(), leader.term.Token())
		}
		headLeads(w, false)
		// The release handed over to the next candidate: it leads on
		// the release's event, with no request after it.
		if got := probeReads(es[w.i]) - own[w.i]; got != 0 {
			t.Errorf("handover %d: the next candidate made %d queue requests after the release, want 0 (the release handed over to it)", k, got)
		}
		settle(t, live())
		if got := reads() - before; got > most {
			t.Errorf("handover %d cost %d queue requests of the waiters, want at most %d", k, got, most)
		}
		most = 2
		if got := queued(); got != n-k-1 {
			t.Fatalf("after handover %d: %d queued, want %d", k, got, n-k-1)
		}
		leader = w
	}
	select {
	case w := <-results:
		t.Fatalf("candidate %d's Campaign returned (%v) while %d leads", w.i, w.err, leader.i)
	default:
	}
	closeAll()
	for _, s := range sessions {
		if err := s.Close(); err != nil {
			t.Errorf("closing a session: %v", err)
		}
	}
	resp, err := admin.Get(ctx, name+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 0 {
		t.Errorf("%d keys left under %s/ after every Elector and Session closed", resp.Count, name)
	}
}

// settle waits until every candidate of es waits on a live watch (or
// leads), its looks done. A newcomer that sorts just above a waiter wakes
// it once (P9) and the watch event may still be on its way when the last
// key is written, so the queue counts as settled when three passes in a
// row, 20 ms apart, find every candidate waiting and no read issued.
func settle(tb testing.TB, es []*etcd.Elector) {
	tb.Helper()
	deadline := time.Now().Add(time.Minute)
	for stable := 0; stable < 3; {
		r0, all := probeReads(es...), true
		for _, e := range es {
			if !probeSettled(e) {
				all = false
				break
			}
		}
		if all && probeReads(es...) == r0 {
			stable++
		} else {
			stable = 0
		}
		if time.Now().After(deadline) {
			tb.Fatal("the queue did not settle within a minute")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
