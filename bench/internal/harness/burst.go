package harness

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/electkit/election/bench/internal/libs"
	"github.com/electkit/election/bench/internal/peer"
	"github.com/electkit/election/bench/internal/servers"
	"github.com/electkit/election/internal/rig/zktest"
)

// burstClients is how many clients (processes) campaign in every
// election of the burst scenario, one candidate each.
const burstClients = 3

// burstTTL is the lease TTL of the burst scenario.
const burstTTL = 10 * time.Second

// burstShortZK is the number of elections of the ZooKeeper cases in the
// -short smoke (at most).
const burstShortZK = 10

// leaseSuffix names the burst rows of backend/etcd whose Electors have a
// lease each (etcd.New, no Session).
const leaseSuffix = ", a lease per Elector"

// BurstRow is one case of the burst scenario: E elections, a candidate of
// each on each of three clients, every Campaign call started at once.
type BurstRow struct {
	Target    string `json:"target"`
	Store     string `json:"store"`
	Lib       string `json:"library"`
	Role      string `json:"role"`
	Sessions  bool   `json:"sessions"` // one Session per client; false: a lease per Elector
	Elections int    `json:"elections"`
	// LedMS is when every election had a leader, from the start of the
	// Campaign calls; -1 when not within CapMS (Led says how many had).
	LedMS float64 `json:"all_led_ms"`
	Led   int     `json:"led"`
	CapMS float64 `json:"cap_ms"`
	// Requests is what the server received from the start until every
	// election led, or the cap: on etcd the member's
	// grpc_server_msg_received_total (unary requests and stream
	// messages), on ZooKeeper its zk_packets_received (mntr: requests and
	// pings); ReqPerSec is the same per second, ByMethod the etcd
	// member's largest parts (on ZooKeeper its znodes and watches once
	// all led).
	Requests  int64   `json:"requests"`
	ReqPerSec float64 `json:"requests_per_s"`
	ByMethod  string  `json:"by_method"`
	// Measured: every election led, and the figures below were taken.
	Measured bool    `json:"measured"`
	QuietMS  float64 `json:"quiet_ms"` // when the member's traffic settled after all led
	// Steady is the member's received messages per second over a window
	// after the quiet; SteadyPerSession the same per Session (one per
	// client), or per lease with a lease per Elector.
	Steady           float64 `json:"steady_requests_per_s"`
	SteadyPerSession float64 `json:"steady_requests_per_s_per_session"`
	Goroutines       float64 `json:"goroutines_per_election"`
	HeapBytes        float64 `json:"heap_bytes_per_election"`
	MemberRSSMiB     float64 `json:"member_rss_mib"`      // at the end of the case (all led and idle, or the cap)
	PeakRSSMiB       float64 `json:"member_peak_rss_mib"` // sampled every 100 ms through the case
	Failed           int64   `json:"failed_campaigns"`    // Campaign calls that failed and were called again
	Err              string  `json:"error,omitempty"`
	Note             string  `json:"note,omitempty"`
}

// burstCase is one library and variant of the burst scenario.
type burstCase struct {
	e        libs.Entry
	sessions bool
	t        target
}

// burst: many elections started at once, as a service with a leader per
// shard starts (a goroutine per shard, each calling Campaign): backend/etcd
// with a Session per client, concurrency.Election with a Session per
// client, backend/etcd with a lease per Elector; then backend/zk with its
// candidates on three connections (a connection is a session), and
// Curator's LeaderLatch the same way where its adapter can share a
// client among latches. Each on a fresh server.
func (r *run) burst(ctx context.Context) error {
	n, capd := 10000, 150*time.Second
	if r.cfg.Short {
		n, capd = 200, 30*time.Second
	}
	if r.cfg.Burst > 0 {
		n = r.cfg.Burst
	}
	if r.cfg.BurstCap > 0 {
		capd = r.cfg.BurstCap
	}
	var cases, leases []burstCase
	for _, e := range r.libsOf(libs.Etcd, libs.Ours, libs.Peer) {
		switch {
		case e.Role == libs.Ours:
			cases = append(cases, burstCase{e, true, etcd1})
			leases = append(leases, burstCase{e, false, etcd1})
		case e.Name == libs.ConcurrencyName:
			cases = append(cases, burstCase{e, true, etcd1})
		}
	}
	for _, c := range append(cases, leases...) {
		if err := r.burstCase(ctx, c, n, capd); err != nil {
			return err
		}
	}
	if err := servers.ZKAvailable(); err != nil {
		r.rep.note(fmt.Sprintf("burst on %s: %v", zk1.title, err))
		return nil
	}
	zn := n
	if r.cfg.Short {
		zn = min(n, burstShortZK)
	}
	for _, e := range r.libsOf(libs.ZK, libs.Ours, libs.Peer) {
		if e.Role != libs.Ours && (e.Name != libs.CuratorName || r.cfg.Short) {
			continue // Curator's JVM and warm-up cost the smoke more than it checks
		}
		if err := r.burstCase(ctx, burstCase{e, true, zk1}, zn, capd); err != nil {
			return err
		}
	}
	return nil
}

