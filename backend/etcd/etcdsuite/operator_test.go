package etcdsuite_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/etcd"
)

// What another client can do to the leader's keys through etcd's normal
// API, and what it must do to the leader's Term: end it, with
// ErrSessionLost, before the next candidate's Campaign returns.
var operatorActions = []struct {
	name string
	act  func(ctx context.Context, admin *clientv3.Client, k leaderKeys) error
}{
	{"DeleteLeaderKey", func(ctx context.Context, admin *clientv3.Client, k leaderKeys) error {
		_, err := admin.Delete(ctx, k.leader)
		return err
	}},
	{"DeleteQueueKey", func(ctx context.Context, admin *clientv3.Client, k leaderKeys) error {
		_, err := admin.Delete(ctx, k.queue)
		return err
	}},
	{"DeletePrefix", func(ctx context.Context, admin *clientv3.Client, _ leaderKeys) error {
		_, err := admin.Delete(ctx, "/op/", clientv3.WithPrefix())
		return err
	}},
	{"RevokeLease", func(ctx context.Context, admin *clientv3.Client, k leaderKeys) error {
		_, err := admin.Revoke(ctx, clientv3.LeaseID(k.lease))
		return err
	}},
	{"PutLeaderKeyWithoutLease", func(ctx context.Context, admin *clientv3.Client, k leaderKeys) error {
		_, err := admin.Put(ctx, k.leader, "operator")
		return err
	}},
	{"PutQueueKeyWithoutLease", func(ctx context.Context, admin *clientv3.Client, k leaderKeys) error {
		_, err := admin.Put(ctx, k.queue, "operator")
		return err
	}},
}

// leaderKeys are the leader key of an election, the queue key it names,
// and their lease.
type leaderKeys struct {
	leader, queue string
	lease         int64
}

// leaderOf reads the leader key of the election name.
func leaderOf(t *testing.T, cli *clientv3.Client, name string) leaderKeys {
	t.Helper()
	resp, err := cli.Get(ctxT(t), name+"/_l/", clientv3.WithPrefix(), clientv3.WithLimit(1))
	if err != nil || len(resp.Kvs) == 0 {
		t.Fatalf("reading %s/_l/: %v (%d keys)", name, err, len(resp.Kvs))
	}
	var rec struct{ Key string }
	if err := json.Unmarshal(resp.Kvs[0].Value, &rec); err != nil {
		t.Fatal(err)
	}
	return leaderKeys{leader: string(resp.Kvs[0].Key), queue: rec.Key, lease: resp.Kvs[0].Lease}
}

// campaignWatching campaigns with e and reports, together with the
// outcome, whether other's Term had ended at the instant Campaign returned.
func campaignWatching(ctx context.Context, e *etcd.Elector, other *election.Term) <-chan struct {
	result
	otherEnded bool
} {
	ch := make(chan struct {
		result
		otherEnded bool
	}, 1)
	go func() {
		t, err := e.Campaign(ctx)
		ended := other.Err() != nil
		ch <- struct {
			result
			otherEnded bool
		}{result{t, err, time.Now()}, ended}
	}()
	return ch
}

