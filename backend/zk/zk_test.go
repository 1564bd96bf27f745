package zk_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/zk"
	"github.com/electkit/election/electiontest"
	"github.com/electkit/election/internal/rig/faultproxy"
	"github.com/electkit/election/internal/rig/zktest"
)

// ttl is the session timeout and TTL of the tests: the servers' tickTime
// is 500 ms, so 2 s is within their 1–10 s bounds.
const ttl = 2 * time.Second

const patience = 15 * time.Second

// One standalone server serves every test that needs no faults on the
// server side; each test uses its own election path.
var shared struct {
	once sync.Once
	srv  *zktest.Server
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.srv != nil {
		shared.srv.Kill()
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

func server(t testing.TB) *zktest.Server {
	t.Helper()
	zktest.Require(t)
	shared.once.Do(func() {
		shared.dir, shared.err = os.MkdirTemp("", "zk-election-test-")
		if shared.err == nil {
			shared.srv, shared.err = zktest.Start(shared.dir)
		}
	})
	if shared.err != nil {
		t.Fatalf("starting ZooKeeper: %v", shared.err)
	}
	return shared.srv
}

var pathSeq atomic.Int64

// newPath returns an election path no other test uses.
func newPath(t testing.TB) string {
	return fmt.Sprintf("/elections/%s-%d", sanitize(t.Name()), pathSeq.Add(1))
}

func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			b[i] = '_'
		}
	}
	return string(b)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	t.Cleanup(cancel)
	return ctx
}

// zkElection is one election of the conformance suite: each candidate has
// its own connection through its own proxy, so that Crash can cut it off
// silently and let its session expire, as a dead process's would.
type zkElection struct {
	addr  string
	path  string
	admin *gozk.Conn // another client of the server, for Evict
	mu    sync.Mutex
	px    map[election.Elector]*faultproxy.Proxy
}

func (z *zkElection) Candidate(t *testing.T, opts ...election.Option) election.Elector {
	t.Helper()
	px := faultproxy.New(t, z.addr)
	conn := zktest.Conn(t, []string{px.Addr}, ttl)
	t.Cleanup(px.Close) // before conn.Close (cleanups run last first): a cut connection closes at once
	e, err := zk.New(conn, z.path, append([]election.Option{election.WithTTL(ttl)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	z.mu.Lock()
	z.px[e] = px
	z.mu.Unlock()
	return e
}

func (z *zkElection) Crash(t *testing.T, e election.Elector) {
	z.mu.Lock()
	px := z.px[e]
	z.mu.Unlock()
	px.Cut()
}

// Silence drops the server's replies to e: requests arrive and are carried
// out, no answer comes back.
func (z *zkElection) Silence(t *testing.T, e election.Elector) func() {
	z.mu.Lock()
	px := z.px[e]
	z.mu.Unlock()
	px.CutReplies()
	return func() {
		// The proxy dropped bytes of a stream: what is still open
		// would never parse again, so it is closed and the client
		// reconnects, as after a network fault that long.
		px.Heal()
		px.Reset()
	}
}

// Evict deletes the leader's node with another connection, as zkCli's
// delete does.
func (z *zkElection) Evict(t *testing.T, e election.Elector, term *election.Term) {
	node, err := e.(*zk.Elector).Node(term)
	if err != nil {
		t.Fatalf("Evict: %v", err)
	}
	if err := z.admin.Delete(node, -1); err != nil {
		t.Fatalf("Evict: deleting %s: %v", node, err)
	}
}

func TestConformance(t *testing.T) {
	srv := server(t)
	admin := newConn(t)
	electiontest.Run(t, electiontest.Harness{
		NewElection: func(t *testing.T) electiontest.Election {
			return &zkElection{addr: srv.Addr, path: newPath(t), admin: admin, px: map[election.Elector]*faultproxy.Proxy{}}
		},
		// Session timeout, plus up to a tick for the server's expiry
		// buckets, plus the watch and the confirming check.
		Failover:  ttl + time.Second,
		Patience:  patience,
		Handover:  2 * time.Second,
		Handovers: 30,
	})
}

func newConn(t *testing.T, addrs ...string) *gozk.Conn {
	t.Helper()
	if len(addrs) == 0 {
		addrs = []string{server(t).Addr}
	}
	return zktest.Conn(t, addrs, ttl)
}

func newElector(t *testing.T, conn *gozk.Conn, path, id string, opts ...election.Option) *zk.Elector {
	t.Helper()
	e, err := zk.New(conn, path, append([]election.Option{election.WithID(id), election.WithTTL(ttl)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}
