package zktest

import (
	"fmt"
	"os"
	"time"

	gozk "github.com/go-zookeeper/zk"
)

// TB is the part of testing.TB the helpers use.
type TB interface {
	Helper()
	Cleanup(func())
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
	TempDir() string
	Logf(format string, args ...any)
}

// Require skips tb when the ZooKeeper server is not installed, and fails it
// instead when the environment variable CI is set: CI installs the server
// (make test does) and must never pass a real-server test by skipping it.
func Require(tb TB) {
	tb.Helper()
	if err := Available(); err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("%v (CI is set: real-server tests must run)", err)
			return
		}
		tb.Skipf("%v", err)
	}
}

// Standalone starts a standalone server for tb and kills it in tb's
// Cleanup.
func Standalone(tb TB) *Server {
	tb.Helper()
	Require(tb)
	s, err := Start(tb.TempDir())
	if err != nil {
		tb.Fatalf("%v", err)
		return nil
	}
	tb.Cleanup(s.Kill)
	return s
}

// NewEnsemble starts an ensemble of n servers for tb and kills it in tb's
// Cleanup.
func NewEnsemble(tb TB, n int) *Ensemble {
	tb.Helper()
	Require(tb)
	e, err := StartEnsemble(tb.TempDir(), n)
	if err != nil {
		tb.Fatalf("%v", err)
		return nil
	}
	tb.Cleanup(e.Stop)
	return e
}

// Conn connects to servers with the given session timeout, waits until the
// session is established, and closes the connection in tb's Cleanup. extra
// options go to gozk.Connect after a quiet logger.
func Conn(tb TB, servers []string, timeout time.Duration, extra ...func(*gozk.Conn)) *gozk.Conn {
	tb.Helper()
	c, err := Connect(servers, timeout, extra...)
	if err != nil {
		tb.Fatalf("%v", err)
		return nil
	}
	tb.Cleanup(c.Close)
	return c
}

// Connect connects to servers and waits until the session is established.
// extra are gozk connection options (gozk.WithDialer(…) and the like).
func Connect(servers []string, timeout time.Duration, extra ...func(*gozk.Conn)) (*gozk.Conn, error) {
	all := func(c *gozk.Conn) {
		for _, f := range extra {
			f(c)
		}
	}
	c, ev, err := gozk.Connect(servers, timeout, gozk.WithLogger(Quiet{}), gozk.WithLogInfo(false), all)
	if err != nil {
		return nil, fmt.Errorf("zktest: connect %v: %w", servers, err)
	}
	deadline := time.NewTimer(StartTimeout)
	defer deadline.Stop()
	for {
		select {
		case e, ok := <-ev:
			if !ok {
				return nil, fmt.Errorf("zktest: connect %v: connection closed", servers)
			}
			if e.State == gozk.StateHasSession {
				go drain(ev)
				return c, nil
			}
		case <-deadline.C:
			c.Close()
			return nil, fmt.Errorf("zktest: connect %v: no session after %v", servers, StartTimeout)
		}
	}
}

// drain consumes a connection's event channel until it is closed (when the
// connection is), so that nothing blocks on it.
func drain(ev <-chan gozk.Event) {
	for range ev {
	}
}

// Quiet is a gozk.Logger that discards everything.
type Quiet struct{}

// Printf discards its arguments.
func (Quiet) Printf(string, ...any) {}
