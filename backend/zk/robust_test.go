package zk_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/zk"
	"github.com/electkit/election/internal/rig/faultproxy"
	"github.com/electkit/election/internal/rig/zktest"
)

// ctxBound is how soon after its ctx ends a call must return whatever the
// server does (100 ms), plus room for the scheduler on a loaded machine.
const ctxBound = 100*time.Millisecond + 50*time.Millisecond

// A Term that another connection ends (its leadership node or the leader
// node deleted, the path deleted with it) reports ErrSessionLost, and so does OnDemoted; it ends at once
// (its session lives on: nothing else would end it), in practice before the
// next candidate's Campaign returns, which is logged, not promised.
func TestNodeDeletedByAnotherEndsTermWithSentinel(t *testing.T) {
	for _, what := range []string{"node", "leader", "path"} {
		t.Run(what, func(t *testing.T) {
			path := newPath(t)
			admin := newConn(t)
			a := newElector(t, newConn(t), path, "a")
			b := newElector(t, newConn(t), path, "b")
			ta := lead(t, a)
			ch := make(chan struct {
				result
				aEnded bool
			}, 1)
			go func() {
				tb, err := b.Campaign(ctxT(t))
				ch <- struct {
					result
					aEnded bool
				}{result{tb, err, time.Now()}, ta.Err() != nil}
			}()
			eventually(t, "b's node", func() bool { return len(cands(t, admin, path)) == 2 })
			names := children(t, admin, path)
			aNode, err := a.FenceKey(ta) // the leadership node
			if err != nil {
				t.Fatal(err)
			}
			if what == "leader" {
				aNode = path + "/_l"
			}
			if what != "path" {
				if err := admin.Delete(aNode, -1); err != nil {
					t.Fatal(err)
				}
			} else {
				for _, n := range names {
					_ = admin.Delete(path+"/"+n, -1)
				}
				_ = admin.Delete(path, -1)
			}
			waitDone(t, ta, patience, "a's Term after its node was deleted")
			if !errors.Is(ta.Err(), election.ErrSessionLost) {
				t.Errorf("a's Term ended with %v (%T); want ErrSessionLost", ta.Err(), ta.Err())
			}
			var r struct {
				result
				aEnded bool
			}
			select {
			case r = <-ch:
			case <-time.After(patience):
				t.Fatal("b never led")
			}
			if r.err != nil {
				t.Fatal(r.err)
			}
			if !r.aEnded {
				t.Logf("a's Term still valid when b's Campaign returned (both learn of the delete from one zxid)")
			}
		})
	}
}

// A heartbeat that finds the node changed or gone ends the Term with a
// sentinel, not context.Canceled: the node's version bumped behind the
// leader's back (no delete event for the own-node watch).
func TestHeartbeatEndsTermWithSentinel(t *testing.T) {
	path := newPath(t)
	admin := newConn(t)
	a := newElector(t, newConn(t), path, "a")
	ta := lead(t, a)
	node, err := a.FenceKey(ta)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Set(node, []byte(`{"v":1,"id":"a"}`), -1); err != nil {
		t.Fatal(err)
	}
	waitDone(t, ta, patience, "a's Term after its node changed")
	if !errors.Is(ta.Err(), election.ErrSessionLost) {
		t.Errorf("a's Term ended with %v; want ErrSessionLost", ta.Err())
	}
}

// Campaign on a closed connection returns at once; a waiter whose
// connection is closed returns promptly.
func TestClosedConn(t *testing.T) {
	path := newPath(t)
	a := newElector(t, newConn(t), path, "a")
	lead(t, a)
	bconn := newConn(t)
	b := newElector(t, bconn, path, "b")
	ch := campaignAsync(ctxT(t), b)
	admin := newConn(t)
	eventually(t, "b's node", func() bool { return len(cands(t, admin, path)) == 2 })
	bconn.Close()
	r := await(t, ch, 2*time.Second, "a waiter whose connection was closed")
	if r.t != nil || !errors.Is(r.err, election.ErrSessionLost) {
		t.Errorf("waiter on a closed connection = %v, %v; want ErrSessionLost", r.t, r.err)
	}
	start := time.Now()
	r = await(t, campaignAsync(ctxT(t), b), 2*time.Second, "Campaign on a closed connection")
	if !errors.Is(r.err, election.ErrSessionLost) || time.Since(start) > time.Second {
		t.Errorf("Campaign on a closed connection = %v after %v; want ErrSessionLost at once", r.err, time.Since(start))
	}
}

