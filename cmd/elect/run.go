//go:build unix

package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/internal/mono"
)

// Exit codes of elect run, besides the command's own status.
const (
	exitTimedOut    = 124 // --timeout passed before this candidate led
	exitRunFailed   = 125 // elect itself failed
	exitCannotRun   = 126 // the command was found but cannot be run
	exitNotFound    = 127 // the command was not found
	killMargin      = 100 * time.Millisecond
	groupGoneWithin = 500 * time.Millisecond
)

// maxGrace is the longest --grace a TTL allows: the SIGTERM of a lease
// about to lapse (deadline − grace − killMargin) must come after the next
// renewal is due (a third of the window after the last), with a sixth of
// the window to spare for the renewal's round trip.
func maxGrace(ttl time.Duration) time.Duration {
	o := election.Options{TTL: ttl, Drift: election.DefaultDrift, Margin: election.DefaultMargin}
	return (o.Window()/2 - killMargin).Truncate(time.Millisecond)
}

func runCommandDef() *command {
	return &command{
		name:     "run",
		summary:  "keep one copy of a command running: run it only while leading",
		synopsis: "--name NAME [flags] -- CMD [ARGS…]",
		about: `Campaigns in the election; while this candidate leads, runs CMD with
ELECTION_TOKEN (the leadership's fencing token), ELECTION_ID and
ELECTION_VALUE (the leader's ID and value) in its environment. elect's own
ELECTION_* settings and the password are not passed on.

CMD runs in a process group of its own, under a small guard process
(elect itself). When the leadership ends — the lease deadline comes
without a renewal, elect gets SIGINT, SIGTERM or SIGHUP, the leadership is
transferred (elect transfer) or preempted (--preempt), the session is
lost — the group gets SIGTERM, then SIGKILL after --grace, and always
before the lease can lapse (P3 holds for the command too):

  SIGKILL no later than Term.Deadline − 100ms, where Term.Deadline =
  last renewal's send time + TTL/(1+1%) − 100ms. When renewals stop
  succeeding, SIGTERM comes at Deadline − grace − 100ms. When elect ends the
  leadership itself (a signal), SIGTERM is at once and SIGKILL grace later,
  or at Deadline − 100ms if that is sooner; elect resigns only once CMD is
  gone, so the next leader starts after it. When the Term ends in a way
  elect did not ask for (a transfer, a preemption, the session lost), the
  same: SIGTERM at once, SIGKILL grace later or at Deadline − 100ms if
  that is sooner. The next leader may lead meanwhile (a transfer's target
  leads at once): from the Term's end CMD's ELECTION_TOKEN is stale, and
  what it writes to must refuse it. To have CMD gone before another
  replica leads, send the leader's elect SIGTERM rather than elect
  transfer.

The guard keeps the deadline too, on the machine's monotonic clock, so
the schedule holds while elect is stopped (SIGSTOP, Ctrl-Z: CMD is not in
the terminal's foreground group) or killed (SIGKILL: the guard sees its
pipe close and stops CMD, SIGKILL by the deadline). If the guard dies, the
kernel kills CMD (Linux parent-death signal) and elect kills the group.
Processes that leave the group (setsid) are not followed.

When CMD exits on its own, elect kills what it left in its group, resigns
at once so that another replica takes over, and exits with CMD's status.
After a leadership lost any other way, elect campaigns again.

--grace is at most TTL/(1+1%)/2 − 150ms (840ms for a 2s TTL, 4.8s for 10s),
so that the SIGTERM of a stalled renewal never comes before a healthy
renewal could have moved the deadline; default TTL/5.

While it waits to lead, elect says so every --progress (default 1m), and
at once whenever the leader changes. With --timeout D it gives up if it
has not led within D of its start. With --listen ADDR it serves, while it
runs, /metrics (Prometheus: leading, token, renewals and their deadline
slack, leader changes — see the metrics package), /healthz (503 when it
believes it leads but its lease deadline is near or past without a
renewal: restart it), /readyz (200 only while leading), /readyz/any (200
while it follows the election) and /leader (the leader as JSON).

Exit codes: CMD's status when it exits on its own while leading (128+N if
a signal N killed it); 0 when elect was stopped by SIGINT, SIGTERM or
SIGHUP (CMD stopped, leadership resigned); 2 bad command line; 124 not
leading within --timeout; 125 elect failed (e.g. the store cannot be
reached at start, --listen's address is taken); 126 CMD cannot be
executed; 127 CMD not found.`,
		example: `ELECTION_PASSWORD=… elect run --name /services/scheduler --user sched \
  --endpoints https://10.0.0.1:2379 --cacert ca.pem --ttl 5s --value "$(hostname):8080" \
  -- ./scheduler --fencing-token-env ELECTION_TOKEN
elect run --backend inmem --name /try -- sh -c 'echo "leading with token $ELECTION_TOKEN"'`,
		setup: func(f *flagSet) func(context.Context, io.Writer) error {
			f.takesArgs = true
			ef := defineElectionFlags(f, true, false)
			var grace time.Duration
			var listen string
			var progress, timeout time.Duration
			f.Duration(&grace, "grace", "D", 0, "time CMD gets between SIGTERM and SIGKILL whenever the leadership ends, at most TTL/(1+1%)/2 − 150ms (default TTL/5)")
			f.String(&listen, "listen", "ADDR", "", "serve /metrics, /healthz, /readyz, /readyz/any and /leader over HTTP on ADDR (HOST:PORT) while running")
			f.Duration(&progress, "progress", "D", time.Minute, "while waiting to lead, say so every D (0: never); leader changes are said at once")
			f.Duration(&timeout, "timeout", "D", 0, "give up (exit 124) if this candidate has not led within D of the start (0: wait for ever)")
			return func(ctx context.Context, w io.Writer) error {
				p, err := planRun(f, ef, grace)
				if err != nil {
					return err
				}
				if listen != "" {
					if err := checkListen(f, listen); err != nil {
						return err
					}
				}
				if progress < 0 {
					return f.Bad("progress", "must not be negative")
				}
				if timeout < 0 {
					return f.Bad("timeout", "must not be negative")
				}
				p.listen, p.progress, p.timeout = listen, progress, timeout
				err = p.run(ctx, w)
				var ue *usageError
				var ee *exitError
				if err != nil && !errors.As(err, &ue) && !errors.As(err, &ee) {
					err = &exitError{code: exitRunFailed, err: err}
				}
				return err
			}
		},
	}
}

