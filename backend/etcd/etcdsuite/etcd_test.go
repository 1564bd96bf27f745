package etcdsuite_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
	"github.com/electkit/election/backend/etcd"
)

const patience = 10 * time.Second

func newClient(t testing.TB, eps []string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func newElector(t *testing.T, cli *clientv3.Client, name, id string, opts ...election.Option) *etcd.Elector {
	t.Helper()
	e, err := etcd.New(cli, name, append([]election.Option{election.WithID(id), election.WithTTL(2 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	t.Cleanup(cancel)
	return ctx
}

type result struct {
	t   *election.Term
	err error
	at  time.Time
}

func campaignAsync(ctx context.Context, e *etcd.Elector) <-chan result {
	ch := make(chan result, 1)
	go func() {
		t, err := e.Campaign(ctx)
		ch <- result{t, err, time.Now()}
	}()
	return ch
}

func await(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(patience):
		t.Fatal("Campaign did not return")
	}
	return result{}
}

// keys returns the keys under prefix, oldest first, but for hand-over
// marks (a key of the queue ending in /h, beside the queue key of the
// candidate a hand-over made leader).
func keys(t *testing.T, cli *clientv3.Client, prefix string) []string {
	t.Helper()
	resp, err := cli.Get(ctxT(t), prefix, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, kv := range resp.Kvs {
		if isMark(string(kv.Key)) {
			continue
		}
		out = append(out, string(kv.Key))
	}
	return out
}

// isMark reports whether key is a hand-over mark.
func isMark(key string) bool { return strings.Contains(key, "/_c/") && strings.HasSuffix(key, "/h") }

// queue returns the queue keys of the election name, oldest first.
func queue(t *testing.T, cli *clientv3.Client, name string) []string {
	return keys(t, cli, name+"/_c/")
}

// queueOrder returns the IDs of the election's queued candidates, in the
// queue's order (the head first: the largest key).
func queueOrder(t *testing.T, cli *clientv3.Client, name string) []string {
	t.Helper()
	resp, err := cli.Get(ctxT(t), name+"/_c/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, kv := range resp.Kvs {
		if isMark(string(kv.Key)) {
			continue
		}
		var rec struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(kv.Value, &rec); err != nil {
			t.Fatalf("queue key %s: %v", kv.Key, err)
		}
		ids = append(ids, rec.ID)
	}
	return ids
}

// waitQueue waits until the election name has n candidates queued.
func waitQueue(t *testing.T, cli *clientv3.Client, name string, n int) []string {
	t.Helper()
	return waitKeys(t, cli, name+"/_c/", n)
}

// waitKeys waits until prefix holds n keys.
func waitKeys(t *testing.T, cli *clientv3.Client, prefix string, n int) []string {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		ks := keys(t, cli, prefix)
		if len(ks) == n {
			return ks
		}
		if time.Now().After(deadline) {
			t.Fatalf("want %d keys under %s, have %q", n, prefix, ks)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestNewRefusesBadInput(t *testing.T) {
	cli := newClient(t, startEtcd(t))
	for _, tc := range []struct {
		cli  *clientv3.Client
		name string
		opts []election.Option
		want string
	}{
		{nil, "/e", nil, "client = nil"},
		{cli, "", nil, `name = ""`},
		{cli, "/", nil, `name = "/"`},
		{cli, "/e\x00x", nil, `has "\x00" at byte 2`},
		{cli, "/" + strings.Repeat("x", backend.MaxNameLen), nil, "more than MaxNameLen (256)"},
		{cli, "/svc/_c", nil, `segment "_c" begins with "_"`},
		{cli, "svc/demo", nil, `must be an absolute path such as "/svc/demo"`},
		{cli, "/svc/", nil, `must not end with "/"`},
		{cli, "/a//b", nil, `empty segment`},
		{cli, "/a b", nil, `has " " at byte 2`},
		{cli, "/e", []election.Option{election.WithTTL(time.Millisecond)}, "TTL = 1ms"},
		{cli, "/e", []election.Option{election.WithID("bad id")}, `"bad id"`},
	} {
		_, err := etcd.New(tc.cli, tc.name, tc.opts...)
		if !errors.Is(err, election.ErrInvalidOption) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%q, %d opts) = %v, want ErrInvalidOption naming %q", tc.name, len(tc.opts), err, tc.want)
		}
	}
}

// The candidate's queue key names its priority, arrival, lease and nonce,
// under that lease; the leader key, under the same lease, names the queue
// key, and its create revision is the token.
func TestKeyLayoutAndToken(t *testing.T) {
	cli := newClient(t, startEtcd(t))
	e := newElector(t, cli, "/layout", "a", election.WithValue([]byte("addr:1")), election.WithPriority(7))
	if e.Name() != "/layout" {
		t.Fatalf("Name() = %q", e.Name())
	}
	term, err := e.Campaign(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	lpattern := regexp.MustCompile(`^/layout/_l/[0-9a-f]{16}-[0-9a-f]{16}-[0-9a-f]{8}$`)
	if k, err := e.FenceKey(term); !lpattern.MatchString(k) || err != nil {
		t.Fatalf("FenceKey = %q, %v; want %s", k, err, lpattern)
	}
	resp, err := cli.Get(ctxT(t), "/layout/", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 2 {
		t.Fatalf("keys: %v %v", resp, err)
	}
	q, l := resp.Kvs[0], resp.Kvs[1]
	pattern := regexp.MustCompile(fmt.Sprintf(`^/layout/_c/8000000000000007[0-9a-f]{16}-%016x-[0-9a-f]{8}$`, q.Lease))
	if !pattern.MatchString(string(q.Key)) || q.Lease == 0 {
		t.Errorf("queue key %q lease %x, want %s", q.Key, q.Lease, pattern)
	}
	if !lpattern.MatchString(string(l.Key)) || !strings.HasSuffix(string(l.Key), string(q.Key)[len(q.Key)-26:]) || l.Lease != q.Lease || !strings.Contains(string(l.Value), `"key":"`+string(q.Key)+`"`) {
		t.Errorf("leader key %q lease %x value %s", l.Key, l.Lease, l.Value)
	}
	// The first candidate of an empty election leads from its create:
	// both keys at one revision.
	if term.Token() != uint64(l.CreateRevision) || l.CreateRevision != q.CreateRevision {
		t.Errorf("token %d, leader key's create revision %d, queue key's %d", term.Token(), l.CreateRevision, q.CreateRevision)
	}
	ld := term.Leader()
	if ld.ID != "a" || string(ld.Value) != "addr:1" || ld.Priority != 7 {
		t.Errorf("leader %+v", ld)
	}
	got, err := e.Leader(ctxT(t))
	if err != nil || !got.Equal(ld) {
		t.Errorf("Leader() = %v, %v; want %v", got, err, ld)
	}
}

// A waiter whose lease expires while it waits (etcd-io/etcd#19597) gets
// ErrSessionLost, never a Term, and leaves no key.
func TestWaiterLeaseLostWhileWaiting(t *testing.T) {
	eps := startEtcd(t)
	admin := newClient(t, eps)
	a := newElector(t, newClient(t, eps), "/lost", "a")
	b := newElector(t, newClient(t, eps), "/lost", "b")
	ctx := ctxT(t)
	if _, err := a.Campaign(ctx); err != nil {
		t.Fatal(err)
	}
	rb := campaignAsync(ctx, b)
	ks := waitQueue(t, admin, "/lost", 2)
	resp, err := admin.Get(ctx, ks[1])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	if err := a.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	r := await(t, rb)
	if r.t != nil || !errors.Is(r.err, election.ErrSessionLost) {
		t.Fatalf("b's Campaign = %v, %v; want ErrSessionLost", r.t, r.err)
	}
	if ks := keys(t, admin, "/lost/"); len(ks) != 0 {
		t.Errorf("keys left: %q", ks)
	}
	// A new Campaign uses a new lease and leads.
	term, err := b.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if term.Token() <= uint64(resp.Kvs[0].CreateRevision) {
		t.Errorf("new token %d not above the lost key's %d", term.Token(), resp.Kvs[0].CreateRevision)
	}
}

// A Campaign that ends with its context removes its key (etcd-io/etcd#21128).
func TestCampaignCanceledRemovesKey(t *testing.T) {
	eps := startEtcd(t)
	admin := newClient(t, eps)
	a := newElector(t, newClient(t, eps), "/cancel", "a")
	b := newElector(t, newClient(t, eps), "/cancel", "b")
	if _, err := a.Campaign(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	bctx, cancel := context.WithCancel(context.Background())
	rb := campaignAsync(bctx, b)
	waitQueue(t, admin, "/cancel", 2)
	cancel()
	if r := await(t, rb); !errors.Is(r.err, context.Canceled) {
		t.Fatalf("Campaign = %v, want context.Canceled", r.err)
	}
	waitQueue(t, admin, "/cancel", 1)
}

// A Resign whose revoke fails keeps the lease and revokes it on the next
// Resign (etcd-io/etcd#22123); the Term ends before any I/O either way.
func TestResignRetriesFailedRevoke(t *testing.T) {
	eps := startEtcd(t)
	admin := newClient(t, eps)
	a := newElector(t, newClient(t, eps), "/resign", "a")
	term, err := a.Campaign(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	dead, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.Resign(dead); !errors.Is(err, context.Canceled) {
		t.Fatalf("Resign(canceled ctx) = %v, want context.Canceled", err)
	}
	if !errors.Is(term.Err(), election.ErrResigned) {
		t.Fatalf("term.Err() = %v, want ErrResigned", term.Err())
	}
	if ks := keys(t, admin, "/resign/"); len(ks) != 2 {
		t.Fatalf("the keys should still be there, have %q", ks)
	}
	if err := a.Resign(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if ks := keys(t, admin, "/resign/"); len(ks) != 0 {
		t.Fatalf("keys left after the second Resign: %q", ks)
	}
	if err := a.Resign(ctxT(t)); err != nil {
		t.Fatalf("a third Resign = %v, want nil", err)
	}
}

// A queue key without a lease never blocks; a leased malformed leader key
// holds the leadership, yields no leader and a named error, and the
// election goes on once its lease is gone.
func TestGarbageKeysFailClosed(t *testing.T) {
	eps := startEtcd(t)
	admin := newClient(t, eps)
	ctx := ctxT(t)
	// Above every candidate: it would head the queue for good.
	if _, err := admin.Put(ctx, "/garbage/_c/ffffffffffffffffffffffffffffffff-0000000000000001-00000001", "x"); err != nil {
		t.Fatal(err)
	}
	g, err := admin.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	garbage := fmt.Sprintf("/garbage/_l/0000000000000001-%016x-00000001", g.ID)
	if _, err := admin.Put(ctx, garbage, "not json", clientv3.WithLease(g.ID)); err != nil {
		t.Fatal(err)
	}
	a := newElector(t, newClient(t, eps), "/garbage", "a")
	obs := newElector(t, newClient(t, eps), "/garbage", "obs")
	changes := obs.Observe(ctx)
	if l := <-changes; !l.IsZero() {
		t.Fatalf("Observe's first value = %v, want no leader", l)
	}
	ra := campaignAsync(ctx, a)
	waitQueue(t, admin, "/garbage", 2)
	_, err = a.Leader(ctx)
	var mk *etcd.MalformedKeyError
	if !errors.As(err, &mk) || mk.Key != garbage || !errors.Is(err, etcd.ErrMalformedKey) || !errors.Is(err, election.ErrNoLeader) {
		t.Fatalf("Leader() = %v, want a MalformedKeyError naming %s", err, garbage)
	}
	if !strings.Contains(err.Error(), "value: not a candidate record") {
		t.Errorf("error does not say what is wrong: %v", err)
	}
	select {
	case r := <-ra:
		t.Fatalf("Campaign returned while a leased malformed leader key is there: %v %v", r.t, r.err)
	case <-time.After(100 * time.Millisecond):
	}
	revoked := time.Now()
	if _, err := admin.Revoke(ctx, g.ID); err != nil {
		t.Fatal(err)
	}
	r := await(t, ra)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.at.Before(revoked) {
		t.Fatal("Campaign returned before the malformed key was gone")
	}
	for l := range changes {
		if l.ID == "a" {
			break
		}
		if !l.IsZero() {
			t.Fatalf("Observe reported %v", l)
		}
	}
	if l, err := obs.Leader(ctx); err != nil || l.ID != "a" {
		t.Fatalf("Leader() = %v, %v; want a", l, err)
	}
}

// A handover wakes only the next leader (P9), which sends nothing to
// lead: with ten waiters sharing one client, queueing costs no read
// beyond the creates' own (but a look if a create came as the leader's
// was applied); the leader's release hands over to its successor, the
// candidate just below it, which leads on the release's event; and no
// waiter reads or writes the queue at a handover (the new leader's read
// of its own successor, and its check of a key handed over to it, come
// once it leads, and are not a waiter's).
func TestHandoverWakesOnlyTheNext(t *testing.T) {
	eps := startEtcd(t)
	admin := newClient(t, eps)
	shared := newClient(t, eps)
	ctx := ctxT(t)
	const n = 10
	es := make([]*etcd.Elector, n)
	for i := range es {
		es[i] = newElector(t, shared, "/herd", fmt.Sprintf("c%d", i))
	}
	first, err := es[0].Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	results := make([]<-chan result, n)
	for i := 1; i < n; i++ {
		results[i] = campaignAsync(ctx, es[i])
		waitQueue(t, admin, "/herd", i+1) // queue in index order
	}
	settle(t, es[1:])
	reads := func() int64 { return probeReads(es...) }
	if got := reads(); got > 1 { // the first candidate's create made it leader
		t.Fatalf("candidates issued %d reads while queueing, want at most 1 (a look if one queued as the leader's create was applied)", got)
	}
	prev := first
	for i := 1; i < n; i++ {
		awaitNextNoted(t, es[i-1])
		before, own := reads(), probeReads(es[i])
		prev = resignTo(ctx, t, es[i-1], results[i], prev)
		if got := probeReads(es[i]) - own; got != 0 {
			t.Errorf("handover to c%d: it sent %d queue requests after the release, want 0 (its predecessor's release handed over to it)", i, got)
		}
		settle(t, es[i:])
		if got := reads() - before; got != 0 {
			t.Errorf("handover to c%d cost %d queue requests of the waiters, want 0", i, got)
		}
	}
	if err := es[n-1].Resign(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestHandoverReachesTheNextAlone: a release that hands over to its
// successor sends events to the successor's watch alone — the going of
// the leader's queue key and the coming of the successor's hand-over mark
// — and none to the candidate behind the successor, whose watch ends just
// past the successor's queue key (P9: one waiter woken per handover). Each
// candidate has a client of its own, whose watch stream logs what it
// delivers to each watch; a candidate's wait is its watch from its own
// queue key up (its guard's, once it leads, runs from the queue's
// beginning).
func TestHandoverReachesTheNextAlone(t *testing.T) {
	eps := startEtcd(t)
	admin := newClient(t, eps)
	ctx := ctxT(t)
	const n, name = 5, "/alone"
	es := make([]*etcd.Elector, n)
	logs := make([]*watchLog, n)
	for i := range es {
		logs[i] = &watchLog{}
		es[i] = newElector(t, watchedClient(t, eps, logs[i]), name, fmt.Sprintf("c%d", i))
	}
	first, err := es[0].Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	results := make([]<-chan result, n)
	for i := 1; i < n; i++ {
		results[i] = campaignAsync(ctx, es[i])
		waitQueue(t, admin, name, i+1) // queue in index order
	}
	qkeys := waitQueue(t, admin, name, n)
	settle(t, es[1:])
	prev := first
	for i := 1; i < n; i++ {
		awaitNextNoted(t, es[i-1])
		prev = resignTo(ctx, t, es[i-1], results[i], prev)
		if i < n-1 {
			awaitNextNoted(t, es[i]) // its guard's watch is created: its wait's was canceled before
		}
	}
	// c2… waited behind a waiter, watching up to just past its key: each
	// heard of its own handover only.
	for j := 2; j < n; j++ {
		got := logs[j].eventsOf(qkeys[j])
		if want := []string{qkeys[j-1], qkeys[j] + "/h"}; !slices.Equal(got, want) {
			t.Errorf("c%d's wait was delivered events of %q, want %q (the going of c%d's key and its own hand-over mark, once)", j, got, want, j-1)
		}
	}
	if err := es[n-1].Resign(ctx); err != nil {
		t.Fatal(err)
	}
}

// resignTo resigns from, the leader at prev, and returns the Term the
// Campaign whose result comes on to returns: its token above prev's.
func resignTo(ctx context.Context, t *testing.T, from *etcd.Elector, to <-chan result, prev *election.Term) *election.Term {
	t.Helper()
	if err := from.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	r := await(t, to)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.t.Token() <= prev.Token() {
		t.Fatalf("token %d after %d", r.t.Token(), prev.Token())
	}
	return r.t
}

// A leader a Transfer made, with a candidate of its priority queued above
// it, hands over to no one when it resigns: the head of the queue leads
// next, as it would have without the Transfer, and then the one behind
// the Transfer's target, by a hand-over. b, below w, leads by a Transfer,
// and c waits behind b. b's release compares the whole queue above it,
// finds w, and hands over to no one: w claims. c, woken by b's going,
// reads once and waits behind w, whose release hands over to it.
func TestTransferTargetsReleaseRestoresTheOrder(t *testing.T) {
	eps := startEtcd(t)
	admin := newClient(t, eps)
	ctx := ctxT(t)
	const name = "/behind"
	a := newElector(t, newClient(t, eps), name, "a")
	ta, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w, b, c := newElector(t, newClient(t, eps), name, "w"), newElector(t, newClient(t, eps), name, "b"), newElector(t, newClient(t, eps), name, "c")
	rs := map[string]<-chan result{}
	for i, e := range []*etcd.Elector{w, b, c} {
		rs[e.ID()] = campaignAsync(ctx, e)
		waitQueue(t, admin, name, i+2)
	}
	settle(t, []*etcd.Elector{w, b, c})
	if err := election.Transfer(ctx, a, ta, "b", election.KeepLeading); err != nil {
		t.Fatalf("Transfer: %v", err)
	}
	rb := await(t, rs["b"])
	if rb.err != nil {
		t.Fatal(rb.err)
	}
	if got, want := queueOrder(t, admin, name), []string{"w", "b", "c"}; !slices.Equal(got, want) {
		t.Fatalf("queue order %v, want %v", got, want)
	}
	awaitSettled(t, c, "c")
	awaitSettled(t, w, "w")
	awaitNextNoted(t, b) // b knows c is next below it
	before := probeReads(c)
	tw := resignTo(ctx, t, b, rs["w"], rb.t)
	awaitSettled(t, c, "c")
	select {
	case r := <-rs["c"]:
		t.Fatalf("c led after b, ahead of w: %v, %v", r.t, r.err)
	default:
	}
	if got := probeReads(c) - before; got > 1 {
		t.Errorf("c made %d queue requests at b's going, want at most 1 (a read that finds w ahead)", got)
	}
	awaitNextNoted(t, w)
	mid := probeReads(c)
	resignTo(ctx, t, w, rs["c"], tw)
	if got := probeReads(c) - mid; got != 0 {
		t.Errorf("c made %d queue requests from w's resign to its lead, want 0 (w's release handed over to it)", got)
	}
}

// A key of the leader's priority above the leader's, written through the
// store's API (the creates of this package refuse such a key while a
// leader is there: its arrival would be older than the leader's), is not
// a candidate to a release: the leader hands over to the one next in
// line, whose Campaign returns without the foreign key going. The key
// stays, and no hand-over touches it.
func TestReleasePassesOverAForeignKeyOfItsPriority(t *testing.T) {
	eps := startEtcd(t)
	admin := newClient(t, eps)
	ctx := ctxT(t)
	a := newElector(t, newClient(t, eps), "/foreign", "a")
	ta, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	aKey := waitQueue(t, admin, "/foreign", 1)[0]
	// a's priority and arrival, a lease that sorts above a's.
	lease, err := admin.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.LastIndex(aKey, "/") + 1 + 32
	otherKey := aKey[:i] + fmt.Sprintf("-%016x-%08x", uint64(0x7fffffffffffff00), 1)
	if _, err := admin.Put(ctx, otherKey, `{"v":1,"id":"other","priority":0}`, clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	c := newElector(t, newClient(t, eps), "/foreign", "c")
	rc := campaignAsync(ctx, c)
	waitQueue(t, admin, "/foreign", 3)
	awaitSettled(t, c, "c")
	awaitNextNoted(t, a)
	resignTo(ctx, t, a, rc, ta)
	if l, err := c.Leader(ctx); err != nil || l.ID != "c" {
		t.Fatalf("Leader() = %v, %v; want c", l, err)
	}
	resp, err := admin.Get(ctx, otherKey)
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].Version != 1 {
		t.Fatalf("the foreign key after the hand-over: %v, %v", resp, err)
	}
}

// TestWaiterSleepsThroughArrivalsAhead: a candidate queued between a
// waiter and the key ahead of it (one that read the same arrival, or of
// higher priority) does not wake the waiter into a read; its watch
// narrows to the new key ahead, so the going of the old one is not even
// delivered to it (at a handover, only the next candidate hears of it).
// It wakes when the key just ahead has gone, and then leads with one
// request (its claim). In a queue filling up, the key just ahead of a
// waiter changes often.
func TestWaiterSleepsThroughArrivalsAhead(t *testing.T) {
	eps := startEtcd(t)
	admin := newClient(t, eps)
	ctx := ctxT(t)
	a := newElector(t, newClient(t, eps), "/arrivals", "a")
	if _, err := a.Campaign(ctx); err != nil {
		t.Fatal(err)
	}
	b := newElector(t, newClient(t, eps), "/arrivals", "b")
	campaignAsync(ctx, b)
	bKey := waitQueue(t, admin, "/arrivals", 2)[1]
	awaitSettled(t, b, "b")
	var wl watchLog
	c := newElector(t, watchedClient(t, eps, &wl), "/arrivals", "c")
	rc := campaignAsync(ctx, c)
	cKey := waitQueue(t, admin, "/arrivals", 3)[2]
	awaitSettled(t, c, "c")
	before := probeReads(c)
	watches, _ := wl.state()

	// Another process's key with c's arrival and a lease that sorts above
	// c's: between c and b.
	i := strings.LastIndex(cKey, "/") + 1 + 32
	var cLease uint64
	if _, err := fmt.Sscanf(cKey[i+1:i+17], "%x", &cLease); err != nil || cLease >= math.MaxInt64 {
		t.Fatalf("c's key %s: lease %x, %v", cKey, cLease, err)
	}
	xLease := int64(cLease + 1)
	if _, err := pb.NewLeaseClient(admin.ActiveConnection()).LeaseGrant(ctx, &pb.LeaseGrantRequest{ID: xLease, TTL: 60}); err != nil {
		t.Fatal(err)
	}
	xKey := cKey[:i] + fmt.Sprintf("-%016x-%08x", xLease, 1)
	if _, err := admin.Put(ctx, xKey, `{"v":1,"id":"x","priority":0}`, clientv3.WithLease(clientv3.LeaseID(xLease))); err != nil {
		t.Fatal(err)
	}
	if got, want := queueOrder(t, admin, "/arrivals"), []string{"a", "b", "x", "c"}; !slices.Equal(got, want) {
		t.Fatalf("queue order %v, want %v", got, want)
	}
	for deadline := time.Now().Add(patience); ; time.Sleep(5 * time.Millisecond) {
		if n, _ := wl.state(); n > watches {
			break // c watches up to x now
		}
		if time.Now().After(deadline) {
			t.Fatal("c's watch never narrowed to x, the new key ahead of it")
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	waitQueue(t, admin, "/arrivals", 2)
	if _, err := admin.Revoke(ctx, clientv3.LeaseID(xLease)); err != nil {
		t.Fatal(err)
	}
	if r := await(t, rc); r.err != nil {
		t.Fatal(r.err)
	}
	if got := probeReads(c) - before; got != 1 {
		t.Errorf("c made %d queue requests from x's arrival to its lead, want 1 (its claim)", got)
	}
	if _, keys := wl.state(); slices.Contains(keys, bKey) {
		t.Errorf("b's going was delivered to c, which x stood before: events for %q", keys)
	}
}

// TestCreateCarriesNoClaimBehindALeader: the first candidate of an empty
// election leads from its create, which carries a claim of the leader key
// (every window above its key, some 4 KB); a candidate that arrives while
// a leader key exists creates its queue key without one, and claims once
// the leader goes. In a queue filling up behind a leader, every write
// would otherwise carry the claim into etcd's log.
func TestCreateCarriesNoClaimBehindALeader(t *testing.T) {
	eps := startEtcd(t)
	admin := newClient(t, eps)
	ctx := ctxT(t)
	claims := func(r *pb.TxnRequest) bool {
		for _, op := range r.Success {
			if op.GetRequestTxn() != nil {
				return true
			}
		}
		return false
	}
	var la, lb txnLog
	a := newElector(t, loggedClient(t, eps, &la), "/noclaim", "a")
	if _, err := a.Campaign(ctx); err != nil {
		t.Fatal(err)
	}
	if reqs := la.all(); len(reqs) != 1 || !claims(reqs[0]) {
		t.Fatalf("a, alone, made %d Txn requests to lead (claim in the first: %v), want 1 that claims", len(reqs), len(reqs) > 0 && claims(reqs[0]))
	}
	b := newElector(t, loggedClient(t, eps, &lb), "/noclaim", "b")
	rb := campaignAsync(ctx, b)
	waitQueue(t, admin, "/noclaim", 2)
	create := lb.all()[0]
	if claims(create) {
		t.Errorf("b's create carries a claim while a leads: %v", create)
	}
	if err := a.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	r := await(t, rb)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if l, err := b.Leader(ctx); err != nil || l.ID != "b" || l.Token != r.t.Token() {
		t.Fatalf("after a resigned: leader %+v, %v; want b at token %d", l, err, r.t.Token())
	}
}

// Fence fences a transaction to the Term; Proclaim updates the leader's
// Value for observers; both, and FenceKey, refuse once the Term is over.
func TestFenceAndProclaim(t *testing.T) {
	eps := startEtcd(t)
	admin := newClient(t, eps)
	ctx := ctxT(t)
	a := newElector(t, newClient(t, eps), "/fence", "a", election.WithValue([]byte("v1")))
	obs := newElector(t, newClient(t, eps), "/fence", "obs")
	term, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cmp, err := a.Fence(term)
	if err != nil {
		t.Fatal(err)
	}
	put := func() bool {
		resp, err := admin.Txn(ctx).If(cmp).Then(clientv3.OpPut("/data/x", "1")).Commit()
		if err != nil {
			t.Fatal(err)
		}
		return resp.Succeeded
	}
	if !put() {
		t.Fatal("fenced write refused while leading")
	}
	changes := obs.Observe(ctx)
	if err := a.Proclaim(ctx, term, []byte("v2")); err != nil {
		t.Fatal(err)
	}
	for l := range changes {
		if string(l.Value) == "v2" {
			if l.Token != term.Token() {
				t.Fatalf("Proclaim changed the token: %v", l)
			}
			break
		}
	}
	if err := a.Proclaim(ctx, term, make([]byte, election.MaxValueSize+1)); !errors.Is(err, election.ErrInvalidOption) {
		t.Errorf("Proclaim(too big) = %v", err)
	}
	if err := a.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if put() {
		t.Fatal("fenced write accepted after Resign")
	}
	if _, err := a.Fence(term); !errors.Is(err, election.ErrNotLeader) {
		t.Errorf("Fence after Resign = %v", err)
	}
	if _, err := a.FenceKey(term); !errors.Is(err, election.ErrNotLeader) {
		t.Errorf("FenceKey after Resign = %v", err)
	}
	if err := a.Proclaim(ctx, term, []byte("v3")); !errors.Is(err, election.ErrNotLeader) {
		t.Errorf("Proclaim after Resign = %v", err)
	}
	// Someone else's Term is refused too.
	b := newElector(t, newClient(t, eps), "/fence", "b")
	tb, err := b.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Fence(tb); !errors.Is(err, election.ErrNotLeader) {
		t.Errorf("Fence(other's term) = %v", err)
	}
	if _, err := a.FenceKey(tb); !errors.Is(err, election.ErrNotLeader) {
		t.Errorf("FenceKey(other's term) = %v", err)
	}
}

// The queue serves the highest priority first, ties in arrival order, and
// every read of it walks the windows above a key: keys of other
// priorities lie 2^64 ranks and more apart, in the far windows.
func TestPriorityOrdersTheQueue(t *testing.T) {
	eps := startEtcd(t)
	admin := newClient(t, eps)
	cli := newClient(t, eps)
	ctx := ctxT(t)
	prios := []int64{0, 0, 9, -5, 9, math.MinInt64, math.MaxInt64}
	es := make([]*etcd.Elector, len(prios))
	for i, p := range prios {
		es[i] = newElector(t, cli, "/prio", fmt.Sprintf("c%d", i), election.WithPriority(p))
	}
	first, err := es[0].Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	results := make([]<-chan result, len(es))
	for i := 1; i < len(es); i++ {
		results[i] = campaignAsync(ctx, es[i])
		waitQueue(t, admin, "/prio", i+1)
	}
	prev, leader := first, 0
	for _, next := range []int{6, 2, 4, 1, 3, 5} {
		if err := es[leader].Resign(ctx); err != nil {
			t.Fatal(err)
		}
		r := await(t, results[next])
		if r.err != nil {
			t.Fatalf("c%d: %v", next, r.err)
		}
		if r.t.Token() <= prev.Token() {
			t.Fatalf("c%d: token %d after %d", next, r.t.Token(), prev.Token())
		}
		for i, ch := range results {
			if ch == nil || i == next {
				continue
			}
			select {
			case r := <-ch:
				t.Fatalf("c%d's Campaign returned (%v) when c%d (priority %d) should lead", i, r.err, next, prios[next])
			default:
			}
		}
		results[next], prev, leader = nil, r.t, next
	}
}

// Stepping down from inside OnElected with OnElected's own ctx returns
// nil, hands over, and logs nothing: neither the Elector nor the etcd
// client (whose retry interceptor warns about a request whose ctx the
// Term's end canceled, had Resign sent it with that ctx).
func TestStepDownInOnElectedLogsNothing(t *testing.T) {
	eps := startEtcd(t)
	admin := newClient(t, eps)
	core, clientLogs := observer.New(zap.InfoLevel) // the client says "retrying" at Debug for every request
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.New(core)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	var logs lockedBuffer
	a := newElector(t, cli, "/stepdown", "a", election.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	b := newElector(t, newClient(t, eps), "/stepdown", "b")
	queued := make(chan struct{})
	resigned := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- election.Run(ctx, a, election.Callbacks{
			OnElected: func(ctx context.Context, _ *election.Term) {
				select {
				case <-queued:
					resigned <- a.Resign(ctx)
				case <-ctx.Done():
				}
				<-ctx.Done()
			},
		})
	}()
	waitKeys(t, admin, "/stepdown/_l/", 1) // a leads
	rb := campaignAsync(ctxT(t), b)
	waitQueue(t, admin, "/stepdown", 2)
	clientLogs.TakeAll() // what the client said while connecting
	close(queued)
	select {
	case err := <-resigned:
		if err != nil {
			t.Errorf("Resign with OnElected's ctx = %v, want nil", err)
		}
	case <-time.After(patience):
		t.Fatal("Resign with OnElected's ctx did not return")
	}
	if r := await(t, rb); r.err != nil {
		t.Fatalf("b's Campaign: %v", r.err)
	}
	// What the client said from the step-down to the handover. Once Run
	// is canceled below, its next Campaign's requests in flight are
	// canceled, and the client warns about each: that is the shutdown,
	// not the step-down.
	stepping := clientLogs.TakeAll()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
	for _, e := range stepping {
		t.Errorf("the etcd client logged %s %q %v", e.Level, e.Message, e.ContextMap())
	}
	if s := logs.String(); s != "" {
		t.Errorf("the Elector logged:\n%s", s)
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent use.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A nil ctx, client or session is refused with an error naming it, never
// a panic, and changes nothing: the leader's Term stays valid.
func TestNilArguments(t *testing.T) {
	var nilCtx context.Context // a variable: a literal nil ctx is what vet tools flag
	cli := newClient(t, startEtcd(t))
	e := newElector(t, cli, "/nil", "a")
	term, err := e.Campaign(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	_, candErr := e.Candidates(nilCtx)
	_, reqErr := e.RequestTransfer(nilCtx, "b")
	_, newErr := etcd.New(nil, "/x")
	_, sessCtxErr := etcd.NewSession(nilCtx, cli)
	_, sessCliErr := etcd.NewSession(ctxT(t), nil)
	_, onErr := etcd.NewWithSession(nil, "/x")
	for _, c := range []struct {
		what, field string
		err         error
	}{
		{"Candidates(nil)", "ctx", candErr},
		{"Transfer(nil)", "ctx", e.Transfer(nilCtx, term, "", election.KeepLeading)},
		{"RequestTransfer(nil)", "ctx", reqErr},
		{"Proclaim(nil)", "ctx", e.Proclaim(nilCtx, term, []byte("v"))},
		{"New(nil client)", "client", newErr},
		{"NewSession(nil ctx)", "ctx", sessCtxErr},
		{"NewSession(nil client)", "client", sessCliErr},
		{"NewWithSession(nil)", "session", onErr},
	} {
		var oe *election.OptionError
		if !errors.Is(c.err, election.ErrInvalidOption) || !errors.As(c.err, &oe) || oe.Field != c.field || oe.Value != "nil" {
			t.Errorf("%s = %v; want an *election.OptionError for %s = nil", c.what, c.err, c.field)
		}
	}
	if err := term.Err(); err != nil {
		t.Errorf("the Term ended after calls with nil arguments: %v", err)
	}
}

// The release is the last request of a handover: it creates the
// leadership key of the leader's successor, which learns from the
// release's watch event that it leads and sends no request — no read, no
// write — between the release and its Campaign's return. Counted by a
// client interceptor on each candidate's client (unary requests: lease
// renewals and watch creates travel on streams; not the new leader's read
// of its own successor, which it sends once its Term has begun), both
// ways, a few times, each release once the leader has seen its
// successor.
func TestHandoverSuccessorSendsNothing(t *testing.T) {
	eps := startEtcd(t)
	ctx := ctxT(t)
	counts := make([]*requestCount, 2)
	es := make([]*etcd.Elector, 2)
	for i := range es {
		counts[i] = new(requestCount)
		es[i] = newElector(t, dialClient(t, eps, grpc.WithChainUnaryInterceptor(counts[i].unary)), "/floor", fmt.Sprintf("c%d", i))
	}
	leader, err := es[0].Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cur := 0
	for round := range 6 {
		next := 1 - cur
		rn := campaignAsync(ctx, es[next])
		settle(t, es[next:next+1])
		awaitNextNoted(t, es[cur])
		sent := counts[next].plain.Load
		before, kinds := sent(), counts[next].kindCounts()
		if err := es[cur].Resign(ctx); err != nil {
			t.Fatal(err)
		}
		r := await(t, rn)
		if r.err != nil {
			t.Fatal(r.err)
		}
		if got := sent() - before; got != 0 {
			t.Errorf("round %d: c%d sent %d requests between the release and its Campaign's return, want 0: %v", round, next, got, counts[next].kindsSince(kinds))
		}
		if r.t.Token() <= leader.Token() {
			t.Fatalf("round %d: token %d after %d", round, r.t.Token(), leader.Token())
		}
		leader, cur = r.t, next
	}
	if err := es[cur].Resign(ctx); err != nil {
		t.Fatal(err)
	}
}

// handOver resigns leader from its Term ta once it knows its successor,
// and returns the successor's Campaign (rb), which must lead with a
// higher token.
func handOver(t *testing.T, ctx context.Context, leader *etcd.Elector, ta *election.Term, rb <-chan result) result {
	t.Helper()
	awaitNextNoted(t, leader)
	if err := leader.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	r := await(t, rb)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.t.Token() <= ta.Token() {
		t.Fatalf("token %d after %d", r.t.Token(), ta.Token())
	}
	return r
}

// A leader that resigns as soon as its Campaign returns, its read of its
// successor still out, hands over all the same: Resign waits for that
// read, and the successor leads on the release's event with no request
// but the check of the key handed to it. Releasing the leader's keys
// alone, it would have the successor claim.
func TestResignAtOnceHandsOver(t *testing.T) {
	eps := startEtcd(t)
	ctx := ctxT(t)
	admin := newClient(t, eps)
	const name = "/atonce"
	h := &heldSuccReads{held: make(chan struct{}), release: make(chan struct{})}
	a := newElector(t, newClient(t, eps), name, "a", election.WithTTL(10*time.Second))
	b := newElector(t, dialClient(t, eps, grpc.WithChainUnaryInterceptor(h.unary)), name, "b", election.WithTTL(10*time.Second))
	cc := new(requestCount)
	c := newElector(t, dialClient(t, eps, grpc.WithChainUnaryInterceptor(cc.unary)), name, "c", election.WithTTL(10*time.Second))
	ta, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rb := campaignAsync(ctx, b)
	q := waitQueue(t, admin, name, 2)
	rc := campaignAsync(ctx, c)
	var ckey string
	for _, k := range waitQueue(t, admin, name, 3) {
		if !slices.Contains(q, k) {
			ckey = k
		}
	}
	settle(t, []*etcd.Elector{c})
	handOver(t, ctx, a, ta, rb)
	select {
	case <-h.held: // b's read of its successor is out
	case <-ctx.Done():
		t.Fatal("b never read its successor")
	}
	before, kinds := cc.plain.Load(), cc.kindCounts()
	resigned := make(chan error, 1)
	go func() { resigned <- b.Resign(ctx) }()
	close(h.release)
	if err := <-resigned; err != nil {
		t.Fatal(err)
	}
	if r := await(t, rc); r.err != nil {
		t.Fatal(r.err)
	}
	// A hand-over put c's mark (beside its queue key); a claim would not.
	mark, err := admin.Get(ctx, ckey+"/h", clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	if mark.Count != 1 {
		t.Errorf("c leads without a hand-over's mark (it claimed); c sent %v", cc.kindsSince(kinds))
	}
	// c, behind b, did not see b's leadership key go and its own come
	// (its watch ends at b's queue key): it checks the key handed to it
	// (checkHandover), one read.
	if got := cc.plain.Load() - before; got > 1 {
		t.Errorf("c sent %d requests between b's Resign and its Campaign's return, want at most 1 (the check of a hand-over): %v", got, cc.kindsSince(kinds))
	}
}

// rangeCompares returns the range Compares of t and of the transactions
// nested in it.
func rangeCompares(t *pb.TxnRequest) []*pb.Compare {
	var out []*pb.Compare
	for _, c := range t.Compare {
		if len(c.RangeEnd) > 0 {
			out = append(out, c)
		}
	}
	for _, ops := range [][]*pb.RequestOp{t.Success, t.Failure} {
		for _, op := range ops {
			if n := op.GetRequestTxn(); n != nil {
				out = append(out, rangeCompares(n)...)
			}
		}
	}
	return out
}

// A clean handover's release compares none of the keys earlier
// handovers deleted: etcd keeps them in its index until the history is
// compacted, and a range Compare visits each, so a release that ranged
// over them would slow by one key per handover (BENCHMARKS.md,
// 2026-11-30). Three candidates take turns, each re-queueing behind the
// others once it resigns; every release is checked against every key of
// the election deleted before it was sent.
func TestReleaseComparesNoPast(t *testing.T) {
	eps := startEtcd(t)
	admin := newClient(t, eps)
	ctx := ctxT(t)
	const name = "/nopast"
	logs := make([]*txnLog, 3)
	es := make([]*etcd.Elector, 3)
	for i := range es {
		logs[i] = new(txnLog)
		es[i] = newElector(t, loggedClient(t, eps, logs[i]), name, fmt.Sprintf("c%d", i))
	}
	live := func() map[string]bool {
		resp, err := admin.Get(ctx, name+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]bool{}
		for _, kv := range resp.Kvs {
			m[string(kv.Key)] = true
		}
		return m
	}
	seen := map[string]bool{}
	if _, err := es[0].Campaign(ctx); err != nil {
		t.Fatal(err)
	}
	rs := make([]<-chan result, 3)
	for i := 1; i < 3; i++ {
		rs[i] = campaignAsync(ctx, es[i])
		waitQueue(t, admin, name, i+1)
	}
	cur, compared := 0, 0
	for round := range 9 {
		next := (cur + 1) % 3
		settle(t, es)
		awaitNextNoted(t, es[cur])
		now := live()
		var gone []string
		for k := range seen {
			if !now[k] {
				gone = append(gone, k)
			}
		}
		for k := range now {
			seen[k] = true
		}
		sent := len(logs[cur].all())
		if err := es[cur].Resign(ctx); err != nil {
			t.Fatal(err)
		}
		r := await(t, rs[next])
		if r.err != nil {
			t.Fatal(r.err)
		}
		for _, txn := range logs[cur].all()[sent:] {
			for _, c := range rangeCompares(txn) {
				compared++
				for _, k := range gone {
					if string(c.Key) <= k && k < string(c.RangeEnd) {
						t.Errorf("round %d: c%d's release compares [%s, %s), which holds %s, deleted by an earlier handover", round, cur, c.Key, c.RangeEnd, k)
					}
				}
			}
		}
		if round > 0 && len(gone) == 0 {
			t.Fatalf("round %d: no key of an earlier handover is gone", round)
		}
		rs[cur] = campaignAsync(ctx, es[cur])
		waitQueue(t, admin, name, 3)
		cur = next
	}
	if compared == 0 {
		t.Fatal("no release carried a hand-over's Compares")
	}
}

// A hand-over mark whose queue key is gone — another program's key shaped
// like one, under a lease of its own — sorts above every candidate: it
// holds its place as any leased key does (no claim passes it), and the
// waiter at the head waits for it to go, and leads then, woken by its
// deletion alone (it heads the queue, so it watches up to the leadership
// keys, where no event comes).
func TestOrphanMarkHeadsTheQueue(t *testing.T) {
	eps := startEtcd(t)
	admin := newClient(t, eps)
	ctx := ctxT(t)
	const name = "/orphanmark"
	a := newElector(t, newClient(t, eps), name, "a")
	ta, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b := newElector(t, newClient(t, eps), name, "b")
	rb := campaignAsync(ctx, b)
	waitQueue(t, admin, name, 2)
	lease, err := admin.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	orphan := name + "/_c/" + strings.Repeat("f", 32) + fmt.Sprintf("-%016x-%08x", uint64(lease.ID), 7) + "/h"
	if _, err := admin.Put(ctx, orphan, `{"v":1,"id":"ghost","key":"x"}`, clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	awaitSettled(t, b, "b")
	if err := a.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	awaitSettled(t, b, "b") // it waits on the mark now
	select {
	case r := <-rb:
		t.Fatalf("b led past a mark above it: %v, %v", r.t, r.err)
	default:
	}
	if _, err := admin.Revoke(ctx, lease.ID); err != nil {
		t.Fatal(err)
	}
	r := await(t, rb)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.t.Token() <= ta.Token() {
		t.Fatalf("b's token %d not above a's %d", r.t.Token(), ta.Token())
	}
}