// Campaign and Resign return within 100 ms of their ctx ending when the
// server accepts requests but never replies; Dial too.
func TestCtxHonouredWhenServerIsSilent(t *testing.T) {
	path := newPath(t)
	a := newElector(t, newConn(t), path, "a")
	ta := lead(t, a)
	px := faultproxy.New(t, server(t).Addr)
	t.Cleanup(px.Close)
	b := newElector(t, zktest.Conn(t, []string{px.Addr}, ttl), path, "b")
	ctx, cancel := context.WithCancel(ctxT(t))
	ch := campaignAsync(ctx, b)
	admin := newConn(t)
	eventually(t, "b's node", func() bool { return len(cands(t, admin, path)) == 2 })
	px.CutReplies()
	cancel()
	ended := time.Now()
	r := await(t, ch, patience, "b's Campaign")
	if !errors.Is(r.err, context.Canceled) {
		t.Errorf("b's Campaign = %v, %v; want context.Canceled", r.t, r.err)
	}
	if d := r.at.Sub(ended); d > ctxBound {
		t.Errorf("b's Campaign returned %v after its ctx ended", d)
	}
	dctx, dcancel := context.WithTimeout(ctxT(t), 300*time.Millisecond)
	defer dcancel()
	r = await(t, campaignAsync(dctx, b), patience, "b's Campaign while silent")
	if !errors.Is(r.err, context.DeadlineExceeded) {
		t.Errorf("Campaign while silent = %v, %v; want context.DeadlineExceeded", r.t, r.err)
	}
	if dl, _ := dctx.Deadline(); r.at.Sub(dl) > ctxBound {
		t.Errorf("Campaign returned %v after its deadline", r.at.Sub(dl))
	}
	px.Heal()
	if ta.Err() != nil {
		t.Errorf("a's Term ended: %v", ta.Err())
	}

	// Dial against a server that never answers.
	silent := faultproxy.New(t, server(t).Addr)
	t.Cleanup(silent.Close)
	silent.CutReplies()
	dctx2, dcancel2 := context.WithTimeout(ctxT(t), 300*time.Millisecond)
	defer dcancel2()
	start := time.Now()
	if _, err := zk.Dial(dctx2, zk.DialConfig{Servers: []string{silent.Addr}}, newPath(t), election.WithTTL(ttl)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Dial against a silent server = %v", err)
	}
	if d := time.Since(start); d > 300*time.Millisecond+ctxBound {
		t.Errorf("Dial returned after %v (ctx 300 ms)", d)
	}
}

// Resign of a leader whose server stopped replying returns with its ctx.
func TestResignHonoursCtxWhenServerIsSilent(t *testing.T) {
	px := faultproxy.New(t, server(t).Addr)
	t.Cleanup(px.Close)
	a := newElector(t, zktest.Conn(t, []string{px.Addr}, ttl), newPath(t), "a")
	ta := lead(t, a)
	px.CutReplies()
	ctx, cancel := context.WithTimeout(ctxT(t), 200*time.Millisecond)
	defer cancel()
	err := a.Resign(ctx)
	at := time.Now()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Resign while silent = %v; want context.DeadlineExceeded", err)
	}
	if dl, _ := ctx.Deadline(); at.Sub(dl) > ctxBound {
		t.Errorf("Resign returned %v after its deadline", at.Sub(dl))
	}
	if !errors.Is(ta.Err(), election.ErrResigned) {
		t.Errorf("Term after Resign: %v", ta.Err())
	}
	px.Heal()
}

// An Elector that leads and resigns many times keeps only the clocks of
// Terms whose hooks may still run, not every Term it ever had.
func TestEndedTermsAreForgotten(t *testing.T) {
	a := newElector(t, newConn(t), newPath(t), "a", election.WithAfterRenew(func(election.Renewal) {}))
	ctx := ctxT(t)
	for range 20 {
		if _, err := a.Campaign(ctx); err != nil {
			t.Fatal(err)
		}
		if err := a.Resign(ctx); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "ended Terms forgotten", func() bool { return zk.Clocks(a) == 0 })
}

// A refused name names itself in part, not its whole kilobyte.
func TestLongNameErrorIsBounded(t *testing.T) {
	_, err := zk.New(newConn(t), "/"+strings.Repeat("p", 1500), election.WithID("a"))
	if !errors.Is(err, election.ErrInvalidOption) || len(err.Error()) > 300 || !strings.Contains(err.Error(), "1501 bytes") {
		t.Errorf("New with a 1501-byte path = %v (%d bytes)", err, len(err.Error()))
	}
}

