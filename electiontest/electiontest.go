// Package electiontest is the conformance suite of package election: the
// contract P1–P9 in code. Every backend runs it from its own tests, ours
// and third parties' alike, the way io/fs implementations run
// testing/fstest.TestFS.
//
// # Running it for a backend
//
// Write a Harness that starts a fresh, empty election per call of
// NewElection, makes candidates of it, and can crash one (cut its connection
// or session so that it dies without resigning), then call Run from a test:
//
//	func TestConformance(t *testing.T) {
//		electiontest.Run(t, electiontest.Harness{
//			NewElection: func(t *testing.T) electiontest.Election {
//				srv := startServer(t)            // stopped with t.Cleanup
//				return &myElection{srv: srv}     // Candidate, Crash
//			},
//			Failover: 2*time.Second + 500*time.Millisecond, // TTL + renewal + store expiry
//		})
//	}
//
// Candidate must pass the suite's options on to the backend's constructor
// (they set ID, Value and Priority) after the harness's own (TTL and the
// like). The suite closes every candidate it makes; the harness releases
// whatever else it made (clients, servers) with t.Cleanup. A backend whose
// elections have names sets Named as well, for the Names subtest: the one
// name rule of package backend (ValidateName). Backends whose
// time is fake (in-process ones) set Bubble so that every subtest runs in a
// testing/synctest bubble.
//
// The suite never sleeps for a fixed time: it waits for events, each wait
// bounded by Patience (or Failover after a crash).
//
// One part of P3 needs the process's clock and so runs on its own, outside
// a bubble: HoldsThroughClockJumps steps the wall clock by hours while a
// candidate leads.
package electiontest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/electkit/election"
)

// Harness adapts a backend to the suite.
type Harness struct {
	// NewElection starts a fresh, empty election. It is called once per
	// subtest, from within the subtest (and its bubble, with Bubble).
	NewElection func(t *testing.T) Election
	// Failover bounds the time from a leader's crash until a waiting
	// candidate leads (P6): TTL + one renewal interval + the store's own
	// expiry delay. Required.
	Failover time.Duration
	// Patience bounds every wait for what should happen promptly: an
	// Observe update, Close returning. Default 10s.
	Patience time.Duration
	// Handover bounds the time from Resign returning until the waiting
	// candidate's Campaign returns (P6: about one store round trip).
	// Default Patience/10. In a bubble, 1ns means "no fake time passes".
	Handover time.Duration
	// Lateness is how long after its Deadline a crashed leader's Term may be
	// seen Done (timer and scheduling delay). Default 0 with Bubble, 50ms
	// otherwise.
	Lateness time.Duration
	// Bubble runs every subtest inside testing/synctest.Test.
	Bubble bool
	// Handovers is the number of handovers of the SuccessiveHandovers
	// subtest. Default 50.
	Handovers int
	// Named, when set, builds a candidate of the election called name
	// (as Election.Candidate does, with the harness's options followed by
	// opts), passing name to the backend's constructor unchanged and
	// returning the constructor's error as is; the suite closes the
	// Elector. The Names subtest needs it and is skipped without it: a
	// name backend.ValidateName refuses must fail with that very error,
	// and the others must make a working candidate. Those begin with a
	// segment random per run, so they meet no other election of a store
	// the harness shares between subtests or runs.
	Named func(t *testing.T, name string, opts ...election.Option) (election.Elector, error)
	// IgnoreGoroutines lists goroutines that outlive a subtest's candidates
	// and harness cleanup legitimately (a client library's, say); see
	// goleak.IgnoreTopFunction.
	IgnoreGoroutines []goleak.Option
}

// Election is one fresh election of a backend.
type Election interface {
	// Candidate returns a new candidate of this election, built with the
	// harness's options followed by opts. It fails t if it cannot.
	Candidate(t *testing.T, opts ...election.Option) election.Elector
	// Crash makes e die without resigning: its lease or session is no
	// longer renewed and its connection is gone. Later calls of e may fail;
	// Close must still return.
	Crash(t *testing.T, e election.Elector)
}

