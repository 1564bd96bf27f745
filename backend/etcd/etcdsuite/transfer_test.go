package etcdsuite_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/etcd"
	"github.com/electkit/election/internal/record"
	"github.com/electkit/election/internal/rig/embedetcd"
	"github.com/electkit/election/internal/rig/etcdtest"
)

// ghost queues a candidate key that no process follows, as another
// program's candidate would be: a valid queue key under a lease of the
// admin client, with a record naming id. It returns the key and its lease.
func ghost(t *testing.T, admin *clientv3.Client, name, id string, priority int64) (string, clientv3.LeaseID) {
	t.Helper()
	lease, err := admin.Grant(ctxT(t), 30)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Revoke(ctxT(t), lease.ID) })
	resp, err := admin.Get(ctxT(t), "x", clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	key := fmt.Sprintf("%s/_c/%016x%016x-%016x-%08x", name, uint64(priority)^(1<<63), ^uint64(resp.Header.Revision), uint64(lease.ID), 1)
	o, _ := election.NewOptions(election.WithID(id), election.WithPriority(priority))
	if _, err := admin.Put(ctxT(t), key, string(record.Encode(o, nil)), clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	return key, lease.ID
}

// TestTransferToGhost: a transfer to a candidate that never acts on it (a
// queue key no process follows, as another program's could be) makes it
// leader all the same — the hand-over creates its leadership key under its
// lease — and the election waits for that lease: the head of the queue
// leads once the ghost's lease is revoked, with a higher token.
func TestTransferToGhost(t *testing.T) {
	eps := startEtcd(t)
	cli, admin := newClient(t, eps), newClient(t, eps)
	const name = "/transfer/ghost"
	a := newElector(t, cli, name, "a")
	ta := await(t, campaignAsync(ctxT(t), a))
	if ta.err != nil {
		t.Fatal(ta.err)
	}
	b := newElector(t, cli, name, "b", election.WithPriority(5))
	rb := campaignAsync(ctxT(t), b)
	waitQueue(t, cli, name, 2)
	_, lease := ghost(t, admin, name, "ghost", 1)
	if err := election.Transfer(ctxT(t), a, ta.t, "ghost", election.KeepLeading); err != nil {
		t.Fatalf("Transfer to a candidate that never acts on it = %v, want nil: it leads once the hand-over is made", err)
	}
	if !errors.Is(ta.t.Err(), election.ErrTransferred) {
		t.Errorf("the old Term ended with %v, want ErrTransferred", ta.t.Err())
	}
	ld, err := a.Leader(ctxT(t))
	if err != nil || ld.ID != "ghost" || ld.Token <= ta.t.Token() {
		t.Fatalf("Leader after the transfer = %v, %v; want the ghost with a token above %d", ld, err, ta.t.Token())
	}
	settle(t, []*etcd.Elector{b}) // b waits on its watch again
	select {
	case r := <-rb:
		t.Fatalf("b returned while the ghost holds the leadership: %v, %v", r.t, r.err)
	default:
	}
	revoked := time.Now()
	if _, err := admin.Revoke(ctxT(t), lease); err != nil {
		t.Fatal(err)
	}
	r := await(t, rb)
	if r.err != nil || r.t.Leader().ID != "b" || r.t.Token() <= ld.Token {
		t.Fatalf("after the ghost's lease went: %v, %v; want b to lead with a token above %d", r.t, r.err, ld.Token)
	}
	if r.at.Before(revoked) {
		t.Errorf("b led before the ghost's lease was revoked")
	}
}

// TestStaleTransferKey: a hand-over key that names a candidate no longer
// queued, under a lease that lives on (a shared Session's), or one without
// a lease, does not hold the election: the head of the queue deletes it
// and leads.
func TestStaleTransferKey(t *testing.T) {
	eps := startEtcd(t)
	cli, admin := newClient(t, eps), newClient(t, eps)
	for _, leased := range []bool{true, false} {
		t.Run(fmt.Sprintf("leased=%v", leased), func(t *testing.T) {
			name := fmt.Sprintf("/transfer/stale-%v", leased)
			var opts []clientv3.OpOption
			if leased {
				lease, err := admin.Grant(ctxT(t), 60)
				if err != nil {
					t.Fatal(err)
				}
				opts = append(opts, clientv3.WithLease(lease.ID))
			}
			if _, err := admin.Put(ctxT(t), name+"/_t", name+"/_c/gone", opts...); err != nil {
				t.Fatal(err)
			}
			a := newElector(t, cli, name, "a")
			r := await(t, campaignAsync(ctxT(t), a))
			if r.err != nil {
				t.Fatalf("Campaign with a stale hand-over key: %v", r.err)
			}
			if ks := keys(t, cli, name+"/_t"); len(ks) != 0 {
				t.Errorf("stale hand-over key still there: %q", ks)
			}
		})
	}
}

// TestTransferWakesOnlyTheTarget: of ten waiting candidates, a transfer to
// one in the middle of the queue wakes that one, which leads on the
// hand-over's event with no read or write; the one behind the target,
// whose key ahead the hand-over put naming its leadership key, lets it go
// by; the others send nothing but a look or two of the head's (the key
// ahead of it, the leader's, went).
func TestTransferWakesOnlyTheTarget(t *testing.T) {
	eps := startEtcd(t)
	cli := newClient(t, eps)
	const name = "/transfer/herd"
	a := newElector(t, cli, name, "a")
	ta := await(t, campaignAsync(ctxT(t), a))
	if ta.err != nil {
		t.Fatal(ta.err)
	}
	var es []*etcd.Elector
	chs := map[string]<-chan result{}
	for i := range 10 {
		id := fmt.Sprintf("w%d", i)
		e := newElector(t, cli, name, id)
		es = append(es, e)
		chs[id] = campaignAsync(ctxT(t), e)
		waitQueue(t, cli, name, i+2)
	}
	settle(t, es)
	before, before6 := probeReads(es...), probeReads(byID(es, "w6"))
	if err := election.Transfer(ctxT(t), a, ta.t, "w6", election.KeepLeading); err != nil {
		t.Fatalf("Transfer: %v", err)
	}
	r := await(t, chs["w6"])
	if r.err != nil || r.t.Token() <= ta.t.Token() {
		t.Fatalf("target: %v, %v; want a Term with a token above %d", r.t, r.err, ta.t.Token())
	}
	settle(t, append(es[:6:6], es[7:]...))
	if got := probeReads(byID(es, "w6")) - before6; got != 0 {
		t.Errorf("the target made %d reads and writes before it led, want 0", got)
	}
	if got := probeReads(es...) - before; got > 3 {
		t.Errorf("the transfer cost %d reads and writes among the waiters, want at most 3 (none by the target; the head's look when the leader's key went)", got)
	}
	// The target leads; the head of the queue is next.
	if err := byID(es, "w6").Resign(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if r := await(t, chs["w0"]); r.err != nil {
		t.Fatalf("after the target resigned: %v", r.err)
	}
}

func byID(es []*etcd.Elector, id string) *etcd.Elector {
	for _, e := range es {
		if e.ID() == id {
			return e
		}
	}
	return nil
}

// TestRequestTransfer: an Elector that does not campaign (an operator's
// tool) asks the leader, through the store, to transfer: to a named
// candidate, to the best one, to one that is not waiting (the leader
// answers ErrNoCandidate and keeps leading), and with no leader at all.
func TestRequestTransfer(t *testing.T) {
	eps := startEtcd(t)
	cli, ops := newClient(t, eps), newClient(t, eps)
	const name = "/transfer/request"
	op := newElector(t, ops, name, "ops")
	if _, err := election.RequestTransfer(ctxT(t), op, "b"); !errors.Is(err, election.ErrNoLeader) {
		t.Errorf("RequestTransfer with no leader = %v, want ErrNoLeader", err)
	}
	a := newElector(t, cli, name, "a")
	ta := await(t, campaignAsync(ctxT(t), a))
	if ta.err != nil {
		t.Fatal(ta.err)
	}
	b, c := newElector(t, cli, name, "b"), newElector(t, cli, name, "c", election.WithPriority(3))
	rb, rc := campaignAsync(ctxT(t), b), campaignAsync(ctxT(t), c)
	waitQueue(t, cli, name, 3)

	ld, err := election.RequestTransfer(ctxT(t), op, "b")
	if err != nil || ld.ID != "b" {
		t.Fatalf("RequestTransfer to b = %v, %v", ld, err)
	}
	if !errors.Is(ta.t.Err(), election.ErrTransferred) {
		t.Errorf("the old Term ended with %v, want ErrTransferred", ta.t.Err())
	}
	tb := await(t, rb)
	if tb.err != nil || tb.t.Token() != ld.Token {
		t.Fatalf("b: %v, %v; RequestTransfer reported %v", tb.t, tb.err, ld)
	}

	if _, err := election.RequestTransfer(ctxT(t), op, "nobody"); !errors.Is(err, election.ErrNoCandidate) {
		t.Errorf("RequestTransfer to a candidate that is not waiting = %v, want ErrNoCandidate", err)
	}
	if err := tb.t.Err(); err != nil {
		t.Errorf("the leader stopped leading after a refused request: %v", err)
	}

	ld, err = election.RequestTransfer(ctxT(t), op, "")
	if err != nil || ld.ID != "c" {
		t.Fatalf("RequestTransfer to the best = %v, %v; want c", ld, err)
	}
	if r := await(t, rc); r.err != nil {
		t.Fatal(r.err)
	}
	if ks := keys(t, cli, name+"/_r"); len(ks) != 0 {
		t.Errorf("request key left: %q", ks)
	}
}

// timedRequests records the unary requests a client sends, with when, but
// for the two a new leader sends once its Term has begun: a hand-over's
// check (two Compares and a count) and the read of its successor
// (succRead). Both may leave before Campaign's caller sees its return.
type timedRequests struct {
	mu   sync.Mutex
	sent []sentRequest
}

type sentRequest struct {
	at   time.Time
	what string
}

func (r *timedRequests) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	txn, ok := req.(*pb.TxnRequest)
	confirm := ok && len(txn.Compare) == 2 && len(txn.Success) == 1 && len(txn.Failure) == 0 &&
		txn.Success[0].GetRequestRange() != nil && txn.Success[0].GetRequestRange().CountOnly // checkHandover's

	if !confirm && !(ok && succRead(txn)) {
		r.mu.Lock()
		r.sent = append(r.sent, sentRequest{time.Now(), fmt.Sprintf("%s %v", method, req)})
		r.mu.Unlock()
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// between returns the requests sent in [from, to).
func (r *timedRequests) between(from, to time.Time) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var in []string
	for _, s := range r.sent {
		if !s.at.Before(from) && s.at.Before(to) {
			in = append(in, s.what)
		}
	}
	return in
}

// The hand-over is the last request of a transfer: the leader's one
// transaction creates the target's leadership key and puts the target's
// queue key with a record naming it, whose watch event tells the target
// it leads. The target sends no unary request — no read, no write — between
// Transfer's call and its Campaign's return (it checks its key afterwards;
// renewals and watches travel on streams).
// Three candidates, each on a client of its own whose requests an
// interceptor records; the transfer passes over the head of the queue; a
// few rounds.
func TestTransferTargetSendsNothing(t *testing.T) {
	eps := startEtcd(t)
	ctx := ctxT(t)
	const name = "/transfer/floor"
	admin := newClient(t, eps)
	reqs := map[string]*timedRequests{}
	es := map[string]*etcd.Elector{}
	for _, id := range []string{"a", "b", "c"} {
		reqs[id] = new(timedRequests)
		es[id] = newElector(t, dialClient(t, eps, grpc.WithChainUnaryInterceptor(reqs[id].unary)), name, id)
	}
	leader, err := es["a"].Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cur, order := "a", []string{"b", "c"} // order: the waiters, the head first
	chs := map[string]<-chan result{}
	for _, id := range order {
		chs[id] = campaignAsync(ctx, es[id])
		waitQueue(t, admin, name, len(chs)+1)
	}
	for round := range 4 {
		settle(t, []*etcd.Elector{es[order[0]], es[order[1]]})
		awaitNextNoted(t, es[cur])
		head, to := order[0], order[1]
		start := time.Now()
		if err := election.Transfer(ctx, es[cur], leader, to, election.KeepLeading); err != nil {
			t.Fatalf("round %d: Transfer from %s to %s: %v", round, cur, to, err)
		}
		r := await(t, chs[to])
		if r.err != nil {
			t.Fatal(r.err)
		}
		if got := reqs[to].between(start, r.at); len(got) != 0 {
			t.Errorf("round %d: %s sent %d requests between Transfer's call and its Campaign's return, want 0: %q", round, to, len(got), got)
		}
		if r.t.Token() <= leader.Token() {
			t.Fatalf("round %d: token %d after %d", round, r.t.Token(), leader.Token())
		}
		// The old leader queues again, behind the head.
		chs[cur] = campaignAsync(ctx, es[cur])
		waitQueue(t, admin, name, 3)
		leader, order, cur = r.t, []string{head, cur}, to
	}
}

// TestForgedHandoverRecord: another client puts waiting candidates'
// hand-over marks with records that name their leadership keys, as a
// hand-over does, but creates no such key. The head of the queue, which
// watches the leadership keys (where a hand-over to it shows), ignores it
// and waits on. The one behind it leads on the record; its check of the
// key once its Term began finds none at its token and ends the Term at
// once (ErrSessionLost); its fenced write is refused meanwhile. The real
// leader leads on, undisturbed.
func TestForgedHandoverRecord(t *testing.T) {
	eps := startEtcd(t)
	cli, admin := newClient(t, eps), newClient(t, eps)
	const name = "/transfer/forged"
	a := newElector(t, cli, name, "a")
	ta := await(t, campaignAsync(ctxT(t), a))
	if ta.err != nil {
		t.Fatal(ta.err)
	}
	b, c := newElector(t, cli, name, "b"), newElector(t, cli, name, "c")
	rb := campaignAsync(ctxT(t), b)
	waitQueue(t, admin, name, 2)
	rc := campaignAsync(ctxT(t), c)
	qs := waitQueue(t, admin, name, 3) // by creation: a, b, c
	settle(t, []*etcd.Elector{b, c})
	awaitNextNoted(t, a) // b is a's successor
	forgeHandover(t, admin, name, "c", qs[2])
	r := await(t, rc)
	if r.err != nil && !errors.Is(r.err, election.ErrSessionLost) {
		t.Fatalf("c's Campaign = %v, want a Term that ends, or ErrSessionLost", r.err)
	}
	if r.err == nil {
		t.Logf("c led at %d on the forged record", r.t.Token())
		if cmp, err := c.Fence(r.t); err == nil {
			resp, err := admin.Txn(ctxT(t)).If(cmp).Then(clientv3.OpPut(name+"-data", "c")).Commit()
			if err != nil || resp.Succeeded {
				t.Errorf("c's fenced write on a forged hand-over record: succeeded %v, %v; want refused", resp != nil && resp.Succeeded, err)
			}
		} else if !errors.Is(err, election.ErrNotLeader) {
			t.Errorf("Fence = %v", err)
		}
		select {
		case <-r.t.Done():
		case <-time.After(patience):
			t.Fatalf("c's Term on a forged hand-over record did not end: %v", r.t)
		}
		if err := r.t.Err(); !errors.Is(err, election.ErrSessionLost) {
			t.Errorf("c's Term ended with %v, want ErrSessionLost", err)
		}
	}
	forgeHandover(t, admin, name, "b", qs[1])
	settle(t, []*etcd.Elector{b})
	select {
	case r := <-rb:
		t.Fatalf("b, the head of the queue, returned on a forged record: %v, %v", r.t, r.err)
	default:
	}
	if err := ta.t.Err(); err != nil {
		t.Errorf("the leader's Term ended: %v", err)
	}
	if ld, err := a.Leader(ctxT(t)); err != nil || ld.ID != "a" || ld.Token != ta.t.Token() {
		t.Errorf("Leader = %v, %v; want a at %d", ld, err, ta.t.Token())
	}
	// b still leads next.
	if err := a.Resign(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if r := await(t, rb); r.err != nil || r.t.Token() <= ta.t.Token() {
		t.Fatalf("b after a resigned: %v, %v", r.t, r.err)
	}
}

// forgeHandover puts the hand-over mark of the queue key qkey of
// candidate id of election name, under its lease, with a record naming
// the leadership key a hand-over would give it (named by its arrival), as
// a hand-over does, but creates no such key: another client's forgery.
func forgeHandover(t *testing.T, admin *clientv3.Client, name, id, qkey string) {
	t.Helper()
	s := qkey[len(name+"/_c/"):]
	lkey := name + "/_l/" + fmt.Sprintf("%016x", ^mustHex(t, s[16:32])) + s[32:]
	o, _ := election.NewOptions(election.WithID(id))
	lease := clientv3.LeaseID(mustHex(t, s[33:49]))
	if _, err := admin.Put(ctxT(t), qkey+"/h", string(record.EncodeLeader(o, nil, lkey)), clientv3.WithLease(lease)); err != nil {
		t.Fatal(err)
	}
}

func mustHex(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestTransferRoundsOnACluster: on three members, three candidates (each
// on a client of its own) take turns leading, by Resign and by Transfer
// alternately, fifty rounds: each round exactly one Campaign returns,
// the old leader queues again, and no new leader's Term ends on its own.
// A new leader's check of its handed key must see the hand-over whatever
// member answers it (a read of Compares alone is served by the member the
// client reaches, which may lag).
func TestTransferRoundsOnACluster(t *testing.T) {
	eps := etcdtest.NewCluster(t, 3, embedetcd.Config{}).Endpoints()
	const name = "/transfer/rounds"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // the rounds' own: ctxT's would be shared by all
	defer cancel()
	es := map[string]*etcd.Elector{}
	for _, id := range []string{"c0", "c1", "c2"} {
		es[id] = newElector(t, newClient(t, eps), name, id)
	}
	type won struct {
		id  string
		t   *election.Term
		err error
	}
	ch := make(chan won, 4)
	campaign := func(id string) {
		go func() { tm, err := es[id].Campaign(ctx); ch <- won{id, tm, err} }()
	}
	next := func() won {
		t.Helper()
		select {
		case w := <-ch:
			return w
		case <-time.After(patience):
			t.Fatal("no Campaign returned")
			return won{}
		}
	}
	campaign("c0")
	w := next()
	if w.err != nil {
		t.Fatal(w.err)
	}
	leader, term := w.id, w.t
	round := -1
	queued := func() {
		t.Helper()
		deadline := time.Now().Add(patience)
		for {
			cs, err := election.Candidates(ctx, es[leader])
			if err == nil && len(cs) == 2 {
				return
			}
			select {
			case w := <-ch:
				t.Fatalf("round %d: %s's Campaign returned while %s leads at %v (%v): %v, %v", round, w.id, leader, term, term.Err(), w.t, w.err)
			case <-time.After(5 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: waiting candidates %v (%v), want 2", round, cs, err)
			}
		}
	}
	campaign("c1")
	campaign("c2")
	queued()
	for round = range 50 {
		cs, err := election.Candidates(ctx, es[leader])
		if err != nil || len(cs) != 2 {
			t.Fatalf("round %d: candidates %v, %v", round, cs, err)
		}
		old, oldTerm := leader, term
		if round%2 == 0 {
			err = es[old].Resign(ctx)
		} else {
			err = election.Transfer(ctx, es[old], oldTerm, cs[1].ID, election.KeepLeading)
		}
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		w := next()
		if w.err != nil || w.t.Token() <= oldTerm.Token() {
			t.Fatalf("round %d: %s: %v, %v after %v", round, w.id, w.t, w.err, oldTerm)
		}
		if round%2 == 1 && w.id != cs[1].ID {
			t.Fatalf("round %d: %s led, not the transfer's target %s", round, w.id, cs[1].ID)
		}
		leader, term = w.id, w.t
		campaign(old)
		queued()
		if err := term.Err(); err != nil {
			t.Fatalf("round %d: %s's Term ended: %v", round, leader, err)
		}
	}
}

// TestForgedHandoverCheckFails: a forged hand-over record, as in
// TestForgedHandoverRecord, and the new leader's check of its key fails
// (the member is unavailable, once). The Term must not live on: renewals
// stop counting and the guard reads the key again, finds none, and ends
// the Term (ErrSessionLost) while the real leader leads on.
func TestForgedHandoverCheckFails(t *testing.T) {
	eps := startEtcd(t)
	cli, admin := newClient(t, eps), newClient(t, eps)
	var failed atomic.Int32
	failOnce := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if txn, ok := req.(*pb.TxnRequest); ok && len(txn.Compare) == 2 && len(txn.Success) == 1 && len(txn.Failure) == 0 &&
			txn.Success[0].GetRequestRange() != nil && txn.Success[0].GetRequestRange().CountOnly && failed.Add(1) == 1 {
			return status.Error(codes.Unavailable, "injected: member unavailable")
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	const name = "/transfer/forgedfail"
	a := newElector(t, cli, name, "a")
	ta := await(t, campaignAsync(ctxT(t), a))
	if ta.err != nil {
		t.Fatal(ta.err)
	}
	b := newElector(t, cli, name, "b")
	campaignAsync(ctxT(t), b)
	waitQueue(t, admin, name, 2)
	c := newElector(t, dialClient(t, eps, grpc.WithChainUnaryInterceptor(failOnce)), name, "c")
	rc := campaignAsync(ctxT(t), c)
	qs := waitQueue(t, admin, name, 3) // by creation: a, b, c
	settle(t, []*etcd.Elector{b, c})
	forgeHandover(t, admin, name, "c", qs[2])
	r := await(t, rc)
	if r.err != nil {
		if !errors.Is(r.err, election.ErrSessionLost) {
			t.Fatalf("c's Campaign = %v, want a Term that ends, or ErrSessionLost", r.err)
		}
		return
	}
	select {
	case <-r.t.Done():
	case <-time.After(patience):
		t.Fatalf("c's Term on a forged record whose check failed did not end (check tried %d times); a's Term: %v", failed.Load(), ta.t.Err())
	}
	if err := r.t.Err(); !errors.Is(err, election.ErrSessionLost) {
		t.Errorf("c's Term ended with %v, want ErrSessionLost", err)
	}
	if failed.Load() == 0 {
		t.Errorf("the check never ran")
	}
	if err := ta.t.Err(); err != nil {
		t.Errorf("the leader's Term ended: %v", err)
	}
}
