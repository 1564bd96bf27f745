package etcdsuite_test

import (
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electkit/election"
)

// A renewal sent while the candidate still waited, whose answer says the
// lease is gone after the candidate has begun to lead, ends the new Term
// at once with ErrSessionLost: the Term must not live on until its
// deadline on a lease etcd no longer has.
func TestLeaseLostAsTermBegins(t *testing.T) {
	eps := startEtcd(t)
	admin := newClient(t, eps)
	ctx := ctxT(t)
	a := newElector(t, newClient(t, eps), "/lostbegin", "a")
	renewal := newHold(methodKeepAlive, 1, false)
	// TTL 6 s: the waiter's first renewal is held about 1.9 s after its
	// grant and times out 1.9 s later; the test is done long before.
	b := newElector(t, heldClient(t, eps, renewal), "/lostbegin", "b", election.WithTTL(6*time.Second))
	if _, err := a.Campaign(ctx); err != nil {
		t.Fatal(err)
	}
	rb := campaignAsync(ctx, b)
	ks := waitQueue(t, admin, "/lostbegin", 2)
	renewal.awaitHeld(t) // b's keepalive loop is in the middle of a renewal
	if err := a.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	r := await(t, rb)
	if r.err != nil {
		t.Fatal(r.err)
	}
	resp, err := admin.Get(ctx, ks[1])
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("b's key: %v, %v", resp, err)
	}
	if _, err := admin.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	close(renewal.release) // the renewal goes out and finds the lease gone
	select {
	case <-r.t.Done():
	case <-time.After(patience):
		t.Fatal("b's Term never ended")
	}
	if !errors.Is(r.t.Err(), election.ErrSessionLost) {
		t.Fatalf("b's Term ended with %v, want ErrSessionLost (the renewal found the lease gone)", r.t.Err())
	}
}

// A Campaign whose key is created while Close runs revokes that key's
// lease: Close has stopped the Elector's background context, and the
// revoke must not depend on it.
func TestCampaignRacingCloseLeavesNoKey(t *testing.T) {
	eps := startEtcd(t)
	admin := newClient(t, eps)
	ctx := ctxT(t)
	create := newHold(methodTxn, 1, true) // the create is served; its reply waits
	// A long TTL: a key left behind would outlive the test.
	b := newElector(t, heldClient(t, eps, create), "/closerace", "b", election.WithTTL(time.Minute))
	rb := campaignAsync(ctx, b)
	create.awaitHeld(t)
	if ks := queue(t, admin, "/closerace"); len(ks) != 1 {
		t.Fatalf("want the created key, have %q", ks)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	close(create.release)
	if r := await(t, rb); !errors.Is(r.err, election.ErrClosed) {
		t.Fatalf("Campaign = %v, %v; want ErrClosed", r.t, r.err)
	}
	if ks := keys(t, admin, "/closerace/"); len(ks) != 0 {
		t.Fatalf("keys left behind by a Campaign that lost the race with Close: %q", ks)
	}
}

// Resign hands over with a single delete of the key; the emptied lease,
// which nothing renews, is revoked later, off the handover's path: here by
// Close (a new Campaign or Resign would too).
func TestResignDeletesKeyThenCloseRevokesLease(t *testing.T) {
	eps := startEtcd(t)
	admin := newClient(t, eps)
	ctx := ctxT(t)
	a := newElector(t, newClient(t, eps), "/release", "a", election.WithTTL(time.Minute))
	if _, err := a.Campaign(ctx); err != nil {
		t.Fatal(err)
	}
	resp, err := admin.Get(ctx, "/release/", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 2 { // the queue key and the leader key, under one lease
		t.Fatalf("keys: %v, %v", resp, err)
	}
	lease := clientv3.LeaseID(resp.Kvs[0].Lease)
	ttl := func() int64 {
		r, err := admin.TimeToLive(ctx, lease)
		if err != nil {
			t.Fatal(err)
		}
		return r.TTL
	}
	if err := a.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if ks := keys(t, admin, "/release/"); len(ks) != 0 {
		t.Fatalf("keys after Resign: %q", ks)
	}
	if got := ttl(); got <= 0 {
		t.Fatalf("the lease was revoked by Resign (TTL %d), on the next candidate's path", got)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if got := ttl(); got != -1 {
		t.Fatalf("lease TTL after Close = %d, want -1 (revoked)", got)
	}
}

// An Elector that leads again and again keeps no trace of its ended Terms.
func TestEndedTermsAreForgotten(t *testing.T) {
	cli := newClient(t, startEtcd(t))
	ctx := ctxT(t)
	a := newElector(t, cli, "/forget", "a", election.WithAfterRenew(func(election.Renewal) {}))
	for range 5 {
		if _, err := a.Campaign(ctx); err != nil {
			t.Fatal(err)
		}
		if err := a.Resign(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(patience); probeClocks(a) != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d ended Terms are still kept after 5 Campaign/Resign rounds", probeClocks(a))
		}
	}
}