func (r *run) burstCase(ctx context.Context, c burstCase, n int, capd time.Duration) error {
	name := c.e.Name
	if !c.sessions {
		name += leaseSuffix
	}
	s := &BurstRow{Target: c.t.key, Store: c.t.title, Lib: name, Role: string(c.e.Role), Sessions: c.sessions,
		Elections: n, LedMS: -1, CapMS: float64(capd.Milliseconds())}
	r.rep.Burst = append(r.rep.Burst, s)
	r.logf("burst on %s (a fresh server): %s, %d elections × %d candidates, every Campaign call at once", c.t.title, name, n, burstClients)
	env, stop, err := r.privateServer(c.t)
	if err != nil {
		s.Err = err.Error()
		return nil
	}
	defer stop()
	env.Scenario = "burst"
	if !c.sessions {
		env.Conns.Pool = burstClients
	}
	if err := r.burstOne(ctx, c, env, s, capd); err != nil {
		s.Err = err.Error()
	}
	return ctx.Err()
}

func (r *run) burstOne(ctx context.Context, bc burstCase, env libs.Env, s *BurstRow, capd time.Duration) error {
	n := s.Elections
	lib, err := bc.e.New(ctx, env)
	if err != nil {
		return err
	}
	defer lib.Close()
	var procs []peer.Process
	if bc.sessions {
		fleet, ok := lib.(peer.Fleet)
		if f, isOf := lib.(peer.FleetOf); !ok && isOf {
			fleet, ok = f.Fleet()
		}
		if !ok {
			return fmt.Errorf("%s shares no sessions (peer.Fleet)", bc.e.Name)
		}
		if procs, err = makeProcesses(ctx, fleet, burstClients, burstTTL); err != nil {
			return err
		}
		defer closeProcesses(procs)
	} else {
		conn, ok := lib.(peer.Connector)
		if !ok {
			return fmt.Errorf("%s cannot connect its clients ahead (peer.Connector)", bc.e.Name)
		}
		if err := conn.Connect(burstTTL); err != nil {
			return err
		}
	}
	var member serverCounter
	serverRSS := r.serverRSS
	elName := func(i int) string { return fmt.Sprintf("/bench/burst/%s/%s/%d", bc.t.key, slug(s.Lib), i) }
	if bc.t.store == libs.ZK {
		member, serverRSS = zkMonitor{addr: env.Servers[0]}, r.zkRSS
		elName = func(i int) string { return fmt.Sprintf("/burst/e%05d", i) }
	} else {
		member = newMemberMetrics(env.Endpoints[0])
	}
	if _, err := member.received(ctx); err != nil {
		return err
	}
	// The baseline: the clients (and Sessions) connected, no candidate.
	h0, g0 := heapBaseline(burstClients * n)
	cands := make([]peer.Candidate, 0, burstClients*n)
	for i := range n {
		for j := range burstClients {
			var c peer.Candidate
			el, id := elName(i), fmt.Sprintf("p%d", j)
			if bc.sessions {
				c, err = procs[j].NewCandidate(ctx, el, id)
			} else { // the pool deals its clients round robin: candidate j of each election on client j
				c, err = lib.NewCandidate(ctx, el, id, burstTTL)
			}
			if err != nil {
				closeAll(cands)
				return err
			}
			cands = append(cands, c)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		t0 := time.Now()
		closeAll(cands)
		wg.Wait()
		r.logf("  candidates closed in %v", time.Since(t0).Round(time.Millisecond))
	}()
	led := make([]atomic.Bool, n)
	var nLed atomic.Int64
	var ledAfter atomic.Int64 // ns from start
	allLed := make(chan struct{})
	var failMu sync.Mutex
	var firstFail error
	m0, err := member.received(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	for k, c := range cands {
		i := k / burstClients
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				_, err := c.Campaign(cctx)
				if err == nil {
					break
				}
				if cctx.Err() != nil {
					return
				}
				failMu.Lock()
				if s.Failed++; firstFail == nil {
					firstFail = err
				}
				failMu.Unlock()
				select { // an application's retry loop
				case <-time.After(100 * time.Millisecond):
				case <-cctx.Done():
					return
				}
			}
			if led[i].CompareAndSwap(false, true) && nLed.Add(1) == int64(n) {
				ledAfter.Store(int64(time.Since(start)))
				close(allLed)
			}
		}()
	}
	defer func() {
		failMu.Lock()
		defer failMu.Unlock()
		if s.Failed > 0 {
			s.Note = strings.TrimPrefix(s.Note+fmt.Sprintf("; %d Campaign calls failed and were called again, the first: %v", s.Failed, firstFail), "; ")
		}
	}()
	r.logf("  %d Campaign calls started in %v", len(cands), time.Since(start).Round(time.Millisecond))
	rss := func() {
		v := float64(serverRSS()) / (1 << 20)
		s.PeakRSSMiB = max(s.PeakRSSMiB, v)
		s.MemberRSSMiB = v
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	lastLog, lastM := start, m0
wait:
	for {
		select {
		case <-allLed:
			break wait
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		rss()
		if time.Since(start) >= capd {
			break
		}
		if time.Since(lastLog) >= 5*time.Second {
			if m, err := member.received(ctx); err == nil {
				r.logf("  %d of %d elections led; the server received %.0f requests/s over the last %v",
					nLed.Load(), n, float64(m.total-lastM.total)/time.Since(lastLog).Seconds(), time.Since(lastLog).Round(time.Second))
				lastM = m
			}
			lastLog = time.Now()
		}
	}
	m1, err := member.received(ctx)
	if err != nil {
		return err
	}
	took := time.Since(start)
	rss()
	s.Led = int(nLed.Load())
	s.Requests = m1.total - m0.total
	s.ReqPerSec = float64(s.Requests) / took.Seconds()
	s.ByMethod = m1.sub(m0).top(4)
	if bc.t.store == libs.ZK {
		s.ByMethod = zkCensus(m1)
	}
	if s.Led < n {
		s.Note = fmt.Sprintf("%d of %d elections led within %v", s.Led, n, capd)
		r.logf("  %s; the server received %d requests (%.0f/s): %s", s.Note, s.Requests, s.ReqPerSec, s.ByMethod)
		return nil
	}
	s.LedMS = float64(ledAfter.Load()) / 1e6
	r.logf("  all %d elections led after %s ms; the server received %d requests (%.0f/s): %s", n, ms(s.LedMS), s.Requests, s.ReqPerSec, s.ByMethod)
	// Quiet: the waiters' watches are made after their keys; wait until
	// the server receives, renewals aside (etcd; ZooKeeper's pings are
	// counted), at most one message per second per client (over a second),
	// at most two TTLs.
	for quietBy := time.Now().Add(2 * burstTTL); !r.cfg.Short; {
		a, err := member.received(ctx)
		if err != nil {
			return err
		}
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return ctx.Err()
		}
		b, err := member.received(ctx)
		if err != nil {
			return err
		}
		d := b.sub(a)
		if d.total-d.byMethod["LeaseKeepAlive"] <= burstClients || time.Now().After(quietBy) {
			break
		}
	}
	s.QuietMS = float64(time.Since(start).Microseconds()) / 1000
	h1, g1 := heapNow()
	if r.cfg.HeapProfile != "" {
		if err := writeHeapProfile(r.cfg.HeapProfile + "-" + slug(s.Lib) + ".pprof"); err != nil {
			return err
		}
	}
	s.HeapBytes = (float64(h1) - float64(h0)) / float64(n)
	s.Goroutines = float64(g1-g0) / float64(n)
	window := burstTTL
	if r.cfg.Short {
		window = 500 * time.Millisecond
	}
	c0, err := member.received(ctx)
	if err != nil {
		return err
	}
	t0 := time.Now()
	select {
	case <-time.After(window):
	case <-ctx.Done():
		return ctx.Err()
	}
	c1, err := member.received(ctx)
	if err != nil {
		return err
	}
	s.Steady = float64(c1.total-c0.total) / time.Since(t0).Seconds()
	r.logf("  steady by method: %s", c1.sub(c0).top(6))
	if bc.t.store == libs.ZK {
		s.ByMethod = zkCensus(c1)
	}
	sessions := burstClients
	if !bc.sessions {
		sessions = burstClients * n
	}
	s.SteadyPerSession = s.Steady / float64(sessions)
	rss()
	if j, ok := lib.(interface{ RSS() (int64, error) }); ok { // the library's own process: Curator's JVM
		if v, err := j.RSS(); err == nil {
			s.Note = strings.TrimPrefix(s.Note+fmt.Sprintf("; its candidates run in a JVM of %.0f MiB RSS at the end (not in the goroutine and heap columns)", float64(v)/(1<<20)), "; ")
		}
	}
	s.Measured = true
	r.logf("  quiet after %s ms; steady %.2f requests/s, %.2f per session; %.2f goroutines, %.0f heap bytes per election; server RSS %.0f MiB (peak %.0f)",
		ms(s.QuietMS), s.Steady, s.SteadyPerSession, s.Goroutines, s.HeapBytes, s.MemberRSSMiB, s.PeakRSSMiB)
	return nil
}

// serverCounter reads a server's own count of the requests it received.
type serverCounter interface {
	received(ctx context.Context) (received, error)
}

// zkMonitor reads a ZooKeeper server's count of the packets it received
// (zk_packets_received: requests and pings) with the mntr four-letter word
// on its client port. A four-letter word is answered before any session
// and adds nothing to the count. byMethod holds mntr's other integer
// figures by name (zk_znode_count, zk_watch_count, …), not parts of the
// total.
type zkMonitor struct{ addr string }

func (z zkMonitor) received(ctx context.Context) (received, error) {
	if err := ctx.Err(); err != nil {
		return received{}, err
	}
	out, err := zktest.FourLetter(z.addr, "mntr")
	if err != nil {
		return received{}, fmt.Errorf("the server's mntr: %w", err)
	}
	r := received{byMethod: map[string]int64{}}
	found := false
	for _, l := range strings.Split(out, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(l), "\t")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			continue
		}
		if k == "zk_packets_received" {
			r.total, found = n, true
			continue
		}
		r.byMethod[k] = n
	}
	if !found {
		return received{}, fmt.Errorf("the server's mntr has no zk_packets_received: %.200q", out)
	}
	return r, nil
}

