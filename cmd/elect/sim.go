package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/electkit/election/classic"
	"github.com/electkit/election/classic/sim"
)

// Bounds of elect sim.
const (
	simMinNodes = 2
	simMaxNodes = 1_000_000
	// simMaxTicking bounds the nodes of a run with crashes: failure
	// detectors need ticks, and the simulator ticks every live node every
	// tick, so such a run costs about nodes² steps.
	simMaxTicking = 3_000
	// simMaxBully bounds the bully's nodes: its worst case sends N² messages.
	simMaxBully = 3_000
	// simMaxTrace bounds the nodes of a traced run: one line per message.
	simMaxTrace = 1_000
	simMaxDelay = 100

	// The failure detector's clockwork, in ticks (as in the transcripts
	// of classic/sim/simtest/testdata). The timeout grows with --delay so that a round
	// trip always fits in it.
	simHeartbeatTicks = 5
	simTimeoutTicks   = 20
)

func simCommand() *command {
	return &command{
		name:     "sim",
		summary:  "run a classic algorithm (" + algorithmNames() + ") in the seeded simulator and count its messages",
		synopsis: "[--algorithm " + strings.ReplaceAll(algorithmNames(), ", ", "|") + "] [--nodes N] [--initiators K|IDs] [--crash K|IDs] [--seed S] [--delay D] [--trace] [--svg FILE] | --chart FILE",
		about: `Runs one election of a classic algorithm of package classic (ring: Chang and
Roberts; bully: Garcia-Molina; lcr: the ring as van Steen tells it, collecting
the live members; hs: Hirschberg and Sinclair on a bidirectional ring; tree:
the ad hoc tree election of Vasudevan, Kurose and Towsley, on a ladder graph
(N1-N2 on the first rung, each linked to the next rung); chubby: Chubby's
quorum lease; zab: ZooKeeper's sequence/successor election) in the
deterministic simulator of classic/sim, and prints the messages it sent by
kind next to the seeds' formulas for the case it ran, the leader the nodes
settled on and its epoch (the fencing token), and with --trace every
message.

The nodes are N1..N<nodes>; a node's rank is its ID, so N<nodes> is the best.
The ring runs N1 → N2 → … → N<nodes> → N1: the best node's successor is N1.
Crashed nodes are down from the start, before anyone initiates: the run is
the election that follows the detection of a failure. --initiators and
--crash take a count (nodes drawn with the seed), a list of node IDs
(N1,N7), or, for --initiators, all. The seed also draws each message's
delay when --delay is a range. Counts follow the seeds' convention: a
message counts when it is sent, whether or not it arrives; Heartbeat and
Ack belong to the failure detector and are listed apart.

--svg FILE draws the run (up to 200 nodes): the nodes on a circle (the
tree's laid out by its graph) with the leader highlighted, who sent to
whom, and every message as an arrow in time.
--chart FILE runs every algorithm for N = 4 to 4,096 (best case, average
over seeds, worst case) and draws messages against N; it ignores the other
flags but --seed.`,
		example: `elect sim --algorithm ring --nodes 10 --initiators N10   # best case: 2N = 20
elect sim --algorithm ring --nodes 10 --initiators N1    # worst case: 3N-1 = 29
elect sim --algorithm bully --nodes 8 --initiators N1    # worst case: N^2-1 = 63
elect sim --algorithm bully --nodes 6 --crash N6 --initiators N1 --trace
elect sim --algorithm lcr --nodes 8 --crash N8 --initiators N7,N4 --svg run.svg
elect sim --algorithm hs --nodes 16 --initiators all     # at most 8n(1+log2 n)
elect sim --algorithm tree --nodes 10 --svg tree.svg    # 4E-N+1 = 43 on the ladder
elect sim --algorithm zab --nodes 6 --crash N6           # N5 takes over
elect sim --chart docs/messages.svg`,
		setup: func(f *flagSet) func(context.Context, io.Writer) error {
			var sf simFlags
			f.String(&sf.algorithm, "algorithm", "NAME", "ring", algorithmNames())
			f.Int(&sf.nodes, "nodes", "N", 10, fmt.Sprintf("number of nodes, %d to %d", simMinNodes, simMaxNodes))
			f.String(&sf.initiators, "initiators", "K|IDs", "1", "who initiates: a count drawn with the seed, node IDs (N1,N7), or all")
			f.String(&sf.crash, "crash", "K|IDs", "", "who is down from the start: a count drawn with the seed, or node IDs (N10)")
			f.Uint64(&sf.seed, "seed", "S", 1, "seed of every random draw: initiators, crashes, delays")
			f.String(&sf.delay, "delay", "D|MIN-MAX", "1", fmt.Sprintf("message delay in ticks, fixed or drawn from a range, 0 to %d", simMaxDelay))
			f.Bool(&sf.trace, "trace", false, fmt.Sprintf("print the run message by message (election traffic; up to %d nodes)", simMaxTrace))
			f.String(&sf.svg, "svg", "FILE", "", fmt.Sprintf("draw the run as an SVG picture in FILE (up to %d nodes)", simMaxSVG))
			f.String(&sf.chart, "chart", "FILE", "", "chart every algorithm's messages against N (4 to 4,096) as SVG in FILE")
			return func(_ context.Context, w io.Writer) error {
				if sf.chart != "" {
					return writeChart(w, sf.chart, sf.seed)
				}
				p, err := sf.plan(f)
				if err != nil {
					return err
				}
				return runSim(w, p)
			}
		},
	}
}

