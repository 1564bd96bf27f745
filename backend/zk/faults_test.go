package zk_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
	"github.com/electkit/election/backend/zk"
	"github.com/electkit/election/internal/rig/faultproxy"
	"github.com/electkit/election/internal/rig/zktest"
)

type result struct {
	t   *election.Term
	err error
	at  time.Time
}

func campaignAsync(ctx context.Context, e election.Elector) <-chan result {
	ch := make(chan result, 1)
	go func() {
		t, err := e.Campaign(ctx)
		ch <- result{t, err, time.Now()}
	}()
	return ch
}

func await(t *testing.T, ch <-chan result, within time.Duration, what string) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(within):
		t.Fatalf("%s: Campaign did not return within %v", what, within)
	}
	return result{}
}

func lead(t *testing.T, e election.Elector) *election.Term {
	t.Helper()
	r := await(t, campaignAsync(ctxT(t), e), patience, "lead")
	if r.err != nil {
		t.Fatalf("Campaign: %v", r.err)
	}
	return r.t
}

// children returns the election path's children, lowest sequence first.
func children(t *testing.T, c *gozk.Conn, path string) []string {
	t.Helper()
	names, _, err := c.Children(path)
	if errors.Is(err, gozk.ErrNoNode) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// cands returns the election path's candidate nodes (not the leader's
// _l, leadership node or hand-over).
func cands(t *testing.T, c *gozk.Conn, path string) []string {
	t.Helper()
	var out []string
	for _, n := range children(t, c, path) {
		if strings.HasPrefix(n, "_c_") && !strings.HasSuffix(n, "-lead") {
			out = append(out, n)
		}
	}
	return out
}

// eventually polls cond until it holds or patience runs out. It is for
// state on the server, which sends no event a test could wait on.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, patience)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func waitDone(t *testing.T, term *election.Term, within time.Duration, what string) time.Time {
	t.Helper()
	select {
	case <-term.Done():
		return time.Now()
	case <-time.After(within):
		t.Fatalf("%s: Term %v not Done within %v", what, term, within)
	}
	return time.Time{}
}

func TestBadInput(t *testing.T) {
	conn := newConn(t)
	for _, p := range []string{"", "/", "x", "services/demo", "/a/", "/a//b", "/a/./b", "/a/../b", "/zookeeper", "/zookeeper/x", "/a\x00b", "/a\x01", "/a b", "/a/_c"} {
		_, err := zk.New(conn, p)
		want := backend.ValidateName(p)
		if !errors.Is(err, election.ErrInvalidOption) || want == nil || err.Error() != want.Error() {
			t.Errorf("New(%q) = %v; want %v", p, err, want)
		}
	}
	if _, err := zk.New(nil, "/a"); !errors.Is(err, election.ErrInvalidOption) || !strings.Contains(err.Error(), "conn") {
		t.Errorf("New(nil) = %v; want an ErrInvalidOption naming conn", err)
	}
	if _, err := zk.NewConfig(conn, "/a", zk.Config{Policy: 7}); !errors.Is(err, election.ErrInvalidOption) || !strings.Contains(err.Error(), "7") {
		t.Errorf("NewConfig(Policy 7) = %v; want an ErrInvalidOption naming 7", err)
	}
	if _, err := zk.NewConfig(conn, "/a", zk.Config{NodeACL: []gozk.ACL{{Perms: 0, Scheme: "world", ID: "anyone"}}}); !errors.Is(err, election.ErrInvalidOption) {
		t.Errorf("NewConfig(ACL without permissions) = %v; want ErrInvalidOption", err)
	}
	if _, err := zk.New(conn, "/a", election.WithTTL(time.Millisecond)); !errors.Is(err, election.ErrInvalidOption) || !strings.Contains(err.Error(), "1ms") {
		t.Errorf("New(TTL 1ms) = %v; want an ErrInvalidOption naming 1ms", err)
	}
	if _, err := zk.Dial(ctxT(t), zk.DialConfig{}, "/a"); !errors.Is(err, election.ErrInvalidOption) || !strings.Contains(err.Error(), "Servers") {
		t.Errorf("Dial(no servers) = %v; want an ErrInvalidOption naming Servers", err)
	}
	if _, err := zk.Dial(ctxT(t), zk.DialConfig{Servers: []string{server(t).Addr}}, "a"); !errors.Is(err, election.ErrInvalidOption) {
		t.Errorf("Dial(bad path) = %v; want ErrInvalidOption", err)
	}
}

