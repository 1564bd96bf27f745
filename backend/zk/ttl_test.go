package zk_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
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

// window is the lease window of a Term whose TTL is ttl, at the default
// drift and margin.
func window(ttl time.Duration) time.Duration {
	o := election.DefaultOptions()
	o.TTL = ttl
	return o.Window()
}

// Without WithTTL, the TTL is the session timeout the server granted the
// connection: the one asked for when it is within the server's bounds,
// the bound when it is not (12 s asked, 10 s granted at a 500 ms tick).
func TestTTLIsSessionTimeout(t *testing.T) {
	for _, c := range []struct{ asked, granted time.Duration }{
		{4 * time.Second, 4 * time.Second},
		{12 * time.Second, 10 * time.Second},
	} {
		conn := zktest.Conn(t, []string{server(t).Addr}, c.asked)
		e, err := zk.New(conn, newPath(t), election.WithID("a"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		term := lead(t, e)
		if got, want := term.Window(), window(c.granted); got != want {
			t.Errorf("session timeout %v asked, %v granted: the Term's window is %v; want %v (from the granted timeout)", c.asked, c.granted, got, want)
		}
		if err := e.Resign(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
}

// A WithTTL other than the granted session timeout is refused, naming
// both; the granted one is accepted.
func TestTTLOtherThanSessionTimeoutRefused(t *testing.T) {
	conn := zktest.Conn(t, []string{server(t).Addr}, 4*time.Second)
	_, err := zk.New(conn, newPath(t), election.WithID("a"), election.WithTTL(10*time.Second))
	var oe *election.OptionError
	if !errors.As(err, &oe) || !errors.Is(err, election.ErrInvalidOption) || oe.Field != "TTL" {
		t.Fatalf("New with a TTL of 10s on a 4s session = %v; want an *election.OptionError for TTL", err)
	}
	if !strings.Contains(err.Error(), "10s") || !strings.Contains(err.Error(), "4s") {
		t.Errorf("the error names not both timeouts: %v", err)
	}
	e, err := zk.New(conn, newPath(t), election.WithID("a"), election.WithTTL(4*time.Second))
	if err != nil {
		t.Fatalf("New with the granted timeout as TTL: %v", err)
	}
	e.Close()
}

// On a connection with no session yet, New cannot read the timeout: the
// first Campaign waits for the session and reads it, before it makes a
// node.
func TestTTLReadAtFirstCampaign(t *testing.T) {
	px := faultproxy.New(t, server(t).Addr)
	t.Cleanup(px.Close)
	px.Refuse()
	conn, _, err := gozk.Connect([]string{px.Addr}, 4*time.Second, gozk.WithLogger(zktest.Quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	derived, err := zk.New(conn, newPath(t), election.WithID("a"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { derived.Close() })
	path := newPath(t)
	given, err := zk.New(conn, path, election.WithID("b"), election.WithTTL(10*time.Second))
	if err != nil {
		t.Fatalf("New with no session yet: %v", err)
	}
	t.Cleanup(func() { given.Close() })
	if conn.State() == gozk.StateHasSession {
		t.Fatal("the connection has a session through a proxy that refuses connections")
	}
	refused := campaignAsync(ctxT(t), given) // waits for the session in its create
	px.Heal()
	term := lead(t, derived)
	if got, want := term.Window(), window(4*time.Second); got != want {
		t.Errorf("the Term's window is %v; want %v (from the 4s session)", got, want)
	}
	r := await(t, refused, patience, "Campaign with a TTL of 10s")
	if err := r.err; !errors.Is(err, election.ErrInvalidOption) || !strings.Contains(err.Error(), "10s") || !strings.Contains(err.Error(), "4s") {
		t.Fatalf("Campaign with a TTL of 10s on a 4s session = %v, %v; want an error naming both", r.t, err)
	}
	if names, _, err := conn.Children(path); err == nil && slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "_c_") }) {
		t.Errorf("the refused Campaign left its node: %v", names)
	}
}

// Dial's TTL and the session timeout it asks for agree as New's do.
func TestDialTTLIsSessionTimeout(t *testing.T) {
	_, err := zk.Dial(ctxT(t), zk.DialConfig{Servers: []string{server(t).Addr}}, newPath(t), election.WithTTL(12*time.Second))
	if !errors.Is(err, election.ErrInvalidOption) || !strings.Contains(err.Error(), "12s") || !strings.Contains(err.Error(), "10s") {
		t.Fatalf("Dial with a TTL of 12s, 10s granted = %v; want an error naming both", err)
	}
	e, err := zk.Dial(ctxT(t), zk.DialConfig{Servers: []string{server(t).Addr}}, newPath(t), election.WithID("a"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if got, want := lead(t, e).Window(), window(election.DefaultTTL); got != want {
		t.Errorf("the Term's window is %v; want %v", got, want)
	}
}

// records keeps the messages and attributes logged to it.
type records struct {
	mu    sync.Mutex
	lines []string
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	line := rec.Level.String() + " " + rec.Message
	rec.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
	r.mu.Lock()
	r.lines = append(r.lines, line)
	r.mu.Unlock()
	return nil
}

func (r *records) matching(s string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, l := range r.lines {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// Dial with a ctx without deadline gives up after DialConfig.Wait, with an
// error naming the server it tried, and logs its attempts.
func TestDialWaitBounded(t *testing.T) {
	addr := deadAddr(t)
	log := &records{}
	const wait = 1500 * time.Millisecond
	start := time.Now()
	_, err := zk.Dial(context.Background(), zk.DialConfig{Servers: []string{addr}, Wait: wait}, newPath(t), election.WithLogger(slog.New(log)))
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "1.5s") {
		t.Errorf("Dial to %s = %v; want context.DeadlineExceeded, naming the address and the wait", addr, err)
	}
	t.Logf("Dial: %v after %v", err, took)
	if took < wait || took > wait+ctxBound {
		t.Errorf("Dial returned after %v; want %v", took, wait)
	}
	if got := log.matching(addr); len(got) == 0 || !strings.Contains(got[0], "INFO") {
		t.Errorf("no attempt to %s logged at info level: %q", addr, log.matching(""))
	}

	// A ctx that ends first: its error, with the servers tried.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	_, err = zk.Dial(ctx, zk.DialConfig{Servers: []string{addr}}, newPath(t))
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), addr) {
		t.Errorf("Dial with a ctx canceled = %v; want context.Canceled, naming %s", err, addr)
	}
	if _, err := zk.Dial(context.Background(), zk.DialConfig{Servers: []string{addr}, Wait: -time.Second}, newPath(t)); !errors.Is(err, election.ErrInvalidOption) || !strings.Contains(err.Error(), "-1s") {
		t.Errorf("Dial with a negative Wait = %v", err)
	}
}