// Silencer is an Election that can make its store stop answering one
// candidate: what the candidate sends may arrive, but no reply comes back
// (a one-way network fault, a hung server), so that every request waits
// until its ctx ends. The SilentStore subtest needs it and is skipped for
// an Election without it.
type Silencer interface {
	// Silence makes the store stop answering e until heal is called.
	// Calling heal again does nothing.
	Silence(t *testing.T, e election.Elector) (heal func())
}

// Evicter is an Election whose store other clients can change: Evict
// removes e's candidacy through the store's own API, as an operator or a
// second program can (deletes its key or node, revokes its lease), while e
// leads with term. The EvictedLeader subtest needs it and is skipped for an
// Election without it.
type Evicter interface {
	Evict(t *testing.T, e election.Elector, term *election.Term)
}

// Run runs every subtest of the suite against the backend h adapts.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.NewElection == nil || h.Failover <= 0 {
		t.Fatalf("electiontest: Harness needs NewElection and a positive Failover (got Failover %v)", h.Failover)
	}
	if h.Patience <= 0 {
		h.Patience = 10 * time.Second
	}
	if h.Handover <= 0 {
		h.Handover = h.Patience / 10
	}
	if h.Lateness <= 0 && !h.Bubble {
		h.Lateness = 50 * time.Millisecond
	}
	if h.Handovers <= 0 {
		h.Handovers = 50
	}
	for _, st := range subtests {
		t.Run(st.name, func(t *testing.T) {
			body := func(t *testing.T) {
				if st.leaks {
					checkLeaks(t, h)
				}
				st.run(newWorld(t, h))
			}
			if h.Bubble {
				synctest.Test(t, body)
			} else {
				body(t)
			}
		})
	}
}

var subtests = []struct {
	name  string
	run   func(w *world)
	leaks bool // check for goroutines left after every cleanup
}{
	{"OneLeader", testOneLeader, false},
	{"ResignHandsOver", testResignHandsOver, false},
	{"ResignHandsOverPromptly", testResignHandsOverPromptly, false},
	{"ResignWhileWaiting", testResignWhileWaiting, false},
	{"CampaignWhileLeading", testCampaignWhileLeading, false},
	{"LeaderStaysLeader", testLeaderStaysLeader, false},
	{"UnhealthyHook", testUnhealthyHook, false},
	{"SuccessiveHandovers", testSuccessiveHandovers, false},
	{"CampaignHonoursContext", testCampaignHonoursContext, false},
	{"CloseWhileLeading", testCloseWhileLeading, false},
	{"CloseWhileWaiting", testCloseWhileWaiting, false},
	{"Observe", testObserve, false},
	{"LeaderAgreesWithObserve", testLeaderAgreesWithObserve, false},
	{"LeaderCrash", testLeaderCrash, false},
	{"TermExitPaths", testTermExitPaths, false},
	{"RunCallbacks", testRunCallbacks, false},
	{"RunStopsWorkFirst", testRunStopsWorkFirst, false},
	{"StepDownInOnElected", testStepDownInOnElected, false},
	{"SilentStore", testSilentStore, false},
	{"EvictedLeader", testEvictedLeader, false},
	{"Priority", testPriority, false},
	{"Preemption", testPreemption, false},
	{"Transfer", testTransfer, false},
	{"Names", testNames, false},
	{"NilArguments", testNilArguments, false},
	{"NoGoroutineLeft", testNoGoroutineLeft, true},
}

// world is one subtest's election, its candidates and everything the suite
// has seen of it. Every Campaign goes through world.campaign, which checks
// P1–P4 at the instant a Term is handed out.
type world struct {
	t      *testing.T
	h      Harness
	el     Election
	wg     sync.WaitGroup // the suite's own goroutines
	ctx    context.Context
	cancel context.CancelFunc
	// ending is set once the subtest's cleanup begins: candidates are
	// being closed, so what campaigns still in flight return is not judged.
	ending atomic.Bool

	mu     sync.Mutex
	n      int
	terms  []*election.Term
	owner  map[*election.Term]election.Elector
	tokens map[uint64]election.Elector
	// evicted: Terms whose key another client removed. The evicted leader
	// and the next candidate learn of it from one store event, in no fixed
	// order, so such a Term may still be valid, for a moment, when the next
	// one is handed out; testEvictedLeader checks that it ends at once.
	evicted map[*election.Term]bool
}

