package etcdsuite_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/etcd"
	"github.com/electkit/election/internal/rig/embedetcd"
	"github.com/electkit/election/internal/rig/etcdtest"
)

// ctxBound is how soon after its ctx ends a call must return whatever the
// store does (100 ms), plus room for the scheduler on a loaded machine.
const ctxBound = 100*time.Millisecond + 50*time.Millisecond

// Elections whose names nest ("/svc" and "/svc/a") never block each other:
// each reads past the other's keys.
func TestNestedNamesDoNotBlock(t *testing.T) {
	eps := startEtcd(t)
	cli := newClient(t, eps)
	ctx := ctxT(t)
	for _, order := range [][2]string{{"/nest/a", "/nest"}, {"/nest2", "/nest2/a"}} {
		first := newElector(t, cli, order[0], "first")
		second := newElector(t, cli, order[1], "second")
		w1 := newElector(t, cli, order[0], "waiter1") // a waiter of the first election, behind its leader
		t1, err := first.Campaign(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rw := campaignAsync(ctx, w1)
		waitQueue(t, cli, order[0], 2)
		c2, cancel := context.WithTimeout(ctx, 3*time.Second)
		t2, err := second.Campaign(c2)
		cancel()
		if err != nil {
			t.Fatalf("%s blocked by %s: %v", order[1], order[0], err)
		}
		for _, c := range []struct {
			e    *etcd.Elector
			want string
		}{{first, "first"}, {second, "second"}} {
			if l, err := c.e.Leader(ctx); err != nil || l.ID != c.want {
				t.Errorf("%s: Leader() = %v, %v; want %s", c.e.Name(), l, err, c.want)
			}
		}
		if t1.Err() != nil || t2.Err() != nil {
			t.Errorf("terms ended: %v, %v", t1.Err(), t2.Err())
		}
		if err := first.Resign(ctx); err != nil {
			t.Fatal(err)
		}
		if r := await(t, rw); r.err != nil {
			t.Fatalf("%s: the waiter behind the leader: %v", order[0], r.err)
		}
	}
}

// Campaign and Resign return within 100 ms of their ctx ending when etcd
// does not answer (the client's connection open, its traffic dropped);
// what is left to release goes in the background and Close waits for it,
// bounded.
func TestCtxHonouredWhenStoreIsSilent(t *testing.T) {
	c := etcdtest.NewCluster(t, 1, embedetcd.Config{})
	m := c.Members()[0]
	admin := newClient(t, []string{m.ClientURL})
	ctx := ctxT(t)
	a := newElector(t, admin, "/silent", "a")
	ta, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// A waiter cut off while it waits.
	b := newElector(t, newClient(t, []string{m.Endpoint}), "/silent", "b")
	cctx, cancel := context.WithCancel(ctx)
	rb := campaignAsync(cctx, b)
	waitQueue(t, admin, "/silent", 2)
	m.Blackhole()
	cancel()
	ended := time.Now()
	r := await(t, rb)
	if !errors.Is(r.err, context.Canceled) {
		t.Errorf("b's Campaign = %v, %v; want context.Canceled", r.t, r.err)
	}
	if d := r.at.Sub(ended); d > ctxBound {
		t.Errorf("b's Campaign returned %v after its ctx ended", d)
	}

	// A campaign started while cut off, with a deadline.
	dctx, dcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer dcancel()
	r = await(t, campaignAsync(dctx, b))
	if !errors.Is(r.err, context.DeadlineExceeded) {
		t.Errorf("b's Campaign while cut off = %v, %v; want context.DeadlineExceeded", r.t, r.err)
	}
	if dl, _ := dctx.Deadline(); r.at.Sub(dl) > ctxBound {
		t.Errorf("b's Campaign returned %v after its deadline", r.at.Sub(dl))
	}
	m.Unblackhole()

	// A leader cut off: Resign ends the Term at once and returns with its ctx.
	if err := a.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	tb, err := b.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m.Blackhole()
	rctx, rcancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer rcancel()
	err = b.Resign(rctx)
	at := time.Now()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Resign while cut off = %v; want context.DeadlineExceeded", err)
	}
	if dl, _ := rctx.Deadline(); at.Sub(dl) > ctxBound {
		t.Errorf("Resign returned %v after its deadline", at.Sub(dl))
	}
	if tb.Err() == nil {
		t.Error("b's Term still valid after Resign")
	}
	// Close is bounded by one lease window even though nothing answers.
	start := time.Now()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	window := election.DefaultOptions().Window()
	if o, err := election.NewOptions(election.WithTTL(2 * time.Second)); err == nil {
		window = o.Window()
	}
	if d := time.Since(start); d > window+ctxBound {
		t.Errorf("Close took %v, more than one lease window (%v)", d, window)
	}
	if ta.Err() == nil {
		t.Error("a's Term valid after Resign")
	}
	m.Unblackhole()
}