type simFlags struct {
	algorithm  string
	nodes      int
	initiators string
	crash      string
	seed       uint64
	delay      string
	trace      bool
	svg        string
	chart      string
}

// simPlan is a checked sim command line: what to build and run.
type simPlan struct {
	alg                  string
	n                    int
	initiators, crashed  []classic.ID // sorted
	drawnInit, drawnDown bool         // chosen with the seed
	minDelay, maxDelay   int64
	seed                 uint64
	trace                bool
	svg                  string
	algo                 sim.Algorithm
}

// plan checks the flags and resolves the node sets.
func (sf *simFlags) plan(f *flagSet) (*simPlan, error) {
	p := &simPlan{alg: strings.ToLower(strings.TrimSpace(sf.algorithm)), n: sf.nodes, seed: sf.seed, trace: sf.trace, svg: sf.svg}
	a, err := sim.Lookup(p.alg)
	if err != nil {
		return nil, f.Bad("algorithm", "must be one of %s", algorithmNames())
	}
	p.algo = a
	if p.n < simMinNodes || p.n > simMaxNodes {
		return nil, f.Bad("nodes", "must be between %d and %d", simMinNodes, simMaxNodes)
	}
	if p.alg == "bully" && p.n > simMaxBully {
		return nil, f.Bad("nodes", "the bully sends about N² messages: at most %d nodes with --algorithm=bully", simMaxBully)
	}
	if p.trace && p.n > simMaxTrace {
		return nil, f.Bad("nodes", "--trace prints every message: at most %d nodes with it", simMaxTrace)
	}
	if p.svg != "" && p.n > simMaxSVG {
		return nil, f.Bad("nodes", "--svg draws every node and message: at most %d nodes with it", simMaxSVG)
	}
	if p.minDelay, p.maxDelay, err = parseDelay(sf.delay); err != nil {
		return nil, f.Bad("delay", "%v", err)
	}
	down, err := parseNodeSet(sf.crash, p.n)
	if err != nil {
		return nil, f.Bad("crash", "%v", err)
	}
	init, err := parseNodeSet(sf.initiators, p.n)
	if err != nil {
		return nil, f.Bad("initiators", "%v", err)
	}

	// Crashes first, so that drawn initiators are live; listed initiators
	// are never drawn to crash.
	rng := rand.New(rand.NewPCG(p.seed, 0x656c656374)) // "elect"
	switch {
	case down.all:
		return nil, f.Bad("crash", "at least one node must stay up")
	case down.ids != nil:
		p.crashed = down.ids
		for _, id := range init.ids {
			if slices.Contains(p.crashed, id) {
				return nil, f.Bad("initiators", "N%d is down (--crash): a crashed node cannot initiate", id)
			}
		}
		if len(p.crashed) == p.n {
			return nil, f.Bad("crash", "at least one node must stay up")
		}
	case down.count > 0:
		pool := allIDs(p.n, func(id classic.ID) bool { return !slices.Contains(init.ids, id) })
		if down.count >= p.n || down.count > len(pool) {
			return nil, f.Bad("crash", "must leave at least one node up, and every listed initiator (at most %d)", min(p.n-1, len(pool)))
		}
		p.crashed, p.drawnDown = draw(rng, pool, down.count), true
	}
	if len(p.crashed) > 0 && p.n > simMaxTicking {
		return nil, f.Bad("nodes", "with --crash the nodes must tick (failure detectors), which costs about N² steps: at most %d nodes", simMaxTicking)
	}
	live := allIDs(p.n, func(id classic.ID) bool { return !slices.Contains(p.crashed, id) })
	switch {
	case init.all:
		p.initiators = live
	case init.ids != nil:
		p.initiators = init.ids
	case init.count < 1:
		return nil, f.Bad("initiators", "at least one node must initiate")
	case init.count > len(live):
		return nil, f.Bad("initiators", "only %d nodes are up", len(live))
	default:
		p.initiators, p.drawnInit = draw(rng, live, init.count), true
	}
	return p, nil
}

