package etcdsuite_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/etcd"
	"github.com/electkit/election/internal/record"
)

// ghost queues a candidate key that no process follows, as another
// program's candidate would be: a valid queue key under a lease of the
// admin client, with a record naming id. It returns the key.
func ghost(t *testing.T, admin *clientv3.Client, name, id string, priority int64) string {
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
	return key
}

// TestTransferLapses: a hand-over to a candidate that never takes it (a
// queue key no process follows) lapses after one lease window: Transfer
// returns ErrTransferFailed, the hand-over key is gone, and the head of
// the queue leads.
func TestTransferLapses(t *testing.T) {
	eps := startEtcd(t)
	cli, admin := newClient(t, eps), newClient(t, eps)
	const name = "/transfer/lapse"
	a := newElector(t, cli, name, "a")
	ta := await(t, campaignAsync(ctxT(t), a))
	if ta.err != nil {
		t.Fatal(ta.err)
	}
	b := newElector(t, cli, name, "b", election.WithPriority(5))
	rb := campaignAsync(ctxT(t), b)
	waitQueue(t, cli, name, 2)
	ghost(t, admin, name, "ghost", 1)
	start := time.Now()
	err := election.Transfer(ctxT(t), a, ta.t, "ghost", election.KeepLeading)
	if !errors.Is(err, election.ErrTransferFailed) {
		t.Fatalf("Transfer to a candidate that never takes over = %v, want ErrTransferFailed", err)
	}
	if !errors.Is(ta.t.Err(), election.ErrTransferred) {
		t.Errorf("the old Term ended with %v, want ErrTransferred", ta.t.Err())
	}
	t.Logf("Transfer gave up after %v: %v", time.Since(start), err)
	r := await(t, rb)
	if r.err != nil || r.t.Leader().ID != "b" {
		t.Fatalf("after the lapse: %v, %v; want b (the head of the queue) to lead", r.t, r.err)
	}
	if r.at.Before(start) {
		t.Errorf("b led before the transfer")
	}
	if ks := keys(t, cli, name+"/_t"); len(ks) != 0 {
		t.Errorf("hand-over key left after the lapse: %q", ks)
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
// hand-over's event with no read; the head of the queue, whose reservation
// the hand-over deletes, reads and reserves again behind the target; the
// one behind the head, whose followed reservation went, reads once; the
// one behind the target, whose key ahead the hand-over put, reads once;
// the others send nothing.
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
	before := probeReads(es...)
	if err := election.Transfer(ctxT(t), a, ta.t, "w6", election.KeepLeading); err != nil {
		t.Fatalf("Transfer: %v", err)
	}
	r := await(t, chs["w6"])
	if r.err != nil || r.t.Token() <= ta.t.Token() {
		t.Fatalf("target: %v, %v; want a Term with a token above %d", r.t, r.err, ta.t.Token())
	}
	settle(t, append(es[:6:6], es[7:]...))
	if got := probeReads(es...) - before; got > 4 {
		t.Errorf("the transfer cost %d reads and writes among the waiters, want at most 4 (none by the target; the head's look when the hand-over takes its reservation and its reservation behind the target; the look of the one behind the head, whose followed reservation went; the look of the one behind the target, whose key ahead the hand-over put)", got)
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
// for a hand-over's confirmation (a put of a leadership key that keeps
// its value), which a new leader sends once its Term has begun.
type timedRequests struct {
	mu   sync.Mutex
	sent []time.Time
}

func (r *timedRequests) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	confirm := false
	if txn, ok := req.(*pb.TxnRequest); ok && len(txn.Success) == 1 {
		if put := txn.Success[0].GetRequestPut(); put != nil && put.IgnoreValue && strings.Contains(string(put.Key), "/_l/") {
			confirm = true
		}
	}
	if !confirm {
		r.mu.Lock()
		r.sent = append(r.sent, time.Now())
		r.mu.Unlock()
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// between counts the requests sent in [from, to).
func (r *timedRequests) between(from, to time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, at := range r.sent {
		if !at.Before(from) && at.Before(to) {
			n++
		}
	}
	return n
}

// The hand-over is the last request of a transfer: the leader's one
// transaction creates the target's leadership key and puts the target's
// queue key with a record naming it, whose watch event tells the target
// it leads. The target sends no request — no read, no write — between
// Transfer's call and its Campaign's return (it confirms afterwards).
// Three candidates, each on a client of its own whose requests an
// interceptor records; the transfer passes over the head of the queue,
// which had reserved; a few rounds.
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
		if got := reqs[to].between(start, r.at); got != 0 {
			t.Errorf("round %d: %s sent %d requests between Transfer's call and its Campaign's return, want 0", round, to, got)
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

// TestForgedHandoverRecord: another client puts a waiting candidate's queue
// key again with a record that names its leadership key, as a hand-over
// does, but creates no such key. The candidate's confirmation finds no key
// at its token and ends the Term at once (ErrSessionLost); its fenced
// write is refused meanwhile; the real leader leads on, undisturbed.
func TestForgedHandoverRecord(t *testing.T) {
	eps := startEtcd(t)
	cli, admin := newClient(t, eps), newClient(t, eps)
	const name = "/transfer/forged"
	a := newElector(t, cli, name, "a")
	ta := await(t, campaignAsync(ctxT(t), a))
	if ta.err != nil {
		t.Fatal(ta.err)
	}
	b := newElector(t, cli, name, "b")
	rb := campaignAsync(ctxT(t), b)
	qs := waitQueue(t, admin, name, 2)
	settle(t, []*etcd.Elector{b})
	bkey := qs[1]
	if bkey == qs[0] || !strings.HasPrefix(bkey, name+"/_c/") {
		t.Fatalf("queue %q", qs)
	}
	// The name a hand-over gives b's leadership key: its arrival's.
	s := bkey[len(name+"/_c/"):]
	lkey := name + "/_l/" + fmt.Sprintf("%016x", ^mustHex(t, s[16:32])) + s[32:]
	o, _ := election.NewOptions(election.WithID("b"))
	if _, err := admin.Put(ctxT(t), bkey, string(record.EncodeLeader(o, nil, lkey)), clientv3.WithIgnoreLease()); err != nil {
		t.Fatal(err)
	}
	r := await(t, rb)
	if r.err != nil && !errors.Is(r.err, election.ErrSessionLost) {
		t.Fatalf("b's Campaign = %v, want a Term that ends, or ErrSessionLost", r.err)
	}
	if r.err == nil {
		t.Logf("b led at %d on the forged record", r.t.Token())
		select {
		case <-r.t.Done():
		case <-time.After(patience):
			t.Fatalf("b's Term on a forged hand-over record did not end: %v", r.t)
		}
		if err := r.t.Err(); !errors.Is(err, election.ErrSessionLost) {
			t.Errorf("b's Term ended with %v, want ErrSessionLost", err)
		}
		cmp, err := b.Fence(r.t)
		if err == nil {
			resp, err := admin.Txn(ctxT(t)).If(cmp).Then(clientv3.OpPut(name+"-data", "b")).Commit()
			if err != nil || resp.Succeeded {
				t.Errorf("b's fenced write after a forged hand-over record: succeeded %v, %v", resp != nil && resp.Succeeded, err)
			}
		}
	}
	if err := ta.t.Err(); err != nil {
		t.Errorf("the leader's Term ended: %v", err)
	}
	if ld, err := a.Leader(ctxT(t)); err != nil || ld.ID != "a" || ld.Token != ta.t.Token() {
		t.Errorf("Leader = %v, %v; want a at %d", ld, err, ta.t.Token())
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
