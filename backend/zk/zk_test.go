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

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	t.Cleanup(cancel)
	return ctx
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