// runPlan is a checked elect run command line.
type runPlan struct {
	f     *flagSet
	ef    *electionFlags
	opts  []election.Option
	ttl   time.Duration
	grace time.Duration
	path  string   // CMD, looked up
	argv  []string // CMD and its arguments
	self  string   // this executable, for the guard

	listen   string        // --listen: serve the operations endpoints here, or ""
	progress time.Duration // --progress: how often to say it still waits
	timeout  time.Duration // --timeout: give up if not leading by then, or 0
}

func planRun(f *flagSet, ef *electionFlags, grace time.Duration) (*runPlan, error) {
	opts, err := ef.check(f, true)
	if err != nil {
		return nil, err
	}
	p := &runPlan{f: f, ef: ef, opts: opts, ttl: ef.ttl, argv: f.Args()}
	if len(p.argv) == 0 {
		return nil, usagef("no command given: elect run [flags] -- CMD [ARGS…]")
	}
	if ef.backend == "inmem" {
		ttl, err := inmemTTL(ef.ttl)
		if err != nil {
			return nil, err
		}
		p.ttl = ttl
	}
	switch limit := maxGrace(p.ttl); {
	case !f.Given("grace"):
		p.grace = min(p.ttl/5, limit)
	case grace < 0:
		return nil, f.Bad("grace", "must not be negative")
	case grace > limit:
		return nil, f.Bad("grace", "must be at most %v with a lease TTL of %v, so that CMD is dead before the lease can lapse", limit, p.ttl)
	default:
		p.grace = grace
	}
	p.path, err = exec.LookPath(p.argv[0])
	if err != nil {
		code := exitNotFound
		if errors.Is(err, os.ErrPermission) {
			code = exitCannotRun
		}
		return nil, &exitError{code: code, err: fmt.Errorf("command %q: %w", p.argv[0], unwrapPath(err))}
	}
	if p.self, err = os.Executable(); err != nil {
		return nil, fmt.Errorf("finding elect's own executable for the guard: %w", err)
	}
	return p, nil
}

