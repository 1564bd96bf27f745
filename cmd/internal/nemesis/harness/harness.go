// Package harness runs an election under faults, Jepsen style, and checks
// what happened with package nemesis.
//
// Candidates campaign against a real store — a 3-member etcd cluster
// embedded in this process, or a 3-server ZooKeeper ensemble of Java
// processes, whose members reach each other through proxies of the
// harness (peerNet) — or against backend/inmem's Zab cluster in process. Store
// candidates are separate OS processes (elect nemesis-candidate), each
// reaching every store member through a TCP proxy of its own that the
// harness can cut. While a candidate leads, it loops: take the call
// instant, check that its Term is valid, work for a few milliseconds, write
// to the fenced register with its token (only once the register has its
// Elected report). Every leadership (elected, each
// renewal's deadline, demoted) is reported to the register too. Every
// even-numbered candidate (c2, c4, …) campaigns on a session that also
// carries its candidate of a side election, as a process of a sharded
// service does — an etcd.Session, or one ZooKeeper connection with two
// Electors of zk.New —; the others hold a lease or a connection each. So
// every fault meets both: a revoked or expired session ends both of its
// candidacies (etcd: the process opens a new Session; ZooKeeper: the
// client opens a new session). One in two of those (c2, c6, …: Sharded)
// is shard-heavy: Config.Shards side elections on its one session, all
// campaigned at once when it starts and on each new session, the same
// elections for each such candidate; after the quiet period every one
// must be led by a shard-heavy candidate that still runs, and each must
// exit cleanly when it stops (NameShards). Each candidate has a
// priority drawn from the seed (0 or 1 at first, up to the highest a
// preempt fault gave later), and every store candidate is made
// WithPreemption: a candidate above the leader takes over after the
// hold-off.
//
// Nemeses, picked from the seed and mixed over the run, one at a time with
// quiet gaps between them:
//
//	kill        SIGKILL the leader's process; a fresh candidate replaces it
//	pause       SIGSTOP the leader past its TTL, until another leads; SIGCONT
//	cut         drop every byte between a candidate (often the leader) and the store; heal
//	store-kill  stop the store's own leader member/server; restart it
//	store-cut   cut every candidate off from the store's leader member/server; heal
//	expire      end a waiting candidate's session (etcd: revoke its lease;
//	            zk: cut it off past the session timeout)
//	garbage     write stray keys/znodes under the election prefix; remove them
//	operator    what another client can do through the store's API: etcd —
//	            delete the leader's key, revoke its lease, delete the
//	            prefix, put the key again without its lease, revoke the
//	            candidates' permission (auth is on) and grant it again;
//	            ZooKeeper — delete the leader's node, delete the path and
//	            every child, create a persistent node named like a
//	            candidate's with sequence 0, make the path read-only
//	            (setAcl) and writable again
//	preempt     start a candidate of a priority above every other's; the
//	            leader (every store candidate is made WithPreemption, a
//	            hold-off of TTL/2) steps down for it; a random waiting
//	            candidate stops (SIGTERM), to keep the number
//	transfer    ask the leader through the store (RequestTransfer, as elect
//	            transfer does) to hand its leadership to a random waiting
//	            candidate
//	clock-fast  run a candidate's clock (the leader's, or at random under
//	            --rate) at (1+δ) × real time, clock-slow at 1/(1+δ), δ drawn
//	            below ρ (Config.Skew), and cut it off the store past its
//	            TTL meanwhile: its Term must end by its own, skewed, clock
//	            before the store lets another lead
//	store-partition  cut the store's leader member off from the other
//	            members (their own traffic, through the harness's proxies);
//	            half the time with the election's leader and some candidates
//	            reaching only it, the others only the majority; heal
//	store-minority  cut a random member off from the others, candidates
//	            on both sides; heal
//	crash       inmem: crash the leader's member; recover it
//	partition   inmem: partition the leader away from every other member; heal
//
// The harness signals only processes it started, by PID, and never
// changes the system clock. After the last fault a quiet period lets a
// leader be elected; then candidates stop, and nemesis.Check judges the
// history.
package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/cmd/internal/nemesis"
	"github.com/electkit/election/internal/clock"
	"github.com/electkit/election/internal/mono"
)

// Fault kinds.
const (
	Kill      = "kill"
	Pause     = "pause"
	Cut       = "cut"
	StoreKill = "store-kill"
	StoreCut  = "store-cut"
	Expire    = "expire"
	Garbage   = "garbage"
	Crash     = "crash"
	Partition = "partition"
	Operator  = "operator"
	Preempt   = "preempt"
	Transfer  = "transfer"
	ClockFast = "clock-fast"
	ClockSlow = "clock-slow"
	// StorePartition and StoreMinority cut store members off from each
	// other (see run.storePartition).
	StorePartition = "store-partition"
	StoreMinority  = "store-minority"
)

// PreemptHold is the hold-off of the store candidates' WithPreemption: a
// candidate of higher priority leads once it has waited half a TTL.
func PreemptHold(ttl time.Duration) time.Duration { return ttl / 2 }

