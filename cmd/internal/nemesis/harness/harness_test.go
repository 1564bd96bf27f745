package harness_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/electkit/election"
	"github.com/electkit/election/cmd/internal/nemesis"
	"github.com/electkit/election/cmd/internal/nemesis/harness"
	"github.com/electkit/election/internal/rig/kubetest"
	"github.com/electkit/election/internal/rig/pgtest"
	"github.com/electkit/election/internal/rig/zktest"
)

// bin is the elect binary the store candidates run, built once by TestMain.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "nemesis-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		b, err := harness.BuildElect(ctx, dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		bin = b
		code := m.Run()
		if code == 0 {
			// Every goroutine of a run (proxies, reporters, the
			// in-process cluster and candidates) ends with it. An
			// embedded etcd cluster leaves idle HTTP connections
			// between its members after Close; the register's own
			// connections are checked by package nemesis's tests.
			if err := goleak.Find(
				goleak.IgnoreAnyFunction("net/http.(*conn).serve"),
				goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
				goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
				goleak.IgnoreAnyFunction("net/http.(*connReader).backgroundRead"),
			); err != nil {
				fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
				code = 1
			}
		}
		return code
	}()
	os.Exit(code)
}

// runMix runs cfg and fails t on an error; a failing checker leaves the
// history and the visualization in a directory named in the log.
func runMix(t *testing.T, cfg harness.Config) (*nemesis.History, nemesis.Report) {
	t.Helper()
	out, err := os.MkdirTemp("", "nemesis-"+strings.ReplaceAll(t.Name(), "/", "-")+"-")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Bin = bin
	cfg.Dir = filepath.Join(out, "run")
	cfg.VisPath = filepath.Join(out, "linearizability.html")
	cfg.Log = logWriter{t}
	ctx, cancel := context.WithTimeout(t.Context(), cfg.Duration+3*time.Minute)
	defer cancel()
	hist, rep, err := harness.Run(ctx, cfg)
	if err != nil {
		t.Fatalf("seed %d: %v (files in %s)", cfg.Seed, err, out)
	}
	t.Logf("seed %d:\n%s", cfg.Seed, rep.String())
	if err := nemesis.SaveHistory(filepath.Join(out, "history.json"), hist); err != nil {
		t.Errorf("saving the history: %v", err)
	}
	if !t.Failed() && (rep.OK() || cfg.Unfenced) {
		t.Cleanup(func() {
			if !t.Failed() {
				os.RemoveAll(out)
			}
		})
	} else {
		t.Logf("history, visualization and logs in %s", out)
	}
	return hist, rep
}

type logWriter struct{ t *testing.T }