// inmemTTL is the TTL of the in-process cluster for --ttl.
func inmemTTL(ttl time.Duration) (time.Duration, error) {
	b, err := openInmem(context.Background(), demoConfig{Algorithm: "ring", TTL: ttl})
	if err != nil {
		return 0, err
	}
	d := b.(*inmemDemo)
	defer d.Close()
	return d.c.Timing().LeaseTTL, nil
}

var errGuardTooLate = errors.New(errTooLate)

// runner is one elect run: the campaign loop of election.Run, and the
// command while leading.
type runner struct {
	p      *runPlan
	e      election.Elector
	stdout io.Writer
	stderr io.Writer
	sigs   context.Context // done on SIGINT, SIGTERM, SIGHUP
	cancel context.CancelFunc
	sink   deadlineSink

	mu        sync.Mutex
	inTerm    bool
	signaled  bool
	result    error           // how elect ends: set when CMD exited on its own or failed to start
	id        string          // this candidate's ID
	waitSince time.Time       // when the current wait to lead began
	led       bool            // a Term began (--timeout no longer applies)
	leader    election.Leader // the latest leader Observe reported
	observed  bool            // leader is set
	ending    bool            // finish was called: elect no longer waits to lead
}

func (p *runPlan) run(ctx context.Context, stdout io.Writer) error {
	sigs, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	r := &runner{p: p, stdout: lockWriter(stdout), stderr: lockWriter(p.f.stderr), sigs: sigs}
	opts := append(slices.Clone(p.opts),
		election.WithLogger(warnLogger(r.stderr)),
		election.WithAfterRenew(r.sink.renewed))
	if p.ef.backend != "inmem" {
		opts = append(opts, election.WithTTL(p.ttl))
	}
	// The candidate's ID, default included, so that progress lines can
	// tell this candidate's leadership from another's.
	if o, err := election.NewOptions(opts...); err == nil {
		r.id = o.ID
		opts = append(opts, election.WithID(o.ID))
	}
	var ops *opsServer
	if p.listen != "" {
		var err error
		if ops, err = listenOps(p.listen, strings.TrimSpace(p.ef.name)); err != nil {
			return err
		}
		defer func() {
			if err := ops.close(); err != nil {
				r.logf("stopping the HTTP server on %s: %v", ops.Addr(), err)
			}
		}()
		r.logf("serving /metrics, /healthz, /readyz, /readyz/any and /leader on http://%s", ops.Addr())
		opts = append(opts, election.WithEvents(ops.m.Events()))
	}
	e, closeAll, err := p.ef.open(sigs, p.f, opts)
	if err != nil {
		if sigs.Err() != nil {
			return nil
		}
		return err
	}
	r.e = e
	cb := election.Callbacks{
		OnElected: r.lead,
		OnError:   func(err error) { r.logf("campaign failed, retrying: %v", err) },
		OnLeader:  r.leaderChanged,
	}
	if ops != nil {
		if err := ops.attach(e); err != nil {
			_ = closeAll()
			return err
		}
		cb = ops.callbacks(cb)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		select {
		case <-sigs.Done():
		case <-runCtx.Done():
			return
		}
		r.mu.Lock()
		r.signaled = true
		if !r.inTerm {
			cancel()
		}
		r.mu.Unlock()
	}()
	r.mu.Lock()
	r.waitSince = time.Now()
	r.mu.Unlock()
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		r.sayProgress(runCtx)
	}()
	if p.timeout > 0 {
		tm := time.AfterFunc(p.timeout, func() {
			r.mu.Lock()
			led := r.led
			r.mu.Unlock()
			if !led {
				r.logf("did not lead %s within --timeout %v: giving up", strings.TrimSpace(p.ef.name), p.timeout)
				r.finish(&exitError{code: exitTimedOut, err: fmt.Errorf("did not lead within %v", p.timeout)})
			}
		})
		defer tm.Stop()
	}
	err = election.Run(runCtx, e, cb)
	cancel()
	<-watchDone
	<-progressDone
	if cerr := closeAll(); cerr != nil {
		r.logf("closing: %v", cerr)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.result != nil:
		return r.result
	case r.signaled:
		return nil
	case errors.Is(err, context.Canceled):
		return nil
	}
	return err
}

func (r *runner) logf(format string, args ...any) {
	fmt.Fprintf(r.stderr, "elect run: %s %s\n", time.Now().Format(timeLayout), fmt.Sprintf(format, args...))
}

