package curator

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	election "github.com/electkit/election"
	"github.com/electkit/election/bench/internal/peer"
	"github.com/electkit/election/internal/mono"
	"github.com/electkit/election/internal/rig/zktest"
)

// require skips t when Curator or a JDK is missing, and fails it when the
// environment variable CI is set: CI installs them (make deps) and must
// never pass by skipping.
func require(t *testing.T) {
	t.Helper()
	if err := Available(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%v (CI is set: the Curator tests must run; make deps installs it)", err)
		}
		t.Skipf("%v", err)
	}
}

// setup starts a ZooKeeper server and the JVM, warmed up by warmup
// handovers, and returns the library and a plain connection for checks.
func setup(t *testing.T, warmup int) (*library, *gozk.Conn) {
	t.Helper()
	require(t)
	zs := zktest.Standalone(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	start := time.Now()
	l, err := New(ctx, []string{zs.Addr}, WithWarmup(warmup))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Logf("New with %d warmup handovers: %v", warmup, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() { l.Close() })
	return l.(*library), zktest.Conn(t, []string{zs.Addr}, 10*time.Second)
}

func newCandidate(t *testing.T, l peer.Library, name, id string, ttl time.Duration) peer.Candidate {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := l.NewCandidate(ctx, name, id, ttl)
	if err != nil {
		t.Fatalf("NewCandidate %s: %v", id, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

type result struct {
	at  int64
	err error
}

func campaignAsync(ctx context.Context, c peer.Candidate) <-chan result {
	ch := make(chan result, 1)
	go func() {
		at, err := c.Campaign(ctx)
		ch <- result{at, err}
	}()
	return ch
}

// waitChildren waits, on ZooKeeper's child watches, until the latch of name
// has n participants.
func waitChildren(t *testing.T, zc *gozk.Conn, name string, n int, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	path := DefaultPrefix + "/" + name
	for {
		kids, _, ev, err := zc.ChildrenW(path)
		if errors.Is(err, gozk.ErrNoNode) {
			// Not created yet: watch for it.
			ok, _, ev2, err2 := zc.ExistsW(path)
			if err2 != nil {
				t.Fatalf("exists %s: %v", path, err2)
			}
			if !ok {
				select {
				case <-ev2:
					continue
				case <-deadline:
					t.Fatalf("%s not created within %v", path, within)
				}
			}
			continue
		}
		if err != nil {
			t.Fatalf("children of %s: %v", path, err)
		}
		if len(kids) == n {
			return
		}
		select {
		case <-ev:
		case <-deadline:
			t.Fatalf("%s: %d participants, want %d within %v", path, len(kids), n, within)
		}
	}
}

// handover makes a lead and b wait behind it (both latches' nodes exist),
// then ends a's leadership with end; it returns end's instant and b's
// elected instant.
func handover(t *testing.T, zc *gozk.Conn, name string, a, b peer.Candidate, end func() (int64, error), within time.Duration) (int64, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within+30*time.Second)
	defer cancel()
	aAt, err := a.Campaign(ctx)
	if err != nil {
		t.Fatalf("a Campaign: %v", err)
	}
	bRes := campaignAsync(ctx, b)
	waitChildren(t, zc, name, 2, 30*time.Second)
	select {
	case r := <-bRes:
		t.Fatalf("b elected (%v) while a leads", r.err)
	default:
	}
	endAt, err := end()
	if err != nil {
		t.Fatalf("ending a's leadership: %v", err)
	}
	if endAt < aAt {
		t.Errorf("a's end instant %d before its elected instant %d", endAt, aAt)
	}
	select {
	case r := <-bRes:
		if r.err != nil {
			t.Fatalf("b Campaign: %v", r.err)
		}
		if r.at <= endAt {
			t.Errorf("b elected at %d, not after a's end at %d", r.at, endAt)
		}
		return endAt, r.at
	case <-time.After(within):
		t.Fatalf("b not elected within %v of a's end", within)
	}
	return 0, 0
}

func TestJVMClockIsMono(t *testing.T) {
	l, _ := setup(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	before := mono.Now()
	jvm, err := l.now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	after := mono.Now()
	if jvm < before || jvm > after {
		t.Fatalf("System.nanoTime() %d not between mono.Now() %d and %d", jvm, before, after)
	}
}

func TestReleaseHandsOver(t *testing.T) {
	l, zc := setup(t, 20)
	a := newCandidate(t, l, "release", "a", 2*time.Second)
	b := newCandidate(t, l, "release", "b", 2*time.Second)
	rel, el := handover(t, zc, "release", a, b, func() (int64, error) { return a.Release(context.Background()) }, 10*time.Second)
	t.Logf("release → b elected: %v", time.Duration(el-rel))
	// a campaigns again (a new latch) and waits behind b.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	aRes := campaignAsync(ctx, a)
	waitChildren(t, zc, "release", 2, 30*time.Second)
	if n, err := l.Registered(ctx, "release"); err != nil || n != 2 {
		t.Errorf("Registered = %d, %v; want 2", n, err)
	}
	if n, err := l.Registered(ctx, "nobody"); err != nil || n != 0 {
		t.Errorf("Registered of an unknown election = %d, %v; want 0", n, err)
	}
	if _, err := b.Release(ctx); err != nil {
		t.Fatalf("b Release: %v", err)
	}
	if r := <-aRes; r.err != nil {
		t.Fatalf("a campaigns again: %v", r.err)
	}
}

func TestCrashFailsOverAfterSession(t *testing.T) {
	const ttl = 2 * time.Second
	l, zc := setup(t, 20)
	a := newCandidate(t, l, "crash", "a", ttl)
	b := newCandidate(t, l, "crash", "b", ttl)
	cut, el := handover(t, zc, "crash", a, b, a.Crash, ttl+10*time.Second)
	t.Logf("crash → b elected: %v (session timeout %v)", time.Duration(el-cut), ttl)
	if _, err := a.Campaign(context.Background()); err == nil {
		t.Errorf("a crashed candidate campaigns again without error")
	}
}

func TestCampaignCanceledWithdraws(t *testing.T) {
	l, zc := setup(t, 0)
	a := newCandidate(t, l, "cancel", "a", 2*time.Second)
	b := newCandidate(t, l, "cancel", "b", 2*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := a.Campaign(ctx); err != nil {
		t.Fatalf("a Campaign: %v", err)
	}
	bctx, bcancel := context.WithCancel(ctx)
	bRes := campaignAsync(bctx, b)
	waitChildren(t, zc, "cancel", 2, 30*time.Second)
	bcancel()
	if r := <-bRes; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("b Campaign after cancel: %v, want context.Canceled", r.err)
	}
	waitChildren(t, zc, "cancel", 1, 30*time.Second)
	if _, err := b.Release(ctx); !errors.Is(err, election.ErrNotLeader) {
		t.Errorf("Release of a withdrawn candidate: %v, want ErrNotLeader", err)
	}
}

// TestProcessSharesOneClient: two processes (a CuratorFramework each),
// candidates of two elections on each; every election gets a leader, a
// released one hands over to the other process's candidate, and closing
// a shared candidate leaves its process's client (and its other latch)
// running.
func TestProcessSharesOneClient(t *testing.T) {
	l, zc := setup(t, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var procs [2]peer.Process
	for i := range procs {
		p, err := l.NewProcess(ctx, 4*time.Second)
		if err != nil {
			t.Fatalf("NewProcess: %v", err)
		}
		t.Cleanup(func() { p.Close() })
		procs[i] = p
	}
	var cs [2][2]peer.Candidate // [election][process]
	for e := range cs {
		for i, p := range procs {
			c, err := p.NewCandidate(ctx, fmt.Sprintf("shared-%d", e), fmt.Sprintf("p%d", i))
			if err != nil {
				t.Fatalf("NewCandidate: %v", err)
			}
			t.Cleanup(func() { c.Close() })
			cs[e][i] = c
		}
	}
	// Election 0: process 0 leads, process 1 waits; election 1 likewise.
	for e := range cs {
		if _, err := cs[e][0].Campaign(ctx); err != nil {
			t.Fatalf("election %d: process 0 Campaign: %v", e, err)
		}
	}
	waiting := [2]<-chan result{campaignAsync(ctx, cs[0][1]), campaignAsync(ctx, cs[1][1])}
	for e := range cs {
		waitChildren(t, zc, fmt.Sprintf("shared-%d", e), 2, 30*time.Second)
	}
	if _, err := cs[0][0].Crash(); err == nil {
		t.Errorf("Crash of a shared candidate: no error")
	}
	if _, err := cs[0][0].Release(ctx); err != nil {
		t.Fatalf("election 0: Release: %v", err)
	}
	if r := <-waiting[0]; r.err != nil {
		t.Fatalf("election 0: process 1 Campaign: %v", r.err)
	}
	// Closing election 0's candidate of process 0 leaves process 0's
	// client open: it still leads election 1, which hands over on release.
	if err := cs[0][0].Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := cs[1][0].Release(ctx); err != nil {
		t.Fatalf("election 1: Release after a sibling's Close: %v", err)
	}
	if r := <-waiting[1]; r.err != nil {
		t.Fatalf("election 1: process 1 Campaign: %v", r.err)
	}
}

func TestBadInput(t *testing.T) {
	ctx := context.Background()
	for name, opts := range map[string][]Option{
		"negative warmup":    {WithWarmup(-1)},
		"relative prefix":    {WithPrefix("electkit")},
		"trailing slash":     {WithPrefix("/electkit/")},
		"connection timeout": {WithConnectionTimeout(0)},
		"empty cache dir":    {WithCacheDir("")},
	} {
		if _, err := New(ctx, []string{"127.0.0.1:2181"}, opts...); !errors.Is(err, election.ErrInvalidOption) {
			t.Errorf("%s: New: %v, want ErrInvalidOption", name, err)
		}
	}
	if _, err := New(ctx, nil); !errors.Is(err, election.ErrInvalidOption) {
		t.Errorf("no servers: New: %v, want ErrInvalidOption", err)
	}
	if _, err := New(ctx, []string{"localhost"}); !errors.Is(err, election.ErrInvalidOption) {
		t.Errorf("server without port: New: %v, want ErrInvalidOption", err)
	}

	l, _ := setup(t, 0)
	for _, c := range []struct {
		name, id string
		ttl      time.Duration
	}{{"e", "", time.Second}, {"e", "a b", time.Second}, {"", "a", time.Second}, {"e", "a", 0}} {
		if cand, err := l.NewCandidate(ctx, c.name, c.id, c.ttl); !errors.Is(err, election.ErrInvalidOption) {
			if cand != nil {
				cand.Close()
			}
			t.Errorf("NewCandidate(%q, %q, %v): %v, want ErrInvalidOption", c.name, c.id, c.ttl, err)
		}
	}
}

func TestCompileIntoCacheDir(t *testing.T) {
	require(t)
	dir := t.TempDir()
	got, err := compile(dir)
	if err != nil {
		t.Fatal(err)
	}
	again, err := compile(dir)
	if err != nil || again != got {
		t.Fatalf("second compile: %q, %v; want the cached %q", again, err, got)
	}
}

func TestAvailableNamesWhatIsMissing(t *testing.T) {
	old := JarDir
	JarDir = t.TempDir()
	defer func() { JarDir = old }()
	err := Available()
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Available with no jars: %v, want ErrUnavailable", err)
	}
	t.Log(err)
}

// TestFigures measures release handover and crash failover at a 2 s
// session timeout, after the default warmup. Run with -v; skipped with
// -short.
func TestFigures(t *testing.T) {
	if testing.Short() {
		t.Skip("measurement; run without -short")
	}
	l, zc := setup(t, DefaultWarmup)
	measure := func(what string, n int, crash bool) []time.Duration {
		var out []time.Duration
		for i := range n {
			name := fmt.Sprintf("%s-%d", what, i)
			a := newCandidate(t, l, name, "a", 2*time.Second)
			b := newCandidate(t, l, name, "b", 2*time.Second)
			end := func() (int64, error) { return a.Release(context.Background()) }
			if crash {
				end = a.Crash
			}
			from, to := handover(t, zc, name, a, b, end, 15*time.Second)
			out = append(out, time.Duration(to-from))
			closing := time.Now()
			a.Close()
			b.Close()
			if d := time.Since(closing); d > time.Second {
				t.Logf("%s: closing the candidates took %v", name, d.Round(time.Millisecond))
			}
		}
		return out
	}
	report(t, "Curator release handover", measure("release", 50, false))
	report(t, "Curator crash failover, session timeout 2s", measure("crash", 8, true))
}

func report(t *testing.T, what string, ds []time.Duration) {
	s := slices.Clone(ds)
	slices.Sort(s)
	q := func(p float64) time.Duration { return s[int(p*float64(len(s)-1)+0.5)] }
	t.Logf("%s: n=%d min=%v p50=%v p90=%v max=%v", what, len(s), s[0].Round(10*time.Microsecond), q(0.5).Round(10*time.Microsecond), q(0.9).Round(10*time.Microsecond), s[len(s)-1].Round(10*time.Microsecond))
}