func newWorld(t *testing.T, h Harness) *world {
	w := &world{t: t, h: h, owner: map[*election.Term]election.Elector{}, tokens: map[uint64]election.Elector{},
		evicted: map[*election.Term]bool{}}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	t.Cleanup(w.waitGoroutines) // runs after the candidates are closed
	w.el = h.NewElection(t)
	if w.el == nil {
		t.Fatal("electiontest: NewElection returned nil")
	}
	return w
}

// candidate makes candidate "c<n>" with value "v<n>" and priority n (and
// extra options); the suite closes it at the end of the subtest.
func (w *world) candidate(extra ...election.Option) election.Elector {
	w.mu.Lock()
	w.n++
	n := w.n
	w.mu.Unlock()
	opts := append([]election.Option{election.WithID(fmt.Sprintf("c%d", n)),
		election.WithValue([]byte(fmt.Sprintf("v%d", n))), election.WithPriority(int64(n))}, extra...)
	e := w.el.Candidate(w.t, opts...)
	if e == nil {
		w.t.Fatal("electiontest: Candidate returned nil")
	}
	w.t.Cleanup(func() { w.close(e) })
	w.t.Cleanup(w.end) // runs before every candidate's Close
	return e
}

// end marks the start of the subtest's cleanup and cancels the campaigns
// still in flight.
func (w *world) end() {
	w.ending.Store(true)
	w.cancel()
}

// errorf reports a failure found by a goroutine of the suite, unless the
// subtest is ending.
func (w *world) errorf(format string, args ...any) {
	if !w.ending.Load() {
		w.t.Errorf(format, args...)
	}
}

// waitGoroutines waits for the suite's goroutines, at most Patience: a
// Campaign or Observe that ignores Close fails the subtest instead of
// hanging the test binary.
func (w *world) waitGoroutines() {
	w.end()
	done := make(chan struct{})
	go func() {
		w.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(w.h.Patience):
		w.t.Errorf("a Campaign or an Observe stream did not end within %v of its Elector's Close", w.h.Patience)
	}
}

// checkLeaks registers, before anything else of the subtest, a check that
// runs after every other cleanup: no goroutine started during the subtest
// is left, but those the harness declares.
//
// Outside a bubble, the check waits up to leakPatience for them to go: a
// client's Close (gRPC's ClientConn.Close) returns once it has cancelled
// its connection attempts, not once their goroutines have returned, and
// goleak's own retries span under half a second, which a machine loaded
// by other test processes, under the race detector, can outlast. A
// goroutine still there after that is reported, with its stack.
func checkLeaks(t *testing.T, h Harness) {
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		opts := append([]goleak.Option{before}, h.IgnoreGoroutines...)
		err := goleak.Find(opts...)
		for deadline := time.Now().Add(leakPatience); err != nil && !h.Bubble && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond) // goroutines ending give no event to wait on
			err = goleak.Find(opts...)
		}
		if err != nil {
			t.Errorf("goroutines left after Close and cleanup: %v", err)
		}
	})
}

// leakPatience is how long checkLeaks waits for the goroutines of a
// subtest's candidates to end after Close and cleanup.
const leakPatience = 5 * time.Second

// close closes e, failing the test if Close does not return within Patience.
func (w *world) close(e election.Elector) error {
	w.t.Helper()
	done := make(chan error, 1)
	go func() { done <- e.Close() }()
	select {
	case err := <-done:
		return err
	case <-time.After(w.h.Patience):
		w.t.Errorf("Close did not return within %v", w.h.Patience)
		return nil
	}
}