// zkCensus names a ZooKeeper server's znodes and watches in a reading of
// zkMonitor.
func zkCensus(m received) string {
	return fmt.Sprintf("%s znodes, %s watches", thousands(int(m.byMethod["zk_znode_count"])), thousands(int(m.byMethod["zk_watch_count"])))
}

// memberMetrics reads an etcd member's own count of the gRPC messages
// it received, from its /metrics on the client URL. Reading it is plain
// HTTP: it adds nothing to the count.
type memberMetrics struct {
	url string
	c   *http.Client
}

func newMemberMetrics(endpoint string) *memberMetrics {
	return &memberMetrics{url: strings.TrimSuffix(endpoint, "/") + "/metrics", c: &http.Client{Timeout: 10 * time.Second}}
}

// received is a reading of grpc_server_msg_received_total: in all and by
// method.
type received struct {
	total    int64
	byMethod map[string]int64
}

func (m *memberMetrics) received(ctx context.Context) (received, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.url, nil)
	if err != nil {
		return received{}, err
	}
	resp, err := m.c.Do(req)
	if err != nil {
		return received{}, fmt.Errorf("the member's metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return received{}, fmt.Errorf("the member's metrics: %s", resp.Status)
	}
	out := received{byMethod: map[string]int64{}}
	found := false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, "grpc_server_msg_received_total{") {
			continue
		}
		found = true
		i := strings.LastIndexByte(l, ' ')
		v, err := strconv.ParseFloat(l[i+1:], 64)
		if err != nil {
			return received{}, fmt.Errorf("the member's metrics: %q: %w", l, err)
		}
		method := "?"
		if _, after, ok := strings.Cut(l, `grpc_method="`); ok {
			method, _, _ = strings.Cut(after, `"`)
		}
		out.total += int64(v)
		out.byMethod[method] += int64(v)
	}
	if err := sc.Err(); err != nil {
		return received{}, fmt.Errorf("the member's metrics: %w", err)
	}
	if !found {
		return received{}, errors.New("the member's metrics have no grpc_server_msg_received_total")
	}
	return out, nil
}

func (a received) sub(b received) received {
	out := received{total: a.total - b.total, byMethod: map[string]int64{}}
	for k, v := range a.byMethod {
		if d := v - b.byMethod[k]; d != 0 {
			out.byMethod[k] = d
		}
	}
	return out
}

// top names the k methods that received the most, with their shares.
func (a received) top(k int) string {
	if a.total <= 0 {
		return "—"
	}
	names := make([]string, 0, len(a.byMethod))
	for m := range a.byMethod {
		names = append(names, m)
	}
	slices.SortFunc(names, func(x, y string) int {
		if a.byMethod[x] != a.byMethod[y] {
			return int(a.byMethod[y] - a.byMethod[x])
		}
		return strings.Compare(x, y)
	})
	var parts []string
	for _, m := range names[:min(k, len(names))] {
		share := fmt.Sprintf("%.0f%%", 100*float64(a.byMethod[m])/float64(a.total))
		if 200*a.byMethod[m] < a.total {
			share = "<1%"
		}
		parts = append(parts, m+" "+share)
	}
	return strings.Join(parts, ", ")
}
