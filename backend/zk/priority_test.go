package zk_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/zk"
	"github.com/electkit/election/internal/rig/faultproxy"
	"github.com/electkit/election/internal/rig/zktest"
)

// The priority field of a node's name round-trips for every int64, and
// sorts as text highest priority first.
func TestPriorityEncoding(t *testing.T) {
	ps := []int64{math.MinInt64, math.MinInt64 + 1, -1 << 40, -2, -1, 0, 1, 2, 1 << 40, math.MaxInt64 - 1, math.MaxInt64}
	var encs []string
	for _, p := range ps {
		s := zk.EncodePriority(p)
		if len(s) != 16 {
			t.Errorf("EncodePriority(%d) = %q: want 16 hex digits", p, s)
		}
		if got, ok := zk.DecodePriority(s); !ok || got != p {
			t.Errorf("DecodePriority(EncodePriority(%d) = %q) = %d, %v", p, s, got, ok)
		}
		encs = append(encs, s)
	}
	if !sort.SliceIsSorted(encs, func(i, j int) bool { return encs[i] > encs[j] }) {
		t.Errorf("encodings of ascending priorities do not sort descending: %v", encs)
	}
	for _, bad := range []string{"", "123", "0000000000000000x", "000000000000000g", "FFFFFFFFFFFFFFFF"} {
		if _, ok := zk.DecodePriority(bad); ok {
			t.Errorf("DecodePriority(%q) accepted", bad)
		}
	}
}

