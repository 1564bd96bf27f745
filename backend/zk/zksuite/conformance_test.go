package zksuite_test

import (
	"sync"
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

// TestMain fails the binary if a goroutine outlives the tests.
func TestMain(m *testing.M) { electiontest.Main(m) }

// server starts a standalone server for t, killed in t's cleanup.
func server(t *testing.T) *zktest.Server { return zktest.Standalone(t) }

// newPath returns an election path of its own for t.
func newPath(t *testing.T) string { return "/elections/" + sanitize(t.Name()) }

// sanitize makes a test's name one segment of an election name, short
// enough for backend.MaxNameLen.
func sanitize(s string) string {
	b := []byte(s)
	if len(b) > 160 {
		b = append([]byte("t"), b[len(b)-159:]...) // a segment must not begin with "_"
	}
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			b[i] = '_'
		}
	}
	return string(b)
}

// sessionTimeout is the session timeout a candidate made with opts asks
// for: the TTL they set, else ttl.
func sessionTimeout(opts []election.Option) time.Duration {
	var o election.Options
	for _, opt := range opts {
		opt(&o)
	}
	if o.TTL == 0 {
		return ttl
	}
	return o.TTL
}

// granted is the session timeout the servers grant when asked for d: d
// within their bounds of 2–20 ticks, else the nearest bound. It is the
// TTL (zk.New refuses any other), so a candidate asked for a TTL beyond
// the bounds leads with the bound.
func granted(d time.Duration) time.Duration {
	return min(max(d, 2*zktest.TickTime), 20*zktest.TickTime)
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
	timeout := sessionTimeout(opts)
	conn := zktest.Conn(t, []string{px.Addr}, timeout)
	t.Cleanup(px.Close) // before conn.Close (cleanups run last first): a cut connection closes at once
	e, err := zk.New(conn, z.path, append(append([]election.Option{election.WithTTL(ttl)}, opts...), election.WithTTL(granted(timeout)))...)
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
	node, err := e.(*zk.Elector).FenceKey(term)
	if err != nil {
		t.Fatalf("Evict: %v", err)
	}
	if err := z.admin.Delete(node, -1); err != nil {
		t.Fatalf("Evict: deleting %s: %v", node, err)
	}
}

func TestConformance(t *testing.T) {
	srv := server(t)
	admin := zktest.Conn(t, []string{srv.Addr}, ttl)
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
		Named: func(t *testing.T, name string, opts ...election.Option) (election.Elector, error) {
			e, err := zk.New(zktest.Conn(t, []string{srv.Addr}, ttl), name, append([]election.Option{election.WithTTL(ttl)}, opts...)...)
			if err != nil {
				return nil, err // not a nil *zk.Elector in an interface
			}
			return e, nil
		},
	})
}

// The machine's wall clock steps by hours while a candidate leads: its
// heartbeats go on, its Term stays valid, nobody else is elected.
func TestWallClockJumps(t *testing.T) {
	srv := server(t)
	path := newPath(t)
	electiontest.HoldsThroughClockJumps(t, ttl, patience, func(t *testing.T, opts ...election.Option) election.Elector {
		conn := zktest.Conn(t, []string{srv.Addr}, ttl)
		e, err := zk.New(conn, path, append([]election.Option{election.WithTTL(ttl)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		return e
	})
}
