package simtest

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/electkit/election/classic"
	"github.com/electkit/election/classic/sim"
)

// lecture is the ring of lecture 08: N3 → N32 → N5 → N80 → N6 → N12 → N3.
var lecture = []classic.ID{3, 32, 5, 80, 6, 12}

func mustNew(t testing.TB, ms []classic.Member, ns []classic.Node, cfg sim.Config) *sim.Sim {
	t.Helper()
	s, err := sim.New(ms, ns, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestToyRingLecture(t *testing.T) {
	ms := toyMembers(lecture...)
	s := mustNew(t, ms, toyRings(ms), sim.Config{NoTicks: true, MinDelay: 1, MaxDelay: 1, Trace: sim.TraceAll, SettleWithin: 100})
	if err := s.Start(3); err != nil {
		t.Fatal(err)
	}
	if st := s.Run(); st != sim.StopQuiet {
		t.Fatalf("Run = %v, want quiet", st)
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	st, ok := s.Settled()
	if !ok || st.Leader != 80 || st.Epoch != 1 {
		t.Fatalf("Settled = %+v, %v; want N80 in epoch 1", st, ok)
	}
	// N3 starts; the Election goes round to N80 (3 hops), round again to
	// N80 (6 hops), then the Elected round (6).
	c := s.Counts()
	if got := c.Of(classic.Election).Delivered; got != 9 {
		t.Errorf("Election delivered = %d, want 9", got)
	}
	if got := c.Of(classic.Elected).Delivered; got != 6 {
		t.Errorf("Elected delivered = %d, want 6", got)
	}
	if st.At != 15 {
		t.Errorf("settled at t=%d, want 15 (15 hops of one tick)", st.At)
	}
	want := []string{
		"    0  N3 start",
		"    0  send Election N3→N32 cand=N3 init=N3",
		"    0  N3 view: no leader electing",
		"    1  recv Election N3→N32 cand=N3 init=N3",
		"    1  send Election N32→N5 cand=N32 init=N3",
	}
	tr := s.Trace()
	if len(tr) < len(want) || strings.Join(tr[:len(want)], "\n") != strings.Join(want, "\n") {
		t.Fatalf("trace starts\n%s\nwant\n%s", strings.Join(tr[:min(len(tr), len(want))], "\n"), strings.Join(want, "\n"))
	}
	if last := tr[len(tr)-1]; last != "   15  settled: leader=N80 epoch=1" {
		t.Errorf("last trace line %q", last)
	}
}

// TestRingBounds reproduces the lecture's analysis on the toy ring: 2N
// messages when the would-be leader initiates, 3N−1 when its successor does.
func TestRingBounds(t *testing.T) {
	for _, n := range []int{2, 3, 10, 57} {
		ids := make([]classic.ID, n)
		for i := range ids {
			ids[i] = classic.ID(i + 1) // the best is the last; its successor is the first
		}
		for _, tc := range []struct {
			init classic.ID
			want int64
		}{{classic.ID(n), int64(2 * n)}, {1, int64(3*n - 1)}} {
			ms := toyMembers(ids...)
			s := mustNew(t, ms, toyRings(ms), sim.Config{NoTicks: true, MinDelay: 1, MaxDelay: 1})
			if err := s.Start(tc.init); err != nil {
				t.Fatal(err)
			}
			s.Run()
			if got := s.Counts().Election().Delivered; got != tc.want {
				t.Errorf("N=%d initiator N%d: %d messages, want %d", n, tc.init, got, tc.want)
			}
			if err := s.Err(); err != nil {
				t.Error(err)
			}
		}
	}
}

// chaosConfig is a busy configuration for the determinism tests.
func chaosConfig(seed uint64, level sim.TraceLevel) sim.Config {
	return sim.Config{
		Seed: seed, MinDelay: 1, MaxDelay: 4, DropProb: 0.01, Trace: level, MaxTime: 600,
		Schedule: []sim.Action{{At: 0, Op: sim.OpStart, ID: 1}},
		Chaos:    &sim.Chaos{From: 5, Until: 300, MeanGap: 15, MaxDown: 2, Partitions: true, Starts: true, Eligibility: true, DropProb: 0.05},
	}
}

func runToyBully(t *testing.T, cfg sim.Config) *sim.Sim {
	t.Helper()
	ms := toyMembers(1, 2, 3, 4, 5, 6, 7)
	s := mustNew(t, ms, toyBullies(ms, 3, 12), cfg)
	s.Run()
	return s
}

func TestSameSeedSameTrace(t *testing.T) {
	for seed := range uint64(5) {
		a := strings.Join(runToyBully(t, chaosConfig(seed, sim.TraceAll)).Trace(), "\n")
		b := strings.Join(runToyBully(t, chaosConfig(seed, sim.TraceAll)).Trace(), "\n")
		if a != b {
			t.Fatalf("seed %d: two runs differ", seed)
		}
		if len(a) < 1000 {
			t.Fatalf("seed %d: trace too short to mean anything:\n%s", seed, a)
		}
		if seed > 0 {
			prev := strings.Join(runToyBully(t, chaosConfig(seed-1, sim.TraceAll)).Trace(), "\n")
			if prev == a {
				t.Fatalf("seeds %d and %d give the same trace", seed-1, seed)
			}
		}
	}
	// The algorithms of package classic, under every kind of fault, to the
	// end of the run whatever it finds.
	for _, alg := range []string{"ring", "bully"} {
		for _, f := range faults {
			for seed := range uint64(3) {
				trace := func() string {
					pc := newPropertyCase(seed)
					pc.cfg.Chaos.Starts, pc.cfg.Chaos.Eligibility = f.starts, f.eligibility
					pc.cfg.Chaos.Partitions = true
					pc.cfg.Chaos.DropProb = 0.02
					pc.cfg.Trace, pc.cfg.StopOnViolation = sim.TraceAll, false
					s, _ := runProperty(algorithms[alg], pc)
					return strings.Join(s.Trace(), "\n")
				}
				a, b := trace(), trace()
				if a != b || len(a) < 1000 {
					t.Fatalf("%s, %s, seed %d: runs differ, or too short (%d bytes)", alg, f.name, seed, len(a))
				}
			}
		}
	}
}

// TestTraceLevelDoesNotChangeTheRun: tracing only observes.
func TestTraceLevelDoesNotChangeTheRun(t *testing.T) {
	type outcome struct {
		steps  uint64
		now    int64
		counts string
		set    sim.Settlement
		ok     bool
		nviol  int
	}
	get := func(level sim.TraceLevel) outcome {
		s := runToyBully(t, chaosConfig(42, level))
		st, ok := s.Settled()
		return outcome{s.Steps(), s.Now(), s.Counts().String(), st, ok, len(s.Violations())}
	}
	off, el, all := get(sim.TraceOff), get(sim.TraceElection), get(sim.TraceAll)
	if off != el || off != all {
		t.Fatalf("trace levels change the run:\noff %+v\nelection %+v\nall %+v", off, el, all)
	}
	if off.steps == 0 || !strings.Contains(off.counts, "Heartbeat") {
		t.Fatalf("run did nothing: %+v", off)
	}
	s := runToyBully(t, chaosConfig(42, sim.TraceElection))
	for _, l := range s.Trace() {
		if strings.Contains(l, "Heartbeat") || strings.Contains(l, "Ack ") {
			t.Fatalf("TraceElection traced failure-detector traffic: %q", l)
		}
	}
}

// liar believes, from the start, that leader leads epoch 1.
type liar struct {
	id, leader classic.ID
}

func (n *liar) ID() classic.ID                         { return n.id }
func (n *liar) Start() []classic.Message               { return nil }
func (n *liar) Step(classic.Message) []classic.Message { return nil }
func (n *liar) Tick() []classic.Message                { return nil }
func (n *liar) Recover() []classic.Message             { return nil }
func (n *liar) SetEligible(bool) []classic.Message     { return nil }
func (n *liar) View() classic.View {
	return classic.View{Leader: n.leader, Epoch: 1, HasLeader: true}
}

func TestSafetyViolation(t *testing.T) {
	ms := toyMembers(1, 2, 3)
	// N1 and N2 believe N1 leads epoch 1; N3 believes N3 does.
	ns := []classic.Node{&liar{id: 1, leader: 1}, &liar{id: 2, leader: 1}, &liar{id: 3, leader: 3}}
	s := mustNew(t, ms, ns, sim.Config{NoTicks: true})
	var v *sim.Violation
	if !errors.As(s.Err(), &v) || v.Check != sim.CheckSafety {
		t.Fatalf("Err = %v, want a safety violation", s.Err())
	}
	if !strings.Contains(v.What, "epoch 1 has 2 leaders") || !strings.Contains(v.What, "N1 (held by 2)") {
		t.Errorf("What = %q", v.What)
	}
	// Crash N3: the survivors agree, on N1, but N3 is better than N1... and
	// down, so N2 is the best live node: a leader violation.
	if err := s.Crash(3); err != nil {
		t.Fatal(err)
	}
	vs := s.Violations()
	if len(vs) != 2 || vs[1].Check != sim.CheckLeader || !strings.Contains(vs[1].What, "best live eligible node is N2") {
		t.Fatalf("violations after crash: %v", vs)
	}
	if tail := strings.Join(vs[1].Tail, "\n"); !strings.HasSuffix(tail, "N3 crash\n    0  settled: leader=N1 epoch=1\n    0  VIOLATION leader: settled on N1 in epoch 1, but the best live eligible node is N2") {
		t.Errorf("tail should end with the crash, the settlement and the violation:\n%s", tail)
	}
	if _, ok := s.Settled(); !ok {
		t.Error("N1 and N2 agree on live N1: should be settled")
	}
	// N2 becomes ineligible: N1 is the best live eligible node, no new violation.
	if err := s.SetEligible(2, false); err != nil {
		t.Fatal(err)
	}
	if len(s.Violations()) != 2 {
		t.Errorf("violations after N2 ineligible: %v", s.Violations()[2:])
	}
}

func TestStopOnViolation(t *testing.T) {
	ms := toyMembers(1, 2)
	ns := []classic.Node{&liar{id: 1, leader: 1}, &liar{id: 2, leader: 2}}
	s := mustNew(t, ms, ns, sim.Config{MaxTime: 100, StopOnViolation: true})
	if st := s.Run(); st != sim.StopViolation {
		t.Fatalf("Run = %v, want violation", st)
	}
	if s.Now() != 0 {
		t.Errorf("ran on to t=%d", s.Now())
	}
}

// sink swallows everything: elections through it never end.
type sink struct{ liar }

func (n *sink) View() classic.View       { return classic.View{Electing: true} }
func (n *sink) Start() []classic.Message { return nil }

func TestLivenessViolation(t *testing.T) {
	for _, ticks := range []bool{false, true} {
		ms := toyMembers(1, 2, 3)
		ns := toyRings(ms)
		ns[1] = &sink{liar{id: 2}}
		s := mustNew(t, ms, ns, sim.Config{NoTicks: !ticks, MinDelay: 1, MaxDelay: 1, SettleWithin: 50, MaxTime: 500})
		if err := s.Start(1); err != nil {
			t.Fatal(err)
		}
		st := s.Run()
		want := sim.StopIdle
		if ticks {
			want = sim.StopTime
		}
		if st != want {
			t.Errorf("ticks=%v: Run = %v, want %v", ticks, st, want)
		}
		vs := s.Violations()
		if len(vs) != 1 || vs[0].Check != sim.CheckLiveness {
			t.Fatalf("ticks=%v: violations %v, want one liveness", ticks, vs)
		}
		if ticks && vs[0].At != 50 {
			t.Errorf("liveness reported at t=%d, want the deadline 0+50", vs[0].At)
		}
	}
}

// TestLivenessNotJudgedWhilePartitioned: a partition suspends the check.
func TestLivenessNotJudgedWhilePartitioned(t *testing.T) {
	ms := toyMembers(1, 2, 3)
	s := mustNew(t, ms, toyRings(ms), sim.Config{MinDelay: 1, MaxDelay: 1, SettleWithin: 10, MaxTime: 100})
	if err := s.Partition([]classic.ID{1}, []classic.ID{2, 3}); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(1); err != nil {
		t.Fatal(err)
	}
	if st := s.Run(); st != sim.StopTime {
		t.Fatalf("Run = %v", st)
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	c := s.Counts().Of(classic.Election)
	if c.Sent != 1 || c.Dropped != 1 || c.Delivered != 0 {
		t.Fatalf("Election counts %+v: want one sent and dropped at the partition", c)
	}
	// Healing is an action: the liveness clock restarts, and nobody starts
	// again, so the toy ring (no failure detector) never settles.
	if err := s.Heal(); err != nil {
		t.Fatal(err)
	}
	s.RunUntil(200)
	if vs := s.Violations(); len(vs) != 1 || vs[0].Check != sim.CheckLiveness || vs[0].At != 110 {
		t.Fatalf("violations %v: want liveness at t=110", vs)
	}
}

// counter counts its ticks and deliveries.
type counter struct {
	liar
	ticks, steps int
}

func (n *counter) Tick() []classic.Message { n.ticks++; return nil }
func (n *counter) Step(classic.Message) []classic.Message {
	n.steps++
	return nil
}
func (n *counter) View() classic.View { return classic.View{} }

// pinger sends k messages to peer at Start, told apart by Cand.Attr.
type pinger struct {
	counter
	peer classic.ID
	k    int
}

func (n *pinger) Start() []classic.Message {
	out := make([]classic.Message, n.k)
	for i := range out {
		out[i] = classic.Message{Kind: classic.Election, From: n.id, To: n.peer, Cand: classic.Rank{Attr: int64(i + 1), ID: n.id}}
	}
	return out
}

func TestCrashedNodesGetNothing(t *testing.T) {
	ms := toyMembers(1, 2)
	p := &pinger{counter: counter{liar: liar{id: 1}}, peer: 2, k: 5}
	c := &counter{liar: liar{id: 2}}
	s := mustNew(t, ms, []classic.Node{p, c}, sim.Config{MinDelay: 2, MaxDelay: 2, MaxTime: 10})
	s.RunUntil(3)
	if p.ticks != 3 || c.ticks != 3 {
		t.Fatalf("ticks %d, %d; want 3 each by t=3", p.ticks, c.ticks)
	}
	if err := s.Start(1); err != nil { // at t=3: arrive at t=5
		t.Fatal(err)
	}
	if err := s.Crash(2); err != nil {
		t.Fatal(err)
	}
	if err := s.Crash(2); !errors.Is(err, sim.ErrNodeDown) {
		t.Fatalf("second crash: %v, want ErrNodeDown", err)
	}
	s.RunUntil(7)
	if c.ticks != 3 || c.steps != 0 {
		t.Fatalf("crashed node got %d ticks, %d messages", c.ticks, c.steps)
	}
	if got := s.Counts().Of(classic.Election); got.Sent != 5 || got.Dropped != 5 {
		t.Fatalf("counts %+v, want 5 sent, 5 dropped", got)
	}
	if err := s.Recover(2); err != nil {
		t.Fatal(err)
	}
	s.RunUntil(9)
	if c.ticks != 5 || p.ticks != 9 {
		t.Fatalf("after recovery at 7: ticks %d (want 5), pinger %d (want 9)", c.ticks, p.ticks)
	}
	if err := s.Start(99); !errors.Is(err, sim.ErrUnknownNode) {
		t.Fatalf("Start(99) = %v", err)
	}
}

var traceLine = regexp.MustCompile(`^ *(\d+)  (send|recv) Election N1→N2 cand=N1\(attr (\d+)\)$`)

func TestDelaysAreDrawnFromTheRange(t *testing.T) {
	const k = 400
	ms := toyMembers(1, 2)
	s := mustNew(t, ms, []classic.Node{&pinger{counter: counter{liar: liar{id: 1}}, peer: 2, k: k}, &counter{liar: liar{id: 2}}},
		sim.Config{Seed: 7, NoTicks: true, MinDelay: 3, MaxDelay: 6, Trace: sim.TraceAll})
	s.RunUntil(10)
	if err := s.Start(1); err != nil {
		t.Fatal(err)
	}
	s.Run()
	sent := map[int]int{}
	seen := map[int]bool{}
	lastAt := 0
	for _, l := range s.Trace() {
		m := traceLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		at, _ := strconv.Atoi(m[1])
		attr, _ := strconv.Atoi(m[3])
		if m[2] == "send" {
			sent[attr] = at
			continue
		}
		if at < lastAt {
			t.Fatalf("deliveries out of time order: %q after t=%d", l, lastAt)
		}
		lastAt = at
		d := at - sent[attr]
		if d < 3 || d > 6 {
			t.Fatalf("delay %d out of [3,6]: %q", d, l)
		}
		seen[d] = true
	}
	if len(seen) != 4 {
		t.Fatalf("delays seen %v: want all of 3..6 in %d messages", seen, k)
	}
	if got := s.Counts().Of(classic.Election).Delivered; got != k {
		t.Fatalf("delivered %d, want %d", got, k)
	}
}

// TestZeroDelaySameTick: a zero-delay message arrives at the same time,
// after what was already due then.
func TestZeroDelaySameTick(t *testing.T) {
	ms := toyMembers(1, 2, 3)
	s := mustNew(t, ms, toyRings(ms), sim.Config{NoTicks: true, Trace: sim.TraceAll})
	if err := s.Start(1); err != nil {
		t.Fatal(err)
	}
	s.Run()
	if s.Now() != 0 {
		t.Fatalf("clock moved to %d with zero delays", s.Now())
	}
	if st, ok := s.Settled(); !ok || st.Leader != 3 {
		t.Fatalf("Settled = %+v %v", st, ok)
	}
	if got := s.Counts().Election().Delivered; got != 3*3-1 {
		t.Fatalf("%d messages, want 8", got)
	}
}

func TestPartitionDropsInFlight(t *testing.T) {
	ms := toyMembers(1, 2)
	s := mustNew(t, ms, []classic.Node{&pinger{counter: counter{liar: liar{id: 1}}, peer: 2, k: 3}, &counter{liar: liar{id: 2}}},
		sim.Config{NoTicks: true, MinDelay: 5, MaxDelay: 5, Trace: sim.TraceAll})
	if err := s.Start(1); err != nil {
		t.Fatal(err)
	}
	s.RunUntil(2)
	if err := s.Partition([]classic.ID{1}); err != nil { // N2 left in the rest
		t.Fatal(err)
	}
	s.Run()
	if got := s.Counts().Of(classic.Election); got.Dropped != 3 || got.Delivered != 0 {
		t.Fatalf("counts %+v", got)
	}
	if tr := s.Trace(); !strings.HasSuffix(tr[len(tr)-1], "(partition)") || !strings.Contains(strings.Join(tr, "\n"), "    2  partition {N1}") {
		t.Fatalf("trace:\n%s", strings.Join(tr, "\n"))
	}
	if err := s.Partition([]classic.ID{1}, []classic.ID{1}); !errors.Is(err, sim.ErrConfig) {
		t.Fatalf("N1 in two groups: %v", err)
	}
}

// badSender sends as somebody else, and to nobody.
type badSender struct{ counter }

func (n *badSender) Start() []classic.Message {
	return []classic.Message{{Kind: classic.OK, From: 7, To: 2}, {Kind: classic.OK, From: n.id, To: 99}}
}

func TestProtocolViolations(t *testing.T) {
	ms := toyMembers(1, 2)
	s := mustNew(t, ms, []classic.Node{&badSender{counter{liar: liar{id: 1}}}, &counter{liar: liar{id: 2}}}, sim.Config{NoTicks: true})
	if err := s.Start(1); err != nil {
		t.Fatal(err)
	}
	vs := s.Violations()
	if len(vs) != 2 || vs[0].Check != sim.CheckProtocol || vs[1].Check != sim.CheckProtocol ||
		!strings.Contains(vs[0].What, "From N7") || !strings.Contains(vs[1].What, "unknown node N99") {
		t.Fatalf("violations: %v", vs)
	}
	if c := s.Counts().Of(classic.OK); c.Sent != 2 || c.Dropped != 2 {
		t.Fatalf("counts %+v", c)
	}
}

func TestConfigErrors(t *testing.T) {
	ms := toyMembers(1, 2)
	for _, tc := range []struct {
		cfg  sim.Config
		want string
	}{
		{sim.Config{}, "MaxTime is 0 but nodes tick"},
		{sim.Config{NoTicks: true, MinDelay: -1}, "MinDelay -1"},
		{sim.Config{NoTicks: true, MinDelay: 3, MaxDelay: 2}, "MaxDelay 2 is below MinDelay 3"},
		{sim.Config{NoTicks: true, DropProb: 1}, "DropProb 1"},
		{sim.Config{NoTicks: true, SettleWithin: -5}, "SettleWithin -5"},
		{sim.Config{NoTicks: true, Schedule: []sim.Action{{At: 1, Op: sim.OpCrash, ID: 9}}}, "Schedule[0]: sim: unknown node N9"},
		{sim.Config{NoTicks: true, Schedule: []sim.Action{{At: -1, Op: sim.OpStart, ID: 1}}}, "negative time"},
		{sim.Config{NoTicks: true, Chaos: &sim.Chaos{Until: 10}}, "Chaos.MeanGap 0"},
		{sim.Config{NoTicks: true, Chaos: &sim.Chaos{From: 5, Until: 1, MeanGap: 1}}, "Chaos.Until 1 is before"},
	} {
		_, err := sim.New(ms, toyRings(ms), tc.cfg)
		if !errors.Is(err, sim.ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err %v, want ErrConfig naming %q", tc.cfg, err, tc.want)
		}
	}
	if _, err := sim.New(ms, toyRings(toyMembers(2, 1)), sim.Config{NoTicks: true}); err == nil || !strings.Contains(err.Error(), "nodes[0] has ID N2") {
		t.Errorf("mismatched order: %v", err)
	}
	if _, err := sim.New(toyMembers(1, 1), toyRings(toyMembers(1, 1)), sim.Config{NoTicks: true}); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("duplicate: %v", err)
	}
	if _, err := sim.New(toyMembers(1<<40, 1), toyRings(toyMembers(1<<40, 1)), sim.Config{NoTicks: true}); err != nil {
		t.Errorf("sparse IDs: %v", err)
	}
}

// puppet shows whatever View the test sets.
type puppet struct {
	counter
	v classic.View
}

func (n *puppet) View() classic.View { return n.v }

func TestFencing(t *testing.T) {
	ms := toyMembers(1, 2, 3)
	a, b, c := &puppet{counter: counter{liar: liar{id: 1}}}, &puppet{counter: counter{liar: liar{id: 2}}}, &puppet{counter: counter{liar: liar{id: 3}}}
	s := mustNew(t, ms, []classic.Node{a, b, c}, sim.Config{NoTicks: true, Fencing: true})
	step := func(n *puppet, v classic.View) {
		t.Helper()
		n.v = v
		if err := s.Start(n.id); err != nil { // any call makes the simulator read the View
			t.Fatal(err)
		}
	}
	// N3 leads epoch 1, everybody knows; N3 crashes; N2 takes epoch 2.
	for _, n := range []*puppet{a, b, c} {
		step(n, classic.View{Leader: 3, Epoch: 1, HasLeader: true})
	}
	if err := s.Crash(3); err != nil {
		t.Fatal(err)
	}
	step(b, classic.View{Leader: 2, Epoch: 2, HasLeader: true})
	step(a, classic.View{Leader: 2, Epoch: 2, HasLeader: true})
	if err := s.Err(); err != nil {
		t.Fatalf("clean so far: %v", err)
	}
	// N2 crashes; N3 recovers and claims epoch 2 for itself: no two live
	// nodes disagree at any instant, so only Fencing sees the reuse.
	if err := s.Crash(2); err != nil {
		t.Fatal(err)
	}
	step(a, classic.View{Electing: true})
	c.v = classic.View{Leader: 3, Epoch: 2, HasLeader: true}
	if err := s.Recover(3); err != nil {
		t.Fatal(err)
	}
	vs := s.Violations()
	if len(vs) != 1 || vs[0].Check != sim.CheckFencing || vs[0].What != "epoch 2 was N2's and now N3's too (seen by N3)" {
		t.Fatalf("violations %v", vs)
	}
	// N1 goes back to epoch 1.
	step(a, classic.View{Leader: 3, Epoch: 1, HasLeader: true})
	vs = s.Violations()
	if len(vs) != 2 || vs[1].Check != sim.CheckFencing || vs[1].What != "N1 went back from epoch 2 to epoch 1 (leader N3)" {
		t.Fatalf("violations %v", vs[1:])
	}
}

// TestScheduledActions: schedule entries fire at their time, in order; an
// impossible one is traced as ignored, not fatal.
func TestScheduledActions(t *testing.T) {
	ms := toyMembers(1, 2, 3)
	s := mustNew(t, ms, toyRings(ms), sim.Config{NoTicks: true, MinDelay: 1, MaxDelay: 1, Trace: sim.TraceAll, Schedule: []sim.Action{
		{At: 20, Op: sim.OpRecover, ID: 2}, // N2 is up then: ignored
		{At: 10, Op: sim.OpStart, ID: 2},
	}})
	if st := s.Run(); st != sim.StopQuiet {
		t.Fatalf("Run = %v", st)
	}
	st, ok := s.Settled()
	if !ok || st.Leader != 3 || st.At != 10+4+3 {
		// N2 starts at 10: four Election hops round to N3, three Elected.
		t.Fatalf("Settled %+v %v", st, ok)
	}
	tr := strings.Join(s.Trace(), "\n")
	if !strings.Contains(tr, "   10  N2 start") || !strings.Contains(tr, "   20  N2 recover ignored: node is up") {
		t.Fatalf("trace:\n%s", tr)
	}
	if err := s.Schedule(sim.Action{At: 5, Op: sim.OpStart, ID: 1}); !errors.Is(err, sim.ErrConfig) {
		t.Fatalf("scheduling in the past: %v", err)
	}
}

func ExampleSim() {
	ms := []classic.Member{{ID: 1}, {ID: 2}, {ID: 3}}
	nodes := toyRings(ms)
	s, err := sim.New(ms, nodes, sim.Config{Seed: 1, NoTicks: true, MinDelay: 1, MaxDelay: 1})
	if err != nil {
		panic(err)
	}
	_ = s.Start(1)
	fmt.Println(s.Run())
	st, _ := s.Settled()
	fmt.Printf("leader N%d epoch %d at t=%d\n", st.Leader, st.Epoch, st.At)
	fmt.Println(s.Counts())
	// Output:
	// quiet
	// leader N3 epoch 1 at t=8
	// Elected      sent=3 delivered=3 dropped=0
	// Election     sent=5 delivered=5 dropped=0
	// election     sent=8 delivered=8 dropped=0
}