// nodeSet is the value of --initiators or --crash: a count of nodes to
// draw, a list of nodes, or all of them.
type nodeSet struct {
	count int
	ids   []classic.ID // sorted; nil unless a list was given
	all   bool
}

// parseNodeSet reads "" (none), "all", a count ("3") or node IDs ("N1,N7")
// among nodes N1..Nn.
func parseNodeSet(s string, n int) (nodeSet, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return nodeSet{}, nil
	case strings.EqualFold(s, "all"):
		return nodeSet{all: true}, nil
	}
	if k, err := strconv.Atoi(s); err == nil {
		if k < 0 {
			return nodeSet{}, errors.New("a count must not be negative")
		}
		return nodeSet{count: k}, nil
	}
	ids := []classic.ID{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		num, ok := strings.CutPrefix(strings.ToUpper(part), "N")
		v, err := strconv.ParseUint(num, 10, 64)
		if !ok || err != nil {
			return nodeSet{}, fmt.Errorf("%q is neither a count (2) nor a node ID (N3); lists go like N1,N7", part)
		}
		if v < 1 || v > uint64(n) {
			return nodeSet{}, fmt.Errorf("no node N%d: the nodes are N1..N%d", v, n)
		}
		if slices.Contains(ids, classic.ID(v)) {
			return nodeSet{}, fmt.Errorf("node N%d is listed twice", v)
		}
		ids = append(ids, classic.ID(v))
	}
	slices.Sort(ids)
	return nodeSet{ids: ids}, nil
}

// parseDelay reads "D" or "MIN-MAX", in ticks.
func parseDelay(s string) (lo, hi int64, err error) {
	a, b, isRange := strings.Cut(strings.TrimSpace(s), "-")
	if lo, err = strconv.ParseInt(strings.TrimSpace(a), 10, 64); err != nil {
		return 0, 0, errors.New("want a number of ticks (1) or a range (1-4)")
	}
	hi = lo
	if isRange {
		if hi, err = strconv.ParseInt(strings.TrimSpace(b), 10, 64); err != nil {
			return 0, 0, errors.New("want a number of ticks (1) or a range (1-4)")
		}
	}
	switch {
	case lo < 0 || hi > simMaxDelay:
		return 0, 0, fmt.Errorf("must be between 0 and %d ticks", simMaxDelay)
	case hi < lo:
		return 0, 0, fmt.Errorf("the range goes from %d down to %d", lo, hi)
	}
	return lo, hi, nil
}

func allIDs(n int, keep func(classic.ID) bool) []classic.ID {
	out := make([]classic.ID, 0, n)
	for i := 1; i <= n; i++ {
		if keep(classic.ID(i)) {
			out = append(out, classic.ID(i))
		}
	}
	return out
}

// draw picks k of pool with rng, sorted; pool is reordered.
func draw(rng *rand.Rand, pool []classic.ID, k int) []classic.ID {
	for i := range k {
		j := i + rng.IntN(len(pool)-i)
		pool[i], pool[j] = pool[j], pool[i]
	}
	out := slices.Clone(pool[:k])
	slices.Sort(out)
	return out
}

