package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	gozk "github.com/go-zookeeper/zk"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/etcd"
	"github.com/electkit/election/backend/kube"
	"github.com/electkit/election/backend/postgres"
	"github.com/electkit/election/backend/zk"
	"github.com/electkit/election/cmd/internal/nemesis"
	"github.com/electkit/election/internal/mono"
)

// DefaultWork is the time a leader spends between checking that its Term
// is valid and the write that check allows: the side effect's own work. A
// process paused in that gap writes late, with a token that may be stale.
const DefaultWork = 15 * time.Millisecond

// CandidateConfig is the configuration of one candidate process (elect
// nemesis-candidate).
type CandidateConfig struct {
	Backend   string   // "etcd", "zk", "postgres" or "kube"
	Endpoints []string // the store's addresses, as this candidate reaches them
	Name      string   // etcd: the election name; zk: the election path
	ID        string   // the candidate's ID
	TTL       time.Duration
	Register  string        // the register's address, host:port
	Work      time.Duration // see DefaultWork; 0 means DefaultWork
	Log       io.Writer     // the candidate's diagnostics; nil discards them
	// Username and Password log the etcd client in, when the store has
	// authentication on; empty for none. kube: Password is the bearer
	// token.
	Username, Password string
	// Session: the candidate campaigns on a session that also carries a
	// candidate of a second election (Name + SideSuffix), as a process of
	// a sharded service does. etcd: an etcd.Session; one that ends (its
	// lease revoked or expired) ends both, and the process opens a new
	// one. ZooKeeper: two Electors of zk.New on one connection, whose
	// session carries both; the client makes a new session after one
	// expires, and both campaign again on it. PostgreSQL: one pool.
	// Kubernetes: one clientset (KubeLease names the side Leases).
	Session bool
	// Shards, with Session: the candidate campaigns in Shards side
	// elections (ShardName(Name, i) for i below Shards) instead of the
	// one, all at once on each session it opens — a process of a service
	// with a leader per shard. Every candidate with Shards campaigns in
	// the same elections. 0: the one side election. elect
	// nemesis-candidate has no flag for it: RunCandidate takes it from
	// the environment (EnvShards) when it is 0.
	Shards int
	// Priority and Preempt are the candidate's WithPriority and
	// WithPreemption.
	Priority int64
	Preempt  time.Duration
	// Drift and Margin are the candidate's WithDrift (ρ) and WithMargin;
	// 0 means the library's defaults.
	Drift  float64
	Margin time.Duration
	// Control, when set, is read for commands from the harness ("rate R":
	// the library's clock runs at R × real time from then on; see
	// skewClock). The command reads its stdin.
	Control io.Reader
}

// SideSuffix names the second election of a candidate on a session.
const SideSuffix = "-side"

// ShardSuffix names the side elections of a candidate with
// CandidateConfig.Shards: NAME-shard/000, NAME-shard/001, …
const ShardSuffix = "-shard"

// ShardName is the name of the side election i of a candidate with
// CandidateConfig.Shards whose election is name.
func ShardName(name string, i int) string { return fmt.Sprintf("%s%s/%03d", name, ShardSuffix, i) }

// EnvShards passes a candidate process its CandidateConfig.Shards.
const EnvShards = "ELECT_NEMESIS_SHARDS"

// MaxShards bounds CandidateConfig.Shards and Config.Shards.
const MaxShards = 1000

// CloseBound is how long a candidate on a session waits for Close of all
// its Electors (each resigns within one lease window, at once): past it,
// the candidate gives up on them and exits with an error.
func CloseBound(ttl time.Duration) time.Duration { return 2*ttl + 5*time.Second }

// sideNames returns the side elections of a candidate on a session.
func sideNames(cfg CandidateConfig) []string {
	if cfg.Shards <= 0 {
		return []string{cfg.Name + SideSuffix}
	}
	names := make([]string, cfg.Shards)
	for i := range names {
		names[i] = ShardName(cfg.Name, i)
	}
	return names
}

