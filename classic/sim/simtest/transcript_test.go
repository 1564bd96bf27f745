package simtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/electkit/election/classic"
	"github.com/electkit/election/classic/sim"
)

// Script-and-transcript tests, in the style of etcd-io/raft's
// interaction tests: each file under testdata/ (the simulator's own on toy
// nodes, toy*.txt, and the algorithms of package classic) is a script;
// the output of each command is checked against the file. Regenerate with
//
//	go test ./classic/sim -run TestTranscripts -rewrite
//
// Commands:
//
//	ring|bully|lcr|hs|… ids=3,32,5 [attrs=0,0,7] [seed=1] [delay=1|1-4] [drop=0.1]
//	           [ticks=off] [hb=5] [timeout=20] [trace=election|all] [settle=N] [maxtime=N]
//	                   build the nodes and a simulator (also toyring, toybully)
//	start|crash|recover id=N          an action, now
//	eligible id=N on=true|false       SetEligible, now
//	partition                         one group per input line: "3 32 5"
//	heal
//	run [for=N|until=T]               until quiet (or for N ticks, or until T)
//	step [n=N]                        N events
//	counts | views | settled | violations
//	components | leases               per connected component; Chubby's master leases
//
// tree, chubby and zab take the same arguments; tree also takes a topology
// (graph_test.go): graph=ring|complete|grid/COLS|geo/RADIUS/SEED or
// edges=1-2,2-3 (the simulator then delivers only along the edges).
//
// Every command prints the trace lines it produced.

// algorithm builds one node of an algorithm.
type algorithm func(cfg classic.Config) (classic.Node, error)

// algorithms lists what the scripts and the property tests can build: every
// algorithm of sim.Algorithms (one node at a time, from the list's
// constructor) and the toys of toy_test.go. The tree is the exception: the
// list runs it on a ladder graph, the scripts and the property tests on the
// complete graph unless they give a topology (graph_test.go).
var algorithms = func() map[string]algorithm {
	m := map[string]algorithm{
		"toyring": func(cfg classic.Config) (classic.Node, error) {
			return newToyRing(cfg.Members, indexOf(cfg.Members, cfg.ID)), nil
		},
		"toybully": func(cfg classic.Config) (classic.Node, error) {
			return newToyBully(cfg.Members, indexOf(cfg.Members, cfg.ID), cfg.HeartbeatTicks, cfg.TimeoutTicks), nil
		},
	}
	for _, a := range sim.Algorithms() {
		m[a.Name] = func(cfg classic.Config) (classic.Node, error) {
			nodes, err := a.New(cfg.Members, cfg.HeartbeatTicks, cfg.TimeoutTicks)
			if err != nil {
				return nil, err
			}
			i := indexOf(cfg.Members, cfg.ID)
			if i < 0 {
				return nil, fmt.Errorf("%w: own ID %d is not in Members", classic.ErrInvalidConfig, cfg.ID)
			}
			return nodes[i], nil
		}
	}
	m["tree"] = func(cfg classic.Config) (classic.Node, error) { return classic.NewTree(cfg, nil) }
	return m
}()

func indexOf(ms []classic.Member, id classic.ID) int {
	for i, m := range ms {
		if m.ID == id {
			return i
		}
	}
	return -1
}

func TestTranscripts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 2 {
		t.Fatalf("%d transcripts in testdata/; want the toy ones and the algorithms'", len(files))
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			if alg := firstCommand(t, f); algorithms[alg] == nil {
				t.Fatalf("script starts with %q, not an algorithm", alg)
			}
			h := &harness{}
			datadriven.RunTest(t, f, h.do)
		})
	}
}

// firstCommand returns the first command of a script: the algorithm.
func firstCommand(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 0 && !strings.HasPrefix(f[0], "#") {
			return f[0]
		}
	}
	return ""
}

type harness struct {
	s      *sim.Sim
	cursor int // trace lines already printed
}

