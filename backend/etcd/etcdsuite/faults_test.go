package etcdsuite_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/etcd"
	"github.com/electkit/election/internal/rig/embedetcd"
	"github.com/electkit/election/internal/rig/etcdtest"
)

// termEnd records when a Term's Done closed, on the monotonic clock.
func termEnd(t *election.Term) <-chan time.Time {
	ch := make(chan time.Time, 1)
	go func() {
		<-t.Done()
		ch <- time.Now()
	}()
	return ch
}

// A leader whose client is cut off from the whole cluster steps down
// before the next candidate's Campaign returns (P3), both instants read
// from this process's monotonic clock.
func TestPartitionedLeaderStepsDownFirst(t *testing.T) {
	t.Parallel() // mostly waiting on member shutdowns
	c := etcdtest.NewCluster(t, 3, embedetcd.Config{})
	ms := c.Members()
	cut := etcdtest.Client(t, []string{ms[0].Endpoint})
	rest := etcdtest.Client(t, []string{ms[1].Endpoint, ms[2].Endpoint})
	a := newElector(t, cut, "/partition", "a")
	b := newElector(t, rest, "/partition", "b")
	ctx := ctxT(t)
	ta, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	aEnd := termEnd(ta)
	rb := campaignAsync(ctx, b)
	waitQueue(t, rest, "/partition", 2)
	ms[0].Blackhole()
	defer ms[0].Unblackhole()
	r := await(t, rb)
	if r.err != nil {
		t.Fatal(r.err)
	}
	var doneAt time.Time
	select {
	case doneAt = <-aEnd:
	case <-time.After(patience):
		t.Fatal("the cut-off leader's Term never ended")
	}
	if !doneAt.Before(r.at) {
		t.Fatalf("a's Term ended %v after b's Campaign returned", doneAt.Sub(r.at))
	}
	if !errors.Is(ta.Err(), election.ErrLeaseExpired) {
		t.Errorf("a's Term ended with %v, want ErrLeaseExpired", ta.Err())
	}
	if r.t.Token() <= ta.Token() {
		t.Errorf("b's token %d not above a's %d", r.t.Token(), ta.Token())
	}
	t.Logf("a stepped down %v before b led; b led %v after a's deadline", r.at.Sub(doneAt), r.at.Sub(ta.Deadline()))
}

// Killing etcd's own Raft leader does not give two candidates valid Terms
// at once, and the election works afterwards.
func TestEtcdLeaderKilled(t *testing.T) {
	t.Parallel() // mostly waiting on member shutdowns
	c := etcdtest.NewCluster(t, 3, embedetcd.Config{})
	ctx := ctxT(t)
	ca := etcdtest.Client(t, c.Endpoints())
	cb := etcdtest.Client(t, c.Endpoints())
	a := newElector(t, ca, "/kill", "a")
	b := newElector(t, cb, "/kill", "b")
	ta, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	aEnd := termEnd(ta)
	rb := campaignAsync(ctx, b)
	waitQueue(t, cb, "/kill", 2)
	old := etcdtest.WaitLeader(t, c, patience)
	c.Members()[old].Stop()
	if now := etcdtest.WaitLeader(t, c, patience); now == old {
		t.Fatalf("member %d still leads after it was stopped", old)
	}
	// Whatever the lease did meanwhile, a handover works now, and b's Term
	// never overlaps a's.
	if err := a.Resign(ctx); err != nil && ta.Err() == nil {
		t.Fatal(err)
	}
	r := await(t, rb)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if doneAt := <-aEnd; !doneAt.Before(r.at) {
		t.Fatalf("a's Term ended %v after b's Campaign returned", doneAt.Sub(r.at))
	}
	if r.t.Token() <= ta.Token() {
		t.Errorf("b's token %d not above a's %d", r.t.Token(), ta.Token())
	}
	if l, err := b.Leader(ctx); err != nil || l.ID != "b" {
		t.Errorf("Leader() = %v, %v; want b", l, err)
	}
}