// closeAll closes es at once and waits for all of them, at most bound.
func closeAll(es []election.Elector, bound time.Duration) error {
	errs := make([]error, len(es))
	var wg sync.WaitGroup
	for i, e := range es {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = e.Close()
		}()
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return errors.Join(errs...)
	case <-time.After(bound):
		return fmt.Errorf("closing %d elections on one session: not all returned within %v", len(es), bound)
	}
}

// runSides campaigns (election.Run) in each of the side elections until
// ctx ends, and returns what waits for every Run to return. Nothing is
// checked of them in the process: the harness asks the store who leads
// them (run.checkShards).
func runSides(ctx context.Context, sides []election.Elector, log io.Writer) (wait func()) {
	var wg sync.WaitGroup
	for _, side := range sides {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = election.Run(ctx, side, election.Callbacks{OnError: func(err error) { fmt.Fprintf(log, "side campaign: %v\n", err) }})
		}()
	}
	return wg.Wait
}

// sink is where a candidate sends its writes and reports: the register's
// network client for a process, the register itself in process.
type sink interface {
	write(ctx context.Context, token uint64, value string, call int64) (bool, error)
	report(ctx context.Context, ev nemesis.Event) error
}

type remoteSink struct{ c *nemesis.RegisterClient }

func (s remoteSink) write(ctx context.Context, token uint64, value string, call int64) (bool, error) {
	return s.c.Write(ctx, token, value, call)
}
func (s remoteSink) report(ctx context.Context, ev nemesis.Event) error { return s.c.Report(ctx, ev) }

type localSink struct {
	r      *nemesis.Register
	client string
}

func (s localSink) write(_ context.Context, token uint64, value string, call int64) (bool, error) {
	return s.r.Write(s.client, 0, token, value, call), nil
}
func (s localSink) report(_ context.Context, ev nemesis.Event) error { s.r.Report(ev); return nil }

// reporter sends a candidate's events to its sink in order, from a queue,
// retrying each until the sink takes it: a report is never dropped while
// the process lives, and a slow register never blocks a callback.
type reporter struct {
	s    sink
	mu   sync.Mutex
	q    []queued
	wake chan struct{}
	stop chan struct{}
	done chan struct{}
	seq  uint64 // the last event's Seq; guarded by mu
}