func TestOperatorEndsTheLeadersTerm(t *testing.T) {
	eps := startEtcd(t)
	for _, op := range operatorActions {
		t.Run(op.name, func(t *testing.T) {
			admin := newClient(t, eps)
			// a's lease renews every 20 s: within patience, only noticing
			// the operator's act can end a's Term.
			a := newElector(t, newClient(t, eps), "/op", "a", election.WithTTL(time.Minute))
			b := newElector(t, newClient(t, eps), "/op", "b")
			ctx := ctxT(t)
			ta, err := a.Campaign(ctx)
			if err != nil {
				t.Fatal(err)
			}
			rb := campaignWatching(ctx, b, ta)
			waitQueue(t, admin, "/op", 2)
			if err := op.act(ctx, admin, leaderOf(t, admin, "/op")); err != nil {
				t.Fatal(err)
			}
			var r struct {
				result
				otherEnded bool
			}
			select {
			case r = <-rb:
			case <-time.After(patience):
				t.Fatal("b never led")
			}
			if op.name == "DeletePrefix" {
				// b's own key went too: b's Campaign fails, and b leads on its next.
				if !errors.Is(r.err, election.ErrSessionLost) {
					t.Fatalf("b's Campaign after the prefix went = %v, %v; want ErrSessionLost", r.t, r.err)
				}
				if r.t, r.err = b.Campaign(ctx); r.err != nil {
					t.Fatal(r.err)
				}
			} else if r.err != nil {
				t.Fatal(r.err)
			} else if !r.otherEnded {
				// Not promised (see the package doc, "Other clients of the
				// store"): both learn of it from one revision, in no fixed order.
				t.Logf("a's Term still valid when b's Campaign returned (a learns of the %s from the same revision)", op.name)
			}
			select {
			case <-ta.Done():
			case <-time.After(patience):
				t.Fatal("a's Term never ended")
			}
			if !errors.Is(ta.Err(), election.ErrSessionLost) {
				t.Errorf("a's Term ended with %v, want ErrSessionLost", ta.Err())
			}
			if r.t.Token() <= ta.Token() {
				t.Errorf("b's token %d not above a's %d", r.t.Token(), ta.Token())
			}
			if l, err := b.Leader(ctx); err != nil || l.ID != "b" {
				t.Errorf("Leader() = %v, %v; want b", l, err)
			}
			// a's keys, if one was left without its lease, are gone once a let go.
			waitQueue(t, admin, "/op", 1)
			if k := leaderOf(t, admin, "/op"); k.queue != queue(t, admin, "/op")[0] || k.lease == 0 {
				t.Errorf("leader key %+v, queue %q", k, queue(t, admin, "/op"))
			}
			// a campaigns again and leads after b.
			ra := campaignAsync(ctx, a)
			waitQueue(t, admin, "/op", 2)
			if err := b.Resign(ctx); err != nil {
				t.Fatal(err)
			}
			if r := await(t, ra); r.err != nil || r.t.Token() <= ta.Token() {
				t.Fatalf("a campaigning again = %v, %v", r.t, r.err)
			}
		})
	}
}

// A waiter whose own key another client deletes learns it at once: its
// Campaign returns ErrSessionLost, and its lease goes.
func TestOperatorDeletesWaitersKey(t *testing.T) {
	eps := startEtcd(t)
	admin := newClient(t, eps)
	a := newElector(t, newClient(t, eps), "/opw", "a")
	b := newElector(t, newClient(t, eps), "/opw", "b", election.WithTTL(10*time.Second))
	ctx := ctxT(t)
	ta, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rb := campaignAsync(ctx, b)
	ks := waitQueue(t, admin, "/opw", 2)
	resp, err := admin.Get(ctx, ks[1])
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatal(resp, err)
	}
	bLease := clientv3.LeaseID(resp.Kvs[0].Lease)
	if _, err := admin.Delete(ctx, ks[1]); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-rb:
		if r.t != nil || !errors.Is(r.err, election.ErrSessionLost) {
			t.Fatalf("b's Campaign = %v, %v; want ErrSessionLost", r.t, r.err)
		}
	case <-time.After(time.Second): // well inside b's 10 s lease window
		t.Fatal("b's Campaign did not learn that its key was deleted")
	}
	if ta.Err() != nil {
		t.Errorf("a's Term ended: %v", ta.Err())
	}
	deadline := time.Now().Add(patience)
	for {
		ttl, err := admin.TimeToLive(ctx, bLease)
		if err != nil {
			t.Fatal(err)
		}
		if ttl.TTL == -1 {
			break // revoked
		}
		if time.Now().After(deadline) {
			t.Fatalf("b's lease still there: TTL %d", ttl.TTL)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A leader's key put again without a lease by another client, and the
// leader then dying without resigning: the election does not stick on a
// key that can never expire, and Leader agrees with who holds a Term.
func TestOperatorUnleasedKeyThenLeaderDies(t *testing.T) {
	eps := startEtcd(t)
	admin := newClient(t, eps)
	ca := newClient(t, eps)
	a := newElector(t, ca, "/opu", "a")
	b := newElector(t, newClient(t, eps), "/opu", "b")
	ctx := ctxT(t)
	ta, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rb := campaignAsync(ctx, b)
	waitQueue(t, admin, "/opu", 2)
	k := leaderOf(t, admin, "/opu")
	// a dies first (its client gone, nothing resigns), then the operator
	// re-puts its leader key without a lease before the lease expires.
	ca.Close()
	if _, err := admin.Put(ctx, k.leader, "operator"); err != nil {
		t.Fatal(err)
	}
	r := await(t, rb)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if ta.Err() == nil {
		t.Errorf("a's Term valid while b leads")
	}
	if l, err := b.Leader(ctx); err != nil || l.ID != "b" {
		t.Errorf("Leader() = %v, %v; want b", l, err)
	}
}
