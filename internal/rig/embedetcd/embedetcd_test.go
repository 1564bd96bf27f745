package embedetcd_test

import (
	"context"
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/electkit/election/internal/rig/embedetcd"
)

// newClient returns a client for endpoints, closed when the test ends.
func newClient(t *testing.T, endpoints []string, extra ...func(*clientv3.Config)) *clientv3.Client {
	t.Helper()
	cfg := clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()}
	for _, f := range extra {
		f(&cfg)
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatalf("clientv3.New(%v): %v", endpoints, err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// start starts a single member and closes it when the test ends.
func start(t *testing.T, cfg embedetcd.Config) *embedetcd.Server {
	t.Helper()
	s, err := embedetcd.Start(cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// ctxTimeout returns a context that expires after d, cancelled when the test
// ends.
func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestStartServesPutGet(t *testing.T) {
	s := start(t, embedetcd.Config{})
	eps := s.Endpoints()
	if len(eps) != 1 || !strings.HasPrefix(eps[0], "http://127.0.0.1:") || strings.HasSuffix(eps[0], ":0") {
		t.Fatalf("Endpoints() = %q, want one http://127.0.0.1:<port> URL", eps)
	}
	if s.Etcd() == nil {
		t.Fatal("Etcd() = nil")
	}
	cli := newClient(t, eps)
	ctx := ctxTimeout(t, 10*time.Second)
	if _, err := cli.Put(ctx, "k", "v1"); err != nil {
		t.Fatalf("Put: %v", err)
	}
	resp, err := cli.Get(ctx, "k")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "v1" {
		t.Fatalf("Get(k) = %v, want one key with value v1", resp.Kvs)
	}
}

func TestCloseRemovesTempDirAndIsIdempotent(t *testing.T) {
	s, err := embedetcd.Start(embedetcd.Config{})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	dir := s.Dir()
	if _, err := os.Stat(filepath.Join(dir, "member")); err != nil {
		t.Fatalf("data dir %q has no member directory while running: %v", dir, err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("first Close: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("after Close, Stat(%q) = %v, want not-exist", dir, err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: s.Endpoints(), DialTimeout: time.Second, Logger: zap.NewNop()})
	if err == nil {
		defer cli.Close()
		ctx := ctxTimeout(t, 300*time.Millisecond)
		if _, err := cli.Get(ctx, "k"); err == nil {
			t.Fatal("Get on a closed server succeeded")
		}
	}
}

func TestGivenDirIsKeptAndReused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s := start(t, embedetcd.Config{Dir: dir})
	ctx := ctxTimeout(t, 10*time.Second)
	if _, err := newClient(t, s.Endpoints()).Put(ctx, "persist", "yes"); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "member")); err != nil {
		t.Fatalf("Close removed the caller's data dir: %v", err)
	}

	s2 := start(t, embedetcd.Config{Dir: dir})
	resp, err := newClient(t, s2.Endpoints()).Get(ctx, "persist")
	if err != nil {
		t.Fatalf("Get after restart: %v", err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "yes" {
		t.Fatalf("Get(persist) after restart = %v, want value yes", resp.Kvs)
	}
}

func TestBadInputReturnsErrors(t *testing.T) {
	configs := []struct {
		cfg  embedetcd.Config
		want string
	}{
		{embedetcd.Config{TickMs: 100, ElectionMs: 200}, "ElectionMs=200"},
		{embedetcd.Config{ElectionMs: 60000}, "ElectionMs=60000"},
		{embedetcd.Config{TickMs: 20000}, "TickMs=20000"},
		{embedetcd.Config{ReadyTimeout: -time.Second}, "ReadyTimeout=-1s"},
		{embedetcd.Config{TLS: &embedetcd.TLS{CAFile: "ca.pem"}}, "ServerCertFile"},
	}
	for _, c := range configs {
		if s, err := embedetcd.Start(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			if s != nil {
				s.Close()
			}
			t.Errorf("Start(%+v) error = %v, want one mentioning %q", c.cfg, err, c.want)
		}
		if cl, err := embedetcd.StartCluster(1, c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			if cl != nil {
				cl.Close()
			}
			t.Errorf("StartCluster(1, %+v) error = %v, want one mentioning %q", c.cfg, err, c.want)
		}
	}
	for _, n := range []int{0, -3} {
		if _, err := embedetcd.StartCluster(n, embedetcd.Config{}); err == nil || !strings.Contains(err.Error(), "n=") {
			t.Errorf("StartCluster(%d) error = %v, want one naming n", n, err)
		}
	}
	if _, err := embedetcd.NewTLS(""); err == nil {
		t.Error("NewTLS(\"\") succeeded")
	}
	var nilTLS *embedetcd.TLS
	if _, err := nilTLS.ClientConfig(); err == nil {
		t.Error("nil TLS ClientConfig succeeded")
	}
	if _, err := (&embedetcd.TLS{CAFile: filepath.Join(t.TempDir(), "missing.pem")}).ClientConfig(); err == nil || !strings.Contains(err.Error(), "missing.pem") {
		t.Errorf("ClientConfig with a missing CA file: error = %v, want one naming the file", err)
	}
	ctx := context.Background()
	if err := embedetcd.EnableAuth(ctx, nil, "pw"); err == nil {
		t.Error("EnableAuth with nil client succeeded")
	}
	if err := embedetcd.AddUser(ctx, nil, "u", "pw", "/p/"); err == nil {
		t.Error("AddUser with nil client succeeded")
	}

	// A populated Config.Dir cannot hold a fresh cluster.
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "m0", "member"), 0o700); err != nil {
		t.Fatal(err)
	}
	if cl, err := embedetcd.StartCluster(1, embedetcd.Config{Dir: dir}); err == nil || !strings.Contains(err.Error(), "m0") {
		if cl != nil {
			cl.Close()
		}
		t.Errorf("StartCluster in a populated dir: error = %v, want one naming m0", err)
	}
}

func TestDefaultsDeriveFromTheGivenTiming(t *testing.T) {
	// Only one of the two raft timings given: the other follows from it and
	// the server starts.
	for _, cfg := range []embedetcd.Config{{TickMs: 100}, {ElectionMs: 200}} {
		s := start(t, cfg)
		got := s.Etcd().Config()
		if got.ElectionMs < 5*got.TickMs {
			t.Errorf("Start(%+v): TickMs=%d ElectionMs=%d, want ElectionMs >= 5*TickMs", cfg, got.TickMs, got.ElectionMs)
		}
		if (cfg.TickMs != 0 && got.TickMs != cfg.TickMs) || (cfg.ElectionMs != 0 && got.ElectionMs != cfg.ElectionMs) {
			t.Errorf("Start(%+v) changed a given value: TickMs=%d ElectionMs=%d", cfg, got.TickMs, got.ElectionMs)
		}
		s.Close()
	}
}

// waitLeader polls until exactly one running member of c is the raft leader
// and returns its index.
func waitLeader(t *testing.T, c *embedetcd.Cluster, timeout time.Duration) int {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if i := c.Leader(); i >= 0 {
			return i
		}
		if time.Now().After(deadline) {
			t.Fatalf("no leader within %v", timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestClusterFailoverAndRestart(t *testing.T) {
	c, err := embedetcd.StartCluster(3, embedetcd.Config{})
	if err != nil {
		t.Fatalf("StartCluster: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	ms := c.Members()
	if len(ms) != 3 || len(c.Endpoints()) != 3 {
		t.Fatalf("got %d members and %d endpoints, want 3 of each", len(ms), len(c.Endpoints()))
	}
	leader := waitLeader(t, c, 10*time.Second)

	ctx := ctxTimeout(t, 20*time.Second)
	cli := newClient(t, c.Endpoints())
	if _, err := cli.Put(ctx, "k", "before"); err != nil {
		t.Fatalf("Put before failover: %v", err)
	}

	old := ms[leader]
	old.Stop()
	old.Stop() // stopping a stopped member does nothing
	if old.Running() || old.IsLeader() || old.Etcd() != nil {
		t.Fatalf("stopped member: Running=%v IsLeader=%v Etcd=%v", old.Running(), old.IsLeader(), old.Etcd())
	}
	next := waitLeader(t, c, 10*time.Second)
	if next == leader {
		t.Fatalf("leader is still the stopped member %d", leader)
	}
	putCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := cli.Put(putCtx, "k", "after"); err != nil {
		t.Fatalf("Put after failover: %v", err)
	}

	if err := old.Restart(); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if err := old.Restart(); err == nil || !strings.Contains(err.Error(), old.Name) {
		t.Fatalf("Restart of a running member: error = %v, want one naming %s", err, old.Name)
	}
	// A linearizable read through the restarted member alone sees the write
	// made while it was down.
	resp, err := newClient(t, []string{old.ClientURL}).Get(ctx, "k")
	if err != nil {
		t.Fatalf("Get through restarted member: %v", err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "after" {
		t.Fatalf("Get(k) through restarted member = %v, want value after", resp.Kvs)
	}
}

func TestTLSAndAuth(t *testing.T) {
	certs, err := embedetcd.NewTLS(filepath.Join(t.TempDir(), "certs"))
	if err != nil {
		t.Fatalf("NewTLS: %v", err)
	}
	for _, f := range []string{certs.CAFile, certs.ServerCertFile, certs.ServerKeyFile, certs.ClientCertFile, certs.ClientKeyFile} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("NewTLS did not write %s: %v", f, err)
		}
	}
	s := start(t, embedetcd.Config{TLS: certs, AuthTokenTTL: 60})
	eps := s.Endpoints()
	if !strings.HasPrefix(eps[0], "https://127.0.0.1:") {
		t.Fatalf("Endpoints() = %q, want https://127.0.0.1:<port>", eps)
	}
	tlsCfg, err := certs.ClientConfig()
	if err != nil {
		t.Fatalf("ClientConfig: %v", err)
	}
	withTLS := func(c *clientv3.Config) { c.TLS = tlsCfg.Clone() }
	login := func(user, password string) func(*clientv3.Config) {
		return func(c *clientv3.Config) { c.Username, c.Password = user, password }
	}
	ctx := ctxTimeout(t, 20*time.Second)

	admin := newClient(t, eps, withTLS)
	if err := embedetcd.EnableAuth(ctx, admin, "rootpw"); err != nil {
		t.Fatalf("EnableAuth: %v", err)
	}
	// Without a password the client certificate's common name, "client",
	// names the user, and there is no such user.
	if _, err := admin.Put(ctx, "/app/x", "anon"); err == nil {
		t.Fatal("Put as the certificate's user (no such user) succeeded after EnableAuth")
	}

	root := newClient(t, eps, withTLS, login("root", "rootpw"))
	if err := embedetcd.AddUser(ctx, root, "app", "apppw", "/app/"); err != nil {
		t.Fatalf("AddUser: %v", err)
	}
	if _, err := root.Put(ctx, "/app/x", "root"); err != nil {
		t.Fatalf("root Put /app/x: %v", err)
	}

	app := newClient(t, eps, withTLS, login("app", "apppw"))
	if _, err := app.Put(ctx, "/app/x", "app"); err != nil {
		t.Fatalf("app Put /app/x: %v", err)
	}
	resp, err := app.Get(ctx, "/app/x")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "app" {
		t.Fatalf("app Get /app/x = %v, %v; want value app", resp, err)
	}
	if _, err := app.Put(ctx, "/other", "app"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Fatalf("app Put /other: error = %v, want %v", err, rpctypes.ErrPermissionDenied)
	}
	// "/app" itself is outside the prefix "/app/".
	if _, err := app.Get(ctx, "/app"); !errors.Is(err, rpctypes.ErrPermissionDenied) {
		t.Fatalf("app Get /app: error = %v, want %v", err, rpctypes.ErrPermissionDenied)
	}

	// A wrong password is refused when the client logs in.
	if cli, err := clientv3.New(clientv3.Config{Endpoints: eps, TLS: tlsCfg.Clone(), Username: "app", Password: "wrong", DialTimeout: 5 * time.Second, Logger: zap.NewNop()}); !errors.Is(err, rpctypes.ErrAuthFailed) {
		if cli != nil {
			cli.Close()
		}
		t.Fatalf("login with a wrong password: error = %v, want %v", err, rpctypes.ErrAuthFailed)
	}

	// Without a client certificate the server refuses the connection: the
	// TLS handshake ends with a "certificate required" alert...
	noCert := &tls.Config{RootCAs: tlsCfg.RootCAs, MinVersion: tls.VersionTLS12}
	conn, err := tls.Dial("tcp", strings.TrimPrefix(eps[0], "https://"), noCert)
	if err == nil {
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		_, err = conn.Read(make([]byte, 1))
		conn.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("TLS connection without a client certificate: error = %v, want a certificate error", err)
	}
	// ... and a clientv3 client without one gets nowhere.
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, TLS: noCert, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err == nil {
		defer cli.Close()
		getCtx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err = cli.Get(getCtx, "/app/x")
	}
	if err == nil {
		t.Fatal("a client without a certificate read a key")
	}
}