// A Campaign whose ctx ends while its lease grant's reply is lost leaves
// no lease behind: the lease ID is the client's, so it is revoked in the
// background once etcd answers again.
func TestCampaignLeavesNoLease(t *testing.T) {
	c := etcdtest.NewCluster(t, 1, embedetcd.Config{})
	m := c.Members()[0]
	admin := newClient(t, []string{m.ClientURL})
	ctx := ctxT(t)
	// A TTL well past the test's patience: the lease must go by revocation.
	b := newElector(t, newClient(t, []string{m.Endpoint}), "/nolease", "b", election.WithTTL(time.Minute))
	if _, err := b.Campaign(ctx); err != nil { // the connection is up
		t.Fatal(err)
	}
	for range 2 { // the second revokes the lease the first emptied
		if err := b.Resign(ctx); err != nil {
			t.Fatal(err)
		}
	}
	waitLeases(t, admin, 0)
	m.Proxy.BlackholeRx() // requests reach etcd, replies are lost
	dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := b.Campaign(dctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Campaign without replies = %v; want context.DeadlineExceeded", err)
	}
	m.Proxy.UnblackholeRx()
	waitLeases(t, admin, 0)
}

// waitLeases waits until etcd holds n leases.
func waitLeases(t *testing.T, cli *clientv3.Client, n int) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		resp, err := cli.Leases(ctxT(t))
		if err == nil && len(resp.Leases) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("leases: %v, %v; want %d", resp, err, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A candidate whose permission on the election's keys is revoked gets a
// final error naming the election, promptly, instead of retrying forever;
// a leader in that state ends its Term.
func TestPermissionRevoked(t *testing.T) {
	// The least bcrypt cost: every login checks a hash, and the test is
	// about permissions, not about logins on a loaded machine.
	eps := etcdtest.New(t, embedetcd.Config{BcryptCost: 4}).Endpoints()
	setup := ctxT(t)
	root := newClient(t, eps)
	if err := embedetcd.AddUser(setup, root, "cand", "pw", "/perm/"); err != nil {
		t.Fatal(err)
	}
	if err := embedetcd.EnableAuth(setup, root, "rootpw"); err != nil {
		t.Fatal(err)
	}
	rootCli := etcdtest.Client(t, eps, func(c *clientv3.Config) { c.Username, c.Password = "root", "rootpw" })
	candCli := func() *clientv3.Client {
		return etcdtest.Client(t, eps, func(c *clientv3.Config) { c.Username, c.Password = "cand", "pw" })
	}
	a := newElector(t, candCli(), "/perm", "a")
	b := newElector(t, candCli(), "/perm", "b")
	ctx := ctxT(t) // the elections' own patience, from here
	ta, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rb := campaignAsync(ctx, b)
	waitQueue(t, rootCli, "/perm", 2)
	if _, err := rootCli.RoleRevokePermission(ctx, "cand-role", "/perm/", clientv3.GetPrefixRangeEnd("/perm/")); err != nil {
		t.Fatal(err)
	}
	if err := a.Resign(ctx); err != nil && !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Logf("a's Resign without permission: %v", err)
	}
	if ta.Err() == nil {
		t.Error("a's Term valid after Resign")
	}
	// b's next read of the queue is refused: its Campaign ends with that.
	select {
	case r := <-rb:
		if r.t != nil || !errors.Is(r.err, rpctypes.ErrPermissionDenied) || !strings.Contains(r.err.Error(), "/perm") {
			t.Errorf("b's Campaign = %v, %v; want permission denied naming the election", r.t, r.err)
		}
	case <-time.After(patience):
		t.Fatal("b's Campaign never returned: a permission error retried silently")
	}
	// A new Campaign is refused at once.
	if _, err := b.Campaign(ctx); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Errorf("Campaign without permission = %v; want permission denied", err)
	}
}

