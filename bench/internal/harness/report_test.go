package harness

import (
	"math"
	"strings"
	"testing"
)

func TestQuantileNearestRank(t *testing.T) {
	d := &Dist{MS: []float64{5, 1, 4, 2, 3, 6, 7, 8, 9, 10}}
	for q, want := range map[float64]float64{0.5: 5, 0.9: 9, 0.99: 10, 1: 10, 0: 1} {
		if got := d.Q(q); got != want {
			t.Errorf("Q(%v) = %v, want %v", q, got, want)
		}
	}
	if !math.IsNaN((&Dist{}).Q(0.5)) {
		t.Error("Q of no samples is not NaN")
	}
}

// The targets compare ours with the peer of the same store and regime, and
// a peer that was not measured is "not measured", never met or missed.
func TestTargets(t *testing.T) {
	r := &Report{Dists: []*Dist{
		{Scenario: "handover", Target: "etcd-1", Store: etcd1.title, Case: churn, Lib: "backend/etcd", Role: "ours", MS: []float64{1, 1.5, 2}},
		{Scenario: "handover", Target: "etcd-1", Store: etcd1.title, Case: churn, Lib: "concurrency.Election", Role: "peer", MS: []float64{80, 80, 80}},
		{Scenario: "crash", Target: "zk-1", Store: zk1.title, Case: "TTL 2s", Lib: "backend/zk", Role: "ours", MS: []float64{2100, 2600}, Bound: 2500},
	}}
	r.evaluate()
	status := map[string]string{}
	for _, x := range r.Targets {
		status[x.What+" | "+x.Want] = x.Status
	}
	for k, want := range map[string]string{
		"handover, etcd, 1 member, churn: waited 20 ms | p50 ≤ 2 ms":                              "met",
		"handover, etcd, 1 member, churn: waited 20 ms | ≥ 20× faster than concurrency.Election":  "met",
		"handover, etcd, 1 member, churn: waited 20 ms | ≥ 100× faster than client-go (defaults)": "not measured",
		"handover, ZooKeeper, standalone, churn: waited 20 ms | p50 ≤ 2 ms":                       "not measured",
		"crash failover, ZooKeeper, standalone, TTL 2s | max ≤ 2500 ms":                           "MISSED",
	} {
		if status[k] != want {
			t.Errorf("%s: %q, want %q", k, status[k], want)
		}
	}
	md := r.Markdown()
	for _, s := range []string{"## Targets", "## Handover", "## Crash failover", "**MISSED**"} {
		if !strings.Contains(md, s) {
			t.Errorf("markdown lacks %q", s)
		}
	}
	if svg := r.SVG(); !strings.Contains(svg, "<polyline") {
		t.Error("no curve in the SVG")
	}
}

// The burst start on ZooKeeper has one target, every election leads, and
// is compared with no etcd row; its table row names the server's znodes
// and watches.
func TestBurstTargetsZK(t *testing.T) {
	r := &Report{Burst: []*BurstRow{
		{Target: zk1.key, Store: zk1.title, Lib: "backend/zk", Role: "ours", Sessions: true, Elections: 1000, LedMS: 900, Led: 1000,
			Requests: 9000, ReqPerSec: 10000, ByMethod: "7,001 znodes, 2,000 watches", Measured: true, HeapBytes: 3000, Goroutines: 2},
		{Target: zk1.key, Store: zk1.title, Lib: "backend/zk", Role: "ours", Sessions: true, Elections: 2000, LedMS: -1, Led: 5, CapMS: 1000},
	}}
	r.evaluate()
	var got []string
	for _, x := range r.Targets {
		if strings.HasPrefix(x.What, "burst start") {
			got = append(got, x.What+" | "+x.Want+" | "+x.Status)
		}
	}
	want := []string{
		"burst start, ZooKeeper, standalone, 1,000 × 3, backend/zk | every election leads | met",
		"burst start, ZooKeeper, standalone, 2,000 × 3, backend/zk | every election leads | MISSED",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("burst targets:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if md := r.Markdown(); !strings.Contains(md, "| 1000 | backend/zk | 900 |") || !strings.Contains(md, "7,001 znodes, 2,000 watches") {
		t.Errorf("the burst table lacks the ZooKeeper row:\n%s", md)
	}
}