// finish records how elect ends and stops the campaign loop.
func (r *runner) finish(err error) {
	r.mu.Lock()
	if r.result == nil {
		r.result = err
	}
	r.ending = true
	r.mu.Unlock()
	r.cancel()
}

// resign ends the leadership at once so that the next candidate leads.
func (r *runner) resign() {
	ctx, cancel := context.WithTimeout(context.Background(), r.p.ttl)
	defer cancel()
	if err := r.e.Resign(ctx); err != nil {
		r.logf("resign: %v (the lease goes by itself within %v)", err, r.p.ttl)
	}
}

// childEnv is the command's environment: elect's, without elect's own
// settings and the password, with the leadership's.
func (r *runner) childEnv(l election.Leader) []string {
	drop := map[string]bool{passwordEnv: true}
	for _, name := range r.p.f.order {
		drop[envName(name)] = true
	}
	var env []string
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); !drop[name] {
			env = append(env, kv)
		}
	}
	return append(env,
		"ELECTION_TOKEN="+strconv.FormatUint(l.Token, 10),
		"ELECTION_ID="+l.ID,
		"ELECTION_VALUE="+string(l.Value))
}

// lead is OnElected: it runs the command for the Term t, until the
// command exits, the Term ends, elect is told to stop, or ctx ends.
func (r *runner) lead(ctx context.Context, t *election.Term) {
	r.mu.Lock()
	if r.signaled || r.ending {
		r.mu.Unlock()
		return // Run resigns: ctx is canceled (a signal, --timeout, CMD exited)
	}
	r.inTerm, r.led = true, true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.inTerm = false
		r.waitSince = time.Now()
		if r.signaled {
			r.cancel()
		}
		r.mu.Unlock()
	}()
	if err := t.Err(); err != nil {
		r.logf("elected with token %d, but the leadership already ended (%v)", t.Token(), err)
		return
	}
	g, err := startGuard(r, t)
	if errors.Is(err, errGuardTooLate) {
		r.logf("elected with token %d, but the deadline is too close to start %s", t.Token(), r.p.argv[0])
		return
	}
	if err != nil {
		r.resign()
		r.finish(&exitError{code: exitCannotRun, err: err})
		return
	}
	r.logf("leader with token %d: started %s (pid %d)", t.Token(), r.p.argv[0], g.pid)
	r.sink.attach(t.Token(), g)
	g.send("deadline %d", mono.OfEarly(t.Deadline())) // a renewal may have come since the start
	why := r.supervise(ctx, t, g)
	r.sink.attach(0, nil)
	g.finish()

	st := g.status
	if !st.known && g.killed {
		// elect's SIGKILL came as the guard's did, before its report.
		st = childStatus{known: true, signal: int(syscall.SIGKILL), code: 128 + int(syscall.SIGKILL), stopping: true}
	}
	switch {
	case why == stopSignal:
		r.logf("stopped %s (%s); resigning", r.p.argv[0], st)
	case why == stopTermEnded || t.Err() != nil && (st.stopping || !st.known):
		// The guard may have acted first (elect was stopped past the
		// deadline): either way the Term is over, and so is the command.
		r.logf("leadership with token %d ended (%v): stopped %s, which %s", t.Token(), t.Err(), r.p.argv[0], st)
	case st.stopping:
		// The guard stopped it: the lease was about to lapse. The Term may
		// still be valid; leave it to whoever renews in time.
		r.logf("renewals were late: stopped %s (%s) before the lease could lapse; resigning", r.p.argv[0], st)
		r.resign()
	default:
		r.logf("%s %s: resigning", r.p.argv[0], st)
		r.resign()
		r.finish(st.exitErr())
	}
}

// Why supervise returned.
const (
	stopOwn       = iota // the command ended (by itself, or the guard stopped it)
	stopSignal           // elect was told to stop, and stopped the command
	stopTermEnded        // the Term ended; the command was stopped
)

