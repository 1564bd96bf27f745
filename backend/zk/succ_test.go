package zk_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/zk"
)

// A release hands over to the successor in its multi: the successor,
// woken by the release, reads the leader node once and leads, with no
// claim; the waiter behind it reads nothing. The leader node and the new
// leadership node are persistent, Leader and a fenced write see the new
// leader, and the next release hands over the same way to a candidate
// that waited further back (it never learnt it was next in line).
func TestReleaseHandsOver(t *testing.T) {
	conn := newConn(t)
	q := threeQueued(t, conn, conn)
	path, a, b, c, ta, rb, rc := q.path, q.a, q.b, q.c, q.ta, q.rb, q.rc
	eventually(t, "b and c watching", func() bool { return zk.Reads(b) >= 3 && zk.Reads(c) >= 3 })
	readsB, readsC, claimsB := zk.Reads(b), zk.Reads(c), zk.Claims(b)
	if err := a.Resign(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	r := await(t, rb, patience, "b")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if n := zk.ConfirmedTakes(b); n != 1 {
		t.Errorf("b took %d hand-overs on a confirmation already made; want 1 (it waited next in line)", n)
	}
	if r.t.Token() <= ta.Token() {
		t.Fatalf("b's token %d not above a's %d", r.t.Token(), ta.Token())
	}
	if d := zk.Reads(b) - readsB; d != 1 {
		t.Errorf("b made %d reads from a's release to its lead; want 1 (the leader node)", d)
	}
	if d := zk.Claims(b) - claimsB; d != 0 {
		t.Errorf("b sent %d claims; want 0 (a's release handed over)", d)
	}
	_, st, err := conn.Get(path + "/_l")
	if err != nil || st.EphemeralOwner != 0 || uint64(st.Czxid) != r.t.Token() {
		t.Fatalf("_l after the hand-over: %+v, %v; want a persistent node made at b's token %d", st, err, r.t.Token())
	}
	if l, err := c.Leader(ctxT(t)); err != nil || l.ID != "b" || l.Token != r.t.Token() {
		t.Fatalf("Leader after the hand-over = %+v, %v; want b at %d", l, err, r.t.Token())
	}
	op, err := b.Fence(r.t)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Multi(op, &gozk.CreateRequest{Path: path + "-data", Acl: gozk.WorldACL(gozk.PermAll)}); err != nil {
		t.Fatalf("b's fenced write: %v", err)
	}
	if err := b.Proclaim(ctxT(t), r.t, []byte("b's")); err != nil {
		t.Fatalf("b's Proclaim on the handed-over nodes: %v", err)
	}
	if d := zk.Reads(c) - readsC; d != 0 {
		t.Errorf("c made %d reads at a's release; want 0 (it waits behind b)", d)
	}

	// c waited behind b, never next in line by its last listing: b's
	// release hands over to it all the same.
	eventually(t, "b knowing its successor", func() bool { return zk.Successor(b) != "" })
	claimsC := zk.Claims(c)
	if err := b.Resign(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	rc2 := await(t, rc, patience, "c")
	if rc2.err != nil {
		t.Fatal(rc2.err)
	}
	if rc2.t.Token() <= r.t.Token() {
		t.Fatalf("c's token %d not above b's %d", rc2.t.Token(), r.t.Token())
	}
	if d := zk.Claims(c) - claimsC; d != 0 {
		t.Errorf("c sent %d claims; want 0 (b's release handed over)", d)
	}
	if n := zk.ConfirmedTakes(c); n != 1 {
		t.Errorf("c took %d hand-overs on a confirmation already made; want 1 (third in the order, it kept its session confirmed)", n)
	}
	if err := r.t.Err(); !errors.Is(err, election.ErrResigned) {
		t.Errorf("b's Term ended with %v", err)
	}
	if err := c.Resign(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if names := children(t, conn, path); len(names) != 1 || names[0] != "_q" {
		t.Errorf("children after every candidate resigned: %q; want only _q", names)
	}
}

// A successor that a release handed over to loses its session (its
// connection closed): its candidate node goes with it, while the
// persistent _l and leadership node stay. The candidate behind it, woken
// by that node's going, finds _l naming a node that is gone, deletes it
// and claims.
func TestHandedLeaderCrashes(t *testing.T) {
	conn, bconn := newConn(t), newConn(t)
	q := threeQueued(t, conn, bconn)
	path, a, c, rb, rc := q.path, q.a, q.c, q.rb, q.rc
	if err := a.Resign(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	r := await(t, rb, patience, "b")
	if r.err != nil {
		t.Fatal(r.err)
	}
	bconn.Close() // b's session ends: its ephemeral nodes go
	rc2 := await(t, rc, patience, "c")
	if rc2.err != nil {
		t.Fatal(rc2.err)
	}
	if rc2.t.Token() <= r.t.Token() {
		t.Fatalf("c's token %d not above b's %d", rc2.t.Token(), r.t.Token())
	}
	waitDone(t, r.t, patience, "b's Term")
	_, st, err := conn.Get(path + "/_l")
	if err != nil || st.EphemeralOwner == 0 || uint64(st.Czxid) != rc2.t.Token() {
		t.Fatalf("_l after c's claim: %+v, %v; want c's, ephemeral", st, err)
	}
	if l, err := c.Leader(ctxT(t)); err != nil || l.ID != "c" {
		t.Fatalf("Leader = %+v, %v; want c", l, err)
	}
	var leads []string
	for _, n := range children(t, conn, path) {
		if strings.HasSuffix(n, "-lead") {
			leads = append(leads, n)
		}
	}
	if len(leads) != 1 {
		t.Errorf("leadership nodes after c's claim: %q; want c's alone (b's, left by the hand-over, deleted)", leads)
	}
}

// Another client deletes the candidate node of a leader that a release
// handed over to: the persistent _l naming it is stale from then on, so
// that leader's Term ends at once (it watches its node), and the
// candidate behind it, woken by the same delete, claims.
func TestHandedLeadersNodeDeleted(t *testing.T) {
	conn := newConn(t)
	q := threeQueued(t, conn, conn)
	path, a, rb, rc := q.path, q.a, q.rb, q.rc
	bNode := zk.Successor(a)
	if err := a.Resign(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	r := await(t, rb, patience, "b")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if err := conn.Delete(path+"/"+bNode, -1); err != nil {
		t.Fatal(err)
	}
	waitDone(t, r.t, patience, "b's Term")
	if err := r.t.Err(); !errors.Is(err, election.ErrSessionLost) {
		t.Errorf("b's Term ended with %v; want ErrSessionLost", err)
	}
	rc2 := await(t, rc, patience, "c")
	if rc2.err != nil {
		t.Fatal(rc2.err)
	}
	if rc2.t.Token() <= r.t.Token() {
		t.Fatalf("c's token %d not above b's %d", rc2.t.Token(), r.t.Token())
	}
}

// queued3 is an election where a leads and b, then c, wait behind it.
type queued3 struct {
	path    string
	a, b, c *zk.Elector
	ta      *election.Term
	rb, rc  <-chan result
}

// threeQueued makes a lead a new election on conn, then b (on bconn) and
// c queue behind it in that order, and waits until a knows b as its
// successor.
func threeQueued(t *testing.T, conn, bconn *gozk.Conn) queued3 {
	t.Helper()
	q := queued3{path: newPath(t)}
	q.a, q.b, q.c = newElector(t, conn, q.path, "a"), newElector(t, bconn, q.path, "b"), newElector(t, conn, q.path, "c")
	q.ta = lead(t, q.a)
	q.rb = campaignAsync(ctxT(t), q.b)
	eventually(t, "b queued", func() bool { return len(cands(t, conn, q.path)) == 2 })
	q.rc = campaignAsync(ctxT(t), q.c)
	eventually(t, "c queued", func() bool { return len(cands(t, conn, q.path)) == 3 })
	eventually(t, "a knowing its successor", func() bool { return zk.Successor(q.a) != "" })
	return q
}

// A successor alone on its connection, next in line: the connection's
// syncs (watchNext) keep its session confirmed, and the hand-over is
// taken on the last of them: one read after the event, no claim, no sync
// on the path, and a Term counted from a send time before the release.
func TestHandoverOnAConfirmedSession(t *testing.T) {
	conn, bconn := newConn(t), newConn(t)
	q := threeQueued(t, conn, bconn)
	a, b, rb := q.a, q.b, q.rb
	eventually(t, "b watching", func() bool { return zk.Reads(b) >= 3 })
	readsB, claimsB := zk.Reads(b), zk.Claims(b)
	before := time.Now()
	if err := a.Resign(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	r := await(t, rb, patience, "b")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.t.Token() <= q.ta.Token() {
		t.Fatalf("b's token %d not above a's %d", r.t.Token(), q.ta.Token())
	}
	if d := zk.Reads(b) - readsB; d != 1 {
		t.Errorf("b made %d reads from a's release to its lead; want 1", d)
	}
	if d := zk.Claims(b) - claimsB; d != 0 {
		t.Errorf("b sent %d claims; want 0", d)
	}
	if n := zk.ConfirmedTakes(b); n != 1 {
		t.Fatalf("b took %d hand-overs on a confirmation already made; want 1", n)
	}
	// The Term counts from a confirmation at most half a window older
	// than the release, and not from one made after b's Campaign
	// returned.
	w := r.t.Window()
	if start := r.t.Deadline().Add(-w); start.Before(before.Add(-w/2)) || start.After(r.at) {
		t.Errorf("b's Term counts from %v: want within [%v, %v] (half a window before the release, to Campaign's return)", start, before.Add(-w/2), r.at)
	}
	// Its heartbeats carry the Term on.
	deadline := r.t.Deadline()
	eventually(t, "b's Term renewed", func() bool { return r.t.Deadline().After(deadline) })
	if err := r.t.Err(); err != nil {
		t.Fatalf("b's Term ended: %v", err)
	}
}

// A persistent node named like a candidate's, behind the leader: it never
// goes, so it never leads (P8) — the leader's release must not hand over
// to it (a persistent _l naming a node that never goes would hold the
// election for good). The waiter behind it leads once the leader resigns.
func TestPersistentNodeNeverSucceeds(t *testing.T) {
	conn := newConn(t)
	path := newPath(t)
	a, b := newElector(t, conn, path, "a"), newElector(t, conn, path, "b")
	lead(t, a)
	junk, err := conn.Create(path+"/"+zk.NodePrefix("0123456789abcdef0123456789abcdef", 0), []byte(`{"v":1,"id":"junk"}`), gozk.FlagSequence, gozk.WorldACL(gozk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Delete(junk, -1) })
	rb := campaignAsync(ctxT(t), b)
	eventually(t, "b queued", func() bool { return len(cands(t, conn, path)) == 3 })
	if err := a.Resign(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if r := await(t, rb, patience, "b"); r.err != nil {
		t.Fatal(r.err)
	}
	if l, err := a.Leader(ctxT(t)); err != nil || l.ID != "b" {
		t.Fatalf("Leader = %+v, %v; want b", l, err)
	}
}