// Kinds returns the fault kinds a backend supports, the default mix.
func Kinds(backend string) []string {
	if backend == "inmem" {
		return []string{Crash, Partition}
	}
	if backend == "postgres" || backend == "kube" { // one server: no store partitions
		return []string{Kill, Pause, Cut, StoreKill, StoreCut, Expire, Garbage, Operator, Preempt, Transfer, ClockFast, ClockSlow}
	}
	return []string{Kill, Pause, Cut, StoreKill, StoreCut, Expire, Garbage, Operator, Preempt, Transfer, ClockFast, ClockSlow, StorePartition, StoreMinority}
}

// Defaults.
const (
	DefaultCandidates = 5
	DefaultTTL        = 2 * time.Second
	DefaultDuration   = 30 * time.Second
	DefaultOverlap    = 3
	DefaultShards     = 50
)

// Config is one run.
type Config struct {
	Backend    string // "etcd", "zk", "postgres", "kube" or "inmem"
	Seed       int64  // picks the faults, their targets and their timing
	Duration   time.Duration
	Candidates int           // how many candidates campaign at once; 0 means DefaultCandidates
	TTL        time.Duration // the candidates' TTL; 0 means DefaultTTL
	// Unfenced turns the register's fencing off: it accepts every write.
	// With the pause nemesis, the run must then fail linearizability (the
	// negative control). The default is a fenced register.
	Unfenced bool
	Faults   []string      // a subset of Kinds(Backend); empty means all of them
	Work     time.Duration // see DefaultWork; 0 means DefaultWork
	// Bin is the elect binary that runs the store candidates (elect
	// nemesis-candidate). Required for etcd and zk.
	Bin string
	// Dir holds the store's data and each candidate's log; empty means a
	// temporary directory, removed at the end.
	Dir string
	Log io.Writer // progress, one line per fault; nil discards it
	// Gap bounds the quiet time before each fault: when positive, each gap
	// is drawn from [0, Gap), so a fault may follow the previous one's
	// heal or recovery at once. Zero means the default, [TTL/2, TTL+1s).
	Gap time.Duration
	// Rate, when positive, starts faults at this many a minute, each
	// after a gap drawn around 60/Rate seconds, without waiting for the
	// previous one to end: up to Overlap run at once, each on a target no
	// other running fault holds, at most one on the store's members at a
	// time. Each fault draws from a generator of its own, seeded from the
	// schedule, so the schedule (kinds, start gaps, each fault's draws) is
	// the seed's whatever the timing. Zero: one fault at a time (Gap).
	Rate float64
	// Overlap bounds the faults running at once under Rate; 0 means
	// DefaultOverlap.
	Overlap int
	// Drift and Margin are the store candidates' WithDrift (ρ) and
	// WithMargin; 0 means the library's defaults (election.DefaultDrift,
	// election.DefaultMargin).
	Drift  float64
	Margin time.Duration
	// Skew is δ of the clock faults: clock-fast runs a candidate's clock at
	// (1+δ) × real time, clock-slow at 1/(1+δ) (so that the store's clock
	// runs 1+δ times as fast as the candidate's: the case ρ bounds). 0
	// draws each fault's δ from [ρ/2, ρ), where no violation may happen; a
	// Skew at or above ρ is a negative control: with a small Margin, P3
	// must fail.
	Skew float64
	// Shards is how many side elections a shard-heavy candidate (Sharded:
	// c2, c6, …) holds on its one session (an etcd.Session; one ZooKeeper
	// connection) beside the checked election, all campaigned at once on
	// each session it opens; 0 means DefaultShards, -1 none (it holds the
	// one side election, as the other candidates on a session do). After
	// the quiet period, every one of them must have a live shard-heavy
	// candidate as its leader, and each such candidate must close all its
	// Electors when it stops (NameShards).
	Shards int
	// VisPath is where a failing run writes porcupine's visualization of
	// the register's history (with the Terms and faults); none when empty.
	VisPath string
}

// FailoverBound is the bound P6 is checked against after the faults stop:
//
//	2 × TTL + 3 s
//
// one TTL for the last leader's lease or session to lapse at the store, one
// more for the renewal interval and the new leader's confirmation (the
// store's expiry sweep: etcd 0.5 s, ZooKeeper one tick of 0.5 s), and 3 s
// for a store member that restarts or re-elects its own leader, and for
// the scheduling noise of a loaded machine.
func FailoverBound(ttl time.Duration) time.Duration { return 2*ttl + 3*time.Second }

// OperatorGrace is how long a leader's Term may overlap its successor's
// when another client removes the leader's key (the operator nemesis):
// both learn of it from one store event, and the successor needs one more
// round trip, but nothing orders two processes' handling of the event on a
// loaded machine. Such overlaps are reported, not violations
// (nemesis.CheckValidTermsGrace); the fenced register's writes are judged
// as ever. A leader that does not watch its key overlaps until its next
// renewal (a third of the TTL) or for good, far past this.
const OperatorGrace = 100 * time.Millisecond

func bad(field, value, reason string) error {
	return &election.OptionError{Field: field, Value: value, Reason: reason}
}