func (w logWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// checkMix asserts what every fault mix must show: every checker OK,
// faults of at least minKinds kinds, two leaderships or more, accepted
// writes.
func checkMix(t *testing.T, cfg harness.Config, minKinds int) *nemesis.History {
	t.Helper()
	hist, _ := checkMixReport(t, cfg, minKinds)
	return hist
}

// checkMixReport is checkMix that returns the report too.
func checkMixReport(t *testing.T, cfg harness.Config, minKinds int) (*nemesis.History, nemesis.Report) {
	t.Helper()
	hist, rep := runMix(t, cfg)
	if !rep.OK() {
		t.Errorf("backend %s, seed %d: a checker failed:\n%s", cfg.Backend, cfg.Seed, rep.String())
	}
	kinds := map[string]int{}
	for _, f := range hist.Faults {
		kinds[f.Kind]++
	}
	if len(kinds) < minKinds {
		t.Errorf("faults of %d kinds injected (%v), want at least %d", len(kinds), kinds, minKinds)
	}
	terms := map[uint64]bool{}
	for _, ev := range hist.Events {
		if ev.Kind == nemesis.Elected {
			terms[ev.Token] = true
		}
	}
	if len(terms) < 2 {
		t.Errorf("%d leaderships, want at least 2", len(terms))
	}
	accepted := 0
	for _, w := range hist.Writes {
		if w.OK {
			accepted++
		}
	}
	if accepted == 0 {
		t.Errorf("no write accepted out of %d", len(hist.Writes))
	}
	return hist, rep
}

// mixDuration is how long faults run: shorter with -short.
func mixDuration(full, short time.Duration) time.Duration {
	if testing.Short() {
		return short
	}
	return full
}

func minKinds(full, short int) int {
	if testing.Short() {
		return short
	}
	return full
}

// The candidates on a shared session (harness.OnSession: an etcd.Session,
// or one ZooKeeper connection, carrying a side election too) lead in the
// mix as well as those with a lease or connection each. A shard-heavy
// candidate (harness.Sharded: c2, the first leader, from the start) holds
// 50 side elections on its session through the faults: after them, each
// must be led by a live one, and each must close all its Electors when it
// stops.
func TestNemesisEtcd(t *testing.T) {
	cfg := harness.Config{Backend: "etcd", Seed: 42, Gap: time.Second, Duration: mixDuration(25*time.Second, 15*time.Second)}
	hist, rep := checkMixReport(t, cfg, minKinds(5, 2))
	checkShared(t, hist)
	checkShards(t, rep)
}

func TestNemesisZK(t *testing.T) {
	zktest.Require(t)
	hist, rep := checkMixReport(t, harness.Config{Backend: "zk", Seed: 42, Gap: time.Second, Duration: mixDuration(30*time.Second, 15*time.Second)}, minKinds(5, 2))
	checkShared(t, hist)
	checkShards(t, rep)
}

func TestNemesisPostgres(t *testing.T) {
	pgtest.Require(t)
	hist, rep := checkMixReport(t, harness.Config{Backend: "postgres", Seed: 7, Gap: time.Second, Duration: mixDuration(30*time.Second, 15*time.Second)}, minKinds(5, 2))
	checkShared(t, hist)
	checkShards(t, rep)
}

// TestNemesisKube runs the kube backend's default fault mix on a
// kube-apiserver (its restarts among them), then the operator nemesis
// alone: kubectl delete lease, edits of holderIdentity and renewTime, the
// candidates' RBAC taken away and given back.
func TestNemesisKube(t *testing.T) {
	if _, err := kubetest.Binary(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%v (CI is set: real-server tests must run)", err)
		}
		t.Skip(err)
	}
	t.Run("mix", func(t *testing.T) {
		hist, rep := checkMixReport(t, harness.Config{Backend: "kube", Seed: 7, Gap: time.Second, Duration: mixDuration(30*time.Second, 15*time.Second)}, minKinds(5, 2))
		checkShared(t, hist)
		checkShards(t, rep)
	})
	t.Run("operator", func(t *testing.T) {
		checkOperator(t, harness.Config{Backend: "kube", Seed: 10, Faults: []string{harness.Operator}, Gap: time.Second,
			Duration: mixDuration(8*time.Second, 5*time.Second)})
	})
}

// checkShards asserts that the run looked at the shard-heavy candidates'
// side elections (checkMix asserts the verdict OK).
func checkShards(t *testing.T, rep nemesis.Report) {
	t.Helper()
	switch v, ok := verdictOf(rep, harness.NameShards); {
	case !ok:
		t.Errorf("no %q verdict:\n%s", harness.NameShards, rep.String())
	case strings.Contains(v.Detail, "not looked at"):
		t.Errorf("the side elections' leaders were not looked at: %s", v.Detail)
	}
}

// checkShared asserts that candidates on a shared session and candidates
// on a session of their own both led.
func checkShared(t *testing.T, hist *nemesis.History) {
	t.Helper()
	led := map[bool]int{}
	for _, ev := range hist.Events {
		if ev.Kind == nemesis.Elected {
			led[harness.OnSession(ev.Candidate)]++
		}
	}
	t.Logf("leaderships: %d on a shared session, %d on one of their own", led[true], led[false])
	if !testing.Short() && (led[true] == 0 || led[false] == 0) {
		t.Errorf("leaderships: %d on a shared session, %d on one of their own; want both", led[true], led[false])
	}
}

// TestOperator runs the operator nemesis alone, with short gaps, so that
// each run goes through most of its actions: every one must leave the
// checkers OK. Seed 10 draws every action of both stores in its first
// five faults (etcd: permission, key, prefix, lease, key put again
// without its lease; ZooKeeper: setAcl, node, path, persistent node).
func TestOperator(t *testing.T) {
	for _, backend := range []string{"etcd", "zk"} {
		t.Run(backend, func(t *testing.T) {
			if backend == "zk" {
				zktest.Require(t)
			}
			checkOperator(t, harness.Config{Backend: backend, Seed: 10, Faults: []string{harness.Operator}, Gap: time.Second,
				Duration: mixDuration(8*time.Second, 5*time.Second)})
		})
	}
}

