package electiontest_test

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
	"github.com/electkit/election/electiontest"
	"github.com/electkit/election/internal/rig/refbackend"
)

const refTTL = 2 * time.Second

// refElection adapts the reference backend to the suite.
type refElection struct{ s *refbackend.Store }

func (r *refElection) Candidate(t *testing.T, opts ...election.Option) election.Elector {
	e, err := r.s.NewElector(append([]election.Option{election.WithTTL(refTTL)}, opts...)...)
	if err != nil {
		t.Fatalf("NewElector: %v", err)
	}
	return e
}

func (r *refElection) Crash(t *testing.T, e election.Elector) { e.(*refbackend.Elector).Crash() }

func (r *refElection) Silence(t *testing.T, e election.Elector) func() {
	return e.(*refbackend.Elector).Silence()
}

func (r *refElection) Evict(t *testing.T, e election.Elector, _ *election.Term) {
	e.(*refbackend.Elector).Evict()
}

func refHarness(bugs refbackend.Bugs) electiontest.Harness {
	return electiontest.Harness{
		NewElection: func(t *testing.T) electiontest.Election { return &refElection{refbackend.NewStore(bugs)} },
		// A crashed leader's lease expires on the store one TTL after its
		// last renewal at the latest.
		Failover: refTTL + refTTL/3,
		Handover: time.Nanosecond, // in-process: no time passes
		Bubble:   true,
		// The reference backend holds one election per store: a name
		// is an election of a store of its own, after the rule every
		// backend follows.
		Named: func(t *testing.T, name string, opts ...election.Option) (election.Elector, error) {
			if err := backend.ValidateName(name); err != nil {
				return nil, err
			}
			return refbackend.NewStore(bugs).NewElector(append([]election.Option{election.WithTTL(refTTL)}, opts...)...)
		},
	}
}

// TestReferenceBackendRealTime runs the suite in real time, as the
// store-backed backends do, to prove the suite's own waits and bounds.
func TestReferenceBackendRealTime(t *testing.T) {
	if os.Getenv(bugEnv) != "" {
		t.Skip("inside a subprocess")
	}
	h := refHarness(refbackend.Bugs{})
	h.Bubble = false
	h.Handover = 0 // the default
	h.Handovers = 20
	electiontest.Run(t, h)
}

// bugEnv selects a deliberate fault of the reference backend for the
// subprocess that TestSuiteCatchesBrokenBackends starts.
const bugEnv = "ELECTIONTEST_REFERENCE_BUG"

var bugs = map[string]refbackend.Bugs{
	"":                       {},
	"EveryoneLeads":          {EveryoneLeads: true},
	"ReuseToken":             {ReuseToken: true},
	"ResignKeepsTerm":        {ResignKeepsTerm: true},
	"LateExpiry":             {LateExpiry: true},
	"ResignNoRevoke":         {ResignNoRevoke: true},
	"NoRenew":                {NoRenew: true},
	"NoHooks":                {NoHooks: true},
	"IgnoreCtxWhenSilent":    {IgnoreCtxWhenSilent: true},
	"EvictionUnnoticed":      {EvictionUnnoticed: true},
	"NoSentinel":             {NoSentinel: true},
	"IgnorePriority":         {IgnorePriority: true},
	"NoPreemption":           {NoPreemption: true},
	"PreemptAtOnce":          {PreemptAtOnce: true},
	"TransferToHead":         {TransferToHead: true},
	"TransferEarly":          {TransferEarly: true},
	"TermBoundToCampaignCtx": {TermBoundToCampaignCtx: true},
	"ResignUsesTermCtx":      {ResignUsesTermCtx: true},
}

// TestReferenceBackend runs the suite on the reference backend: every
// subtest passes on a correct backend.
func TestReferenceBackend(t *testing.T) {
	b, ok := bugs[os.Getenv(bugEnv)]
	if !ok {
		t.Fatalf("%s=%q names no known bug", bugEnv, os.Getenv(bugEnv))
	}
	electiontest.Run(t, refHarness(b))
}

// TestSuiteCatchesBrokenBackends runs the suite on each broken variant of
// the reference backend, in a subprocess (a failing suite fails its test),
// and checks that the subtests guarding the broken promise fail.
func TestSuiteCatchesBrokenBackends(t *testing.T) {
	if os.Getenv(bugEnv) != "" {
		t.Skip("inside a subprocess")
	}
	mustFail := map[string][]string{
		"EveryoneLeads":          {"OneLeader", "ResignHandsOver", "SuccessiveHandovers", "LeaderCrash"},
		"ReuseToken":             {"ResignHandsOver", "SuccessiveHandovers", "LeaderCrash"},
		"ResignKeepsTerm":        {"ResignHandsOver", "SuccessiveHandovers", "OneLeader", "TermExitPaths"},
		"LateExpiry":             {"LeaderCrash", "RunCallbacks"},
		"ResignNoRevoke":         {"ResignHandsOverPromptly"},
		"NoRenew":                {"LeaderStaysLeader"},
		"NoHooks":                {"LeaderStaysLeader", "UnhealthyHook"},
		"IgnoreCtxWhenSilent":    {"SilentStore"},
		"EvictionUnnoticed":      {"EvictedLeader"},
		"NoSentinel":             {"EvictedLeader"},
		"IgnorePriority":         {"Priority"},
		"NoPreemption":           {"Preemption"},
		"PreemptAtOnce":          {"Preemption"},
		"TransferToHead":         {"Transfer"},
		"TransferEarly":          {"Transfer"},
		"TermBoundToCampaignCtx": {"RunStopsWorkFirst"},
		"ResignUsesTermCtx":      {"StepDownInOnElected"},
	}
	failLine := regexp.MustCompile(`--- FAIL: TestReferenceBackend/(\w+)`)
	for bug, want := range mustFail {
		t.Run(bug, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestReferenceBackend$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), bugEnv+"="+bug)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the suite passed on a backend with bug %s:\n%s", bug, out)
			}
			var failed []string
			for _, m := range failLine.FindAllStringSubmatch(string(out), -1) {
				failed = append(failed, m[1])
			}
			for _, name := range want {
				if !slices.Contains(failed, name) {
					t.Errorf("bug %s: subtest %s did not fail (failed: %v)\n%s", bug, name, failed, tail(out))
				}
			}
			t.Logf("bug %s: failed subtests %v", bug, failed)
		})
	}
}

func tail(b []byte) []byte {
	if len(b) > 4000 {
		return b[len(b)-4000:]
	}
	return b
}
