package etcdtest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electkit/election/internal/rig/embedetcd"
	"github.com/electkit/election/internal/rig/etcdtest"
)

// fakeTB records failures instead of stopping the test, so tests can check
// that helpers fail when they should. Its Cleanup functions run on
// runCleanups.
type fakeTB struct {
	t *testing.T

	mu       sync.Mutex
	failures []string
	cleanups []func()
}

func (f *fakeTB) Helper()                         {}
func (f *fakeTB) TempDir() string                 { return f.t.TempDir() }
func (f *fakeTB) Logf(format string, args ...any) { f.t.Logf(format, args...) }

func (f *fakeTB) Cleanup(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleanups = append(f.cleanups, fn)
}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures = append(f.failures, fmt.Sprintf(format, args...))
}

func (f *fakeTB) failed() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.failures...)
}

func (f *fakeTB) runCleanups() {
	f.mu.Lock()
	fns := f.cleanups
	f.cleanups = nil
	f.mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}

// ctxTimeout returns a context that expires after d, cancelled when the test
// ends.
func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestNewAndClient(t *testing.T) {
	s := etcdtest.New(t, embedetcd.Config{})
	cli := etcdtest.Client(t, s.Endpoints())
	ctx := ctxTimeout(t, 10*time.Second)
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatalf("Put: %v", err)
	}
	resp, err := cli.Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v" {
		t.Fatalf("Get(k) = %v, %v; want value v", resp, err)
	}
}

func TestNewClosesInCleanup(t *testing.T) {
	f := &fakeTB{t: t}
	s := etcdtest.New(f, embedetcd.Config{})
	if s == nil {
		t.Fatalf("New failed: %v", f.failed())
	}
	dir := s.Dir()
	f.runCleanups()
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("after Cleanup, Stat(%q) = %v, want not-exist", dir, err)
	}
	if got := f.failed(); len(got) != 0 {
		t.Fatalf("unexpected failures: %v", got)
	}
}

func TestHelpersFailOnBadInput(t *testing.T) {
	cases := []struct {
		name string
		run  func(tb etcdtest.TB) any
		want string
	}{
		{"New with bad timing", func(tb etcdtest.TB) any { return etcdtest.New(tb, embedetcd.Config{TickMs: 100, ElectionMs: 100}) }, "ElectionMs=100"},
		{"NewCluster with n=0", func(tb etcdtest.TB) any { return etcdtest.NewCluster(tb, 0, embedetcd.Config{}) }, "n=0"},
		{"Client without endpoints", func(tb etcdtest.TB) any { return etcdtest.Client(tb, nil) }, "no endpoints"},
		{"Client to a remote host", func(tb etcdtest.TB) any { return etcdtest.Client(tb, []string{"http://10.1.2.3:2379"}) }, "10.1.2.3"},
		{"Client with a remote host set by extra", func(tb etcdtest.TB) any {
			return etcdtest.Client(tb, []string{"http://127.0.0.1:2379"}, func(c *clientv3.Config) { c.Endpoints = []string{"example.com:2379"} })
		}, "example.com"},
		{"WaitLeader on nil", func(tb etcdtest.TB) any { return etcdtest.WaitLeader(tb, nil, time.Second) }, "nil"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &fakeTB{t: t}
			got := c.run(f)
			defer f.runCleanups()
			fails := f.failed()
			if len(fails) != 1 || !strings.Contains(fails[0], c.want) {
				t.Fatalf("failures = %q, want one mentioning %q", fails, c.want)
			}
			switch v := got.(type) {
			case *embedetcd.Server:
				if v != nil {
					t.Fatalf("returned %v after failing", v)
				}
			case *etcdtest.Cluster:
				if v != nil {
					t.Fatalf("returned %v after failing", v)
				}
			case *clientv3.Client:
				if v != nil {
					t.Fatalf("returned %v after failing", v)
				}
			case int:
				if v != -1 {
					t.Fatalf("returned %d after failing", v)
				}
			}
		})
	}
}

