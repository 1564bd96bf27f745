// Package etcdtest starts real etcd servers in-process for tests, built on
// internal/rig/embedetcd: a single member (New), a cluster whose members are each
// fronted by a fault-injecting TCP proxy (NewCluster), and clients for them
// (Client). Everything is stopped in the test's Cleanup.
//
// The package does not import "testing": helpers take a TB, which
// *testing.T and *testing.B satisfy.
package etcdtest

import (
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/electkit/election/internal/rig/embedetcd"
)

// DialTimeout is the clientv3.Config.DialTimeout that Client sets.
const DialTimeout = 5 * time.Second

// TB is the part of testing.TB the helpers use.
type TB interface {
	Helper()
	Cleanup(func())
	Fatalf(format string, args ...any)
	TempDir() string
	Logf(format string, args ...any)
}

// New starts a single-member etcd server with cfg, failing tb if it does not
// start, and closes it in tb's Cleanup.
func New(tb TB, cfg embedetcd.Config) *embedetcd.Server {
	tb.Helper()
	s, err := embedetcd.Start(cfg)
	if err != nil {
		tb.Fatalf("etcdtest: starting etcd: %v", err)
		return nil
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Fatalf("etcdtest: closing etcd: %v", err)
		}
	})
	return s
}

// Client returns a clientv3 client for endpoints, closed in tb's Cleanup. It
// sets DialTimeout and a no-op logger, then applies extra in order (e.g. to
// set TLS, Username and Password). Every endpoint must be on a loopback
// address; tb fails otherwise, or if the client cannot be created.
func Client(tb TB, endpoints []string, extra ...func(*clientv3.Config)) *clientv3.Client {
	tb.Helper()
	cfg := clientv3.Config{
		Endpoints:   append([]string(nil), endpoints...),
		DialTimeout: DialTimeout,
		Logger:      zap.NewNop(),
	}
	for _, f := range extra {
		if f != nil {
			f(&cfg)
		}
	}
	if len(cfg.Endpoints) == 0 {
		tb.Fatalf("etcdtest: Client: no endpoints")
		return nil
	}
	for _, ep := range cfg.Endpoints {
		if err := checkLoopback(ep); err != nil {
			tb.Fatalf("etcdtest: Client: %v", err)
			return nil
		}
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		tb.Fatalf("etcdtest: Client: connecting to %v: %v", cfg.Endpoints, err)
		return nil
	}
	tb.Cleanup(func() { cli.Close() })
	return cli
}

// checkLoopback returns an error unless endpoint ("scheme://host:port" or
// "host:port") names a loopback address.
func checkLoopback(endpoint string) error {
	hostport := endpoint
	if strings.Contains(endpoint, "://") {
		u, err := url.Parse(endpoint)
		if err != nil {
			return fmt.Errorf("endpoint %q: %w", endpoint, err)
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			return fmt.Errorf("endpoint %q: scheme %q is not http or https", endpoint, u.Scheme)
		}
		hostport = u.Host
	}
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return fmt.Errorf("endpoint %q: %w", endpoint, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("endpoint %q is not on a loopback address", endpoint)
}

// WaitLeader waits until the cluster has a settled etcd leader and returns
// its index in c.Members(): a running member that is the raft leader and that
// every other running member also names as leader. It polls every 10 ms and
// fails tb if that does not happen within timeout.
func WaitLeader(tb TB, c *Cluster, timeout time.Duration) int {
	tb.Helper()
	if c == nil {
		tb.Fatalf("etcdtest: WaitLeader: cluster is nil")
		return -1
	}
	deadline := time.Now().Add(timeout)
	ticker := time.NewTicker(10 * time.Millisecond)
	defer ticker.Stop()
	for {
		if i := c.settledLeader(); i >= 0 {
			return i
		}
		if !time.Now().Before(deadline) {
			tb.Fatalf("etcdtest: no settled etcd leader within %v; members' leaders: %s", timeout, c.leaderViews())
			return -1
		}
		<-ticker.C
	}
}