// runSim builds the nodes and the simulator, runs the election and prints
// what it counted.
func runSim(w io.Writer, p *simPlan) error {
	timeout := max(simTimeoutTicks, 4*int(p.maxDelay)+4)
	ms := sim.Seq(p.n)
	nodes, err := p.algo.New(ms, simHeartbeatTicks, timeout)
	if err != nil {
		return err
	}
	topo, err := p.algo.Graph(ms)
	if err != nil {
		return err
	}
	cfg := sim.Config{
		Seed:     p.seed,
		MinDelay: p.minDelay,
		MaxDelay: p.maxDelay,
		// Without failures no timeout matters, and a run costs only its
		// messages; with crashes the failure detectors must tick, and so
		// must the algorithms whose nodes wait their turn (p.algo.Ticks).
		NoTicks:   len(p.crashed) == 0 && !p.algo.Ticks,
		Fencing:   true,
		Topology:  topo,
		AnyLeader: p.algo.AnyLeader,
	}
	if !cfg.NoTicks {
		cfg.MaxTime = int64(p.n)*(p.maxDelay+1)*8 + int64(timeout)*int64(len(p.crashed)+8)*8
	}
	if p.trace {
		cfg.Trace = sim.TraceElection
	}
	cfg.Record = p.svg != ""
	s, err := sim.New(ms, nodes, cfg)
	if err != nil {
		return fmt.Errorf("building the simulator: %w", err)
	}
	for _, id := range p.crashed {
		if err := s.Crash(id); err != nil {
			return err
		}
	}
	for _, id := range p.initiators {
		if err := s.Start(id); err != nil {
			return err
		}
	}
	stop := s.Run()

	p.writeHeader(w, timeout, cfg.NoTicks)
	if p.trace {
		fmt.Fprintln(w)
		for _, l := range s.Trace() {
			fmt.Fprintln(w, l)
		}
	}
	fmt.Fprintln(w)
	writeCounts(w, s.Counts(), p.formulas(topo))
	fmt.Fprintln(w)
	if p.svg != "" {
		if err := p.writeSVG(s); err != nil {
			return err
		}
		fmt.Fprintf(w, "picture of the run: %s\n", p.svg)
	}
	if err := s.Err(); err != nil {
		return fmt.Errorf("the simulator's checks failed:\n%w", err)
	}
	st, ok := s.Settled()
	if stop != sim.StopQuiet || !ok {
		fmt.Fprintf(w, "last events:\n  %s\n", strings.Join(s.Tail(), "\n  "))
		return fmt.Errorf("the nodes did not settle on a leader (stopped: %v at t=%d)", stop, s.Now())
	}
	fmt.Fprintf(w, "leader: N%d, epoch %d (every live node agrees since t=%d; safety and fencing checked after every step)\n",
		st.Leader, st.Epoch, st.At)
	return nil
}

func (p *simPlan) writeHeader(w io.Writer, timeout int, noTicks bool) {
	name := p.algo.Title
	fmt.Fprintf(w, "%s among %d nodes N1..N%d (rank = ID; the best is N%d)\n", name, p.n, p.n, p.n)
	drawn := func(b bool) string {
		if b {
			return fmt.Sprintf(" (drawn with seed %d)", p.seed)
		}
		return ""
	}
	fmt.Fprintf(w, "initiators: %s%s\n", idList(p.initiators), drawn(p.drawnInit))
	fmt.Fprintf(w, "down:       %s%s\n", idList(p.crashed), drawn(p.drawnDown))
	delay := fmt.Sprintf("%d tick", p.minDelay)
	if p.minDelay != 1 {
		delay += "s"
	}
	if p.maxDelay != p.minDelay {
		delay = fmt.Sprintf("%d to %d ticks, drawn with seed %d", p.minDelay, p.maxDelay, p.seed)
	}
	fmt.Fprintf(w, "delay:      %s per message\n", delay)
	if noTicks {
		fmt.Fprintln(w, "clock:      no ticks (no failure, so no timeout can matter)")
	} else {
		fmt.Fprintf(w, "clock:      failure detectors probe every %d ticks, time out after %d\n", simHeartbeatTicks, timeout)
	}
}