// Campaign on a closed client returns at once with ErrSessionLost; a
// waiter whose client is closed returns promptly too.
func TestClosedClient(t *testing.T) {
	eps := startEtcd(t)
	ctx := ctxT(t)
	a := newElector(t, newClient(t, eps), "/closed", "a")
	if _, err := a.Campaign(ctx); err != nil {
		t.Fatal(err)
	}
	cb := newClient(t, eps)
	b := newElector(t, cb, "/closed", "b")
	rb := campaignAsync(ctx, b)
	waitQueue(t, newClient(t, eps), "/closed", 2)
	cb.Close()
	select {
	case r := <-rb:
		if r.t != nil || !errors.Is(r.err, election.ErrSessionLost) {
			t.Errorf("waiter on a closed client = %v, %v; want ErrSessionLost", r.t, r.err)
		}
	case <-time.After(time.Second):
		t.Fatal("a waiter whose client was closed did not return")
	}
	start := time.Now()
	if _, err := b.Campaign(ctx); !errors.Is(err, election.ErrSessionLost) || time.Since(start) > time.Second {
		t.Errorf("Campaign on a closed client = %v after %v; want ErrSessionLost at once", err, time.Since(start))
	}
}

// A refused name is named in the error, but a long one only in part.
func TestLongNameErrorIsBounded(t *testing.T) {
	cli := newClient(t, startEtcd(t))
	_, err := etcd.New(cli, strings.Repeat("n", 2000), election.WithID("a"))
	if !errors.Is(err, election.ErrInvalidOption) || len(err.Error()) > 300 || !strings.Contains(err.Error(), "2000 bytes") {
		t.Errorf("New with a 2000-byte name = %v (%d bytes)", err, len(err.Error()))
	}
}

// slowOpen delays the opening of a client's streams of method by d (or
// until the opening's ctx ends, forever with d < 0), as a login does:
// with a user name, clientv3 logs in before it opens each stream, and on
// a loaded member (bcrypt, -race) that takes a second or more. opened
// counts the openings begun.
type slowOpen struct {
	method string
	d      time.Duration
	opened atomic.Int32
}