// campaign calls e.Campaign and checks the Term it returns against every
// Term handed out before: no other candidate's Term is still valid (P1,
// P3), the token is new and larger than every earlier one (P1, P2), and the
// Term is valid (P4).
func (w *world) campaign(ctx context.Context, e election.Elector) (*election.Term, error) {
	t, err := e.Campaign(ctx)
	if err != nil {
		if t != nil {
			w.errorf("Campaign returned both a Term (%v) and an error (%v)", t, err)
		}
		return nil, err
	}
	if t == nil {
		w.errorf("Campaign returned neither a Term nor an error")
		return nil, errors.New("nil term")
	}
	if terr := t.Err(); terr != nil {
		w.errorf("Campaign returned a Term that is not valid: %v", terr)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, o := range w.terms {
		if o == t {
			return t, nil // the same Term again (Campaign while leading)
		}
	}
	for _, o := range w.terms {
		if w.owner[o] != e && o.Err() == nil && !w.evicted[o] {
			w.errorf("two valid Terms at once: %v was handed out while %v was still valid (P1/P3)", t, o)
		}
		if o.Token() >= t.Token() {
			w.errorf("token did not increase: %v after %v (P2)", t, o)
		}
	}
	if prev, ok := w.tokens[t.Token()]; ok && prev != e {
		w.errorf("token %d handed to two candidates (P1)", t.Token())
	}
	if id := t.Leader().ID; id == "" {
		w.errorf("Term %v has an empty leader ID", t)
	}
	w.terms = append(w.terms, t)
	w.owner[t] = e
	w.tokens[t.Token()] = e
	return t, nil
}

type result struct {
	term *election.Term
	err  error
}

// campaignAsync runs w.campaign on a goroutine of the suite's.
func (w *world) campaignAsync(ctx context.Context, e election.Elector) <-chan result {
	ch := make(chan result, 1)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		t, err := w.campaign(ctx, e)
		ch <- result{t, err}
	}()
	return ch
}

// settle lets the candidates started so far block in Campaign before the
// subtest goes on, where that can be known (in a bubble). Elsewhere the
// checks at each Campaign's return still hold, they just may see less.
func (w *world) settle() {
	if w.h.Bubble {
		synctest.Wait()
	}
}

// lead campaigns and fails the test unless e leads within Patience.
func (w *world) lead(e election.Elector) *election.Term {
	w.t.Helper()
	r := w.await(w.campaignAsync(w.ctx, e), w.h.Patience, "Campaign on an election with no other candidate")
	if r.err != nil {
		w.t.Fatalf("Campaign: %v", r.err)
	}
	return r.term
}

// await waits for a Campaign result.
func (w *world) await(ch <-chan result, d time.Duration, what string) result {
	w.t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(d):
		w.t.Fatalf("%s: no result within %v", what, d)
		return result{}
	}
}

// resign resigns e and checks that its Term ended with ErrResigned before
// Resign returned.
func (w *world) resign(e election.Elector, t *election.Term) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(w.ctx, w.h.Patience)
	defer cancel()
	if err := e.Resign(ctx); err != nil {
		w.t.Fatalf("Resign: %v", err)
	}
	if t == nil {
		return
	}
	select {
	case <-t.Done():
	default:
		w.t.Fatalf("Term %v not Done when Resign returned", t)
	}
	if err := t.Err(); !errors.Is(err, election.ErrResigned) {
		w.t.Errorf("Term %v ended with %v after Resign, want ErrResigned", t, err)
	}
}

// recorder collects what one Observe stream delivers.
type recorder struct {
	mu     sync.Mutex
	vals   []election.Leader
	closed bool
	notify chan struct{}
}

func (w *world) observe(ctx context.Context, e election.Elector) *recorder {
	r := &recorder{notify: make(chan struct{})}
	ch := e.Observe(ctx)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for l := range ch {
			r.mu.Lock()
			r.vals = append(r.vals, l)
			close(r.notify)
			r.notify = make(chan struct{})
			r.mu.Unlock()
		}
		r.mu.Lock()
		r.closed = true
		close(r.notify)
		r.notify = make(chan struct{})
		r.mu.Unlock()
	}()
	return r
}