// idList formats IDs as "N1 N5 N7", shortened when long.
func idList(ids []classic.ID) string {
	if len(ids) == 0 {
		return "none"
	}
	const most = 12
	var b strings.Builder
	for i, id := range ids {
		if i == most {
			fmt.Fprintf(&b, " … (%d in all)", len(ids))
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "N%d", id)
	}
	return b.String()
}

// expectation is the seeds' formula for one row of the count table.
type expectation struct {
	formula string
	value   int64
}

// simFormulas are the seeds' formulas for the case a plan runs: per kind,
// for the election total, and what they assume.
type simFormulas struct {
	caseName string
	kinds    map[classic.Kind]expectation
	total    *expectation
	atMost   bool // total is a bound: the count must not exceed it
	notes    []string
}

// formulas returns the seeds' formulas for the plan's case, where the
// seeds (and the tests of package classic) give one; g is the graph the
// nodes ran on (nil: complete).
func (p *simPlan) formulas(g classic.Graph) simFormulas {
	n := int64(p.n)
	f := simFormulas{kinds: map[classic.Kind]expectation{}}
	one := len(p.initiators) == 1
	var i int64
	if one {
		i = int64(p.initiators[0])
	}
	switch p.alg {
	case "ring":
		f.notes = append(f.notes, fmt.Sprintf("ring, one initiator, no failure: best case 2N = %d (the best initiates), worst case 3N-1 = %d (its successor N1 does)", 2*n, 3*n-1))
		switch {
		case len(p.crashed) > 0:
			f.caseName = "crashed nodes: the count depends on the failure detectors' timing; the seeds count failure-free runs"
		case one:
			d := (n - i) % n // hops from the initiator to the best, N<n>
			f.kinds[classic.Election] = expectation{fmt.Sprintf("N + d = %d + %d", n, d), n + d}
			f.kinds[classic.Elected] = expectation{"N", n}
			switch d {
			case 0:
				f.caseName = "best case: the best node initiates"
				f.total = &expectation{"2N", 2 * n}
			case n - 1:
				f.caseName = "worst case: the best node's successor initiates"
				f.total = &expectation{"3N-1", 3*n - 1}
			default:
				f.caseName = fmt.Sprintf("one initiator, d = %d hops before the best", d)
				f.total = &expectation{"2N + d", 2*n + d}
			}
		default:
			f.caseName = "several initiators: only the highest initiator's run completes, so one Elected lap; the Elections depend on the interleaving"
			f.kinds[classic.Elected] = expectation{"N", n}
		}
	case "bully":
		f.notes = append(f.notes, fmt.Sprintf("bully worst case (fresh cluster, all up, N1 initiates): N(N-1)/2 = %d Election, as many OK, N-1 = %d Coordinator: N^2-1 = %d",
			n*(n-1)/2, n-1, n*n-1))
		m := n - i + 1 // the nodes from the initiator up, the best included
		switch {
		case one && len(p.crashed) == 0:
			f.kinds[classic.Election] = expectation{"M(M-1)/2", m * (m - 1) / 2}
			f.kinds[classic.OK] = expectation{"M(M-1)/2", m * (m - 1) / 2}
			f.kinds[classic.Coordinator] = expectation{"N-1", n - 1}
			f.total = &expectation{"M(M-1) + N-1", m*(m-1) + n - 1}
			switch i {
			case 1:
				f.caseName = "worst case: the lowest node initiates in a fresh cluster, all up (M = N)"
				f.kinds[classic.Election] = expectation{"N(N-1)/2", m * (m - 1) / 2}
				f.kinds[classic.OK] = expectation{"N(N-1)/2", m * (m - 1) / 2}
				f.total = &expectation{"N^2-1", n*n - 1}
			case n:
				f.caseName = "the best node initiates: nobody is above it, it only announces (M = 1)"
			default:
				f.caseName = fmt.Sprintf("one initiator, all up: every node from N%d up (M = N-%d+1 = %d) elects against those above it", i, i, m)
			}
		case one && len(p.crashed) == 1 && p.crashed[0] == classic.ID(n) && i < n:
			f.kinds[classic.Election] = expectation{"M(M-1)/2", m * (m - 1) / 2}
			f.kinds[classic.OK] = expectation{"(M-1)(M-2)/2", (m - 1) * (m - 2) / 2}
			f.kinds[classic.Coordinator] = expectation{"N-2", n - 2}
			f.total = &expectation{"sum", m*(m-1)/2 + (m-1)*(m-2)/2 + n - 2}
			f.caseName = fmt.Sprintf("the best node is down and N%d initiates (M = N-%d+1 = %d): the Elections to the dead best go unanswered, the second best announces after its timeout", i, i, m)
			if i == 1 {
				f.caseName = "the notebook's worst case: the best node is down and the lowest initiates (M = N)"
				f.kinds[classic.Election] = expectation{"N(N-1)/2", m * (m - 1) / 2}
				f.kinds[classic.OK] = expectation{"(N-1)(N-2)/2", (m - 1) * (m - 2) / 2}
			}
		default:
			f.caseName = "no closed form in the seeds for this case (they count one initiator, with at most the best node down)"
		}
	default:
		p.moreFormulas(&f, g) // sim_more.go
	}
	if len(f.kinds) > 0 && p.maxDelay != p.minDelay {
		f.notes = append(f.notes, "the formulas assume every message takes as long (a fixed --delay); with a range, messages may overtake one another")
	}
	return f
}