// Tokens are creation zxids: they increase across leaderships even when the
// election path is deleted and made again (its sequence numbers restart).
func TestTokensIncreaseAcrossPathRecreation(t *testing.T) {
	conn := newConn(t)
	path := newPath(t)
	a := newElector(t, conn, path, "a")
	t1 := lead(t, a)
	if err := a.Resign(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	// No candidate is left: only the queue node, which stays with the path.
	if got := children(t, conn, path); len(got) != 1 || got[0] != "_q" {
		t.Fatalf("children after the last candidate resigned: %v; want the queue node _q only", got)
	}
	if err := conn.Delete(path+"/_q", -1); err != nil {
		t.Fatal(err)
	}
	if err := conn.Delete(path, -1); err != nil {
		t.Fatalf("deleting the empty election path: %v", err)
	}
	t2 := lead(t, a)
	if t2.Token() <= t1.Token() {
		t.Fatalf("token %d after path recreation, not above %d", t2.Token(), t1.Token())
	}
	node, err := a.FenceKey(t2)
	if err != nil {
		t.Fatal(err)
	}
	_, st, err := conn.Get(node)
	if err != nil {
		t.Fatal(err)
	}
	if uint64(st.Czxid) != t2.Token() {
		t.Fatalf("token %d, node's creation zxid %d", t2.Token(), st.Czxid)
	}
	if got := cands(t, conn, path); len(got) != 1 || !strings.HasSuffix(got[0], "0000000001") {
		t.Fatalf("candidate nodes %v: want one, of sequence 1 in the recreated path (after its queue node)", got)
	}
}

// P8: children that are not candidates never lead. A persistent node in the
// order is skipped, a foreign name without a sequence is ignored, and an
// ephemeral malformed node holds its place: no leader while it heads.
func TestGarbageChildren(t *testing.T) {
	conn := newConn(t)
	path := newPath(t)
	if _, err := conn.Create("/elections", nil, 0, gozk.WorldACL(gozk.PermAll)); err != nil && !errors.Is(err, gozk.ErrNodeExists) {
		t.Fatal(err)
	}
	if _, err := conn.Create(path, nil, 0, gozk.WorldACL(gozk.PermAll)); err != nil {
		t.Fatal(err)
	}
	open := gozk.WorldACL(gozk.PermAll)
	if _, err := conn.Create(path+"/persistent-", []byte("{}"), gozk.FlagSequence, open); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Create(path+"/foreign", []byte("x"), 0, open); err != nil {
		t.Fatal(err)
	}
	intruder := newConn(t)
	bad, err := intruder.Create(path+"/_c_00000000000000000000000000000000-cand-", []byte("not json"), gozk.FlagEphemeral|gozk.FlagSequence, open)
	if err != nil {
		t.Fatal(err)
	}
	observer := newElector(t, newConn(t), path, "observer")
	obs := observer.Observe(ctxT(t))
	if l := <-obs; !l.IsZero() {
		t.Fatalf("first Observe value %v; want none while a malformed node heads", l)
	}
	var me *zk.MalformedNodeError
	if _, err := observer.Leader(ctxT(t)); !errors.As(err, &me) || me.Path != bad || !errors.Is(err, election.ErrNoLeader) {
		t.Fatalf("Leader = %v; want a *MalformedNodeError naming %s", err, bad)
	}
	a := newElector(t, conn, path, "a")
	ch := campaignAsync(ctxT(t), a)
	select {
	case r := <-ch:
		t.Fatalf("Campaign returned %v, %v while a malformed node heads the order", r.t, r.err)
	case <-time.After(ttl): // bounded: the candidate must still be waiting
	}
	intruder.Close() // its session ends, and its node with it
	r := await(t, ch, patience, "after the malformed node went")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if l := <-obs; l.ID != "a" || l.Token != r.t.Token() {
		t.Fatalf("Observe after the malformed node went: %v; want a@%d", l, r.t.Token())
	}
	l, err := observer.Leader(ctxT(t))
	if err != nil || l.ID != "a" {
		t.Fatalf("Leader = %v, %v; want a", l, err)
	}
}

// The election path deleted under a running election (CURATOR-724): the
// leader's Term ends, the waiter makes the path and a new node and leads.
func TestPathDeletedUnderRunningElection(t *testing.T) {
	admin := newConn(t)
	path := newPath(t)
	a := newElector(t, newConn(t), path, "a")
	b := newElector(t, newConn(t), path, "b")
	ta := lead(t, a)
	ch := campaignAsync(ctxT(t), b)
	eventually(t, "b's node", func() bool { return len(cands(t, admin, path)) == 2 })
	// The whole election at once, as an operator's recursive delete, here in one
	// transaction so that no candidate makes a node in between.
	var ops []any
	for _, n := range children(t, admin, path) {
		ops = append(ops, &gozk.DeleteRequest{Path: path + "/" + n, Version: -1})
	}
	ops = append(ops, &gozk.DeleteRequest{Path: path, Version: -1})
	if _, err := admin.Multi(ops...); err != nil {
		t.Fatal(err)
	}
	waitDone(t, ta, patience, "leader whose node was deleted")
	if !errors.Is(ta.Err(), election.ErrSessionLost) {
		t.Fatalf("leader's Term ended with %v; want ErrSessionLost", ta.Err())
	}
	r := await(t, ch, patience, "waiter after the path was deleted")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.t.Token() <= ta.Token() {
		t.Fatalf("token %d not above %d", r.t.Token(), ta.Token())
	}
	if got := cands(t, admin, path); len(got) != 1 {
		t.Fatalf("children after recovery: %v; want b's node only", got)
	}
}

// A waiter whose session expires gets a new node under its new session and
// leads in its turn, with a higher token.
func TestWaiterSessionExpiry(t *testing.T) {
	admin := newConn(t)
	path := newPath(t)
	a := newElector(t, newConn(t), path, "a")
	px := faultproxy.New(t, server(t).Addr)
	bconn := zktest.Conn(t, []string{px.Addr}, ttl)
	t.Cleanup(px.Close)
	b := newElector(t, bconn, path, "b")
	ta := lead(t, a)
	ch := campaignAsync(ctxT(t), b)
	eventually(t, "b's node", func() bool { return len(cands(t, admin, path)) == 2 })
	old := bconn.SessionID()
	px.Cut()
	eventually(t, "b's session to expire", func() bool { return len(cands(t, admin, path)) == 1 })
	px.Reset()
	px.Heal()
	eventually(t, "b's new session", func() bool { return bconn.SessionID() != old && bconn.SessionID() != 0 })
	eventually(t, "b's new node", func() bool { return len(cands(t, admin, path)) == 2 })
	if err := a.Resign(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	r := await(t, ch, patience, "waiter after its session expired")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.t.Token() <= ta.Token() {
		t.Fatalf("token %d not above %d", r.t.Token(), ta.Token())
	}
}

// P3 under a partition: the leader cut off from ZooKeeper ends its Term
// before the next candidate's Campaign returns (one monotonic clock: both
// run in this process).
func TestPartitionedLeaderStepsDownFirst(t *testing.T) {
	for _, policy := range []zk.Policy{zk.StepDownOnDisconnect, zk.HoldUntilDeadline} {
		t.Run(policy.String(), func(t *testing.T) {
			path := newPath(t)
			px := faultproxy.New(t, server(t).Addr)
			aconn := zktest.Conn(t, []string{px.Addr}, ttl)
			t.Cleanup(px.Close)
			a, err := zk.NewConfig(aconn, path, zk.Config{Policy: policy}, election.WithID("a"), election.WithTTL(ttl))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { a.Close() })
			b := newElector(t, newConn(t), path, "b")
			ta := lead(t, a)
			ch := campaignAsync(ctxT(t), b)
			var done time.Time
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { defer wg.Done(); <-ta.Done(); done = time.Now() }()
			px.Cut()
			r := await(t, ch, patience, "next candidate")
			if r.err != nil {
				t.Fatal(r.err)
			}
			wg.Wait()
			if !done.Before(r.at) {
				t.Fatalf("partitioned leader's Term Done at %v, next Campaign returned %v earlier", done, done.Sub(r.at))
			}
			if !errors.Is(ta.Err(), election.ErrSessionLost) && !errors.Is(ta.Err(), election.ErrLeaseExpired) {
				t.Fatalf("Term ended with %v", ta.Err())
			}
			t.Logf("%v: old Term Done %v before the next Campaign returned (%v)", policy, r.at.Sub(done), ta.Err())
		})
	}
}

// Disconnect policies: a connection reset (the session survives) ends the
// Term under StepDownOnDisconnect, and not under HoldUntilDeadline.
func TestDisconnectPolicy(t *testing.T) {
	for _, policy := range []zk.Policy{zk.StepDownOnDisconnect, zk.HoldUntilDeadline} {
		t.Run(policy.String(), func(t *testing.T) {
			px := faultproxy.New(t, server(t).Addr)
			a, err := zk.Dial(ctxT(t), zk.DialConfig{Servers: []string{px.Addr}, Config: zk.Config{Policy: policy}}, newPath(t),
				election.WithID("a"), election.WithTTL(ttl))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { a.Close() })
			ta := lead(t, a)
			px.Reset()
			if policy == zk.StepDownOnDisconnect {
				waitDone(t, ta, patience, "leader after a disconnect")
				if !errors.Is(ta.Err(), election.ErrSessionLost) {
					t.Fatalf("Term ended with %v; want ErrSessionLost", ta.Err())
				}
				return
			}
			// Held: renewals go on over the new connection.
			d0 := ta.Deadline()
			eventually(t, "a renewal after reconnecting", func() bool { return ta.Deadline().After(d0) })
			if err := ta.Err(); err != nil {
				t.Fatalf("Term ended across a reconnect within the session: %v", err)
			}
		})
	}
}

