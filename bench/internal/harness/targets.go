package harness

import (
	"fmt"
	"math"
	"strconv"

	"github.com/electkit/election/bench/internal/libs"
)

// Regime names, as the handover cases are called.
const (
	churn   = "churn: waited 20 ms"
	settled = "settled: waited 300 ms"
)

func (r *Report) add(what, want, got string, ok bool, measured bool) {
	st := "met"
	switch {
	case !measured:
		st = "not measured"
	case !ok:
		st = "MISSED"
	}
	r.Targets = append(r.Targets, &Target{What: what, Want: want, Got: got, Status: st})
}

// evaluate fills Targets from the figures.
func (r *Report) evaluate() {
	r.Targets = nil
	p50 := func(d *Dist) float64 {
		if d == nil || len(d.MS) == 0 {
			return math.NaN()
		}
		return d.Q(0.5)
	}
	// Handover p50 ≤ 2 ms on single-member etcd and standalone ZooKeeper.
	for _, t := range []target{etcd1, zk1} {
		for _, c := range []string{churn, settled} {
			o := p50(r.ours("handover", t.key, c))
			r.add(fmt.Sprintf("handover, %s, %s", t.title, c), "p50 ≤ 2 ms", ms(o)+" ms", o <= 2, !math.IsNaN(o))
		}
	}
	// Against the peers, on every store the handover ran on.
	type cmp struct {
		peer     string
		store    libs.Store
		cas      string
		want     string
		factor   float64 // peer p50 / ours p50 must be ≥ factor
		targets2 []target
	}
	cmps := []cmp{
		{libs.ConcurrencyName, libs.Etcd, churn, "≥ 20× faster than concurrency.Election", 20, []target{etcd1, etcd3}},
		{libs.ConcurrencyName, libs.Etcd, settled, "no slower than concurrency.Election", 1, []target{etcd1, etcd3}},
		{libs.ClientGoName, libs.Etcd, churn, "≥ 100× faster than client-go (defaults)", 100, []target{etcd1, etcd3}},
		{libs.ClientGoName, libs.Etcd, settled, "≥ 100× faster than client-go (defaults)", 100, []target{etcd1, etcd3}},
		{libs.CuratorName, libs.ZK, churn, "no slower than Curator LeaderLatch", 1, []target{zk1, zk3}},
		{libs.CuratorName, libs.ZK, settled, "no slower than Curator LeaderLatch", 1, []target{zk1, zk3}},
	}
	for _, c := range cmps {
		for _, t := range c.targets2 {
			o := p50(r.ours("handover", t.key, c.cas))
			p := p50(r.find("handover", t.key, c.cas, c.peer))
			got := fmt.Sprintf("ours %s ms, %s %s ms (theirs ÷ ours %s)", ms(o), c.peer, ms(p), ratio(p, o))
			if math.IsNaN(p) {
				got = c.peer + " not measured"
			}
			r.add(fmt.Sprintf("handover, %s, %s", t.title, c.cas), c.want, got, p/o >= c.factor, !math.IsNaN(o) && !math.IsNaN(p))
		}
	}
	// Crash failover: every library's maximum within the bound.
	for _, d := range r.dists("crash") {
		if d.Role != "ours" {
			continue
		}
		mx := math.NaN()
		if len(d.MS) > 0 {
			mx = d.Q(1)
		}
		r.add(fmt.Sprintf("crash failover, %s, %s", d.Store, d.Case), "max ≤ "+ms(d.Bound)+" ms", ms(mx)+" ms (p50 "+ms(p50(d))+")", mx <= d.Bound, !math.IsNaN(mx))
	}
	// Herd: ≤ 2 woken per handover.
	for _, h := range r.Herd {
		if h.Role != "ours" {
			continue
		}
		m := -1
		for _, w := range h.Woken {
			m = max(m, w)
		}
		r.add(fmt.Sprintf("herd, %s, N = %d", h.Store, h.N), "≤ 2 woken per handover", fmt.Sprintf("max %d woken", m), m >= 0 && m <= 2, m >= 0 && h.Counted)
	}
	r.evaluateBurst()
	// Memory within 1.5× of concurrency.Election.
	for _, s := range r.Scale {
		if s.Role != "ours" || s.Store != etcd1.title {
			continue
		}
		for _, p := range r.Scale {
			if p.Lib == libs.ConcurrencyName && p.N == s.N && p.Target == s.Target {
				if !s.Measured || !p.Measured {
					r.add(fmt.Sprintf("memory per idle candidate, %s, %s, N = %d", s.Store, s.Lib, s.N), "heap ≤ 1.5× concurrency.Election's", "not all registered (see Scale)", false, false)
					continue
				}
				r.add(fmt.Sprintf("memory per idle candidate, %s, %s, N = %d", s.Store, s.Lib, s.N), "heap ≤ 1.5× concurrency.Election's",
					fmt.Sprintf("%.0f B vs %.0f B (%s); goroutines %.2f vs %.2f", s.HeapBytes, p.HeapBytes, ratio(s.HeapBytes, p.HeapBytes), s.Goroutines, p.Goroutines),
					s.HeapBytes <= 1.5*p.HeapBytes, true)
			}
		}
	}
}

