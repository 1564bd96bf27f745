package etcd_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/etcd"
)

// Two well-formed, leased keys written by one transaction share a create
// revision, hence a token: neither leads (Leader names them, Observe shows
// no leader, whatever the order it holds them in), and a candidate behind
// them leads once they are gone.
func TestKeysSharingACreateRevisionNeverLead(t *testing.T) {
	eps := startEtcd(t)
	admin := newClient(t, eps)
	ctx := ctxT(t)
	var ops []clientv3.Op
	var leases []clientv3.LeaseID
	for i := range 2 {
		g, err := admin.Grant(ctx, 60)
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, g.ID)
		ops = append(ops, clientv3.OpPut(fmt.Sprintf("/twins/%016x", int64(g.ID)),
			fmt.Sprintf(`{"v":1,"id":"twin%d","priority":0}`, i), clientv3.WithLease(g.ID)))
	}
	if _, err := admin.Txn(ctx).Then(ops...).Commit(); err != nil {
		t.Fatal(err)
	}
	obs := newElector(t, newClient(t, eps), "/twins", "obs")
	_, err := obs.Leader(ctx)
	var mk *etcd.MalformedKeyError
	if !errors.As(err, &mk) || !errors.Is(err, election.ErrNoLeader) || !strings.Contains(err.Error(), "shares its create revision") {
		t.Fatalf("Leader() = %v, want a MalformedKeyError about the shared create revision", err)
	}
	changes := obs.Observe(ctx)
	if l := <-changes; !l.IsZero() {
		t.Fatalf("Observe's first value = %v, want no leader", l)
	}
	a := newElector(t, newClient(t, eps), "/twins", "a")
	ra := campaignAsync(ctx, a)
	waitKeys(t, admin, "/twins/", 3)
	for _, id := range leases {
		if _, err := admin.Revoke(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if r := await(t, ra); r.err != nil {
		t.Fatal(r.err)
	}
	for l := range changes {
		if l.ID == "a" {
			break
		}
		if !l.IsZero() {
			t.Fatalf("Observe reported %v", l)
		}
	}
}