// A create whose reply is lost is found by its GUID after the reconnect:
// exactly one node, and it leads.
func TestLostCreateReply(t *testing.T) {
	admin := newConn(t)
	path := newPath(t)
	// The path made beforehand, by another client, without the queue node
	// (a candidate of priority 0 needs none to register). No watch is set
	// before the reconnect: go-zookeeper v1.0.4 races with itself when it
	// sends SetWatches on a new connection (go-zookeeper/zk#35).
	if _, err := admin.Create("/elections", nil, 0, gozk.WorldACL(gozk.PermAll)); err != nil && !errors.Is(err, gozk.ErrNodeExists) {
		t.Fatal(err)
	}
	if _, err := admin.Create(path, nil, 0, gozk.WorldACL(gozk.PermAll)); err != nil {
		t.Fatal(err)
	}
	px := faultproxy.New(t, server(t).Addr)
	conn := zktest.Conn(t, []string{px.Addr}, ttl)
	t.Cleanup(px.Close)
	a := newElector(t, conn, path, "a")
	px.CutReplies()
	ch := campaignAsync(ctxT(t), a)
	eventually(t, "the node created without a reply", func() bool { return len(cands(t, admin, path)) == 1 })
	px.Reset()
	px.Heal()
	r := await(t, ch, patience, "campaign after a lost create reply")
	if r.err != nil {
		t.Fatal(r.err)
	}
	got := cands(t, admin, path)
	if len(got) != 1 {
		t.Fatalf("candidate nodes %v; want exactly one", got)
	}
	node, err := a.FenceKey(r.t)
	if err != nil {
		t.Fatal(err)
	}
	_, st, err := admin.Get(node)
	if err != nil {
		t.Fatal(err)
	}
	if uint64(st.Czxid) != r.t.Token() || st.EphemeralOwner != conn.SessionID() {
		t.Fatalf("node czxid %d owner %#x; Term token %d, session %#x", st.Czxid, st.EphemeralOwner, r.t.Token(), conn.SessionID())
	}
}