func (c *Config) normalize() error {
	switch c.Backend {
	case "etcd", "zk", "inmem", "postgres", "kube":
	default:
		return bad("Backend", fmt.Sprintf("%q", c.Backend), "must be etcd, zk, postgres, kube or inmem")
	}
	if c.Candidates == 0 {
		c.Candidates = DefaultCandidates
	}
	if c.Candidates < 2 || c.Candidates > 50 {
		return bad("Candidates", fmt.Sprint(c.Candidates), "must be between 2 and 50")
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.TTL < time.Second || c.TTL > time.Minute {
		return bad("TTL", c.TTL.String(), "must be between 1s and 1m")
	}
	if c.Duration == 0 {
		c.Duration = DefaultDuration
	}
	if c.Duration < 0 {
		return bad("Duration", c.Duration.String(), "must not be negative")
	}
	if c.Work == 0 {
		c.Work = DefaultWork
	}
	if c.Work < 0 || c.Work > time.Second {
		return bad("Work", c.Work.String(), "must be between 0 and 1s")
	}
	all := Kinds(c.Backend)
	if len(c.Faults) == 0 {
		c.Faults = all
	}
	for _, f := range c.Faults {
		if !slices.Contains(all, f) {
			return bad("Faults", fmt.Sprintf("%q", f), fmt.Sprintf("is not a fault of %s (%s)", c.Backend, strings.Join(all, ", ")))
		}
	}
	if c.Gap < 0 || c.Gap > time.Minute {
		return bad("Gap", c.Gap.String(), "must be between 0 and 1m")
	}
	if c.Rate < 0 || c.Rate > 600 {
		return bad("Rate", fmt.Sprint(c.Rate), "must be between 0 and 600 faults a minute")
	}
	if c.Rate > 0 && c.Backend == "inmem" {
		return bad("Rate", fmt.Sprint(c.Rate), "overlapping faults are for the store backends (etcd, zk)")
	}
	if c.Overlap == 0 {
		c.Overlap = DefaultOverlap
	}
	if c.Overlap < 1 || c.Overlap > 10 {
		return bad("Overlap", fmt.Sprint(c.Overlap), "must be between 1 and 10")
	}
	if math.IsNaN(c.Drift) || c.Drift < 0 || c.Drift > election.MaxDrift {
		return bad("Drift", fmt.Sprint(c.Drift), fmt.Sprintf("must be between 0 (the default, %g) and %g", election.DefaultDrift, election.MaxDrift))
	}
	if c.Drift == 0 {
		c.Drift = election.DefaultDrift
	}
	if c.Margin < 0 || c.Margin > c.TTL/4 {
		return bad("Margin", c.Margin.String(), "must be between 0 (the default) and TTL/4")
	}
	if math.IsNaN(c.Skew) || c.Skew < 0 || c.Skew > 1 {
		return bad("Skew", fmt.Sprint(c.Skew), "must be between 0 (drawn below Drift) and 1")
	}
	if c.Shards == 0 {
		c.Shards = DefaultShards
	}
	if c.Shards < -1 || c.Shards > MaxShards {
		return bad("Shards", fmt.Sprint(c.Shards), fmt.Sprintf("must be between -1 (none) and %d", MaxShards))
	}
	if c.Backend != "inmem" && c.Bin == "" {
		return bad("Bin", `""`, "the elect binary is required to run "+c.Backend+" candidates")
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	return nil
}

// run is the state of one run.
type run struct {
	cfg Config
	dir string
	reg *nemesis.Register
	rng *rand.Rand // the schedule: fault kinds, gaps, durations
	// pick chooses targets, whose number of draws depends on what the run
	// found (a reported leader or none, how many waiters): kept apart so
	// that the schedule is the same for a seed however the run goes.
	pick *rand.Rand
	log  io.Writer

	st store
	// smu guards the candidates and the store faults' state: faults run
	// at once under Config.Rate.
	smu       sync.Mutex
	procs     []*proc // live candidates, in start order
	storeCut  map[int]bool
	nextID    int
	prio      int64               // the highest priority given so far
	prios     *rand.Rand          // the spawned candidates' priorities, kept apart from the schedule
	busy      map[*proc]bool      // candidates a running fault holds
	freed     map[*proc]time.Time // when a fault last let a candidate go
	storeBusy bool                // a fault holds the store's members
	storeFree time.Time           // when a fault last let them go
	trimMu    sync.Mutex          // serializes trim

	mu     sync.Mutex
	faults []nemesis.Fault
	killed map[string]int64

	shards *shardCheck // the shard-heavy candidates' side elections; nil when none run
}

func (r *run) logf(format string, args ...any) {
	fmt.Fprintf(r.log, "%s  %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

func (r *run) fault(f nemesis.Fault) {
	r.mu.Lock()
	r.faults = append(r.faults, f)
	r.mu.Unlock()
}

// Run runs one seeded mix of faults against cfg.Backend for cfg.Duration,
// then a quiet period, and returns the history and Check's report. The
// error is for a run that could not be carried out (a store that did not
// start, ctx canceled); a violation is in the report, not the error.
// Every process and server the run started is stopped before Run returns.
func Run(ctx context.Context, cfg Config) (*nemesis.History, nemesis.Report, error) {
	if err := cfg.normalize(); err != nil {
		return nil, nemesis.Report{}, err
	}
	dir := cfg.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "nemesis-")
		if err != nil {
			return nil, nemesis.Report{}, err
		}
		defer os.RemoveAll(d)
		dir = d
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nemesis.Report{}, err
	}
	reg, err := nemesis.NewRegister(!cfg.Unfenced)
	if err != nil {
		return nil, nemesis.Report{}, err
	}
	defer reg.Close()
	r := &run{cfg: cfg, dir: dir, reg: reg, rng: rand.New(rand.NewSource(cfg.Seed)),
		pick: rand.New(rand.NewSource(^cfg.Seed)), log: cfg.Log,
		storeCut: map[int]bool{}, killed: map[string]int64{}, busy: map[*proc]bool{}, freed: map[*proc]time.Time{},
		prios: rand.New(rand.NewSource(cfg.Seed ^ 0x5eed))}
	if slices.Contains(cfg.Faults, Preempt) {
		r.prio = 1 // priorities 0 and 1 from the start; without preempt faults, all 0
	}
	hist := &nemesis.History{Backend: cfg.Backend, Seed: cfg.Seed, Fenced: !cfg.Unfenced}
	r.logf("nemesis: backend %s, seed %d, %v, %d candidates, TTL %v, fenced %v, faults %s",
		cfg.Backend, cfg.Seed, cfg.Duration, cfg.Candidates, cfg.TTL, !cfg.Unfenced, strings.Join(cfg.Faults, ","))
	if cfg.Backend == "inmem" {
		err = r.runInmem(ctx, hist)
	} else {
		err = r.runStore(ctx, hist)
	}
	hist.End = mono.Now()
	r.mu.Lock()
	hist.Faults = append([]nemesis.Fault(nil), r.faults...)
	hist.Killed = r.killed
	r.mu.Unlock()
	hist.Writes = reg.Writes()
	hist.Events = reg.Events()
	r.logf("history: %d writes, %d events, %d faults", len(hist.Writes), len(hist.Events), len(hist.Faults))
	if err != nil {
		return hist, nemesis.Report{}, err
	}
	rep := nemesis.Check(hist, nemesis.CheckOptions{FailoverBound: FailoverBound(cfg.TTL), OperatorGrace: OperatorGrace})
	if r.shards != nil {
		rep.Verdicts = append(rep.Verdicts, r.shards.verdict())
	}
	if !rep.OK() && cfg.VisPath != "" {
		// The visualization is for failing runs: check again, drawing it.
		for i, v := range rep.Verdicts {
			if v.Name == nemesis.NameLinearizable {
				rep.Verdicts[i] = nemesis.CheckLinearizable(hist, cfg.VisPath)
			}
		}
	}
	return hist, rep, nil
}

// runStore runs the etcd or ZooKeeper variant.
func (r *run) runStore(ctx context.Context, hist *nemesis.History) (err error) {
	switch r.cfg.Backend {
	case "etcd":
		s, err := startEtcd(filepath.Join(r.dir, "etcd"), slices.Contains(r.cfg.Faults, Operator))
		if err != nil {
			return err
		}
		r.st = s
	case "zk":
		s, err := startZK(filepath.Join(r.dir, "zk"))
		if err != nil {
			return err
		}
		r.st = s
	case "postgres":
		s, err := startPG()
		if err != nil {
			return err
		}
		r.st = s
	case "kube":
		s, err := startKube(filepath.Join(r.dir, "kube"))
		if err != nil {
			return err
		}
		r.st = s
	}
	defer r.st.close()
	if r.cfg.Shards > 0 {
		r.shards = &shardCheck{}
	}
	defer func() {
		// Every candidate goes, however the run ends.
		for _, p := range r.procs {
			p.stop(5 * time.Second)
		}
	}()
	r.logf("store: %s up at %s", r.cfg.Backend, strings.Join(r.st.addrs(), ","))
	hist.Start = mono.Now()
	for range r.cfg.Candidates {
		if _, err := r.spawn(); err != nil {
			return err
		}
	}
	if _, err := r.awaitLeader(ctx, "", 60*time.Second); err != nil {
		return fmt.Errorf("no first leader: %w", err)
	}
	if err := r.mix(ctx); err != nil {
		return err
	}
	r.quiet(ctx)
	if r.shards != nil {
		r.checkShards(ctx)
	}
	// Graceful stop: each resigns and sends what it has left to report.
	for _, p := range r.procs {
		err := p.stop(max(15*time.Second, CloseBound(r.cfg.TTL)+5*time.Second))
		if r.shards != nil && r.sharded(p.id) {
			r.shards.stopped(p.id, err)
		}
	}
	r.procs = nil
	return ctx.Err()
}

// spawn starts a fresh candidate with a new ID, of a priority drawn from
// the seed between 0 and the highest so far (at first 1 when the mix has
// preempt faults, else 0): a candidate above the leader's takes over
// after the preemption hold-off.
func (r *run) spawn() (*proc, error) {
	r.smu.Lock()
	prio := r.prios.Int63n(r.prio + 1)
	r.smu.Unlock()
	return r.spawnWith(prio)
}

// spawnWith starts a fresh candidate of the given priority.
func (r *run) spawnWith(priority int64) (*proc, error) {
	r.smu.Lock()
	defer r.smu.Unlock()
	r.nextID++
	id := fmt.Sprintf("c%d", r.nextID)
	p, err := r.startProc(id, priority) // reads storeCut: under smu
	if err != nil {
		return nil, err
	}
	r.procs = append(r.procs, p)
	return p, nil
}

// replaceExited replaces each candidate process that exited on its own (no
// fault ends a candidate: that is a finding, in its log) by a fresh one.
func (r *run) replaceExited() {
	r.smu.Lock()
	procs := slices.Clone(r.procs)
	r.smu.Unlock()
	for _, p := range procs {
		r.smu.Lock()
		held := r.busy[p]
		r.smu.Unlock()
		if held {
			continue // its fault deals with it
		}
		select {
		case <-p.exited:
		default:
			continue
		}
		r.logf("candidate %s (pid %d) exited on its own (%v): see %s", p.id, p.pid(), p.cmd.ProcessState,
			filepath.Join(r.dir, "candidate-"+p.id+".log"))
		if r.shards != nil && r.sharded(p.id) {
			r.shards.stopped(p.id, fmt.Errorf("exited on its own (%v)", p.cmd.ProcessState))
		}
		p.closeProxies()
		r.drop(p)
		if q, err := r.spawn(); err == nil {
			r.logf("%s replaces %s", q.id, p.id)
		}
	}
}

// trim stops candidates beyond Config.Candidates — a preempt fault adds
// one and stops another only if one is free of other faults — the oldest
// first of those that do not lead and no fault holds, gracefully.
func (r *run) trim() {
	r.trimMu.Lock() // one at a time: two would stop one candidate each for one too many
	defer r.trimMu.Unlock()
	for {
		r.smu.Lock()
		n := len(r.procs)
		r.smu.Unlock()
		if n <= r.cfg.Candidates {
			return
		}
		leader := ""
		if ev, ok := r.reg.Leader(); ok {
			leader = ev.Candidate
		}
		ws := r.live(leader)
		if len(ws) == 0 || !r.take(ws[0]) {
			return
		}
		p := ws[0]
		p.stop(2 * r.cfg.TTL)
		r.drop(p)
		r.logf("trim: %s stopped (%d candidates, %d wanted)", p.id, n, r.cfg.Candidates)
	}
}

func (r *run) procByIDLocked(id string) *proc {
	for _, p := range r.procs {
		if p.id == id {
			return p
		}
	}
	return nil
}

// awaitLeader waits until the register names a leader other than not, for
// at most timeout, and returns its Elected event.
func (r *run) awaitLeader(ctx context.Context, not string, timeout time.Duration) (nemesis.Event, error) {
	ch, cancel := r.reg.Subscribe()
	defer cancel()
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		if ev, ok := r.reg.Leader(); ok && ev.Candidate != not && !r.wasKilled(ev.Candidate) {
			return ev, nil
		}
		select {
		case <-ch:
		case <-t.C:
			return nemesis.Event{}, fmt.Errorf("no leader within %v", timeout)
		case <-ctx.Done():
			return nemesis.Event{}, ctx.Err()
		}
	}
}

func (r *run) wasKilled(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.killed[id]
	return ok
}

// sleep waits d or until ctx ends: the length of a fault or a gap, chosen
// by the seed; not a synchronization.
func sleep(ctx context.Context, d time.Duration) error {
	if !clock.Sleep(ctx, d) {
		return ctx.Err()
	}
	return nil
}

// between returns a duration in [lo, hi) from the seed.
func (r *run) between(lo, hi time.Duration) time.Duration { return betweenWith(r.rng, lo, hi) }

func betweenWith(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(rng.Int63n(int64(hi-lo)))
}

// draws are one fault's generators under Config.Rate: sched for its
// durations and choices, pick for its targets.
type draws struct{ sched, pick *rand.Rand }

type drawsKey struct{}

// rngOf returns the generator of the fault running under ctx: its own
// under Config.Rate, else the run's schedule.
func (r *run) rngOf(ctx context.Context) *rand.Rand {
	if d, ok := ctx.Value(drawsKey{}).(*draws); ok {
		return d.sched
	}
	return r.rng
}

// pickOf returns the target generator of the fault running under ctx.
func (r *run) pickOf(ctx context.Context) *rand.Rand {
	if d, ok := ctx.Value(drawsKey{}).(*draws); ok {
		return d.pick
	}
	return r.pick
}

// betweenIn draws a duration for the fault running under ctx.
func (r *run) betweenIn(ctx context.Context, lo, hi time.Duration) time.Duration {
	return betweenWith(r.rngOf(ctx), lo, hi)
}

// errBusy: the fault found no target free of the other running faults.
var errBusy = errors.New("every possible target is held by another fault")

// mix injects faults for cfg.Duration: each cycle goes through every kind
// once, in an order the seed shuffles, with a quiet gap before each fault
// (see Config.Gap).
func (r *run) mix(ctx context.Context) error { return r.mixWith(ctx, r.inject) }

func (r *run) mixWith(ctx context.Context, inject func(ctx context.Context, kind string) error) error {
	if r.cfg.Rate > 0 {
		return r.mixOverlapping(ctx, inject)
	}
	end := time.Now().Add(r.cfg.Duration)
	var order []string
	for time.Now().Before(end) {
		gap := r.between(r.cfg.TTL/2, r.cfg.TTL+time.Second)
		if r.cfg.Gap > 0 {
			gap = r.between(0, r.cfg.Gap)
		}
		if err := sleep(ctx, gap); err != nil {
			return err
		}
		if !time.Now().Before(end) {
			break
		}
		if len(order) == 0 {
			order = slices.Clone(r.cfg.Faults)
			r.rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		kind := order[0]
		order = order[1:]
		r.replaceExited()
		r.trim()
		if err := inject(ctx, kind); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r.logf("%s: not injected: %v", kind, err)
		}
	}
	return nil
}

// mixOverlapping is mix under Config.Rate: a fault starts every gap
// (drawn from [½, 1½) × 60/Rate s) while at most Overlap run.
func (r *run) mixOverlapping(ctx context.Context, inject func(ctx context.Context, kind string) error) error {
	end := time.Now().Add(r.cfg.Duration)
	interval := time.Duration(float64(time.Minute) / r.cfg.Rate)
	slots := make(chan struct{}, r.cfg.Overlap)
	var wg sync.WaitGroup
	defer wg.Wait()
	var order []string
	for time.Now().Before(end) {
		if err := sleep(ctx, r.between(interval/2, interval*3/2)); err != nil {
			return err
		}
		if len(order) == 0 {
			order = slices.Clone(r.cfg.Faults)
			r.rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		kind := order[0]
		order = order[1:]
		d := &draws{sched: rand.New(rand.NewSource(r.rng.Int63())), pick: rand.New(rand.NewSource(r.rng.Int63()))}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		if !time.Now().Before(end) {
			<-slots
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			r.replaceExited()
			r.trim()
			if err := inject(context.WithValue(ctx, drawsKey{}, d), kind); err != nil && ctx.Err() == nil {
				r.logf("%s: not injected: %v", kind, err)
			}
		}()
	}
	return ctx.Err()
}

// target holds and returns the current leader's process, or, when no
// leader is reported, its process is not one of ours or another fault
// holds it, a random candidate no fault holds. The caller releases it.
// With preferLeader false, the share aimed at the leader is the seed's
// (Config.Rate: a third), the rest at random.
func (r *run) target(ctx context.Context, preferLeader bool) (*proc, error) {
	r.smu.Lock()
	defer r.smu.Unlock()
	if preferLeader {
		if ev, ok := r.reg.Leader(); ok {
			if p := r.procByIDLocked(ev.Candidate); p != nil && !r.busy[p] {
				r.busy[p] = true
				return p, nil
			}
		}
	}
	var free []*proc
	for _, p := range r.procs {
		if !r.busy[p] {
			free = append(free, p)
		}
	}
	if len(free) == 0 {
		return nil, errBusy
	}
	p := free[r.pickOf(ctx).Intn(len(free))]
	r.busy[p] = true
	return p, nil
}

// release lets other faults take p again.
func (r *run) release(p *proc) {
	r.smu.Lock()
	delete(r.busy, p)
	r.freed[p] = time.Now()
	r.smu.Unlock()
}

// hold holds the process of the candidate id for one fault: errBusy if
// another fault holds it, or let it go less than settle ago; nil, nil if
// it is not one of ours.
func (r *run) hold(id string, settle time.Duration) (*proc, error) {
	r.smu.Lock()
	p := r.procByIDLocked(id)
	r.smu.Unlock()
	switch {
	case p == nil:
		return nil, nil
	case !r.takeSettled(p, settle):
		return nil, errBusy
	}
	return p, nil
}

// take holds p for one fault, and reports false if another fault holds it.
func (r *run) take(p *proc) bool { return r.takeSettled(p, 0) }

// takeSettled is take that also refuses a p a fault let go less than
// settle ago.
func (r *run) takeSettled(p *proc, settle time.Duration) bool {
	r.smu.Lock()
	defer r.smu.Unlock()
	if r.busy[p] || time.Since(r.freed[p]) < settle {
		return false
	}
	r.busy[p] = true
	return true
}

// unsettled is how long until the store's members and the candidate id
// have been free of faults for settle.
func (r *run) unsettled(id string, settle time.Duration) time.Duration {
	r.smu.Lock()
	defer r.smu.Unlock()
	last := r.storeFree
	if p := r.procByIDLocked(id); p != nil && r.freed[p].After(last) {
		last = r.freed[p]
	}
	return max(0, settle-time.Since(last))
}

// holdStore takes the store's members for one fault, or reports errBusy
// if another fault holds them or let them go less than settle ago.
func (r *run) holdStore(settle time.Duration) error {
	r.smu.Lock()
	defer r.smu.Unlock()
	if r.storeBusy || time.Since(r.storeFree) < settle {
		return errBusy
	}
	r.storeBusy = true
	return nil
}

// releaseStoreSettled lets other faults take the store's members again,
// as settled as before it was held.
func (r *run) releaseStoreSettled() {
	r.smu.Lock()
	r.storeBusy = false
	r.smu.Unlock()
}

// releaseSettled lets other faults take p again, as settled as before.
func (r *run) releaseSettled(p *proc) {
	r.smu.Lock()
	delete(r.busy, p)
	r.smu.Unlock()
}

func (r *run) releaseStore() {
	r.smu.Lock()
	r.storeBusy = false
	r.storeFree = time.Now()
	r.smu.Unlock()
}

// live returns the candidates no fault holds, but for the one whose ID is
// not.
func (r *run) live(not string) []*proc {
	r.smu.Lock()
	defer r.smu.Unlock()
	var ws []*proc
	for _, p := range r.procs {
		if p.id != not && !r.busy[p] {
			ws = append(ws, p)
		}
	}
	return ws
}

// drop removes p from the live candidates.
func (r *run) drop(p *proc) {
	r.smu.Lock()
	r.procs = slices.DeleteFunc(r.procs, func(q *proc) bool { return q == p })
	delete(r.busy, p)
	delete(r.freed, p)
	r.smu.Unlock()
}

func (r *run) inject(ctx context.Context, kind string) error {
	switch kind {
	case Kill:
		return r.kill(ctx)
	case Pause:
		return r.pause(ctx)
	case Cut:
		return r.cut(ctx)
	case StoreKill:
		return r.storeKill(ctx)
	case StoreCut:
		return r.storeCutFault(ctx)
	case Expire:
		return r.expire(ctx)
	case Garbage:
		return r.garbage(ctx)
	case Operator:
		return r.operator(ctx)
	case Preempt:
		return r.preempt(ctx)
	case Transfer:
		return r.transfer(ctx)
	case ClockFast, ClockSlow:
		return r.clockFault(ctx, kind)
	case StorePartition, StoreMinority:
		return r.storePartition(ctx, kind)
	}
	return fmt.Errorf("unknown fault %q", kind)
}

// kill: SIGKILL the leader, and start a fresh candidate in its place.
func (r *run) kill(ctx context.Context) error {
	p, err := r.target(ctx, r.leaderShare(ctx))
	if err != nil {
		return err
	}
	defer r.release(p)
	pid := p.pid()
	start := mono.Now()
	if err := p.signal(syscall.SIGKILL); err != nil {
		return err
	}
	r.mu.Lock()
	r.killed[p.id] = start
	r.mu.Unlock()
	<-p.exited
	p.closeProxies()
	r.drop(p)
	r.fault(nemesis.Fault{Kind: Kill, Target: p.id, PID: pid, Start: start})
	q, err := r.spawn()
	if err != nil {
		return err
	}
	r.logf("kill: SIGKILL %s (pid %d); %s replaces it", p.id, pid, q.id)
	return nil
}

// pause: SIGSTOP the leader for longer than the TTL — until another
// candidate leads, within a bound — then SIGCONT.
func (r *run) pause(ctx context.Context) error {
	p, err := r.target(ctx, r.leaderShare(ctx))
	if err != nil {
		return err
	}
	defer r.release(p)
	pid := p.pid()
	start := mono.Now()
	if err := p.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	minHold := r.cfg.TTL + r.betweenIn(ctx, 500*time.Millisecond, r.cfg.TTL)
	_ = sleep(ctx, minHold)
	next, err := r.awaitLeader(ctx, p.id, FailoverBound(r.cfg.TTL))
	if err == nil {
		// Let the next leader write for a moment before p resumes.
		_ = r.awaitWrites(ctx, next.Candidate, 3, r.cfg.TTL)
	}
	_ = p.signal(syscall.SIGCONT)
	r.fault(nemesis.Fault{Kind: Pause, Target: p.id, PID: pid, Start: start, End: mono.Now()})
	r.logf("pause: SIGSTOP %s (pid %d) for %v; next leader %q", p.id, pid, time.Duration(mono.Now()-start).Round(time.Millisecond), next.Candidate)
	return ctx.Err()
}

// awaitWrites waits until client has n more accepted writes, for at most
// timeout.
func (r *run) awaitWrites(ctx context.Context, client string, n int, timeout time.Duration) error {
	count := func() int {
		c := 0
		for _, w := range r.reg.Writes() {
			if w.Client == client && w.OK {
				c++
			}
		}
		return c
	}
	want := count() + n
	deadline := time.Now().Add(timeout)
	for count() < want {
		if time.Now().After(deadline) {
			return errors.New("timeout")
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil { // polling the register's log
			return err
		}
	}
	return nil
}

// cut: blackhole a candidate's proxies (the leader's, two times in three)
// for longer than the TTL, then heal.
func (r *run) cut(ctx context.Context) error {
	p, err := r.target(ctx, r.rngOf(ctx).Intn(3) < 2)
	if err != nil {
		return err
	}
	defer r.release(p)
	start := mono.Now()
	p.cut()
	d := r.cfg.TTL + r.betweenIn(ctx, 500*time.Millisecond, r.cfg.TTL+500*time.Millisecond)
	_ = sleep(ctx, d)
	p.heal()
	r.fault(nemesis.Fault{Kind: Cut, Target: p.id, PID: p.pid(), Start: start, End: mono.Now()})
	r.logf("cut: %s off the store for %v", p.id, d.Round(time.Millisecond))
	return ctx.Err()
}

// storeKill: stop the store's leader member/server, and restart it.
func (r *run) storeKill(ctx context.Context) error {
	if err := r.holdStore(0); err != nil {
		return err
	}
	defer r.releaseStore()
	i := r.st.leader()
	if i < 0 || !r.leaderShare(ctx) {
		i = r.pickOf(ctx).Intn(len(r.st.addrs()))
	}
	name := r.st.memberName(i)
	start := mono.Now()
	if err := r.st.stopMember(i); err != nil {
		return err
	}
	d := r.betweenIn(ctx, r.cfg.TTL/2, 2*r.cfg.TTL)
	_ = sleep(ctx, d)
	var err error
	for range 3 { // a port taken meanwhile, a slow start: try again
		if err = r.st.startMember(i); err == nil {
			break
		}
		r.logf("store-kill: restarting %s: %v", name, err)
	}
	r.fault(nemesis.Fault{Kind: StoreKill, Target: name, Start: start, End: mono.Now()})
	r.logf("store-kill: %s down for %v, restarted (err %v)", name, d.Round(time.Millisecond), err)
	return err
}

// storeCutFault: cut every candidate off from the store's leader
// member/server; heal.
func (r *run) storeCutFault(ctx context.Context) error {
	if err := r.holdStore(0); err != nil {
		return err
	}
	defer r.releaseStore()
	i := r.st.leader()
	if i < 0 || !r.leaderShare(ctx) {
		i = r.pickOf(ctx).Intn(len(r.st.addrs()))
	}
	name := r.st.memberName(i)
	start := mono.Now()
	d := r.betweenIn(ctx, r.cfg.TTL, 2*r.cfg.TTL+time.Second)
	r.smu.Lock()
	r.storeCut[i] = true
	for _, p := range r.procs {
		p.proxies[i].Cut()
	}
	r.smu.Unlock()
	_ = sleep(ctx, d)
	r.smu.Lock()
	delete(r.storeCut, i)
	for _, p := range r.procs {
		p.proxies[i].Reset()
		p.proxies[i].Heal()
	}
	r.smu.Unlock()
	r.fault(nemesis.Fault{Kind: StoreCut, Target: name, Start: start, End: mono.Now()})
	r.logf("store-cut: candidates off %s for %v", name, d.Round(time.Millisecond))
	return ctx.Err()
}

// expire ends a waiting candidate's session.
func (r *run) expire(ctx context.Context) error {
	leader := ""
	if ev, ok := r.reg.Leader(); ok {
		leader = ev.Candidate
	}
	start := mono.Now()
	octx, cancel := context.WithTimeout(ctx, 5*time.Second)
	id, ok, err := r.st.expire(octx, r.pickOf(ctx), leader)
	cancel()
	if ok {
		if err != nil {
			return err
		}
		r.fault(nemesis.Fault{Kind: Expire, Target: id, Start: start, End: mono.Now()})
		r.logf("expire: revoked the lease of %s", id)
		return nil
	}
	ws := r.live(leader)
	if len(ws) == 0 {
		return errors.New("no waiting candidate free of other faults")
	}
	p := ws[r.pickOf(ctx).Intn(len(ws))]
	if !r.take(p) {
		return errBusy
	}
	defer r.release(p)
	p.cut()
	// Past the session timeout (= TTL) and one server tick.
	d := r.cfg.TTL + 1500*time.Millisecond
	_ = sleep(ctx, d)
	p.heal()
	r.fault(nemesis.Fault{Kind: Expire, Target: p.id, PID: p.pid(), Start: start, End: mono.Now()})
	r.logf("expire: %s cut off for %v, past its session timeout", p.id, d)
	return ctx.Err()
}

// garbage writes stray entries under the election prefix, leaves them for
// a while, and removes them.
func (r *run) garbage(ctx context.Context) error {
	d := r.betweenIn(ctx, r.cfg.TTL/2, 2*r.cfg.TTL) // drawn whatever happens next
	start := mono.Now()
	gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	remove, err := r.st.garbage(gctx, r.pickOf(ctx))
	cancel()
	if remove == nil {
		return err
	}
	_ = sleep(ctx, d)
	rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	rerr := remove(rctx)
	cancel()
	r.fault(nemesis.Fault{Kind: Garbage, Target: r.st.election(), Start: start, End: mono.Now()})
	r.logf("garbage: stray entries under %s for %v (errors: %v)", r.st.election(), d.Round(time.Millisecond), errors.Join(err, rerr))
	return nil
}

// quiet waits after the last fault until a leader is elected and has
// written, within twice the failover bound: the period P6 is checked on.
func (r *run) quiet(ctx context.Context) {
	bound := FailoverBound(r.cfg.TTL)
	ev, err := r.awaitLeader(ctx, "", 2*bound)
	if err != nil {
		r.logf("quiet: %v", err)
		return
	}
	_ = r.awaitWrites(ctx, ev.Candidate, 5, bound)
	r.logf("quiet: %s leads (token %d)", ev.Candidate, ev.Token)
}

// BuildElect builds the elect command into dir and returns the binary's
// path: what Config.Bin needs when no binary is at hand.
func BuildElect(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "elect")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/electkit/election/cmd/elect")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build elect: %v\n%s", err, out)
	}
	return bin, nil
}

// leaderShare says whether a fault that can aim at the leader does: one
// at a time, always (the leader is where a fault finds the most); under
// Config.Rate, one time in three, the rest at random targets.
func (r *run) leaderShare(ctx context.Context) bool {
	if _, ok := ctx.Value(drawsKey{}).(*draws); !ok {
		return true
	}
	return r.rngOf(ctx).Intn(3) == 0
}
