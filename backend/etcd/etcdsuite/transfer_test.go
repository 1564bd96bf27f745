package etcdsuite_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

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
// one in the middle of the queue wakes that one, which leads at once, and
// the head of the queue, whose reservation the hand-over deletes: it finds
// the hand-over, waits on, and reserves again behind the target; the one
// behind the head, which follows that reservation, and the one behind the
// target, whose key ahead the hand-over touched, read once or twice; the
// others send nothing.
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
	if got := probeReads(es...) - before; got > 8 {
		t.Errorf("the transfer cost %d reads and claims among the waiters, want at most 8 (the target's claim; the head's look when the hand-over takes its reservation, its attempt once the target leads, its reservation behind the target; the looks of the one behind the head, whose followed reservation went and came again; the look of the one behind the target, whose key the hand-over touched)", got)
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