// A newcomer of higher priority sorts ahead of the leader's candidate
// node, but the leader leads on (its Term is renewed, Leader names it) and
// the newcomer waits, listed first, until the leader resigns.
func TestNewcomerNeverSortsAheadOfConfirmedLeader(t *testing.T) {
	path := newPath(t)
	admin := newConn(t)
	var renewals atomic.Int64
	a := newElector(t, newConn(t), path, "a", election.WithPriority(-5), election.WithAfterRenew(func(r election.Renewal) {
		if r.Err == nil {
			renewals.Add(1)
		}
	}))
	ta := lead(t, a)
	b := newElector(t, newConn(t), path, "b", election.WithPriority(math.MaxInt64))
	rb := campaignAsync(ctxT(t), b)
	eventually(t, "b's node", func() bool { return len(cands(t, admin, path)) == 2 })
	names := cands(t, admin, path)
	slices.Sort(names) // not the order: GUIDs first; check the fields
	var bNode string
	for _, n := range names {
		if strings.Contains(n, "-p"+zk.EncodePriority(math.MaxInt64)+"-") {
			bNode = n
		}
	}
	if bNode == "" {
		t.Fatalf("no candidate node carries b's priority: %v", names)
	}
	n0 := renewals.Load()
	eventually(t, "two renewals of a's Term with b queued", func() bool { return renewals.Load() >= n0+2 })
	select {
	case r := <-rb:
		t.Fatalf("b's Campaign returned %v, %v while a leads", r.t, r.err)
	default:
	}
	if err := ta.Err(); err != nil {
		t.Fatalf("a's Term ended: %v", err)
	}
	if l, err := b.Leader(ctxT(t)); err != nil || l.ID != "a" || l.Token != ta.Token() {
		t.Fatalf("Leader = %v, %v; want a@%d", l, err, ta.Token())
	}
	if cs, err := a.Candidates(ctxT(t)); err != nil || len(cs) != 1 || cs[0].ID != "b" || cs[0].Priority != math.MaxInt64 {
		t.Fatalf("Candidates = %v, %v; want b alone", cs, err)
	}
	if err := a.Resign(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	r := await(t, rb, patience, "b after a resigned")
	if r.err != nil || r.t.Token() <= ta.Token() {
		t.Fatalf("b: %v, %v; want a Term with a token above %d", r.t, r.err, ta.Token())
	}
}

// A hand-over whose target crashes (its session left to expire) lapses:
// Transfer fails with ErrTransferFailed, the hand-over node is gone, and
// the normal order resumes.
func TestHandoverToCrashedTargetLapses(t *testing.T) {
	path := newPath(t)
	admin := newConn(t)
	a := newElector(t, newConn(t), path, "a")
	ta := lead(t, a)
	px := faultproxy.New(t, server(t).Addr)
	t.Cleanup(px.Close)
	b := newElector(t, zktest.Conn(t, []string{px.Addr}, ttl), path, "b", election.WithPriority(9))
	rb := campaignAsync(ctxT(t), b)
	c := newElector(t, newConn(t), path, "c", election.WithPriority(1))
	rc := campaignAsync(ctxT(t), c)
	eventually(t, "b and c queued", func() bool { return len(cands(t, admin, path)) == 3 })
	px.Cut() // b crashes: it never claims, its session expires
	err := election.Transfer(ctxT(t), a, ta, "b", election.KeepLeading)
	if !errors.Is(err, election.ErrTransferFailed) {
		t.Fatalf("Transfer to a crashed target = %v; want ErrTransferFailed", err)
	}
	if !errors.Is(ta.Err(), election.ErrTransferred) {
		t.Errorf("a's Term ended with %v; want ErrTransferred", ta.Err())
	}
	r := await(t, rc, patience, "c after the hand-over lapsed")
	if r.err != nil || r.t.Leader().ID != "c" || r.t.Token() <= ta.Token() {
		t.Fatalf("c: %v, %v", r.t, r.err)
	}
	if ok, _, err := admin.Exists(path + "/_t"); err != nil || ok {
		t.Errorf("hand-over node after the lapse: exists %v, %v", ok, err)
	}
	select {
	case r := <-rb:
		if r.err == nil {
			t.Errorf("the crashed target led: %v", r.t)
		}
	default:
	}
}

// A stale hand-over node — persistent, naming a candidate that is gone,
// as a crashed or foreign client may leave — never wedges the election:
// the head of the queue withdraws it and leads.
func TestStaleHandoverDoesNotWedge(t *testing.T) {
	for _, flags := range []int32{0, gozk.FlagEphemeral} {
		t.Run(map[int32]string{0: "persistent", gozk.FlagEphemeral: "ephemeral"}[flags], func(t *testing.T) {
			path := newPath(t)
			admin := newConn(t)
			if _, err := admin.Create("/elections", nil, 0, gozk.WorldACL(gozk.PermAll)); err != nil && !errors.Is(err, gozk.ErrNodeExists) {
				t.Fatal(err)
			}
			if _, err := admin.Create(path, nil, 0, gozk.WorldACL(gozk.PermAll)); err != nil {
				t.Fatal(err)
			}
			gone := "_c_00000000000000000000000000000000-p7fffffffffffffff-0000000007"
			if _, err := admin.Create(path+"/_t", []byte(`{"v":1,"to":"`+gone+`"}`), flags, gozk.WorldACL(gozk.PermAll)); err != nil {
				t.Fatal(err)
			}
			a := newElector(t, newConn(t), path, "a")
			ta := lead(t, a)
			if l, _, err := admin.Exists(path + "/_t"); err != nil || l {
				t.Errorf("the stale hand-over is still there (%v, %v)", l, err)
			}
			if ta.Err() != nil {
				t.Errorf("a's Term: %v", ta.Err())
			}
		})
	}
}

// Preemption and transfer hand the leadership on with a strictly higher
// token and no hand-over left behind; a transfer to the best candidate
// goes to the highest priority even when a lower one arrived first.
func TestTransferToBestAndPreemptionLeaveNoMarker(t *testing.T) {
	path := newPath(t)
	admin := newConn(t)
	a := newElector(t, newConn(t), path, "a", election.WithPreemption(ttl/4))
	ta := lead(t, a)
	b := newElector(t, newConn(t), path, "b", election.WithPriority(1))
	rb := campaignAsync(ctxT(t), b)
	r := await(t, rb, patience, "b preempting a")
	if r.err != nil || r.t.Token() <= ta.Token() {
		t.Fatalf("b: %v, %v", r.t, r.err)
	}
	if !errors.Is(ta.Err(), election.ErrPreempted) {
		t.Errorf("a's Term ended with %v; want ErrPreempted", ta.Err())
	}
	tb := r.t
	c := newElector(t, newConn(t), path, "c", election.WithPriority(0))
	rc := campaignAsync(ctxT(t), c)
	d := newElector(t, newConn(t), path, "d", election.WithPriority(7))
	rd := campaignAsync(ctxT(t), d)
	eventually(t, "c and d queued", func() bool { return len(cands(t, admin, path)) == 3 })
	if err := election.Transfer(context.Background(), b, tb, "", election.KeepLeading); err != nil {
		t.Fatalf("Transfer to the best: %v", err)
	}
	r = await(t, rd, patience, "d, the best")
	if r.err != nil || r.t.Leader().ID != "d" || r.t.Token() <= tb.Token() {
		t.Fatalf("d: %v, %v", r.t, r.err)
	}
	if ok, _, err := admin.Exists(path + "/_t"); err != nil || ok {
		t.Errorf("hand-over node after the transfer: exists %v, %v", ok, err)
	}
	select {
	case r := <-rc:
		t.Fatalf("c returned %v, %v", r.t, r.err)
	default:
	}
}

// RequestTransfer from an Elector that does not campaign (an operator's
// tool): to a named candidate, to one that is not waiting (the leader
// answers ErrNoCandidate and keeps leading), to the best; with no leader.
func TestRequestTransfer(t *testing.T) {
	path := newPath(t)
	op := newElector(t, newConn(t), path, "ops")
	if _, err := election.RequestTransfer(ctxT(t), op, "b"); !errors.Is(err, election.ErrNoLeader) {
		t.Errorf("RequestTransfer with no leader = %v, want ErrNoLeader", err)
	}
	a := newElector(t, newConn(t), path, "a")
	ta := lead(t, a)
	b, c := newElector(t, newConn(t), path, "b"), newElector(t, newConn(t), path, "c", election.WithPriority(3))
	rb, rc := campaignAsync(ctxT(t), b), campaignAsync(ctxT(t), c)
	eventually(t, "two waiting candidates", func() bool {
		cs, err := a.Candidates(ctxT(t))
		return err == nil && len(cs) == 2
	})
	ld, err := election.RequestTransfer(ctxT(t), op, "b")
	if err != nil || ld.ID != "b" {
		t.Fatalf("RequestTransfer to b = %v, %v", ld, err)
	}
	if !errors.Is(ta.Err(), election.ErrTransferred) {
		t.Errorf("the old Term ended with %v, want ErrTransferred", ta.Err())
	}
	r := <-rb
	if r.err != nil || r.t.Token() != ld.Token {
		t.Fatalf("b: %v, %v; RequestTransfer reported %v", r.t, r.err, ld)
	}
	if _, err := election.RequestTransfer(ctxT(t), op, "nobody"); !errors.Is(err, election.ErrNoCandidate) {
		t.Errorf("RequestTransfer to a candidate that is not waiting = %v, want ErrNoCandidate", err)
	}
	if err := r.t.Err(); err != nil {
		t.Errorf("the leader stopped leading after a refused request: %v", err)
	}
	ld, err = election.RequestTransfer(ctxT(t), op, "")
	if err != nil || ld.ID != "c" {
		t.Fatalf("RequestTransfer to the best = %v, %v; want c", ld, err)
	}
	if r := <-rc; r.err != nil {
		t.Fatal(r.err)
	}
}