// ACLs: two authenticated identities share the election; a client without
// credentials can neither unseat the leader nor stand, and is told why.
func TestACLKeepsIntrudersOut(t *testing.T) {
	path := newPath(t)
	pathACL := append(gozk.DigestACL(gozk.PermAll, "alice", "pa"), gozk.DigestACL(gozk.PermAll, "bob", "pb")...)
	pathACL = append(pathACL, gozk.WorldACL(gozk.PermRead)...)
	cfg := zk.Config{PathACL: pathACL, NodeACL: zk.CreatorOnly(gozk.PermRead)}
	dial := func(digest, id string) *zk.Elector {
		e, err := zk.Dial(ctxT(t), zk.DialConfig{Servers: []string{server(t).Addr}, Digest: digest, Config: cfg}, path,
			election.WithID(id), election.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	}
	a, b := dial("alice:pa", "alice"), dial("bob:pb", "bob")
	ta := lead(t, a)
	chb := campaignAsync(ctxT(t), b)
	intruder := newConn(t)
	eventually(t, "bob's node", func() bool { return len(cands(t, intruder, path)) == 2 })
	node, err := a.FenceKey(ta)
	if err != nil {
		t.Fatal(err)
	}
	if err := intruder.Delete(node, -1); !errors.Is(err, gozk.ErrNoAuth) {
		t.Fatalf("intruder deleting the leader's node: %v; want ErrNoAuth", err)
	}
	if _, err := intruder.Set(node, []byte("{}"), -1); !errors.Is(err, gozk.ErrNoAuth) {
		t.Fatalf("intruder overwriting the leader's node: %v; want ErrNoAuth", err)
	}
	e := newElector(t, intruder, path, "mallory")
	if _, err := e.Campaign(ctxT(t)); !errors.Is(err, gozk.ErrNoAuth) || !strings.Contains(err.Error(), path) {
		t.Fatalf("intruder's Campaign: %v; want an error naming the path and wrapping ErrNoAuth", err)
	}
	if err := ta.Err(); err != nil {
		t.Fatalf("leader's Term ended: %v", err)
	}
	if l, err := b.Leader(ctxT(t)); err != nil || l.ID != "alice" {
		t.Fatalf("Leader = %v, %v; want alice", l, err)
	}
	if err := a.Resign(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if r := await(t, chb, patience, "bob"); r.err != nil {
		t.Fatal(r.err)
	}
}

// Fence makes a write conditional on the leadership.
func TestFence(t *testing.T) {
	conn := newConn(t)
	path := newPath(t)
	a := newElector(t, conn, path, "a")
	ta := lead(t, a)
	op, err := a.Fence(ta)
	if err != nil {
		t.Fatal(err)
	}
	data := path + "-data"
	if _, err := conn.Multi(op, &gozk.CreateRequest{Path: data, Data: []byte("1"), Acl: gozk.WorldACL(gozk.PermAll)}); err != nil {
		t.Fatalf("fenced write while leading: %v", err)
	}
	if err := a.Proclaim(ctxT(t), ta, []byte("new value")); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Multi(op, &gozk.SetDataRequest{Path: data, Data: []byte("2"), Version: -1}); err == nil {
		t.Fatal("a check op taken before Proclaim still passed")
	}
	op, err = a.Fence(ta)
	if err != nil {
		t.Fatal(err)
	}
	if l, err := a.Leader(ctxT(t)); err != nil || string(l.Value) != "new value" {
		t.Fatalf("Leader after Proclaim: %v, %v", l, err)
	}
	if err := ta.Err(); err != nil {
		t.Fatalf("Proclaim ended the Term: %v", err)
	}
	if err := a.Resign(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Multi(op, &gozk.SetDataRequest{Path: data, Data: []byte("3"), Version: -1}); !errors.Is(err, gozk.ErrNoNode) {
		t.Fatalf("fenced write after Resign: %v; want ErrNoNode", err)
	}
	if _, err := a.Fence(ta); !errors.Is(err, election.ErrNotLeader) {
		t.Fatalf("Fence after Resign: %v; want ErrNotLeader", err)
	}
	if err := a.Proclaim(ctxT(t), ta, nil); !errors.Is(err, election.ErrNotLeader) {
		t.Fatalf("Proclaim after Resign: %v; want ErrNotLeader", err)
	}
}

// P9: with many candidates waiting, a handover costs the waiters O(1)
// listings and watches in all, not one per waiter.
func TestNoHerd(t *testing.T) {
	conn := newConn(t)
	path := newPath(t)
	const n = 30
	var es []*zk.Elector
	var chs []<-chan result
	for i := range n {
		e := newElector(t, conn, path, "c"+string(rune('a'+i%26))+string(rune('a'+i/26)))
		es = append(es, e)
		if i == 0 {
			lead(t, e)
			continue
		}
		chs = append(chs, campaignAsync(ctxT(t), e))
		// One at a time, so that the queue's order is the slice's.
		eventually(t, "the new node", func() bool { return len(cands(t, conn, path)) == i+1 })
	}
	total := func() (s int64) {
		for _, e := range es[1:] {
			s += zk.Reads(e)
		}
		return s
	}
	// Every waiter has set its wake-up watch, read the queue node, listed
	// once and set one watch (each counted as it starts); let them settle.
	eventually(t, "every waiter watching", func() bool {
		for _, e := range es[1:] {
			if zk.Reads(e) < 4 {
				return false
			}
		}
		return true
	})
	for h := 1; h < 4; h++ {
		// es[h-1]'s release hands over to es[h], which reads _l once on
		// the event and leads; nothing else changes for the others: the
		// release touches no node they watch.
		eventually(t, "the leader knowing its successor", func() bool { return zk.Successor(es[h-1]) != "" })
		before := total()
		if err := es[h-1].Resign(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		if r := await(t, chs[h-1], patience, "next in line"); r.err != nil {
			t.Fatal(r.err)
		}
		if d := total() - before; d != 1 {
			t.Fatalf("handover %d cost the waiters %d listings, reads and watches; want 1 (the next candidate's read of the leader node)", h, d)
		}
	}
}

// Another client deletes the queue node (_q) while a candidate waits next
// in line: its claim on the leader's resign checks _q, fails, and it lists
// and claims as usual; a waiter near the head (or a registration of
// positive priority) makes _q again, and the order by priority holds.
func TestQueueNodeDeleted(t *testing.T) {
	admin := newConn(t)
	path := newPath(t)
	a := newElector(t, newConn(t), path, "a")
	ta := lead(t, a)
	b := newElector(t, newConn(t), path, "b")
	chb := campaignAsync(ctxT(t), b)
	eventually(t, "b to queue", func() bool { return len(cands(t, admin, path)) == 2 })
	if err := admin.Delete(path+"/_q", -1); err != nil {
		t.Fatalf("deleting _q: %v", err)
	}
	if err := a.Resign(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	waitDone(t, ta, patience, "a's Term after its resign")
	rb := await(t, chb, patience, "b after a resigned with _q gone")
	if rb.err != nil {
		t.Fatal(rb.err)
	}
	if rb.t.Token() <= ta.Token() {
		t.Fatalf("b's token %d not above a's %d", rb.t.Token(), ta.Token())
	}
	d := newElector(t, newConn(t), path, "d")
	chd := campaignAsync(ctxT(t), d)
	c := newElector(t, newConn(t), path, "c", election.WithPriority(1))
	chc := campaignAsync(ctxT(t), c)
	eventually(t, "c and d to queue", func() bool { return len(cands(t, admin, path)) == 3 })
	if ok, _, err := admin.Exists(path + "/_q"); err != nil || !ok {
		t.Fatalf("_q after a registration of priority 1: exists %v, %v; want made again", ok, err)
	}
	if err := b.Resign(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	rc := await(t, chc, patience, "c (priority 1) after b resigned")
	if rc.err != nil {
		t.Fatal(rc.err)
	}
	select {
	case r := <-chd:
		t.Fatalf("d (priority 0, first to queue) led before c (priority 1): %v, %v", r.t, r.err)
	default:
	}
}

// A nil ctx or connection is refused with an error naming it, never a
// panic, and changes nothing: the leader's Term stays valid.
func TestNilArguments(t *testing.T) {
	var nilCtx context.Context // a variable: a literal nil ctx is what vet tools flag
	e := newElector(t, newConn(t), newPath(t), "a")
	term, err := e.Campaign(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	_, candErr := e.Candidates(nilCtx)
	_, reqErr := e.RequestTransfer(nilCtx, "b")
	_, newErr := zk.New(nil, "/x")
	_, cfgErr := zk.NewConfig(nil, "/x", zk.Config{})
	_, dialErr := zk.Dial(nilCtx, zk.DialConfig{Servers: []string{"127.0.0.1:1"}}, "/x")
	for _, c := range []struct {
		what, field string
		err         error
	}{
		{"Candidates(nil)", "ctx", candErr},
		{"Transfer(nil)", "ctx", e.Transfer(nilCtx, term, "", election.KeepLeading)},
		{"RequestTransfer(nil)", "ctx", reqErr},
		{"Proclaim(nil)", "ctx", e.Proclaim(nilCtx, term, []byte("v"))},
		{"New(nil conn)", "conn", newErr},
		{"NewConfig(nil conn)", "conn", cfgErr},
		{"Dial(nil ctx)", "ctx", dialErr},
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