// writeCounts writes the count table: every kind sent, the election total,
// and the formula for each where there is one.
func writeCounts(w io.Writer, counts sim.Counts, f simFormulas) {
	type row struct {
		kind                     string
		sent, delivered, dropped string
		formula, expected, check string
	}
	rows := []row{{"kind", "sent", "delivered", "dropped", "seeds' formula", "expected", "check"}}
	add := func(c sim.Count, e *expectation, atMost bool) {
		r := row{kind: string(c.Kind), sent: itoa(c.Sent), delivered: itoa(c.Delivered), dropped: itoa(c.Dropped)}
		if e != nil {
			r.formula, r.expected, r.check = e.formula, itoa(e.value), "ok"
			if atMost {
				r.expected = "≤ " + r.expected
			}
			if (!atMost && e.value != c.Sent) || (atMost && c.Sent > e.value) {
				r.check = "DIFFERS"
			}
		}
		rows = append(rows, r)
	}
	var fd []sim.Count
	for _, k := range electionKinds(counts, f.kinds) {
		e, want := f.kinds[k]
		c := counts.Of(k)
		if c.Sent == 0 && !want {
			continue
		}
		if want {
			add(c, &e, false)
		} else {
			add(c, nil, false)
		}
	}
	total := counts.Election()
	total.Kind = "election total"
	add(total, f.total, f.atMost)
	for _, k := range []classic.Kind{classic.Heartbeat, classic.Ack} {
		if c := counts.Of(k); c.Sent > 0 {
			fd = append(fd, c)
		}
	}
	for _, c := range fd {
		rows = append(rows, row{kind: string(c.Kind), sent: itoa(c.Sent), delivered: itoa(c.Delivered), dropped: itoa(c.Dropped),
			formula: "(failure detector)"})
	}
	var wd [7]int
	for _, r := range rows {
		for i, s := range []string{r.kind, r.sent, r.delivered, r.dropped, r.formula, r.expected, r.check} {
			wd[i] = max(wd[i], len([]rune(s)))
		}
	}
	for _, r := range rows {
		s := fmt.Sprintf("%-*s  %*s  %*s  %*s  %-*s  %*s  %s", wd[0], r.kind, wd[1], r.sent, wd[2], r.delivered,
			wd[3], r.dropped, wd[4], r.formula, wd[5], r.expected, r.check)
		fmt.Fprintln(w, strings.TrimRight(s, " "))
	}
	fmt.Fprintf(w, "\ncase: %s\n", f.caseName)
	for _, n := range f.notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	if len(fd) > 0 {
		fmt.Fprintln(w, "note: Heartbeat and Ack are the failure detector's traffic; the seeds' formulas leave them out")
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