func TestClusterLeaderFailover(t *testing.T) {
	c := etcdtest.NewCluster(t, 3, embedetcd.Config{})
	ms := c.Members()
	eps := c.Endpoints()
	if len(ms) != 3 || len(eps) != 3 {
		t.Fatalf("got %d members and %d endpoints, want 3 of each", len(ms), len(eps))
	}
	for i, m := range ms {
		if eps[i] != m.Endpoint || !strings.HasPrefix(m.Endpoint, "http://127.0.0.1:") || m.Endpoint == m.ClientURL {
			t.Fatalf("member %d: Endpoint %q (ClientURL %q), want a distinct http://127.0.0.1 proxy address", i, m.Endpoint, m.ClientURL)
		}
	}

	leader := etcdtest.WaitLeader(t, c, 10*time.Second)
	if !ms[leader].IsLeader() {
		t.Fatalf("WaitLeader returned %d, which is not the leader", leader)
	}
	cli := etcdtest.Client(t, eps)
	ctx := ctxTimeout(t, 20*time.Second)
	if _, err := cli.Put(ctx, "k", "before"); err != nil {
		t.Fatalf("Put: %v", err)
	}

	ms[leader].Stop()
	next := etcdtest.WaitLeader(t, c, 10*time.Second)
	if next == leader {
		t.Fatalf("WaitLeader returned the stopped member %d", leader)
	}
	putCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cli.Put(putCtx, "k", "after"); err != nil {
		t.Fatalf("Put after the leader stopped: %v", err)
	}

	// With two of three members down there is no quorum and so no leader.
	third := 3 - leader - next
	ms[third].Stop()
	// The lone member steps down once it misses a quorum for an election
	// timeout (etcd runs raft with CheckQuorum).
	deadline := time.Now().Add(10 * time.Second)
	for ms[next].IsLeader() {
		if time.Now().After(deadline) {
			t.Fatal("the lone member is still leader without a quorum")
		}
		time.Sleep(10 * time.Millisecond)
	}
	f := &fakeTB{t: t}
	if got := etcdtest.WaitLeader(f, c, 300*time.Millisecond); got != -1 || len(f.failed()) != 1 {
		t.Fatalf("WaitLeader without quorum = %d with failures %q, want -1 and one failure", got, f.failed())
	}

	// A restarted member restores the quorum; reads through its proxy see
	// the last write.
	if err := ms[leader].Restart(); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	etcdtest.WaitLeader(t, c, 10*time.Second)
	resp, err := etcdtest.Client(t, []string{ms[leader].Endpoint}).Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "after" {
		t.Fatalf("Get(k) through the restarted member = %v, %v; want value after", resp, err)
	}
}

func TestBlackholedProxy(t *testing.T) {
	c := etcdtest.NewCluster(t, 1, embedetcd.Config{})
	m := c.Members()[0]
	cli := etcdtest.Client(t, []string{m.Endpoint})
	ctx := ctxTimeout(t, 20*time.Second)
	if _, err := cli.Put(ctx, "k", "v1"); err != nil {
		t.Fatalf("Put before blackhole: %v", err)
	}

	m.Blackhole()
	putCtx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err := cli.Put(putCtx, "k", "lost")
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Put through a blackholed proxy: error = %v, want %v", err, context.DeadlineExceeded)
	}

	m.Unblackhole()
	start := time.Now()
	var attempts int
	for {
		attempts++
		putCtx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		_, err = cli.Put(putCtx, "k", "v2")
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("Put never succeeded after Unblackhole (%d attempts): %v", attempts, err)
		}
	}
	t.Logf("Put succeeded %v after Unblackhole, attempt %d", time.Since(start), attempts)
	resp, err := cli.Get(ctx, "k")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v2" {
		t.Fatalf("Get(k) = %v, %v; want value v2", resp, err)
	}
}

func TestClusterWithTLSThroughProxy(t *testing.T) {
	certs, err := embedetcd.NewTLS(t.TempDir())
	if err != nil {
		t.Fatalf("NewTLS: %v", err)
	}
	c := etcdtest.NewCluster(t, 1, embedetcd.Config{TLS: certs})
	m := c.Members()[0]
	if !strings.HasPrefix(m.Endpoint, "https://127.0.0.1:") || !strings.HasPrefix(m.ClientURL, "https://127.0.0.1:") {
		t.Fatalf("Endpoint %q, ClientURL %q: want https://127.0.0.1 URLs", m.Endpoint, m.ClientURL)
	}
	tlsCfg, err := certs.ClientConfig()
	if err != nil {
		t.Fatalf("ClientConfig: %v", err)
	}
	cli := etcdtest.Client(t, c.Endpoints(), func(cfg *clientv3.Config) { cfg.TLS = tlsCfg })
	ctx := ctxTimeout(t, 10*time.Second)
	if _, err := cli.Put(ctx, "k", "tls"); err != nil {
		t.Fatalf("Put over TLS through the proxy: %v", err)
	}
}