// checkOperator runs cfg, an operator nemesis alone, and asserts the
// checkers OK after operator faults of several actions.
func checkOperator(t *testing.T, cfg harness.Config) {
	t.Helper()
	hist, rep := runMix(t, cfg)
	if !rep.OK() {
		t.Errorf("backend %s, seed %d: a checker failed:\n%s", cfg.Backend, cfg.Seed, rep.String())
	}
	faults, actions := 0, map[string]int{}
	for _, f := range hist.Faults {
		if f.Kind == harness.Operator {
			faults++
			// The P3 check's grace counts from the operator's request
			// that changed the election: sent at Start, answered at Acked.
			if f.Acked < f.Start || f.Start <= 0 || f.Acked > f.End {
				t.Errorf("operator fault %q: Start %d, Acked %d, End %d: want 0 < Start <= Acked <= End", f.Target, f.Start, f.Acked, f.End)
			}
			// The action is the target's first three words.
			w := strings.Fields(f.Target)
			actions[strings.Join(w[:min(3, len(w))], " ")]++
		}
	}
	if n := minKinds(4, 1); faults < n {
		t.Errorf("%d operator faults injected, want at least %d", faults, n)
	}
	if n := minKinds(3, 1); len(actions) < n {
		t.Errorf("operator actions %v: want at least %d kinds", actions, n)
	}
	t.Logf("operator actions: %v", actions)
}

// Under Rate, faults start every second or so without waiting for the
// previous one: they overlap, on targets no other fault holds, and the
// checkers hold. The candidates run at a tight margin (ρ 0.1, a margin of
// 1 ms) so that the clock faults (δ drawn below ρ) come close to the
// bound; store partitions split the members and the candidates.
func TestOverlappingFaults(t *testing.T) {
	for _, backend := range []string{"etcd", "zk"} {
		t.Run(backend, func(t *testing.T) {
			if backend == "zk" {
				zktest.Require(t)
			}
			cfg := harness.Config{Backend: backend, Seed: 7, Rate: 120, Drift: 0.1, Margin: time.Millisecond,
				Duration: mixDuration(15*time.Second, 10*time.Second)}
			hist := checkMix(t, cfg, minKinds(6, 3))
			overlaps := 0
			kinds := map[string]int{}
			for i, f := range hist.Faults {
				kinds[f.Kind]++
				if (f.Kind == harness.StorePartition || f.Kind == harness.StoreMinority) && strings.Contains(f.Target, "then none") {
					t.Errorf("%s %s: no leader on the majority side", f.Kind, f.Target)
				}
				for _, g := range hist.Faults[i+1:] {
					if f.End != 0 && g.End != 0 && f.Start < g.End && g.Start < f.End && f.Target != g.Target {
						overlaps++
					}
				}
			}
			t.Logf("%d faults %v, %d overlapping pairs", len(hist.Faults), kinds, overlaps)
			// One at a time, a fault and its gap take 3 to 4 s at this TTL.
			if want := int(cfg.Duration / (2 * time.Second)); len(hist.Faults) < want {
				t.Errorf("%d faults in %v at %v a minute; want at least %d (one every 2 s)", len(hist.Faults), cfg.Duration, cfg.Rate, want)
			}
			if overlaps == 0 {
				t.Errorf("no two faults overlapped in time")
			}
			if !testing.Short() {
				if kinds[harness.StorePartition]+kinds[harness.StoreMinority] == 0 {
					t.Errorf("faults %v: no partition between the store's members", kinds)
				}
				if kinds[harness.ClockFast]+kinds[harness.ClockSlow] == 0 {
					t.Errorf("faults %v: no clock fault", kinds)
				}
			}
		})
	}
}