func newReporter(s sink) *reporter {
	r := &reporter{s: s, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go r.loop()
	return r
}

// queued is one event waiting to be reported; delivered is closed once the
// sink took it.
type queued struct {
	ev        nemesis.Event
	delivered chan struct{}
}

// add queues ev and returns a channel closed once the sink took it.
func (r *reporter) add(ev nemesis.Event) <-chan struct{} {
	r.mu.Lock()
	r.seq++
	ev.Seq = r.seq // the register drops a retried report it already has
	q := queued{ev: ev, delivered: make(chan struct{})}
	r.q = append(r.q, q)
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
	return q.delivered
}

func (r *reporter) loop() {
	defer close(r.done)
	for {
		r.mu.Lock()
		var q queued
		ok := len(r.q) > 0
		if ok {
			q = r.q[0]
		}
		r.mu.Unlock()
		if !ok {
			select {
			case <-r.wake:
				continue
			case <-r.stop:
				return
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := r.s.report(ctx, q.ev)
		cancel()
		if err != nil {
			select {
			case <-time.After(50 * time.Millisecond): // retry backoff
			case <-r.stop:
				return
			}
			continue
		}
		r.mu.Lock()
		r.q = r.q[1:]
		r.mu.Unlock()
		close(q.delivered)
	}
}

// flush waits until the queue is empty or timeout passes, then stops the
// reporter.
func (r *reporter) flush(timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		r.mu.Lock()
		n := len(r.q)
		r.mu.Unlock()
		if n == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond) // polling the queue's length while it drains
	}
	close(r.stop)
	<-r.done
}

// candidate is the application side of one candidate: the callbacks of
// election.Run that report each Term and write while leading.
type candidate struct {
	id   string
	pid  int
	work time.Duration
	s    sink
	rep  *reporter
	clk  *skewClock // the library's clock in this process

	mu      sync.Mutex
	doneAt  map[*election.Term]chan int64 // Mono instant Done closed, per Term
	elected map[uint64]*electedReport     // per token: its Elected event, reported by the Events
	watched bool                          // the Elector has c's Events
}

// electedReport is a Term's Elected event as the Events reported it:
// ready closes once delivered is set.
type electedReport struct {
	ready     chan struct{}
	delivered <-chan struct{}
	ended     int64  // Mono instant the Events reported its end; 0 before; guarded by candidate.mu
	cause     string // why it ended
}

// electedOf returns the report of the Term with token, made on first use.
func (c *candidate) electedOf(token uint64) *electedReport {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.elected[token]
	if e == nil {
		e = &electedReport{ready: make(chan struct{})}
		c.elected[token] = e
	}
	return e
}

func newCandidate(id string, pid int, work time.Duration, s sink) *candidate {
	if work <= 0 {
		work = DefaultWork
	}
	return &candidate{id: id, pid: pid, work: work, s: s, rep: newReporter(s), clk: newSkewClock(),
		doneAt: map[*election.Term]chan int64{}, elected: map[uint64]*electedReport{}}
}

// afterRenew is the after-renewal hook: each confirmed renewal reports the
// Term's new deadline. The event's instant is when the library recorded
// the reply (Sent + Latency), not when the hook ran: hooks run later, even
// after the Term ended.
func (c *candidate) afterRenew(rn election.Renewal) {
	if rn.Err != nil {
		return
	}
	c.rep.add(nemesis.Event{Kind: nemesis.Renewed, Candidate: c.id, PID: c.pid, Token: rn.Leader.Token,
		At: c.clk.monoOf(rn.Sent.Add(rn.Latency)), Deadline: c.clk.monoOf(rn.Deadline)})
}

// observer reports the start of each Term, as the lease clock sees it —
// every Term, also one that Run resigns at once because it is stopping,
// without calling OnElected — and its end, and waits (briefly) for the
// register to have the end: a hand-over of the leadership (Transfer,
// preemption) is sent only after, so the register knows the Term was over
// before the next leader began, even if this process is killed right
// after.
func (c *candidate) events() *election.Events {
	c.mu.Lock()
	c.watched = true
	c.mu.Unlock()
	return &election.Events{Elected: func(l election.Leader, deadline time.Time) {
		e := c.electedOf(l.Token)
		e.delivered = c.rep.add(nemesis.Event{Kind: nemesis.Elected, Candidate: c.id, PID: c.pid, Token: l.Token,
			At: mono.Now(), Deadline: c.clk.monoOf(deadline)})
		close(e.ready)
	}, Ended: func(l election.Leader, cause error) {
		msg := ""
		if cause != nil {
			msg = cause.Error()
		}
		at := mono.Now()
		c.mu.Lock()
		if e := c.elected[l.Token]; e != nil {
			e.ended, e.cause = at, msg
		}
		c.mu.Unlock()
		delivered := c.rep.add(nemesis.Event{Kind: nemesis.Ended, Candidate: c.id, PID: c.pid, Token: l.Token, At: at, Err: msg})
		select {
		case <-delivered:
		case <-time.After(50 * time.Millisecond):
		}
	}}
}

// unpaired reports, once the Elector is closed (no OnElected can come
// any more), a Demoted for each Term the Events reported elected and
// ended but Run never handed to OnElected: Run resigns at once a Term it
// wins as it stops. The history then pairs that Term's Elected, as it
// does every other's.
func (c *candidate) unpaired() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for token, e := range c.elected {
		at := e.ended
		if at == 0 {
			at = mono.Now()
		}
		c.rep.add(nemesis.Event{Kind: nemesis.Demoted, Candidate: c.id, PID: c.pid, Token: token, At: at, Err: e.cause})
		delete(c.elected, token)
	}
}

