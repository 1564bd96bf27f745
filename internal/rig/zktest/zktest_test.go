package zktest_test

import (
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electkit/election/internal/rig/faultproxy"
	"github.com/electkit/election/internal/rig/zktest"
)

func TestStandaloneServes(t *testing.T) {
	t0 := time.Now()
	s := zktest.Standalone(t)
	t.Logf("standalone serving after %v", time.Since(t0))
	if m, err := s.Mode(); err != nil || m != "standalone" {
		t.Fatalf("Mode = %q, %v; want standalone", m, err)
	}
	c := zktest.Conn(t, []string{s.Addr}, 2*time.Second)
	if _, err := c.Create("/x", []byte("1"), 0, gozk.WorldACL(gozk.PermAll)); err != nil {
		t.Fatal(err)
	}
	got, _, err := c.Get("/x")
	if err != nil || string(got) != "1" {
		t.Fatalf("Get = %q, %v", got, err)
	}
	pid := s.PID()
	s.Kill()
	if s.Running() || pid == 0 {
		t.Fatalf("server still running after Kill (pid %d)", pid)
	}
}

func TestEnsembleHasOneLeader(t *testing.T) {
	t0 := time.Now()
	e := zktest.NewEnsemble(t, 3)
	t.Logf("ensemble serving after %v", time.Since(t0))
	leaders := 0
	for _, s := range e.Servers {
		if m, _ := s.Mode(); m == "leader" {
			leaders++
		}
	}
	if leaders != 1 {
		t.Fatalf("%d leaders, want 1", leaders)
	}
	c := zktest.Conn(t, e.Addrs(), 2*time.Second)
	if _, err := c.Create("/y", nil, 0, gozk.WorldACL(gozk.PermAll)); err != nil {
		t.Fatal(err)
	}
}

func TestProxyCutStopsTraffic(t *testing.T) {
	s := zktest.Standalone(t)
	p := faultproxy.New(t, s.Addr)
	c := zktest.Conn(t, []string{p.Addr}, 2*time.Second)
	if _, _, err := c.Exists("/"); err != nil {
		t.Fatal(err)
	}
	p.Cut()
	done := make(chan error, 1)
	go func() { _, _, err := c.Exists("/"); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a request through a cut proxy succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a request through a cut proxy neither failed nor succeeded")
	}
}