// TestClockNegativeControl is the clock faults' negative control: a
// leader's clock runs at 1/(1+δ) of real time with δ = 3ρ (ρ 0.1, a
// margin of 1 ms) while it is cut off the store, so its Term lasts past
// the store's expiry of its lease (by about (TTL/(1+ρ))(1+δ) − TTL = 0.9 s
// at TTL 5 s, more than etcd's 0.5 s expiry sweep), and another leads
// meanwhile. The valid-terms checker must fail.
//
// It runs beside TestNemesisInmem (both parallel: one waits on its TTL of
// 5 s most of the time, the other runs in this process).
func TestClockNegativeControl(t *testing.T) {
	t.Parallel()
	cfg := harness.Config{Backend: "etcd", Seed: 3, TTL: 5 * time.Second, Unfenced: true,
		Drift: 0.1, Skew: 0.3, Margin: time.Millisecond, Faults: []string{harness.ClockSlow},
		Duration: 10 * time.Second} // the first fault starts within TTL + 1 s
	hist, rep := runMix(t, cfg)
	faults := countFaults(hist, harness.ClockSlow)
	if faults == 0 {
		t.Fatalf("no clock-slow fault injected")
	}
	if v, ok := verdictOf(rep, nemesis.NameValidTerms); !ok || v.OK {
		t.Errorf("δ = 3ρ, margin 1ms, %d slowed leaders cut off: valid terms passed or missing; want an overlap:\n%s", faults, rep.String())
	}
}

// countFaults counts the faults of kind in hist.
func countFaults(hist *nemesis.History, kind string) int {
	n := 0
	for _, f := range hist.Faults {
		if f.Kind == kind {
			n++
		}
	}
	return n
}

// verdictOf is rep's verdict of the checker name.
func verdictOf(rep nemesis.Report, name string) (nemesis.Verdict, bool) {
	for _, v := range rep.Verdicts {
		if v.Name == name {
			return v, true
		}
	}
	return nemesis.Verdict{}, false
}

func TestNemesisInmem(t *testing.T) {
	t.Parallel()
	checkMix(t, harness.Config{Backend: "inmem", Seed: 42, Duration: mixDuration(12*time.Second, 8*time.Second)}, 2)
}

// TestNegativeControl runs the pause nemesis against an unfenced register:
// a leader paused between its validity check and its write writes after
// its successor, and the register takes it. The linearizability checker
// must see it; a fenced register must refuse that write (TestNemesis…).
func TestNegativeControl(t *testing.T) {
	for _, backend := range []string{"etcd", "zk"} {
		t.Run(backend, func(t *testing.T) {
			if backend == "zk" {
				zktest.Require(t)
			}
			// A long work gap makes almost every pause land between a
			// leader's check and its write.
			cfg := harness.Config{Backend: backend, Seed: 7, Duration: mixDuration(14*time.Second, 9*time.Second),
				Unfenced: true, Faults: []string{harness.Pause}, Work: 50 * time.Millisecond}
			hist, rep := runMix(t, cfg)
			pauses := countFaults(hist, harness.Pause)
			if pauses == 0 {
				t.Fatalf("no pause injected")
			}
			if rep.OK() {
				t.Fatalf("fencing off, %d pauses: every checker passed; want a linearizability violation:\n%s", pauses, rep.String())
			}
			// The failure must be the register's linearizability (every
			// report names that checker, so look at its verdict).
			switch v, ok := verdictOf(rep, nemesis.NameLinearizable); {
			case !ok:
				t.Errorf("no linearizability verdict:\n%s", rep.String())
			case v.OK:
				t.Errorf("fencing off, %d pauses: linearizability passed; the run failed elsewhere:\n%s", pauses, rep.String())
			}
		})
	}
}

func TestConfigRefused(t *testing.T) {
	for _, cfg := range []harness.Config{
		{Backend: "consul"},
		{Backend: "inmem", Faults: []string{harness.Kill}},
		{Backend: "etcd", Faults: []string{harness.Pause}}, // no Bin
		{Backend: "inmem", TTL: time.Millisecond},
		{Backend: "inmem", Candidates: 1},
		{Backend: "inmem", Gap: -time.Second},
		{Backend: "inmem", Rate: 60},
		{Backend: "etcd", Bin: "elect", Rate: -1},
		{Backend: "etcd", Bin: "elect", Rate: 60, Overlap: 11},
		{Backend: "etcd", Bin: "elect", Shards: -2},
		{Backend: "etcd", Bin: "elect", Shards: harness.MaxShards + 1},
	} {
		_, _, err := harness.Run(t.Context(), cfg)
		if !errors.Is(err, election.ErrInvalidOption) {
			t.Errorf("Run(%+v) = %v, want an error wrapping ErrInvalidOption", cfg, err)
		}
	}
}