// snapshot returns the values so far and whether the stream was closed.
func (r *recorder) snapshot() ([]election.Leader, bool, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]election.Leader(nil), r.vals...), r.closed, r.notify
}

// waitUntil waits until cond holds for r's values, for up to d.
func (w *world) waitUntil(r *recorder, d time.Duration, what string, cond func(vals []election.Leader, closed bool) bool) []election.Leader {
	w.t.Helper()
	deadline := time.After(d)
	for {
		vals, closed, notify := r.snapshot()
		if cond(vals, closed) {
			return vals
		}
		select {
		case <-notify:
		case <-deadline:
			w.t.Fatalf("Observe: %s: not within %v; got %v (closed %v)", what, d, vals, closed)
			return nil
		}
	}
}

func last(vals []election.Leader) (election.Leader, bool) {
	if len(vals) == 0 {
		return election.Leader{}, false
	}
	return vals[len(vals)-1], true
}

// sees waits until r's newest value is l.
func (w *world) sees(r *recorder, l election.Leader) {
	w.t.Helper()
	w.waitUntil(r, w.h.Patience, "newest value "+l.String(), func(vals []election.Leader, _ bool) bool {
		v, ok := last(vals)
		return ok && v.Equal(l)
	})
}

// waitDone waits up to d for t to end and returns when it was seen ended.
func (w *world) waitDone(t *election.Term, d time.Duration, what string) time.Time {
	w.t.Helper()
	select {
	case <-t.Done():
		return time.Now()
	case <-time.After(d):
		w.t.Fatalf("%s: Term %v not Done within %v", what, t, d)
		return time.Time{}
	}
}

// checkEnded checks that Done, Context and Err of an ended Term agree and
// that Err is one of want.
func (w *world) checkEnded(t *election.Term, want ...error) {
	w.t.Helper()
	select {
	case <-t.Done():
	default:
		w.t.Errorf("Term %v: Done not closed", t)
	}
	if t.Done() != t.Context().Done() {
		w.t.Errorf("Term %v: Done is not Context().Done()", t)
	}
	if t.Context().Err() == nil {
		w.t.Errorf("Term %v: Done closed but Context not canceled", t)
	}
	err := t.Err()
	if err == nil {
		w.t.Errorf("Term %v: Done closed but Err is nil", t)
		return
	}
	if c := context.Cause(t.Context()); c != err {
		w.t.Errorf("Term %v: context.Cause(Context()) = %v, Err() = %v", t, c, err)
	}
	for _, target := range want {
		if errors.Is(err, target) {
			return
		}
	}
	w.t.Errorf("Term %v ended with %v, want one of %v", t, err, want)
}

// checkValid checks that a Term's accessors agree that it is valid.
func (w *world) checkValid(t *election.Term) {
	w.t.Helper()
	select {
	case <-t.Done():
		w.t.Errorf("Term %v: Done closed while it should be valid (Err %v)", t, t.Err())
	default:
	}
	if err := t.Err(); err != nil {
		w.t.Errorf("Term %v: Err = %v while it should be valid", t, err)
	}
	if err := t.Context().Err(); err != nil {
		w.t.Errorf("Term %v: Context canceled while it should be valid", t)
	}
	if !t.Deadline().After(time.Now()) {
		w.t.Errorf("Term %v: Deadline %v not in the future while valid", t, t.Deadline())
	}
}

// Main runs a test binary's tests (call it from TestMain) and fails the
// binary if any goroutine outlives them: a backend's own tests use it so
// that a goroutine left behind by a Close, a crash or a cancelled
// Campaign shows, whichever test leaked it.
//
//	func TestMain(m *testing.M) { electiontest.Main(m) }
func Main(m *testing.M, ignore ...goleak.Option) {
	goleak.VerifyTestMain(m, ignore...)
}