func (s *slowOpen) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if method == s.method {
		s.opened.Add(1)
		var after <-chan time.Time
		if s.d >= 0 {
			after = time.After(s.d)
		}
		select {
		case <-after:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return streamer(ctx, desc, cc, method, opts...)
}

// slowClient is a client of eps whose streams open as the slowOpens say.
func slowClient(t *testing.T, eps []string, slow ...*slowOpen) *clientv3.Client {
	t.Helper()
	var opts []grpc.DialOption
	for _, s := range slow {
		opts = append(opts, grpc.WithChainStreamInterceptor(s.stream))
	}
	return dialClient(t, eps, opts...)
}

// A renewal stream whose opening takes longer than a renewal waits (TTL
// 2 s: 627 ms) still opens, once, and the renewals go through it: the
// opening goes on past the renewal that began it. Abandoned with each
// renewal and begun again by the next, it never finished: no renewal went
// out, the Term expired, and the member checked a password for each.
func TestRenewalOutlastsSlowStreamOpening(t *testing.T) {
	eps := startEtcd(t)
	ctx := ctxT(t)
	keep := &slowOpen{method: methodKeepAlive, d: 800 * time.Millisecond}
	renewed := make(chan election.Renewal, 64)
	a := newElector(t, slowClient(t, eps, keep), "/slowkeep", "a", election.WithAfterRenew(func(r election.Renewal) {
		select {
		case renewed <- r:
		default:
		}
	}))
	term, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A renewal through the stream moves the Term's deadline past the
	// one the claim gave it.
	first := term.Deadline()
	for {
		select {
		case r := <-renewed:
			if r.Err != nil || !r.Deadline.After(first) {
				continue
			}
		case <-term.Done():
			t.Fatalf("the Term ended with renewals behind a slow stream opening (%d openings begun): %v", keep.opened.Load(), term.Err())
		case <-ctx.Done():
			t.Fatalf("no renewal went through in %v (%d openings begun)", patience, keep.opened.Load())
		}
		break
	}
	if n := keep.opened.Load(); n != 1 {
		t.Errorf("%d renewal stream openings begun; want 1", n)
	}
}

// A Term claimed as the watch on its keys opens slowly (a new watch
// stream logs in first) counts from the session's renewals meanwhile: a
// first Campaign whose watch took longer than a lease window still leads,
// while its lease lives. Counted from the claim's renewal alone, the Term
// began expired.
func TestCampaignOutlastsSlowWatchOpening(t *testing.T) {
	eps := startEtcd(t)
	ctx := ctxT(t)
	watch := &slowOpen{method: methodWatch, d: 2200 * time.Millisecond} // > the window, 1.88 s
	a := newElector(t, slowClient(t, eps, watch), "/slowwatch", "a")
	term, err := a.Campaign(ctx)
	if err != nil {
		t.Fatalf("Campaign with a watch that opened in %v = %v", watch.d, err)
	}
	if err := term.Err(); err != nil {
		t.Fatalf("the Term = %v", err)
	}
}

// A Term that ends as Campaign makes it (it began expired: the reply to
// the create that claimed came later than a lease window, and no renewal
// went through) is no Resign: Campaign returns why it ended,
// ErrLeaseExpired, naming the election — never ErrResigned, which the
// candidacy's stop, as the Term's end withdraws it, used to say.
func TestTermEndingAsItBeginsIsNotResigned(t *testing.T) {
	eps := startEtcd(t)
	// Each Campaign waits out several slow replies (the create, the
	// release): more than ctxT's patience for three under -race on a
	// loaded machine.
	ctx, cancel := context.WithTimeout(context.Background(), 6*patience)
	defer cancel()
	slowTxn := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if method == "/etcdserverpb.KV/Txn" {
			select {
			case <-time.After(600 * time.Millisecond): // > the window, 0.5 s
			case <-ctx.Done():
			}
		}
		return err
	}
	keep := &slowOpen{method: methodKeepAlive, d: -1} // no renewal ever
	cli := dialClient(t, eps, grpc.WithChainStreamInterceptor(keep.stream), grpc.WithChainUnaryInterceptor(slowTxn))
	a := newElector(t, cli, "/expiring", "a", election.WithTTL(time.Second), election.WithMargin(490*time.Millisecond))
	for i := range 3 {
		term, err := a.Campaign(ctx)
		if term != nil || !errors.Is(err, election.ErrLeaseExpired) || errors.Is(err, election.ErrResigned) || !strings.Contains(err.Error(), "/expiring") {
			t.Fatalf("Campaign %d, its Term begun expired = %v, %v; want ErrLeaseExpired naming the election", i, term, err)
		}
	}
}

// A waiter whose lease renewal etcd refuses (it checks that the user may
// still write the lease's keys) ends its Campaign with permission denied,
// naming the election: the session's loss names none (a Session carries
// many elections), the candidacy's does.
func TestRefusedRenewalNamesTheElection(t *testing.T) {
	eps := etcdtest.New(t, embedetcd.Config{BcryptCost: 4}).Endpoints()
	ctx := ctxT(t)
	root := newClient(t, eps)
	if err := embedetcd.AddUser(ctx, root, "cand", "pw", "/refused/"); err != nil {
		t.Fatal(err)
	}
	if err := embedetcd.EnableAuth(ctx, root, "rootpw"); err != nil {
		t.Fatal(err)
	}
	rootCli := etcdtest.Client(t, eps, func(c *clientv3.Config) { c.Username, c.Password = "root", "rootpw" })
	candCli := func() *clientv3.Client {
		return etcdtest.Client(t, eps, func(c *clientv3.Config) { c.Username, c.Password = "cand", "pw" })
	}
	a := newElector(t, candCli(), "/refused", "a")
	b := newElector(t, candCli(), "/refused", "b")
	if _, err := a.Campaign(ctx); err != nil {
		t.Fatal(err)
	}
	rb := campaignAsync(ctx, b)
	awaitSettled(t, b, "b") // its watch is open: only its renewals meet the revocation
	if _, err := rootCli.RoleRevokePermission(ctx, "cand-role", "/refused/", clientv3.GetPrefixRangeEnd("/refused/")); err != nil {
		t.Fatal(err)
	}
	_ = a.Resign(ctx) // refused too: a's keys go with its lease
	r := await(t, rb)
	if r.t != nil || !errors.Is(r.err, rpctypes.ErrPermissionDenied) || !strings.Contains(r.err.Error(), "/refused") {
		t.Errorf("b's Campaign = %v, %v; want permission denied naming the election", r.t, r.err)
	}
}