// rateChanged reports again the deadline of each Term still valid: the
// real instant a deadline stands for moves when the clock's rate does, and
// the history keeps the largest one reported for a Term (nemesis.Terms):
// a deadline that moved earlier (the clock sped up) leaves the Term's end
// overstated, on the safe side for the valid-terms checker.
func (c *candidate) rateChanged() {
	c.mu.Lock()
	var live []*election.Term
	for t := range c.doneAt {
		live = append(live, t)
	}
	c.mu.Unlock()
	for _, t := range live {
		if t.Err() != nil {
			continue
		}
		c.rep.add(nemesis.Event{Kind: nemesis.Renewed, Candidate: c.id, PID: c.pid, Token: t.Token(),
			At: mono.Now(), Deadline: c.clk.monoOf(t.Deadline())})
	}
}

func (c *candidate) callbacks() election.Callbacks {
	return election.Callbacks{OnElected: c.onElected, OnDemoted: c.onDemoted}
}

func (c *candidate) onElected(ctx context.Context, t *election.Term) {
	ch := make(chan int64, 1)
	c.mu.Lock()
	c.doneAt[t] = ch
	watched := c.watched
	c.mu.Unlock()
	var delivered <-chan struct{}
	if watched {
		// The Events report the Term's start (its calls are queued: it
		// may come just after this).
		e := c.electedOf(t.Token())
		select {
		case <-e.ready:
			delivered = e.delivered
		case <-time.After(5 * time.Second):
			watched = false // never came: report it here
		}
		c.mu.Lock()
		delete(c.elected, t.Token())
		c.mu.Unlock()
	}
	if !watched { // no Events on this Elector: report it here
		delivered = c.rep.add(nemesis.Event{Kind: nemesis.Elected, Candidate: c.id, PID: c.pid, Token: t.Token(),
			At: mono.Now(), Deadline: c.clk.monoOf(t.Deadline())})
	}
	go func() {
		<-t.Done()
		ch <- mono.Now()
	}()
	// No write before the register has the Elected event: a process killed
	// with the event still queued would leave writes of a Term the history
	// does not show.
	select {
	case <-delivered:
	case <-t.Done():
		return
	}
	for n := 0; ; n++ {
		// The call instant is taken before the validity check, so that a
		// write's Call is never later than the instant its Term was seen
		// valid, even if the process is paused between the two.
		call := mono.Now()
		if t.Err() != nil {
			return
		}
		// The work between the check and the side effect: a pause that
		// lands here makes the write late.
		time.Sleep(c.work)
		wctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, _ = c.s.write(wctx, t.Token(), fmt.Sprintf("%s/%d/%d", c.id, t.Token(), n), call)
		cancel()
	}
}

func (c *candidate) onDemoted(t *election.Term) {
	c.mu.Lock()
	ch := c.doneAt[t]
	delete(c.doneAt, t)
	c.mu.Unlock()
	at := mono.Now()
	if ch != nil {
		at = <-ch
	}
	msg := ""
	if err := t.Err(); err != nil {
		msg = err.Error()
	}
	c.rep.add(nemesis.Event{Kind: nemesis.Demoted, Candidate: c.id, PID: c.pid, Token: t.Token(), At: at, Err: msg})
}

