package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/electkit/election/bench/internal/conns"
	"github.com/electkit/election/bench/internal/libs"
	"github.com/electkit/election/bench/internal/peer"
	"github.com/electkit/election/bench/internal/servers"
	"github.com/electkit/election/internal/mono"
)

// maxServerRSS stops a scale case whose etcd member has grown past it: the
// machine is shared, and a member that large is the finding.
const maxServerRSS = 6 << 30

// perClient is how many candidates share one client in the scale scenario.
const perClient = 500

// scaleWindow bounds how many started candidates may be not yet
// registered.
const scaleWindow = 50

// scaleTTL is the lease TTL / session timeout in the scale scenario: long,
// so that a store busy registering thousands does not expire the early
// ones (and the steady state is the idle rate of a long-lived fleet).
// ZooKeeper's is its servers' maximum at a 500 ms tick, 10 s.
func scaleTTL(store libs.Store) time.Duration {
	if store == libs.ZK {
		return 10 * time.Second
	}
	return 30 * time.Second
}

func (r *run) scale(ctx context.Context) error {
	for _, t := range []target{etcd1, zk1} {
		if t.store == libs.ZK {
			if err := servers.ZKAvailable(); err != nil {
				r.rep.note(fmt.Sprintf("scale on %s: %v", t.title, err))
				continue
			}
		}
		for _, n := range r.sz.scaleNs {
			for _, e := range r.libsOf(t.store, libs.Ours, libs.Peer) {
				// backend/etcd runs twice: a lease per candidate (as N
				// processes would), and a Session per client (as N
				// candidates of a few processes would).
				variants := []bool{false}
				if e.Role == libs.Ours && t.store == libs.Etcd {
					variants = append(variants, true)
				}
				for _, sessions := range variants {
					if err := r.scaleCase(ctx, t, e, n, sessions); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// scaleCase runs one library at one size on a fresh server; with
// sessions, the candidates of each client share one Session (peer.Fleet).
func (r *run) scaleCase(ctx context.Context, t target, e libs.Entry, n int, sessions bool) error {
	pool := (n + perClient - 1) / perClient
	if e.OwnConnections {
		pool = n
	}
	name := e.Name
	if sessions {
		name += sessionsSuffix
	}
	s := &ScaleRow{Target: t.key, Store: t.title, Lib: name, Role: string(e.Role), N: n, Clients: pool, RegisteredMS: -1, LeadMS: -1}
	r.rep.Scale = append(r.rep.Scale, s)
	r.logf("scale on %s (a fresh server): %s, %d candidates over %d clients", t.title, name, n, pool)
	// Every case gets a fresh server: what one library left behind
	// (memory, a compaction backlog) must not weigh on the next.
	env, stop, err := r.privateServer(t)
	if err != nil {
		s.Err = err.Error()
		return nil
	}
	defer stop()
	env.Conns = conns.Options{Counted: true, Pool: pool}
	env.Scenario = "scale"
	if e.MaxCandidates > 0 && n > e.MaxCandidates {
		s.Note = fmt.Sprintf("skipped: at most %d candidates for this library", e.MaxCandidates)
		return nil
	}
	if err := r.scaleOne(ctx, e, env, s, sessions); err != nil {
		s.Err = err.Error()
	}
	return ctx.Err()
}

// makeProcesses opens n processes (a client and a session each).
func makeProcesses(ctx context.Context, fleet peer.Fleet, n int, ttl time.Duration) ([]peer.Process, error) {
	procs := make([]peer.Process, 0, n)
	for range n {
		p, err := fleet.NewProcess(ctx, ttl)
		if err != nil {
			closeProcesses(procs)
			return nil, err
		}
		procs = append(procs, p)
	}
	return procs, nil
}

func closeProcesses(procs []peer.Process) {
	for _, p := range procs {
		_ = p.Close()
	}
}

// makeProcessCandidates makes n candidates of the election called name,
// dealt round robin over procs' sessions.
func makeProcessCandidates(ctx context.Context, procs []peer.Process, name string, n int) ([]peer.Candidate, error) {
	cs := make([]peer.Candidate, n)
	for i := range cs {
		c, err := procs[i%len(procs)].NewCandidate(ctx, name, fmt.Sprintf("c%05d", i))
		if err != nil {
			closeAll(cs)
			return nil, err
		}
		cs[i] = c
	}
	return cs, nil
}

// sessionsSuffix names the scale rows whose candidates share a Session
// per client.
const sessionsSuffix = ", a Session per client"

// warmGoroutines leaves n goroutine descriptors on the runtime's free
// list (up to maxWarmGoroutines). The runtime never frees a descriptor
// (~0.5 KB of heap each): goroutines reuse those of goroutines that have
// ended. Without this, the first library measured in a process paid for
// its goroutines' descriptors in its heap growth and the ones after it
// reused them for free (concurrency.Election alone at N = 10,000: 7.5 KB
// per candidate; after backend/etcd: 6.0 KB). Warmed, no case pays for
// them, whichever order the cases run in; goroutines are counted in their
// own column.
func warmGoroutines(n int) {
	n = min(n, maxWarmGoroutines)
	var done sync.WaitGroup
	release := make(chan struct{})
	done.Add(n)
	for range n { // each go statement takes a descriptor; none ends before release
		go func() {
			<-release
			done.Done()
		}()
	}
	close(release)
	done.Wait()
}

// maxWarmGoroutines bounds warmGoroutines (their stacks, while they all
// wait, are a few KB each).
const maxWarmGoroutines = 200_000

// warmPerCandidate: goroutine descriptors warmed per candidate before a
// heap baseline, above what any library uses.
const warmPerCandidate = 6

// heapBaseline is heapNow before a case of n candidates or elections,
// with the goroutine descriptors warmed for them.
func heapBaseline(n int) (uint64, int) {
	warmGoroutines(warmPerCandidate * n)
	return heapNow()
}

func heapNow() (uint64, int) {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc, runtime.NumGoroutine()
}

// writeHeapProfile writes the process's heap profile (after heapNow's
// collections) to path, and its goroutines' stacks beside it.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("heap profile: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	// Beside it, what the goroutines wait in, grouped by stack.
	g, err := os.Create(strings.TrimSuffix(path, ".pprof") + ".goroutines.txt")
	if err != nil {
		return fmt.Errorf("goroutine profile: %w", err)
	}
	if err := pprof.Lookup("goroutine").WriteTo(g, 1); err != nil {
		g.Close()
		return fmt.Errorf("goroutine profile: %w", err)
	}
	return g.Close()
}

func (r *run) scaleOne(ctx context.Context, e libs.Entry, env libs.Env, s *ScaleRow, sessions bool) error {
	lib, err := e.New(ctx, env)
	if err != nil {
		return err
	}
	defer lib.Close()
	if l, ok := lib.(peer.Limited); ok && s.N > l.MaxCandidates() {
		s.Note = fmt.Sprintf("skipped: the adapter runs at most %d candidates", l.MaxCandidates())
		return nil
	}
	name := fmt.Sprintf("/bench/scale/%s/%s/%d", s.Target, slug(e.Name), s.N)
	census, hasCensus := lib.(peer.Census)
	if hasCensus { // its connection is made now, outside the measurement
		if _, err := census.Registered(ctx, name); err != nil {
			return fmt.Errorf("census: %w", err)
		}
	}
	h0, g0 := heapBaseline(s.N)
	start, start0 := time.Now(), mono.Now()
	var cs []peer.Candidate
	if sessions {
		fleet, ok := lib.(peer.Fleet)
		if !ok {
			return fmt.Errorf("%s shares no sessions (peer.Fleet)", e.Name)
		}
		procs, err := makeProcesses(ctx, fleet, s.Clients, scaleTTL(e.Store))
		if err != nil {
			return err
		}
		defer closeProcesses(procs)
		cs, err = makeProcessCandidates(ctx, procs, name, s.N)
		if err != nil {
			return err
		}
	} else {
		cs, err = makeCandidates(ctx, lib, name, s.N, scaleTTL(e.Store))
		if err != nil {
			return err
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	camp := newCampaigns(len(cs))
	defer func() {
		cancel()
		r.logf("  closing the candidates")
		closeAll(cs)
		camp.wg.Wait()
	}()
	patience := max(r.sz.scalePatience, time.Duration(s.N)*1200*time.Microsecond) // 120 s at N = 100,000
	deadline := time.Now().Add(patience)
	led, registered, first := false, !hasCensus, -1
	r.logf("  %d candidates made in %v", s.N, time.Since(start).Round(time.Millisecond))
	// Start the Campaign calls with at most scaleWindow of them not yet
	// registered, as a fleet rolls out, rather than all in the same
	// millisecond (which makes a single etcd member refuse requests).
	lastLog, have := time.Now(), 0
	count := func() (int, error) {
		if !hasCensus {
			return -1, errors.New("no census")
		}
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return census.Registered(c, name)
	}
	tooBig := func() bool {
		rss := r.serverRSS()
		s.MemberRSSMiB = max(s.MemberRSSMiB, float64(rss)/(1<<20))
		if rss > maxServerRSS {
			if n, err := count(); err == nil {
				have = n
			}
			s.Note = fmt.Sprintf("stopped: the etcd member grew to %.1f GiB with %d of %d registered after %v", float64(rss)/(1<<30), have, s.N, time.Since(start).Round(time.Second))
			return true
		}
		return false
	}
	for i, c := range cs {
		for hasCensus && i-have >= scaleWindow && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
			if n, err := count(); err == nil {
				have = n
			}
			if time.Since(lastLog) > 5*time.Second {
				r.logf("  %d started, %d registered", i, have)
				lastLog = time.Now()
			}
			if tooBig() {
				return nil
			}
		}
		if !time.Now().Before(deadline) {
			break // the time is up: the rest would only add load to what is reported
		}
		camp.start(cctx, i, c)
	}
	for !(led && registered) {
		if !led {
			select {
			case first = <-camp.won:
				led = true
				// When its Campaign returned: this loop only begins once
				// every Campaign call has started.
				s.LeadMS = float64(camp.at[first]-start0) / 1e6
			default:
			}
		}
		if time.Now().After(deadline) {
			if n, err := count(); err == nil {
				have = n
			}
			s.Note = fmt.Sprintf("only %d of %d registered within %v", have, s.N, patience)
			break
		}
		if tooBig() {
			return nil
		}
		if !registered {
			n, err := count()
			if err == nil {
				have = n
			}
			if err == nil && n >= s.N {
				registered = true
				s.RegisteredMS = float64(time.Since(start).Microseconds()) / 1000
			}
			if time.Since(lastLog) > 5*time.Second {
				f, ferr := camp.failed()
				r.logf("  %d of %d registered (led: %v; %d campaigns failed, the first: %v)", have, s.N, led, f, ferr)
				lastLog = time.Now()
			}
		}
		if !(led && registered) {
			time.Sleep(100 * time.Millisecond)
		}
	}
	r.logf("  one led after %s ms, all registered after %s ms", ms(s.LeadMS), ms(s.RegisteredMS))
	settle := time.Second
	if r.cfg.Short {
		settle = 100 * time.Millisecond
	}
	time.Sleep(settle) // let the registration's stragglers settle
	tooBig()           // the member's resident memory, once more
	h1, g1 := heapNow()
	s.HeapBytes = (float64(h1) - float64(h0)) / float64(s.N)
	s.Goroutines = float64(g1-g0) / float64(s.N)
	s.Measured = led && registered
	if c, ok := lib.(peer.Counter); ok && led && registered {
		s.Counted = true
		window := r.sz.steadyWindow
		if window == 0 { // one renewal period at least: the renewals come in bursts
			window = scaleTTL(e.Store)
		}
		c0, t0 := c.Counts(), time.Now()
		select {
		case <-time.After(window):
		case <-ctx.Done():
			return ctx.Err()
		}
		d, el := c.Counts().Sub(c0), time.Since(t0).Seconds()
		s.ReqPerSecCand = float64(d.Requests+d.Events+d.Renewals) / el / float64(s.N)
	}
	if ctx.Err() != nil {
		return errors.New("interrupted")
	}
	if led && registered {
		r.scaleHandovers(ctx, cs, camp, first, s)
	}
	if n, err := camp.failed(); n > 0 {
		s.Note = strings.TrimPrefix(s.Note+fmt.Sprintf("; %d Campaign calls failed and were called again, the first: %v", n, err), "; ")
	}
	return nil
}

// scaleHandovers measures handovers at the head of a full queue: the
// leader releases, the next candidate's Campaign returns (from the
// release's start to the return, on the Mono clock).
func (r *run) scaleHandovers(ctx context.Context, cs []peer.Candidate, camp *campaigns, leader int, s *ScaleRow) {
	n := scaleHandoverSamples
	if r.cfg.Short {
		n = 3
	}
	var lat []float64
	for range min(n, len(cs)-1) {
		t0, err := cs[leader].Release(ctx)
		if err != nil {
			s.Note = strings.TrimPrefix(s.Note+fmt.Sprintf("; a release failed: %v", err), "; ")
			break
		}
		select {
		case next := <-camp.won:
			lat = append(lat, float64(camp.at[next]-t0)/1e6)
			leader = next
		case <-time.After(10 * time.Second):
			s.Note = strings.TrimPrefix(s.Note+"; a handover took over 10 s", "; ")
		case <-ctx.Done():
		}
		if ctx.Err() != nil || len(lat) == 0 {
			break
		}
	}
	if len(lat) > 0 {
		d := &Dist{MS: lat}
		s.HandoverP50MS, s.HandoverP99MS, s.Handovers = d.Q(0.5), d.Q(0.99), len(lat)
	}
}

// scaleHandoverSamples is how many handovers the scale scenario measures
// at the head of each full queue.
const scaleHandoverSamples = 50
