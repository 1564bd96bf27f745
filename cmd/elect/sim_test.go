package main

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/electkit/election/classic/sim"
)

// simCounts runs elect sim and returns the messages sent by kind, as the
// count table prints them ("election total" for the sum).
func simCounts(t *testing.T, args ...string) (map[string]int64, string) {
	t.Helper()
	code, out, errOut := elect(t, append([]string{"sim"}, args...)...)
	if code != exitOK {
		t.Fatalf("elect sim %v: exit %d\n%s%s", args, code, out, errOut)
	}
	row := regexp.MustCompile(`(?m)^(Election|Reply|Elected|OK|Coordinator|TreeElection|TreeAck|TreeLeader|VoteRequest|Vote|NewLeader|LeaderAck|Commit|election total|Heartbeat|Ack)\s+(\d+)\s+(\d+)\s+(\d+)`)
	counts := map[string]int64{}
	for _, m := range row.FindAllStringSubmatch(out, -1) {
		n, err := strconv.ParseInt(m[2], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		counts[m[1]] = n
	}
	if counts["election total"] == 0 {
		t.Fatalf("elect sim %v: no count table in\n%s", args, out)
	}
	if strings.Contains(out, "DIFFERS") {
		t.Errorf("elect sim %v: a count differs from its formula:\n%s", args, out)
	}
	return counts, out
}

// TestSimRingBounds: one initiator, no failure: 2N when the best node
// initiates, 3N−1 when its successor (N1) does, 2N + d in between.
func TestSimRingBounds(t *testing.T) {
	for _, n := range []int64{2, 3, 10, 57} {
		nodes := strconv.FormatInt(n, 10)
		c, out := simCounts(t, "--algorithm", "ring", "--nodes", nodes, "--initiators", "N"+nodes)
		if c["election total"] != 2*n || c["Election"] != n || c["Elected"] != n {
			t.Errorf("N=%d, best initiates: %v, want 2N = %d", n, c, 2*n)
		}
		if !strings.Contains(out, "case: best case") || !strings.Contains(out, fmt.Sprintf("leader: N%d, epoch 1", n)) {
			t.Errorf("N=%d best case: output\n%s", n, out)
		}
		c, out = simCounts(t, "--algorithm", "ring", "--nodes", nodes, "--initiators", "N1")
		if c["election total"] != 3*n-1 || c["Election"] != 2*n-1 || c["Elected"] != n {
			t.Errorf("N=%d, successor initiates: %v, want 3N-1 = %d", n, c, 3*n-1)
		}
		if !strings.Contains(out, "case: worst case") {
			t.Errorf("N=%d worst case: output\n%s", n, out)
		}
	}
	// In between: d hops before the best, 2N + d.
	c, _ := simCounts(t, "--nodes", "10", "--initiators", "N7")
	if c["election total"] != 2*10+3 {
		t.Errorf("N7 of 10 initiates: %v, want 2N + 3 = 23", c)
	}
}

// TestSimBully: the seeds' worst case (the lowest node initiates in a
// fresh cluster, all up): N(N−1)/2 Election, as many OK, N−1 Coordinator;
// and the notebook's, with the best node down: N(N−1)/2 Election,
// (N−1)(N−2)/2 OK, N−2 Coordinator.
func TestSimBully(t *testing.T) {
	for _, n := range []int64{2, 3, 5, 8, 20} {
		nodes := strconv.FormatInt(n, 10)
		c, out := simCounts(t, "--algorithm", "bully", "--nodes", nodes, "--initiators", "N1")
		half := n * (n - 1) / 2
		if c["Election"] != half || c["OK"] != half || c["Coordinator"] != n-1 || c["election total"] != n*n-1 {
			t.Errorf("N=%d worst case: %v, want %d Election, %d OK, %d Coordinator", n, c, half, half, n-1)
		}
		if !strings.Contains(out, fmt.Sprintf("leader: N%d, epoch 1", n)) {
			t.Errorf("N=%d: leader line missing:\n%s", n, out)
		}
		if n < 3 {
			continue
		}
		c, out = simCounts(t, "--algorithm", "bully", "--nodes", nodes, "--initiators", "N1", "--crash", "N"+nodes)
		if c["Election"] != half || c["OK"] != (n-1)*(n-2)/2 || c["Coordinator"] != n-2 {
			t.Errorf("N=%d, best down: %v, want %d Election, %d OK, %d Coordinator", n, c, half, (n-1)*(n-2)/2, n-2)
		}
		if !strings.Contains(out, fmt.Sprintf("leader: N%d, epoch 1", n-1)) {
			t.Errorf("N=%d, best down: the second best should lead:\n%s", n, out)
		}
	}
	// The best node initiates: it only announces.
	c, _ := simCounts(t, "--algorithm", "bully", "--nodes", "6", "--initiators", "N6")
	if c["Election"] != 0 || c["OK"] != 0 || c["Coordinator"] != 5 {
		t.Errorf("best initiates: %v, want only N-1 = 5 Coordinator", c)
	}
}

// TestSimTrace: --trace prints every election message sent, as many as the
// table counts.
func TestSimTrace(t *testing.T) {
	c, out := simCounts(t, "--algorithm", "bully", "--nodes", "6", "--crash", "N6", "--initiators", "N1", "--trace")
	for kind, want := range map[string]int64{"Election": c["Election"], "OK": c["OK"], "Coordinator": c["Coordinator"]} {
		if got := int64(strings.Count(out, "  send "+kind+" ")); got != want {
			t.Errorf("trace shows %d %s sends, the table %d", got, kind, want)
		}
	}
	for _, want := range []string{"    0  N6 crash", "    0  N1 start", "drop Election N1→N6 cand=N1 (N6 is down)", "settled: leader=N5 epoch=1"} {
		if !strings.Contains(out, want) {
			t.Errorf("trace lacks %q:\n%s", want, out)
		}
	}
	_, out = simCounts(t, "--nodes", "6")
	if strings.Contains(out, "send Election") {
		t.Errorf("trace printed without --trace:\n%s", out)
	}
}

// TestSimSeed: a run is a function of its flags; the seed draws initiators,
// crashes and delays.
func TestSimSeed(t *testing.T) {
	args := []string{"--algorithm", "ring", "--nodes", "30", "--initiators", "3", "--crash", "2", "--delay", "1-4", "--seed", "7"}
	_, a := simCounts(t, args...)
	_, b := simCounts(t, args...)
	if a != b {
		t.Fatalf("same flags, different runs:\n%s\n---\n%s", a, b)
	}
	if !strings.Contains(a, "(drawn with seed 7)") || !strings.Contains(a, "leader: N") {
		t.Errorf("output:\n%s", a)
	}
	_, c := simCounts(t, append(args[:len(args)-1:len(args)-1], "8")...)
	if c == a {
		t.Errorf("seeds 7 and 8 gave the same run")
	}
	// Multiple initiators on the ring: one Elected lap, whatever the delays.
	counts, _ := simCounts(t, "--nodes", "12", "--initiators", "all", "--delay", "0-5", "--seed", "3")
	if counts["Elected"] != 12 {
		t.Errorf("every node initiates: %v, want one Elected lap of 12", counts)
	}
}

// TestSimZab: ZooKeeper's election without failure costs N−1 NEW_LEADER,
// N−1 ACK and N−1 COMMIT, 3(N−1), and the highest server leads; with the
// highest down, the next one leads.
func TestSimZab(t *testing.T) {
	for _, n := range []int64{2, 5, 40} {
		nodes := strconv.FormatInt(n, 10)
		c, out := simCounts(t, "--algorithm", "zab", "--nodes", nodes)
		if c["election total"] != 3*(n-1) || c["NewLeader"] != n-1 || c["LeaderAck"] != n-1 || c["Commit"] != n-1 {
			t.Errorf("N=%d: %v, want N-1 of each kind, 3(N-1) = %d", n, c, 3*(n-1))
		}
		if !strings.Contains(out, fmt.Sprintf("leader: N%d,", n)) {
			t.Errorf("N=%d: output\n%s", n, out)
		}
	}
	_, out := simCounts(t, "--algorithm", "zab", "--nodes", "6", "--crash", "N6")
	if !strings.Contains(out, "leader: N5,") {
		t.Errorf("N6 down: output\n%s", out)
	}
}

// TestSimLCR: one initiator, no failure: 2N wherever it starts (the
// slides: best case = worst case); van Steen's figure with N8 down and N7,
// N4 initiating elects N7; --svg draws the run.
func TestSimLCR(t *testing.T) {
	for _, n := range []int64{2, 5, 12} {
		for _, init := range []int64{1, n} {
			c, out := simCounts(t, "--algorithm", "lcr", "--nodes", strconv.FormatInt(n, 10), "--initiators", fmt.Sprintf("N%d", init))
			if c["Election"] != n || c["Coordinator"] != n || c["election total"] != 2*n {
				t.Errorf("N=%d, N%d initiates: %v, want 2N = %d", n, init, c, 2*n)
			}
			if !strings.Contains(out, fmt.Sprintf("leader: N%d, epoch 1", n)) {
				t.Errorf("output:\n%s", out)
			}
		}
	}
	svg := filepath.Join(t.TempDir(), "run.svg")
	_, out := simCounts(t, "--algorithm", "lcr", "--nodes", "8", "--crash", "N8", "--initiators", "N7,N4", "--svg", svg)
	if !strings.Contains(out, "leader: N7, epoch 1") || !strings.Contains(out, "picture of the run: "+svg) {
		t.Errorf("output:\n%s", out)
	}
	b, err := os.ReadFile(svg)
	if err != nil || !strings.Contains(string(b), "<svg") || !strings.Contains(string(b), ">leader<") {
		t.Errorf("picture: %v\n%.300s", err, b)
	}
}

// TestSimHS: Hirschberg–Sinclair stays within 8n(1+⌈log₂ n⌉) with every
// node initiating or one, and sends one Elected lap.
func TestSimHS(t *testing.T) {
	for _, n := range []int64{2, 7, 16, 100} {
		for _, init := range []string{"all", "N1"} {
			c, out := simCounts(t, "--algorithm", "hs", "--nodes", strconv.FormatInt(n, 10), "--initiators", init, "--delay", "1-3")
			bound := 8 * n * (1 + int64(bits.Len64(uint64(n-1))))
			if c["election total"] > bound || c["Elected"] != n {
				t.Errorf("N=%d, initiators %s: %v, want at most %d and N Elected", n, init, c, bound)
			}
			if !strings.Contains(out, fmt.Sprintf("≤ %d", bound)) || !strings.Contains(out, fmt.Sprintf("leader: N%d,", n)) {
				t.Errorf("output:\n%s", out)
			}
		}
	}
}

// TestChartDraws: the chart names every listed algorithm (what the
// integrator's additions rely on) and is well-formed.
func TestChartDraws(t *testing.T) {
	var lines []chartLine
	for _, a := range sim.Algorithms() {
		lines = append(lines, chartLine{alg: a, ns: []int{4, 8}, best: []float64{4, 8}, avg: []float64{5, 11}, worst: []float64{6, math.NaN()},
			lo: []float64{4, 8}, hi: []float64{6, 12}})
	}
	var b strings.Builder
	w := bufio.NewWriter(&b)
	drawChart(w, lines)
	w.Flush()
	dec := xml.NewDecoder(strings.NewReader(b.String()))
	for {
		if _, err := dec.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("not well-formed: %v", err)
		}
	}
	for _, a := range sim.Algorithms() {
		if !strings.Contains(b.String(), ">"+a.Name+"<") {
			t.Errorf("%s missing from the chart", a.Name)
		}
	}
}

// TestSimEveryAlgorithm: every algorithm of the list runs in elect sim with
// one initiator and no failure, its election total beside a formula that
// holds, and draws its run; the tree's picture draws the ladder it ran on.
func TestSimEveryAlgorithm(t *testing.T) {
	for _, a := range sim.Algorithms() {
		t.Run(a.Name, func(t *testing.T) {
			svg := filepath.Join(t.TempDir(), a.Name+".svg")
			_, out := simCounts(t, "--algorithm", a.Name, "--nodes", "8", "--initiators", "N3", "--svg", svg)
			if !regexp.MustCompile(`(?m)^election total .* ok$`).MatchString(out) {
				t.Errorf("no formula checked for the election total:\n%s", out)
			}
			b, err := os.ReadFile(svg)
			if err != nil || !strings.Contains(string(b), "<svg") {
				t.Fatalf("picture: %v", err)
			}
			links := strings.Count(string(b), `stroke="#ddd" stroke-width="2"`)
			if want := map[string]int{"tree": 10}[a.Name]; links != want { // the ladder of 8: 4 rungs, 2×3 rails
				t.Errorf("%d graph links drawn, want %d", links, want)
			}
		})
	}
}