// evaluateBurst adds the burst start's targets (issue 33): with a
// Session per client, every election led in at most concurrency.Election's
// time, at most 1 request/s per Session once idle, heap, goroutines and
// member RSS at most concurrency.Election's; with a lease per Elector,
// every election led; on ZooKeeper, every election led.
func (r *Report) evaluateBurst() {
	for _, s := range r.Burst {
		if s.Role != string(libs.Ours) {
			continue
		}
		what := fmt.Sprintf("burst start, %s, %s × 3, %s", s.Store, thousands(s.Elections), s.Lib)
		led := fmt.Sprintf("%d of %d after %s ms", s.Led, s.Elections, ms(s.CapMS))
		if s.LedMS >= 0 {
			led = "all after " + ms(s.LedMS) + " ms"
		}
		if !s.Sessions {
			r.add(what, "every election leads", led+fmt.Sprintf("; the member received %.0f requests/s", s.ReqPerSec), s.LedMS >= 0, s.Err == "")
			continue
		}
		if s.Target == zk1.key {
			got := led + fmt.Sprintf("; the server received %.1f requests per election, %.0f/s", float64(s.Requests)/float64(s.Elections), s.ReqPerSec)
			if s.Measured {
				got += fmt.Sprintf("; %.0f heap bytes and %.2f goroutines per idle election", s.HeapBytes, s.Goroutines)
			}
			r.add(what, "every election leads", got, s.LedMS >= 0, s.Err == "")
			continue
		}
		p := r.burstPeer(s)
		if p == nil {
			r.add(what, "all led in ≤ concurrency.Election's time", "concurrency.Election not measured", false, false)
			continue
		}
		theirs := "all after " + ms(p.LedMS) + " ms"
		if p.LedMS < 0 {
			theirs = fmt.Sprintf("%d of %d after %s ms", p.Led, p.Elections, ms(p.CapMS))
		}
		r.add(what, "all led in ≤ concurrency.Election's time", fmt.Sprintf("ours %s, concurrency.Election %s; the member received %.0f vs %.0f requests/s", led, theirs, s.ReqPerSec, p.ReqPerSec),
			s.LedMS >= 0 && (p.LedMS < 0 || s.LedMS <= p.LedMS), s.Err == "" && p.Err == "")
		if !s.Measured || !p.Measured {
			r.add(what, "steady ≤ 1 req/s per Session; heap, goroutines, member RSS ≤ concurrency.Election's", "not all led (see Burst start)", false, false)
			continue
		}
		r.add(what, "steady ≤ 1 req/s per Session", fmt.Sprintf("%.2f (concurrency.Election %.2f)", s.SteadyPerSession, p.SteadyPerSession), s.SteadyPerSession <= 1, true)
		r.add(what, "heap and goroutines per election ≤ concurrency.Election's",
			fmt.Sprintf("%.0f B vs %.0f B (%s); goroutines %.2f vs %.2f", s.HeapBytes, p.HeapBytes, ratio(s.HeapBytes, p.HeapBytes), s.Goroutines, p.Goroutines),
			s.HeapBytes <= p.HeapBytes && s.Goroutines <= p.Goroutines, true)
		r.add(what, "member RSS ≤ concurrency.Election's", fmt.Sprintf("%.0f MiB vs %.0f MiB (%s)", s.MemberRSSMiB, p.MemberRSSMiB, ratio(s.MemberRSSMiB, p.MemberRSSMiB)),
			s.MemberRSSMiB <= p.MemberRSSMiB, true)
	}
}

// thousands writes n with comma separators: 10,000.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