// supervise waits until the command is gone and says why it went. When
// the Term ends, elect is told to stop (a signal) or ctx ends, it stops
// the command: SIGTERM at once, SIGKILL grace later, or at the Term's
// deadline minus killMargin if that is sooner (stopSchedule). The guard
// keeps that schedule; elect keeps it too, in case the guard cannot act.
func (r *runner) supervise(ctx context.Context, t *election.Term, g *guard) int {
	why := stopOwn
	var killTimer <-chan time.Time
	sigs, ended, canceled := r.sigs.Done(), t.Done(), ctx.Done()
	for {
		select {
		case <-g.exited:
			return why
		case <-killTimer:
			g.kill()
			g.killed = true
			killTimer = nil
			continue
		case <-ended:
			why = stopTermEnded
		case <-sigs:
			why = stopSignal
		case <-canceled:
			// OnElected's ctx ends with the Term, or before it when Run
			// is stopped.
			why = stopSignal
			if t.Err() != nil {
				why = stopTermEnded
			}
		}
		// The first of them stops the command; the others change nothing.
		sigs, ended, canceled = nil, nil, nil
		g.send("stop")
		_, killAt := stopSchedule(t.Deadline(), r.p.grace, time.Now())
		killTimer = time.After(time.Until(killAt))
	}
}

// lockWriter returns w if it is a file (the guard and the command then
// write to it directly), or w behind a mutex: elect's log lines and the
// copy of the command's output then never write at once.
func lockWriter(w io.Writer) io.Writer {
	if _, ok := w.(*os.File); ok {
		return w
	}
	return &lockedWriter{w: w}
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// deadlineSink forwards each renewal's deadline to the guard of the
// current Term.
type deadlineSink struct {
	mu    sync.Mutex
	token uint64
	g     *guard
}

func (s *deadlineSink) attach(token uint64, g *guard) {
	s.mu.Lock()
	s.token, s.g = token, g
	s.mu.Unlock()
}

// renewed is the after-renewal hook: short, it never blocks on the guard.
func (s *deadlineSink) renewed(rn election.Renewal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.g != nil && rn.Leader.Token == s.token && rn.Err == nil {
		s.g.send("deadline %d", mono.OfEarly(rn.Deadline))
	}
}

// guard is elect's handle on a guard process and its command.
type guard struct {
	cmd    *exec.Cmd
	pid    int // the command's
	pgid   int // the guard's: the group's
	ctl    *os.File
	ctlMu  sync.Mutex
	exited chan struct{} // closed when the guard has exited; status is set
	status childStatus
	killed bool // elect's own copy of the schedule sent the SIGKILL (supervise's goroutine only)
}

// childStatus is how the command ended, as the guard reported it.
type childStatus struct {
	known    bool
	code     int // exit code, or 128 + signal
	signal   int
	stopping bool // the guard had begun to stop it
}

func (s childStatus) String() string {
	switch {
	case !s.known:
		return "was killed with its guard"
	case s.signal != 0:
		return "was killed by " + signalName(syscall.Signal(s.signal))
	}
	return "exited with status " + strconv.Itoa(s.code)
}

// signalName names a signal as kill(1) does ("SIGTERM"), with its number
// and description when it is not a common one.
func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	case syscall.SIGABRT:
		return "SIGABRT"
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGSEGV:
		return "SIGSEGV"
	case syscall.SIGPIPE:
		return "SIGPIPE"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return fmt.Sprintf("signal %d (%v)", int(sig), sig)
}

func (s childStatus) exitErr() error {
	if !s.known {
		return &exitError{code: exitRunFailed, err: errors.New("the command's guard died")}
	}
	if s.code == 0 {
		return nil
	}
	return &exitError{code: s.code}
}