// An observer whose member goes away while the election moves on and the
// history is compacted (etcd-io/etcd#7815, #18163) reads again when it is
// back and reports the newest leader.
func TestObserveSurvivesCompaction(t *testing.T) {
	t.Parallel() // mostly waiting on member shutdowns
	c := etcdtest.NewCluster(t, 3, embedetcd.Config{})
	ms := c.Members()
	admin := etcdtest.Client(t, []string{ms[0].Endpoint, ms[1].Endpoint})
	obsCli := etcdtest.Client(t, []string{ms[2].ClientURL}) // direct: a stopped member closes its connections
	obs := newElector(t, obsCli, "/compact", "obs")
	ctx, cancel := context.WithTimeout(context.Background(), 3*patience)
	defer cancel()
	start := time.Now()
	a := newElector(t, admin, "/compact", "a")
	b := newElector(t, admin, "/compact", "b")
	changes := obs.Observe(ctx)
	next := func() election.Leader {
		t.Helper()
		select {
		case l, ok := <-changes:
			if !ok {
				t.Fatal("Observe closed")
			}
			return l
		case <-time.After(2 * patience):
			t.Fatal("no Observe update")
		}
		return election.Leader{}
	}
	if l := next(); !l.IsZero() {
		t.Fatalf("first value %v, want none", l)
	}
	if _, err := a.Campaign(ctx); err != nil {
		t.Fatal(err)
	}
	if l := next(); l.ID != "a" {
		t.Fatalf("observed %v, want a", l)
	}
	t.Logf("a observed at %v", time.Since(start))
	ms[2].Stop()
	t.Logf("stopped at %v", time.Since(start))
	if err := a.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	tb, err := b.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("b leads at %v", time.Since(start))
	for i := range 20 { // history past the observer's revision
		if _, err := admin.Put(ctx, "/other/x", string(rune('a'+i))); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := admin.Get(ctx, "/other/x")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	t.Logf("compacted at %v", time.Since(start))
	if err := ms[2].Restart(); err != nil {
		t.Fatal(err)
	}
	t.Logf("restarted at %v", time.Since(start))
	for {
		l := next()
		if l.ID == "b" {
			t.Logf("observed b at %v", time.Since(start))
			if l.Token != tb.Token() {
				t.Fatalf("observed b with token %d, want %d", l.Token, tb.Token())
			}
			break
		}
		if l.ID == "a" {
			t.Fatal("observed the old leader again after the gap")
		}
	}
	if l, err := obs.Leader(ctx); err != nil || l.ID != "b" {
		t.Errorf("Leader() = %v, %v; want b", l, err)
	}
}

// With TLS client certificates and etcd auth, a user whose role covers the
// election prefix campaigns; a user without permission gets a clear error
// at once; a waiter survives its auth token expiring (etcd-io/etcd#17623).
func TestTLSAndAuth(t *testing.T) {
	tlsFiles, err := embedetcd.NewTLS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv := etcdtest.New(t, embedetcd.Config{TLS: tlsFiles, AuthTokenTTL: 1, BcryptCost: 4}) // the least bcrypt cost: logins cheap on a loaded machine
	tc, err := tlsFiles.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	// bcrypt makes every login slow under the race detector, and the 1 s
	// token makes the clients log in again and again: the whole test gets
	// more than one patience.
	ctx, cancel := context.WithTimeout(context.Background(), 3*patience)
	defer cancel()
	withTLS := func(user, pass string) func(*clientv3.Config) {
		return func(c *clientv3.Config) { c.TLS, c.Username, c.Password = tc.Clone(), user, pass }
	}
	root := etcdtest.Client(t, srv.Endpoints(), withTLS("", ""))
	if err := embedetcd.EnableAuth(ctx, root, "rootpw"); err != nil {
		t.Fatal(err)
	}
	admin := etcdtest.Client(t, srv.Endpoints(), withTLS("root", "rootpw"))
	if err := embedetcd.AddUser(ctx, admin, "sched", "pw1", "/app/"); err != nil {
		t.Fatal(err)
	}
	if err := embedetcd.AddUser(ctx, admin, "intruder", "pw2", "/elsewhere/"); err != nil {
		t.Fatal(err)
	}
	// Long TTLs: under the race detector a login (bcrypt) can outlast a
	// short lease; and the waiter renews every ~3 s, long after its 1 s
	// token expired.
	a := newElector(t, etcdtest.Client(t, srv.Endpoints(), withTLS("sched", "pw1")), "/app/leader", "a", election.WithTTL(10*time.Second))
	b := newElector(t, etcdtest.Client(t, srv.Endpoints(), withTLS("sched", "pw1")), "/app/leader", "b", election.WithTTL(10*time.Second))
	ta, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rb := campaignAsync(ctx, b)
	var ks []string
	for deadline := time.Now().Add(2 * patience); len(ks) != 2; time.Sleep(10 * time.Millisecond) {
		select {
		case r := <-rb:
			t.Fatalf("b's Campaign returned while a led: %v, %v (a's Term: %v)", r.t, r.err, ta.Err())
		default:
		}
		if ks = queue(t, admin, "/app/leader"); time.Now().After(deadline) {
			t.Fatalf("b's key did not appear; keys %q", ks)
		}
	}
	// Wait until b's lease has been renewed after staying idle for more
	// than twice the token TTL: its client has had to get a new token.
	kv, err := admin.Get(ctx, ks[1])
	if err != nil {
		t.Fatal(err)
	}
	lease := clientv3.LeaseID(kv.Kvs[0].Lease)
	sawLow := false
	for deadline := time.Now().Add(patience); ; {
		ttl, err := admin.TimeToLive(ctx, lease)
		if err != nil {
			t.Fatal(err)
		}
		if ttl.TTL <= 7 {
			sawLow = true
		} else if sawLow {
			break // renewed after ≥ 3 s idle
		}
		if time.Now().After(deadline) {
			t.Fatalf("b's lease was not renewed after its token expired (TTL %d)", ttl.TTL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := a.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	r := await(t, rb)
	if r.err != nil {
		t.Fatalf("the waiter did not survive its token expiring: %v", r.err)
	}
	if r.t.Token() <= ta.Token() {
		t.Errorf("token %d after %d", r.t.Token(), ta.Token())
	}

	intruder := newElector(t, etcdtest.Client(t, srv.Endpoints(), withTLS("intruder", "pw2")), "/app/leader", "x")
	start := time.Now()
	_, err = intruder.Campaign(ctx)
	if err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("Campaign without permission = %v, want a permission-denied error", err)
	}
	if time.Since(start) > patience/2 {
		t.Errorf("the refusal took %v", time.Since(start))
	}
	if ks := queue(t, admin, "/app/leader"); len(ks) != 1 {
		t.Errorf("keys after the refused Campaign: %q", ks)
	}
}

// With auth on a three-member cluster, clients that know every member log
// in again for each lease renewal and each watch (clientv3 does so for
// every stream it opens), and a request can reach a member that has not
// applied the new token yet: etcd answers "invalid auth token". That is
// not final: a leader and its waiters renew through it, the leader keeps
// its Term, and handovers work.
func TestAuthOnClusterRenewals(t *testing.T) {
	t.Parallel() // mostly waiting on renewals
	c := etcdtest.NewCluster(t, 3, embedetcd.Config{BcryptCost: 4})
	ctx, cancel := context.WithTimeout(context.Background(), 3*patience)
	defer cancel()
	root := etcdtest.Client(t, c.Endpoints())
	if err := embedetcd.EnableAuth(ctx, root, "rootpw"); err != nil {
		t.Fatal(err)
	}
	admin := etcdtest.Client(t, c.Endpoints(), func(cfg *clientv3.Config) { cfg.Username, cfg.Password = "root", "rootpw" })
	if err := embedetcd.AddUser(ctx, admin, "sched", "pw", "/auth/"); err != nil {
		t.Fatal(err)
	}
	user := func(cfg *clientv3.Config) { cfg.Username, cfg.Password = "sched", "pw" }
	const want = 10 // renewals of the first leader's
	renewed := make(chan election.Renewal, want)
	// TTL 2 s: a lease of 1 s is not kept on a machine whose cores other
	// work holds (a renewal's reply later than the window ends the Term,
	// rightly), and the test is about tokens, not about load.
	es := []*etcd.Elector{newElector(t, etcdtest.Client(t, c.Endpoints(), user), "/auth/leader", "a",
		election.WithTTL(2*time.Second), election.WithAfterRenew(func(r election.Renewal) {
			select {
			case renewed <- r:
			default:
			}
		}))}
	ta, err := es[0].Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var rbs []<-chan result
	for _, id := range []string{"b", "c"} {
		e := newElector(t, etcdtest.Client(t, c.Endpoints(), user), "/auth/leader", id, election.WithTTL(2*time.Second))
		es = append(es, e)
		rbs = append(rbs, campaignAsync(ctx, e))
		// b queued before c starts: the handovers below go to b, then
		// to c (their Campaigns, started together, could queue either
		// way round, and c would lead first).
		awaitSettled(t, e, id)
	}
	for i := range want {
		select {
		case r := <-renewed:
			if r.Err != nil {
				t.Logf("renewal %d: %v", i, r.Err)
			}
		case <-ta.Done():
			t.Fatalf("a's Term ended after %d renewals: %v", i, ta.Err())
		case <-ctx.Done():
			t.Fatalf("only %d renewals of a's", i)
		}
	}
	for _, rb := range rbs {
		select {
		case r := <-rb:
			t.Fatalf("a waiter's Campaign returned while a led: %v, %v", r.t, r.err)
		default:
		}
	}
	// Two handovers, through the waiters' watches.
	prev := ta
	for h, rb := range rbs {
		if err := es[h].Resign(ctx); err != nil {
			t.Fatal(err)
		}
		r := await(t, rb)
		if r.err != nil {
			t.Fatalf("handover %d: %v", h+1, r.err)
		}
		if r.t.Token() <= prev.Token() {
			t.Fatalf("handover %d: token %d not above %d", h+1, r.t.Token(), prev.Token())
		}
		prev = r.t
	}
}

// A client's lease renewals share one stream, to one member: when that
// member stops, the stream breaks and the next renewal opens another, to a
// member that runs. Each member is stopped in turn (a quorum stays up),
// and the leader's Term outlives all three, renewed after each stop.
func TestRenewalsMoveOffAStoppedMember(t *testing.T) {
	t.Parallel() // mostly waiting on renewals and member restarts
	c := etcdtest.NewCluster(t, 3, embedetcd.Config{})
	ms := c.Members()
	direct := []string{ms[0].ClientURL, ms[1].ClientURL, ms[2].ClientURL} // a stopped member closes its connections
	ctx, cancel := context.WithTimeout(context.Background(), 6*patience)
	defer cancel()
	renewed := make(chan election.Renewal, 64)
	a := newElector(t, etcdtest.Client(t, direct), "/moveoff", "a", election.WithTTL(6*time.Second),
		election.WithAfterRenew(func(r election.Renewal) {
			select {
			case renewed <- r:
			default:
			}
		}))
	ta, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range ms {
		m.Stop()
		stopped := time.Now()
		for ok := 0; ok < 2; {
			select {
			case r := <-renewed:
				if r.Err == nil && r.Sent.After(stopped) {
					ok++
				}
			case <-ta.Done():
				t.Fatalf("the Term ended with member %d stopped: %v", i, ta.Err())
			case <-ctx.Done():
				t.Fatalf("no two renewals with member %d stopped", i)
			}
		}
		if err := m.Restart(); err != nil {
			t.Fatal(err)
		}
	}
	if err := ta.Err(); err != nil {
		t.Fatalf("the Term ended: %v", err)
	}
}