func (h *harness) do(t *testing.T, td *datadriven.TestData) string {
	out, err := h.exec(t, td)
	if err != nil {
		out += "error: " + err.Error() + "\n"
	}
	if out == "" {
		out = "ok\n"
	}
	return out
}

func (h *harness) exec(t *testing.T, td *datadriven.TestData) (string, error) {
	if alg, ok := algorithms[td.Cmd]; ok {
		return h.build(t, td, alg)
	}
	if h.s == nil {
		return "", fmt.Errorf("no simulator: start the script with an algorithm (ring, bully, …)")
	}
	id := func() classic.ID {
		var n uint64
		td.ScanArgs(t, "id", &n)
		return classic.ID(n)
	}
	var err error
	var tail string
	switch td.Cmd {
	case "start":
		err = h.s.Start(id())
	case "crash":
		err = h.s.Crash(id())
	case "recover":
		err = h.s.Recover(id())
	case "eligible":
		on := true
		td.MaybeScanArgs(t, "on", &on)
		err = h.s.SetEligible(id(), on)
	case "partition":
		var groups [][]classic.ID
		for _, line := range strings.Split(strings.TrimSpace(td.Input), "\n") {
			var g []classic.ID
			for _, f := range strings.Fields(line) {
				n, perr := strconv.ParseUint(strings.TrimPrefix(f, "N"), 10, 64)
				if perr != nil {
					t.Fatalf("%s: bad ID %q", td.Pos, f)
				}
				g = append(g, classic.ID(n))
			}
			groups = append(groups, g)
		}
		err = h.s.Partition(groups...)
	case "heal":
		err = h.s.Heal()
	case "run":
		var st sim.Stop
		var d, until int64
		switch {
		case td.MaybeScanArgs(t, "for", &d):
			st = h.s.RunUntil(h.s.Now() + d)
		case td.MaybeScanArgs(t, "until", &until):
			st = h.s.RunUntil(until)
		default:
			st = h.s.Run()
		}
		tail = fmt.Sprintf("stop: %v at t=%d\n", st, h.s.Now())
	case "step":
		n := 1
		td.MaybeScanArgs(t, "n", &n)
		for range n {
			if !h.s.Step() {
				break
			}
		}
	case "counts":
		tail = h.s.Counts().String() + "\n"
	case "views":
		var b strings.Builder
		for _, m := range h.s.Members() {
			v, up, _ := h.s.View(m.ID)
			fmt.Fprintf(&b, "%v: %s", m.Rank(), sim.FormatView(v))
			if !up {
				b.WriteString(" (down)")
			}
			if !h.s.Eligible(m.ID) {
				b.WriteString(" (ineligible)")
			}
			b.WriteByte('\n')
		}
		tail = b.String()
	case "settled":
		if st, ok := h.s.Settled(); ok {
			tail = fmt.Sprintf("leader=N%d epoch=%d since t=%d\n", st.Leader, st.Epoch, st.At)
		} else {
			tail = "not settled\n"
		}
	case "components", "leases":
		tail = moreCommand(h.s, td.Cmd)
	case "violations":
		vs := h.s.Violations()
		if len(vs) == 0 {
			tail = "none\n"
		}
		for _, v := range vs {
			tail += fmt.Sprintf("step %d t=%d %s: %s\n", v.Step, v.At, v.Check, v.What)
		}
	default:
		t.Fatalf("%s: unknown command %q", td.Pos, td.Cmd)
	}
	return h.flush() + tail, err
}

