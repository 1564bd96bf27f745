package simtest

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/electkit/election/classic"
	"github.com/electkit/election/classic/sim"
)

// propertyCase is one random run: N in 3..12 with distinct random IDs (and
// sometimes attributes), random delays, one initiator at t=0, random
// crashes and recoveries between t=1 and t=chaosUntil (checkProperties
// adds false suspicions or eligibility flips); then the faults stop and the
// nodes must settle within the bound.
type propertyCase struct {
	members  []classic.Member
	hb, to   int
	cfg      sim.Config
	starter  classic.ID
	settleIn int64
}

const chaosUntil = 250

func newPropertyCase(seed uint64) propertyCase {
	r := rand.New(rand.NewPCG(seed, 0xfeed))
	n := 3 + r.IntN(10)
	seen := map[classic.ID]bool{}
	var ms []classic.Member
	withAttrs := r.IntN(4) == 0
	for len(ms) < n {
		id := classic.ID(1 + r.IntN(100))
		if seen[id] {
			continue
		}
		seen[id] = true
		m := classic.Member{ID: id}
		if withAttrs {
			m.Attr = int64(r.IntN(3))
		}
		ms = append(ms, m)
	}
	maxDelay := int64(1 + r.IntN(3))
	hb := 2 + r.IntN(4)
	// Timeouts well above a round trip, so that a slow answer is not taken
	// for a crash.
	to := int(4*maxDelay) + hb + r.IntN(6)
	// Long enough for a detection and for an election to pass every node a
	// few times, with a timeout at each of them in the bully's worst case.
	bound := int64(n*to*3) + int64(n)*maxDelay*6 + 100
	return propertyCase{
		members: ms, hb: hb, to: to, starter: ms[r.IntN(n)].ID, settleIn: bound,
		cfg: sim.Config{
			Seed:     seed,
			MinDelay: 1, MaxDelay: maxDelay,
			Schedule: []sim.Action{{At: 0, Op: sim.OpStart, ID: ms[r.IntN(n)].ID}},
			Chaos: &sim.Chaos{From: 1, Until: chaosUntil, MeanGap: int64(5 + r.IntN(20)),
				MaxDown: r.IntN(n)},
			SettleWithin:    bound,
			Fencing:         true, // epochs are backend/inmem's fencing tokens
			MaxTime:         chaosUntil + 2*bound,
			StopOnViolation: true,
		},
	}
}

// runProperty runs one seed of alg and returns what went wrong, if
// anything: a violation, or a run that did not end quiet and settled.
func runProperty(alg algorithm, pc propertyCase) (*sim.Sim, error) {
	nodes := make([]classic.Node, len(pc.members))
	for i, m := range pc.members {
		n, err := alg(classic.Config{ID: m.ID, Members: slices.Clone(pc.members), HeartbeatTicks: pc.hb, TimeoutTicks: pc.to})
		if err != nil {
			return nil, err
		}
		nodes[i] = n
	}
	s, err := sim.New(pc.members, nodes, pc.cfg)
	if err != nil {
		return nil, err
	}
	st := s.Run()
	desc := fmt.Sprintf("N=%d, delay 1..%d, hb %d, timeout %d", len(pc.members), pc.cfg.MaxDelay, pc.hb, pc.to)
	if err := s.Err(); err != nil {
		return s, fmt.Errorf("%s: %w", desc, err)
	}
	if st != sim.StopQuiet {
		return s, fmt.Errorf("%s: Run stopped %v at t=%d, not quiet", desc, st, s.Now())
	}
	if _, ok := s.Settled(); !ok && !s.Vacant() {
		return s, fmt.Errorf("%s: quiet but neither settled nor vacant", desc)
	}
	return s, nil
}

// propSeed replays one seed of the property tests with a full trace:
//
//	go test ./classic/sim -run 'TestBullyProperties/crashes' -propseed=3 -v
var propSeed = flag.Int("propseed", -1, "run only this seed of the property tests, and print its whole trace")

// faults are the kinds of fault the property tests draw, each a subtest:
// crashes and recoveries always; then false suspicions (Start on a random
// live node, the leader included), or eligibility flips.
var faults = []struct {
	name                string
	starts, eligibility bool
}{
	{"crashes", false, false},
	{"suspicions", true, false},
	{"eligibility", false, true},
}

// checkProperties runs seeds 0..seeds-1 of alg under each kind of fault:
// safety and fencing always, the best live eligible leader whenever the
// nodes settle, and settlement within the bound once the faults stop. It reports the
// first failures in full and the failing seeds.
func checkProperties(t *testing.T, alg algorithm, seeds int, tweak func(*propertyCase)) {
	t.Helper()
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			var failed []uint64
			var msgs int64
			for seed := range uint64(seeds) {
				if *propSeed >= 0 && seed != uint64(*propSeed) {
					continue
				}
				pc := newPropertyCase(seed)
				pc.cfg.Chaos.Starts, pc.cfg.Chaos.Eligibility = f.starts, f.eligibility
				if tweak != nil {
					tweak(&pc)
				}
				if *propSeed >= 0 {
					pc.cfg.Trace = sim.TraceAll
				}
				s, err := runProperty(alg, pc)
				if *propSeed >= 0 && s != nil {
					t.Logf("seed %d, whole trace:\n%s", seed, strings.Join(s.Trace(), "\n"))
				}
				if err != nil {
					if len(failed) < 2 {
						t.Errorf("seed %d: %v", seed, err)
					}
					failed = append(failed, seed)
					continue
				}
				msgs += s.Counts().Election().Delivered
			}
			if len(failed) > 0 {
				t.Errorf("%d of %d seeds failed: %v\n(replay one: go test ./classic/sim -run '%s$' -propseed=N -v)", len(failed), seeds, failed, t.Name())
			}
			if msgs == 0 && len(failed) == 0 && *propSeed < 0 {
				t.Error("no election message was delivered in any run")
			}
		})
	}
}

// TestPropertyHarness checks the harness on the toy bully. With false
// suspicions only it runs clean. With crashes it must find the toy's known
// bug: a recovered best node announces "highest epoch it saw + 1" without
// learning the current epoch first, so it can reuse an epoch that another
// node already leads.
func TestPropertyHarness(t *testing.T) {
	toy := algorithms["toybully"]
	for seed := range uint64(50) {
		pc := newPropertyCase(seed)
		pc.cfg.Chaos.MaxDown, pc.cfg.Chaos.Starts, pc.cfg.Chaos.Eligibility = 0, true, false
		if _, err := runProperty(toy, pc); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
	found := false
	for seed := range uint64(50) {
		pc := newPropertyCase(seed)
		pc.cfg.Chaos.MaxDown = len(pc.members) - 1
		_, err := runProperty(toy, pc)
		var v *sim.Violation
		if errors.As(err, &v) && v.Check == sim.CheckSafety && strings.Contains(strings.Join(v.Tail, "\n"), "recover") {
			found = true
			break
		}
	}
	if !found {
		t.Fatal("the toy bully's recovery bug went unnoticed in 50 seeds")
	}
}

// TestRingProperties: the ring of package classic, 200 random runs per
// kind of fault.
func TestRingProperties(t *testing.T) {
	checkProperties(t, algorithms["ring"], propertySeeds(t), nil)
}

// TestBullyProperties: the bully of package classic, 200 random runs per
// kind of fault.
func TestBullyProperties(t *testing.T) {
	checkProperties(t, algorithms["bully"], propertySeeds(t), nil)
}

func propertySeeds(t *testing.T) int {
	if testing.Short() {
		return 40
	}
	return 200
}