// cutWatch cuts a client's watch streams when told: the streams open end,
// and those opened after never receive (not even the confirmation of a
// watch's creation), while the client's other requests, its lease's
// renewals among them, go through.
type cutWatch struct {
	mu      sync.Mutex
	cut     bool
	cancels []context.CancelFunc // the streams opened before the cut
}

func (w *cutWatch) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if method != methodWatch {
		return streamer(ctx, desc, cc, method, opts...)
	}
	ctx, cancel := context.WithCancel(ctx)
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		cancel()
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cut {
		return &muteStream{ClientStream: cs, done: ctx.Done(), cancel: cancel}, nil
	}
	w.cancels = append(w.cancels, cancel)
	return cs, nil
}

// now cuts the watch streams.
func (w *cutWatch) now() {
	w.mu.Lock()
	w.cut = true
	cancels := w.cancels
	w.cancels = nil
	w.mu.Unlock()
	for _, cancel := range cancels {
		cancel()
	}
}

// muteStream receives nothing until it ends.
type muteStream struct {
	grpc.ClientStream
	done   <-chan struct{}
	cancel context.CancelFunc
}

func (m *muteStream) RecvMsg(any) error {
	<-m.done
	m.cancel()
	return context.Canceled
}

// A leader whose watch breaks and cannot be opened again (the create of a
// watch is never confirmed) while its lease is renewed steps down when its
// Term runs out: renewals do not count unwatched, and at the Term's end
// its keys go at once, though its lease lives on, so the next candidate
// leads. The guard that renews the Term must not wait for the watch past
// the Term's end.
func TestUnwatchedLeaderStepsDownAtItsTermEnd(t *testing.T) {
	eps := startEtcd(t)
	ctx := ctxT(t)
	cut := &cutWatch{}
	counted := make(chan struct{}, 1)
	a := newElector(t, dialClient(t, eps, grpc.WithChainStreamInterceptor(cut.stream)), "/cutwatch", "a",
		election.WithAfterRenew(func(r election.Renewal) {
			if r.Err == nil {
				select {
				case counted <- struct{}{}:
				default:
				}
			}
		}))
	b := newElector(t, newClient(t, eps), "/cutwatch", "b")
	term, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-counted: // a renewal counted: the watch is live
	case <-term.Done():
		t.Fatalf("the Term ended before a renewal counted: %v", term.Err())
	case <-ctx.Done():
		t.Fatal("no renewal counted")
	}
	type led struct {
		err     error
		aBefore error // a's Term as b's Campaign returned
	}
	won := make(chan led, 1)
	go func() {
		_, err := b.Campaign(ctx)
		won <- led{err: err, aBefore: term.Err()}
	}()
	cut.now()
	select {
	case <-term.Done():
	case <-ctx.Done():
		t.Fatal("the Term outlived its watch")
	}
	if !errors.Is(term.Err(), election.ErrLeaseExpired) {
		t.Errorf("the Term ended with %v; want ErrLeaseExpired", term.Err())
	}
	select {
	case r := <-won:
		if r.err != nil {
			t.Fatalf("b's Campaign = %v", r.err)
		}
		if r.aBefore == nil {
			t.Error("b led while a's Term was valid")
		}
	case <-ctx.Done():
		t.Fatal("b did not lead: a's keys stayed after its Term ended")
	}
}