// RunCandidate runs one candidate until ctx ends: it connects to the store
// and the register, campaigns with election.Run, reports every Term and
// writes to the register while leading. When ctx ends it resigns, sends
// the reports still queued and returns.
func RunCandidate(ctx context.Context, cfg CandidateConfig) error {
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.Register == "" {
		return &election.OptionError{Field: "register", Value: `""`, Reason: "the register's address is required"}
	}
	if len(cfg.Endpoints) == 0 {
		return &election.OptionError{Field: "endpoints", Value: "[]", Reason: "at least one store address is required"}
	}
	if cfg.Shards == 0 {
		if v := os.Getenv(EnvShards); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return &election.OptionError{Field: "shards", Value: fmt.Sprintf("%q", v), Reason: "must be a number"}
			}
			cfg.Shards = n
		}
	}
	if cfg.Shards < 0 || cfg.Shards > MaxShards {
		return &election.OptionError{Field: "shards", Value: fmt.Sprint(cfg.Shards), Reason: fmt.Sprintf("must be between 0 and %d", MaxShards)}
	}
	pid := os.Getpid()
	c := newCandidate(cfg.ID, pid, cfg.Work, remoteSink{nemesis.DialRegister(cfg.Register, cfg.ID, pid)})
	defer c.rep.flush(10 * time.Second)
	defer c.clk.install()()
	if cfg.Control != nil {
		go readControl(cfg.Control, c.clk, cfg.Log, c.rateChanged)
	}
	logger := slog.New(slog.NewTextHandler(cfg.Log, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts := []election.Option{election.WithID(cfg.ID), election.WithTTL(cfg.TTL),
		election.WithAfterRenew(c.afterRenew), election.WithLogger(logger), election.WithEvents(c.events()),
		election.WithPriority(cfg.Priority), election.WithPreemption(cfg.Preempt)}
	if cfg.Drift > 0 {
		opts = append(opts, election.WithDrift(cfg.Drift))
	}
	if cfg.Margin > 0 {
		opts = append(opts, election.WithMargin(cfg.Margin))
	}
	var e election.Elector
	switch cfg.Backend {
	case "etcd":
		cli, err := connectEtcd(ctx, cfg)
		if err != nil {
			return fmt.Errorf("etcd at %s: %w", strings.Join(cfg.Endpoints, ","), err)
		}
		defer cli.Close()
		if cfg.Session {
			return runOnSessions(ctx, cli, cfg, c, opts)
		}
		ee, err := etcd.New(cli, cfg.Name, opts...)
		if err != nil {
			return err
		}
		e = ee
	case "zk":
		if cfg.Session {
			return runZKShared(ctx, cfg, c, opts)
		}
		var ze *zk.Elector
		var err error
		// The store may be cut off or restarting when the candidate starts:
		// dial until it answers or ctx ends.
		for {
			dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			ze, err = zk.Dial(dctx, zk.DialConfig{Servers: cfg.Endpoints}, cfg.Name, opts...)
			cancel()
			if err == nil || ctx.Err() != nil || errors.Is(err, election.ErrInvalidOption) {
				break
			}
			fmt.Fprintf(cfg.Log, "dial: %v\n", err)
			select { // a pause before dialing again
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
		if err != nil {
			return err
		}
		e = ze
	case "postgres":
		pool, err := pgxpool.New(ctx, strings.Join(cfg.Endpoints, ","))
		if err != nil {
			return err
		}
		defer pool.Close()
		if cfg.Session {
			return runPGShared(ctx, pool, cfg, c, opts)
		}
		pe, err := postgres.New(pool, cfg.Name, opts...)
		if err != nil {
			return err
		}
		e = pe
	case "kube":
		cs, err := kubernetes.NewForConfig(&rest.Config{
			Host:            "https://" + cfg.Endpoints[0],
			BearerToken:     cfg.Password,
			TLSClientConfig: rest.TLSClientConfig{Insecure: true}, // loopback, the API server's own certificate
			QPS:             -1,
		})
		if err != nil {
			return err
		}
		if cfg.Session {
			return runKubeShared(ctx, cs, cfg, c, opts)
		}
		ke, err := kube.New(cs.CoordinationV1(), KubeNamespace, KubeLease(cfg.Name), opts...)
		if err != nil {
			return err
		}
		e = ke
	default:
		return &election.OptionError{Field: "backend", Value: fmt.Sprintf("%q", cfg.Backend), Reason: "must be etcd, zk, postgres or kube"}
	}
	cb := c.callbacks()
	cb.OnError = func(err error) { fmt.Fprintf(cfg.Log, "campaign: %v\n", err) }
	err := election.Run(ctx, e, cb)
	cerr := e.Close()
	c.unpaired()
	if errors.Is(err, ctx.Err()) {
		err = nil
	}
	return errors.Join(err, cerr)
}

// runOnSessions campaigns (election.Run) on a Session shared with a
// candidate of the side election, one Session after another until ctx
// ends: when a Session ends, its Electors close and a new one opens.
func runOnSessions(ctx context.Context, cli *clientv3.Client, cfg CandidateConfig, c *candidate, opts []election.Option) error {
	for ctx.Err() == nil {
		s, err := etcd.NewSession(ctx, cli, election.WithTTL(cfg.TTL))
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			fmt.Fprintf(cfg.Log, "session: %v\n", err)
			select { // a pause before trying again
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		if err := runOnSession(ctx, s, cfg, c, opts); err != nil {
			s.Close()
			return err
		}
		if err := s.Err(); err != nil && ctx.Err() == nil {
			fmt.Fprintf(cfg.Log, "session ended: %v; opening another\n", err)
		}
		s.Close()
	}
	return nil
}

// runOnSession runs the candidate and its side candidates on s until ctx
// ends or s does: all of them start at once, as a sharded service's
// process starts its shards.
func runOnSession(ctx context.Context, s *etcd.Session, cfg CandidateConfig, c *candidate, opts []election.Option) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.Done():
			cancel()
		case <-sctx.Done():
		}
	}()
	e, err := etcd.NewWithSession(s, cfg.Name, opts...)
	if err != nil {
		return err
	}
	err = campaignWithSides(sctx, cfg, c, cfg.TTL, e, func(name string) (election.Elector, error) {
		return etcd.NewWithSession(s, name, election.WithID(cfg.ID))
	})
	if err != nil && s.Err() != nil && ctx.Err() == nil {
		// The Session ended (its lease expired or was revoked): Run may
		// return that, as ErrClosed, before sctx ends. The caller opens
		// another Session.
		fmt.Fprintf(cfg.Log, "campaign on an ended session: %v\n", err)
		return nil
	}
	return err
}

// runZKShared campaigns (election.Run) with candidates of the side
// elections beside it on one ZooKeeper connection, so one session, until
// ctx ends.
func runZKShared(ctx context.Context, cfg CandidateConfig, c *candidate, opts []election.Option) error {
	granted := make(chan time.Duration, 1)
	conn, _, err := gozk.Connect(cfg.Endpoints, cfg.TTL, gozk.WithLogger(grantedLog{granted}), gozk.WithLogInfo(true))
	if err != nil {
		return fmt.Errorf("zk at %s: %w", strings.Join(cfg.Endpoints, ","), err)
	}
	defer conn.Close()
	// zk.New takes the session timeout the server granted (servers clamp
	// it to 2–20 ticks) as the TTL, and refuses another one.
	var ttl time.Duration
	select {
	case ttl = <-granted:
	case <-ctx.Done():
		return nil
	}
	opts = append(opts, election.WithTTL(ttl))
	e, err := zk.New(conn, cfg.Name, opts...)
	if err != nil {
		return err
	}
	return campaignWithSides(ctx, cfg, c, ttl, e, func(name string) (election.Elector, error) {
		return zk.New(conn, name, election.WithID(cfg.ID), election.WithTTL(ttl))
	})
}

// campaignWithSides campaigns with e (election.Run) and, at once, with a
// candidate of each side election that newSide makes, as a sharded
// service's process starts its shards, until ctx ends or Run returns; then
// it closes them all, each within CloseBound(ttl).
func campaignWithSides(ctx context.Context, cfg CandidateConfig, c *candidate, ttl time.Duration, e election.Elector, newSide func(name string) (election.Elector, error)) error {
	all := []election.Elector{e}
	for _, name := range sideNames(cfg) {
		side, err := newSide(name)
		if err != nil {
			return errors.Join(err, closeAll(all, CloseBound(ttl)))
		}
		all = append(all, side)
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wait := runSides(sctx, all[1:], cfg.Log)
	cb := c.callbacks()
	cb.OnError = func(err error) { fmt.Fprintf(cfg.Log, "campaign: %v\n", err) }
	err := election.Run(sctx, e, cb)
	cancel()
	wait()
	cerr := closeAll(all, CloseBound(ttl))
	c.unpaired()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return errors.Join(err, cerr)
}

// grantedLog drops the ZooKeeper client's log but for the session timeout
// the server granted, which the client logs on each new session and
// exposes nowhere else; the first one is sent on the channel.
type grantedLog struct{ granted chan time.Duration }

func (l grantedLog) Printf(format string, args ...any) {
	if format != "authenticated: id=%d, timeout=%d" || len(args) != 2 {
		return
	}
	if ms, ok := args[1].(int32); ok {
		select {
		case l.granted <- time.Duration(ms) * time.Millisecond:
		default:
		}
	}
}

// runPGShared campaigns (election.Run) with candidates of the side
// elections beside it on one pool, so one listening connection, until ctx
// ends.
func runPGShared(ctx context.Context, pool *pgxpool.Pool, cfg CandidateConfig, c *candidate, opts []election.Option) error {
	e, err := postgres.New(pool, cfg.Name, opts...)
	if err != nil {
		return err
	}
	return campaignWithSides(ctx, cfg, c, cfg.TTL, e, func(name string) (election.Elector, error) {
		return postgres.New(pool, name, election.WithID(cfg.ID), election.WithTTL(cfg.TTL))
	})
}

// runKubeShared campaigns (election.Run) with candidates of the side
// elections beside it on one clientset, until ctx ends.
func runKubeShared(ctx context.Context, cs *kubernetes.Clientset, cfg CandidateConfig, c *candidate, opts []election.Option) error {
	e, err := kube.New(cs.CoordinationV1(), KubeNamespace, KubeLease(cfg.Name), opts...)
	if err != nil {
		return err
	}
	return campaignWithSides(ctx, cfg, c, cfg.TTL, e, func(name string) (election.Elector, error) {
		return kube.New(cs.CoordinationV1(), KubeNamespace, KubeLease(name), election.WithID(cfg.ID), election.WithTTL(cfg.TTL))
	})
}

// connectEtcd makes the candidate's etcd client. With a user name the
// client logs in as it is made, and a store fault then (a leader change, a
// member cut off or restarting) fails that login: it is made again after a
// pause, until ctx ends or the store refuses the credentials.
func connectEtcd(ctx context.Context, cfg CandidateConfig) (*clientv3.Client, error) {
	for {
		cli, err := clientv3.New(clientv3.Config{
			Endpoints: cfg.Endpoints, DialTimeout: 5 * time.Second,
			DialKeepAliveTime: time.Second, DialKeepAliveTimeout: time.Second,
			Username: cfg.Username, Password: cfg.Password,
			Logger: zap.NewNop(),
		})
		if err == nil || ctx.Err() != nil || errors.Is(err, rpctypes.ErrAuthFailed) || errors.Is(err, rpctypes.ErrPermissionDenied) ||
			errors.Is(err, rpctypes.ErrUserEmpty) || errors.Is(err, rpctypes.ErrAuthNotEnabled) {
			return cli, err
		}
		fmt.Fprintf(cfg.Log, "connect: %v\n", err)
		select { // a pause before connecting again
		case <-ctx.Done():
			return nil, err
		case <-time.After(200 * time.Millisecond):
		}
	}
}