// startGuard starts the guard and, through it, the command.
func startGuard(r *runner, t *election.Term) (*guard, error) {
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	stR, stW, err := os.Pipe()
	if err != nil {
		ctlR.Close()
		ctlW.Close()
		return nil, err
	}
	args := append([]string{guardArg, strconv.FormatInt(int64(r.p.grace), 10), strconv.FormatInt(mono.OfEarly(t.Deadline()), 10), "--", r.p.path}, r.p.argv[1:]...)
	cmd := exec.Command(r.p.self, args...)
	cmd.Args[0] = "elect-guard"
	cmd.Env = r.childEnv(t.Leader())
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, r.stdout, r.stderr
	cmd.ExtraFiles = []*os.File{ctlR, stW}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	ctlR.Close()
	stW.Close()
	if err != nil {
		ctlW.Close()
		stR.Close()
		return nil, fmt.Errorf("starting the guard %s: %w", r.p.self, err)
	}
	g := &guard{cmd: cmd, pgid: cmd.Process.Pid, ctl: ctlW, exited: make(chan struct{})}
	sc := bufio.NewScanner(stR)
	first := ""
	if sc.Scan() {
		first = sc.Text()
	}
	if pid, ok := strings.CutPrefix(first, "started "); ok {
		g.pid, _ = strconv.Atoi(pid)
	} else {
		g.kill()
		cmd.Wait()
		stR.Close()
		ctlW.Close()
		msg, _ := strings.CutPrefix(first, "error ")
		if msg == errTooLate {
			return nil, errGuardTooLate
		}
		if msg == "" {
			msg = "the guard exited before starting it"
		}
		return nil, fmt.Errorf("starting %s: %s", r.p.argv[0], msg)
	}
	go func() {
		for sc.Scan() {
			var kind string
			var n, stopping int
			if _, err := fmt.Sscan(sc.Text(), &kind, &n, &stopping); err != nil {
				continue
			}
			st := childStatus{known: true, stopping: stopping == 1, code: n}
			if kind == "signal" || kind == "killed" {
				st.signal, st.code = n, 128+n
			}
			g.status = st
		}
		stR.Close()
		cmd.Wait()
		close(g.exited)
	}()
	return g, nil
}

// send writes one control line; a guard that is gone does not matter.
func (g *guard) send(format string, args ...any) {
	g.ctlMu.Lock()
	defer g.ctlMu.Unlock()
	fmt.Fprintf(g.ctl, format+"\n", args...)
}

// kill sends SIGKILL to the whole group, the guard included.
func (g *guard) kill() { _ = syscall.Kill(-g.pgid, syscall.SIGKILL) }

// finish makes sure nothing is left of the group once the guard has
// exited: SIGKILL to the group again (processes the command left there),
// and a short wait until the group is empty.
func (g *guard) finish() {
	<-g.exited
	g.ctlMu.Lock()
	g.ctl.Close()
	g.ctlMu.Unlock()
	g.kill()
	for end := time.Now().Add(groupGoneWithin); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if !groupAlive(g.pgid) {
			return
		}
	}
}

// leaderChanged is Run's OnLeader: while waiting, a new leader is said at
// once (who holds what this candidate waits for). An election with no
// leader at the start is not a change: this candidate is about to lead, or
// the progress lines say it still waits.
func (r *runner) leaderChanged(l election.Leader) {
	r.mu.Lock()
	prev, had := r.leader, r.observed
	r.leader, r.observed = l, true
	waiting := r.waitingLocked()
	r.mu.Unlock()
	nobody := l.ID == "" && l.Token == 0
	changed := had && (prev.Token != l.Token || prev.ID != l.ID) || !had && !nobody
	if waiting && changed && l.ID != r.id {
		r.logf("waiting to lead %s; %s", strings.TrimSpace(r.p.ef.name), describeLeader(l))
	}
}

// waitingLocked reports whether elect waits to lead: it campaigns, leads
// not, and is not on its way out (a signal; CMD exited, once it resigned
// the leadership; --timeout). r.mu is held.
func (r *runner) waitingLocked() bool { return !r.inTerm && !r.signaled && !r.ending }

// sayProgress says every --progress that elect still waits to lead, since
// when, and who leads, until ctx ends.
func (r *runner) sayProgress(ctx context.Context) {
	if r.p.progress <= 0 {
		return
	}
	tick := time.NewTicker(r.p.progress)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		r.mu.Lock()
		waiting, since, l, seen := r.waitingLocked(), r.waitSince, r.leader, r.observed
		r.mu.Unlock()
		if !waiting {
			continue
		}
		who := "the leader is not known yet"
		if seen {
			who = describeLeader(l)
		}
		r.logf("still waiting to lead %s, since %s (%s); %s", strings.TrimSpace(r.p.ef.name),
			since.Format(timeLayout), time.Since(since).Round(time.Second), who)
	}
}

// describeLeader says who leads, for progress lines.
func describeLeader(l election.Leader) string {
	if l.ID == "" && l.Token == 0 {
		return "nobody leads"
	}
	return fmt.Sprintf("%s leads (token %d, priority %d)", l.ID, l.Token, l.Priority)
}