// A persistent node with a leader-like name under the path never leads;
// the candidates behind it do.
func TestPersistentLeaderLikeNodeNeverLeads(t *testing.T) {
	path := newPath(t)
	admin := newConn(t)
	a := newElector(t, newConn(t), path, "a")
	ta := lead(t, a)
	if _, err := admin.Create(path+"/_c_00000000000000000000000000000000-cand-0000000000", []byte(`{"v":1,"id":"forger"}`), 0, gozk.WorldACL(gozk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if l, err := a.Leader(ctxT(t)); err != nil || l.ID != "a" {
		t.Errorf("Leader() = %v, %v; want a", l, err)
	}
	if ta.Err() != nil {
		t.Errorf("a's Term ended: %v", ta.Err())
	}
}

// lostCreateReplies sets up an election where a leads and b, on a
// connection of its own through a proxy, gets no replies (its requests are
// carried out); admin is a third connection to read the path with.
func lostCreateReplies(t *testing.T) (path string, a *zk.Elector, ta *election.Term, b *zk.Elector, px *faultproxy.Proxy, admin *gozk.Conn) {
	t.Helper()
	path = newPath(t)
	a = newElector(t, newConn(t), path, "a")
	ta = lead(t, a)
	px = faultproxy.New(t, server(t).Addr) // closed in Cleanup
	b = newElector(t, zktest.Conn(t, []string{px.Addr}, ttl), path, "b")
	admin = newConn(t)
	px.CutReplies()
	return path, a, ta, b, px, admin
}

// A create whose reply is lost and whose Campaign gives up (ctx) leaves a
// node of the candidate's own live session; it is found and deleted once
// the server answers again, so it never heads the order for nobody.
func TestAbandonedCreateNeverBlocks(t *testing.T) {
	path, a, ta, b, px, admin := lostCreateReplies(t)
	ctx, cancel := context.WithTimeout(ctxT(t), 300*time.Millisecond)
	defer cancel()
	r := await(t, campaignAsync(ctx, b), patience, "b's Campaign while its replies are lost")
	if !errors.Is(r.err, context.DeadlineExceeded) {
		t.Fatalf("b's Campaign = %v, %v; want context.DeadlineExceeded", r.t, r.err)
	}
	eventually(t, "b's create carried out", func() bool { return len(cands(t, admin, path)) == 2 })
	px.Heal()
	px.Reset() // the cut stream would never parse again: the client reconnects
	eventually(t, "b's abandoned node deleted", func() bool { return len(cands(t, admin, path)) == 1 })
	ch := campaignAsync(ctxT(t), b)
	if err := a.Resign(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if r := await(t, ch, patience, "b after a resigned"); r.err != nil {
		t.Fatalf("b after a resigned: %v", r.err)
	}
	if ta.Err() == nil {
		t.Error("a's Term valid after Resign")
	}
}

// A create whose reply is lost when the Elector is closed leaves a node of
// a session that lives on (the connection is the caller's): Close finds it
// by its GUID and deletes it, so the election never waits behind a closed
// candidate.
func TestCloseDeletesAbandonedCreate(t *testing.T) {
	path, a, ta, b, px, admin := lostCreateReplies(t)
	rb := campaignAsync(ctxT(t), b)
	eventually(t, "b's create carried out", func() bool { return len(cands(t, admin, path)) == 2 })
	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	if r := await(t, rb, patience, "b's Campaign when b closes"); !errors.Is(r.err, election.ErrClosed) {
		t.Fatalf("b's Campaign = %v, %v; want ErrClosed", r.t, r.err)
	}
	px.Heal()
	px.Reset() // the cut stream would never parse again: the client reconnects
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(patience):
		t.Fatal("Close did not return")
	}
	if n := cands(t, admin, path); len(n) != 1 {
		t.Errorf("after b closed, the election holds %v; want a's node alone", n)
	}
	c := newElector(t, newConn(t), path, "c")
	rc := campaignAsync(ctxT(t), c)
	if err := a.Resign(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if r := await(t, rc, patience, "c after a resigned"); r.err != nil {
		t.Fatalf("c after a resigned: %v", r.err)
	}
	if ta.Err() == nil {
		t.Error("a's Term valid after Resign")
	}
}

// Stepping down from inside OnElected with OnElected's own ctx, which
// the Term's end cancels, returns nil, hands over, and logs nothing: the
// delete goes on past that ctx.
func TestStepDownInOnElectedLogsNothing(t *testing.T) {
	var logs lockedBuffer
	path := newPath(t)
	conn := newConn(t)
	a := newElector(t, conn, path, "a", election.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	b := newElector(t, newConn(t), path, "b")
	elected := make(chan struct{}, 1)
	queued := make(chan struct{})
	resigned := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- election.Run(ctx, a, election.Callbacks{
			OnElected: func(ctx context.Context, _ *election.Term) {
				elected <- struct{}{}
				select {
				case <-queued:
					resigned <- a.Resign(ctx)
				case <-ctx.Done():
				}
				<-ctx.Done()
			},
		})
	}()
	<-elected
	rb := campaignAsync(ctxT(t), b)
	eventually(t, "b queued", func() bool { return len(cands(t, conn, path)) == 2 })
	close(queued)
	select {
	case err := <-resigned:
		if err != nil {
			t.Errorf("Resign with OnElected's ctx = %v, want nil", err)
		}
	case <-time.After(patience):
		t.Fatal("Resign with OnElected's ctx did not return")
	}
	if r := await(t, rb, patience, "b"); r.err != nil {
		t.Fatalf("b's Campaign: %v", r.err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Run = %v, want context.Canceled", err)
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