// flush returns the trace lines not printed yet.
func (h *harness) flush() string {
	tr := h.s.Trace()
	var b strings.Builder
	for _, l := range tr[h.cursor:] {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	h.cursor = len(tr)
	return b.String()
}

func (h *harness) build(t *testing.T, td *datadriven.TestData, alg algorithm) (string, error) {
	var idsArg string
	td.ScanArgs(t, "ids", &idsArg)
	var ms []classic.Member
	for _, f := range strings.Split(idsArg, ",") {
		n, err := strconv.ParseUint(strings.TrimPrefix(strings.TrimSpace(f), "N"), 10, 64)
		if err != nil {
			t.Fatalf("%s: bad ID %q", td.Pos, f)
		}
		ms = append(ms, classic.Member{ID: classic.ID(n)})
	}
	var attrsArg string
	if td.MaybeScanArgs(t, "attrs", &attrsArg) {
		fs := strings.Split(attrsArg, ",")
		if len(fs) != len(ms) {
			t.Fatalf("%s: %d attrs for %d ids", td.Pos, len(fs), len(ms))
		}
		for i, f := range fs {
			a, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
			if err != nil {
				t.Fatalf("%s: bad attr %q", td.Pos, f)
			}
			ms[i].Attr = a
		}
	}
	cfg := sim.Config{MinDelay: 1, MaxDelay: 1, Trace: sim.TraceElection, MaxTime: 10_000}
	td.MaybeScanArgs(t, "seed", &cfg.Seed)
	var delay string
	if td.MaybeScanArgs(t, "delay", &delay) {
		lo, hi, ok := strings.Cut(delay, "-")
		if !ok {
			hi = lo
		}
		var err1, err2 error
		cfg.MinDelay, err1 = strconv.ParseInt(lo, 10, 64)
		cfg.MaxDelay, err2 = strconv.ParseInt(hi, 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("%s: bad delay %q", td.Pos, delay)
		}
	}
	td.MaybeScanArgs(t, "drop", &cfg.DropProb)
	var ticks string
	if td.MaybeScanArgs(t, "ticks", &ticks) {
		cfg.NoTicks = ticks == "off"
	}
	var level string
	if td.MaybeScanArgs(t, "trace", &level) {
		switch level {
		case "all":
			cfg.Trace = sim.TraceAll
		case "election":
			cfg.Trace = sim.TraceElection
		default:
			t.Fatalf("%s: trace=%s: want all or election", td.Pos, level)
		}
	}
	td.MaybeScanArgs(t, "settle", &cfg.SettleWithin)
	if a, err := sim.Lookup(td.Cmd); err == nil {
		cfg.AnyLeader = a.AnyLeader // chubby: whoever wins a majority
	}
	td.MaybeScanArgs(t, "maxtime", &cfg.MaxTime)
	hb, timeout := 5, 20
	td.MaybeScanArgs(t, "hb", &hb)
	td.MaybeScanArgs(t, "timeout", &timeout)

	cfg.Topology = graphArg(t, td, ms)
	nodes := make([]classic.Node, len(ms))
	for i, m := range ms {
		n, err := nodeOn(cfg.Topology, alg, classic.Config{ID: m.ID, Members: ms, HeartbeatTicks: hb, TimeoutTicks: timeout})
		if err != nil {
			return "", err
		}
		nodes[i] = n
	}
	s, err := sim.New(ms, nodes, cfg)
	if err != nil {
		return "", err
	}
	h.s, h.cursor = s, 0
	var b strings.Builder
	fmt.Fprintf(&b, "%s:", td.Cmd)
	for _, m := range ms {
		fmt.Fprintf(&b, " %v", m.Rank())
	}
	b.WriteByte('\n')
	if cfg.NoTicks {
		b.WriteString("ticks off")
	} else {
		fmt.Fprintf(&b, "heartbeat every %d ticks, timeout %d ticks", hb, timeout)
	}
	fmt.Fprintf(&b, "; delay %d..%d", cfg.MinDelay, cfg.MaxDelay)
	if cfg.DropProb > 0 {
		fmt.Fprintf(&b, "; drop %v", cfg.DropProb)
	}
	fmt.Fprintf(&b, "; seed %d\n", cfg.Seed)
	b.WriteString(describeGraph(cfg.Topology))
	return h.flush() + b.String(), nil
}
