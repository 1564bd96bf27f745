package postgres

import (
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
	"github.com/electkit/election/internal/clock"
	"github.com/electkit/election/internal/lograte"
	"github.com/electkit/election/internal/skeleton"
	"github.com/electkit/election/internal/watch"
)

// retryDelay is the pause before a statement that failed for a passing
// reason (a lost connection, a canceled statement) is sent again.
const retryDelay = 50 * time.Millisecond

// listenWait bounds how long a candidate waits for its channel to be
// LISTENed on before it goes on without (then it polls until it is).
const listenWait = time.Second

// withdrawNow bounds the first try to withdraw the row of a Campaign that
// ends without leading (its ctx ended, say), within the 100 ms a Campaign
// may take past its ctx; a failed try goes on in the background.
const withdrawNow = 50 * time.Millisecond

// Config holds the settings only this backend has.
type Config struct {
	// Schema is the PostgreSQL schema of the election's tables and
	// functions: a lower-case unquoted identifier (1 to 63 of a-z, 0-9
	// and _, not beginning with a digit or pg_). Default DefaultSchema.
	// Elections of different schemas are unrelated.
	Schema string
}

// Validate reports an invalid field as an *election.OptionError.
func (c Config) Validate() error {
	if c.Schema != "" {
		return validateSchema(c.Schema)
	}
	return nil
}

// Elector is one candidate of an election on PostgreSQL. It implements
// election.Elector, backend.Lister, backend.Transferer and
// backend.TransferRequester; see the package doc for the protocol.
type Elector struct {
	pool     *pgxpool.Pool
	ownsPool bool
	name     string
	schema   string
	o        election.Options
	log      *slog.Logger
	lst      *listener
	elChan   string // the election's channel: its row changed
	allChan  string // the schema's channel: the table was truncated
	prefix   string // of the candidates' channels

	gate     *skeleton.Gate
	closing  <-chan struct{}
	bg       context.Context // canceled by Close
	stopBg   context.CancelFunc
	wg       sync.WaitGroup // goroutines Close waits for
	obs      *watch.Feed
	terms    skeleton.Terms
	retries  lograte.Limiter
	schemaOK atomic.Bool

	statements, notified, polled, timed atomic.Int64

	mu     sync.Mutex
	closed bool
	cand   *candidacy
}

// candidacy is one Campaign's place in the election, from its
// registration until it is withdrawn or its leadership released.
type candidacy struct {
	channel  string
	sub      *sub
	stop     chan struct{} // closed when Resign or Close takes it
	stopOnce sync.Once

	// Guarded by Elector.mu.
	halted   bool
	arrival  int64 // its row in candidates, 0 before it is registered
	lc       *backend.LeaseClock
	token    int64
	leadDone chan struct{} // closed when the leader's goroutine has returned

	serving atomic.Bool // a transfer request is being served
}

func (c *candidacy) halt() { c.stopOnce.Do(func() { close(c.stop) }) }

var (
	_ election.Elector   = (*Elector)(nil)
	_ backend.Lister     = (*Elector)(nil)
	_ backend.Transferer = (*Elector)(nil)
)

// New returns a candidate of the election called name on the PostgreSQL
// server pool connects to, with the default Config. name follows the rule
// of every backend's names (backend.ValidateName: "/services/scheduler").
// pool stays the caller's: Close does not close it. Every statement is
// one transaction on whichever connection of pool is free: no session
// state (no advisory lock, no open transaction) carries the leadership, so
// a connection recycled, reset or killed decides nothing. Electors made on
// one pool share one more connection, outside the pool, that LISTENs.
// Bad options and a bad name are refused with an error wrapping
// election.ErrInvalidOption.
func New(pool *pgxpool.Pool, name string, opts ...election.Option) (*Elector, error) {
	return NewConfig(pool, name, Config{}, opts...)
}

// NewConfig is New with PostgreSQL-specific settings.
func NewConfig(pool *pgxpool.Pool, name string, cfg Config, opts ...election.Option) (*Elector, error) {
	if pool == nil {
		return nil, &election.OptionError{Field: "pool", Value: "nil", Reason: "a *pgxpool.Pool is required"}
	}
	if err := backend.ValidateName(name); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Schema == "" {
		cfg.Schema = DefaultSchema
	}
	o, err := election.NewOptions(opts...)
	if err != nil {
		return nil, err
	}
	bg, stop := context.WithCancel(context.Background())
	gate := skeleton.NewGate()
	e := &Elector{
		pool: pool, name: name, schema: cfg.Schema, o: o, log: o.Logger,
		elChan: channelOf(cfg.Schema + "/" + name), allChan: channelOf(cfg.Schema),
		prefix: "el_" + md5hex(cfg.Schema)[:8] + "_",
		gate:   gate, closing: gate.Closing(), bg: bg, stopBg: stop, obs: watch.NewFeed(),
	}
	e.lst = listenerFor(pool, o.Logger)
	return e, nil
}

// Open connects a pool to the server of connString (a URL or key=value
// DSN; the PG* environment variables fill what it leaves out, as for
// psql) and returns New's Elector on it. Close closes the pool.
func Open(ctx context.Context, connString, name string, cfg Config, opts ...election.Option) (*Elector, error) {
	if err := skeleton.CheckContext(ctx); err != nil {
		return nil, err
	}
	pc, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, &election.OptionError{Field: "connString", Value: "(not shown: it may hold a password)", Reason: err.Error()}
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("postgres election: %w", err)
	}
	e, err := NewConfig(pool, name, cfg, opts...)
	if err != nil {
		pool.Close()
		return nil, err
	}
	e.ownsPool = true
	return e, nil
}

func md5hex(s string) string {
	h := md5.Sum([]byte(s))
	return hex.EncodeToString(h[:])
}

// channelOf is the schema's election.channel(): "el_" and the md5 of s.
func channelOf(s string) string { return "el_" + md5hex(s) }

// Name returns the election's name.
func (e *Elector) Name() string { return e.name }

// Schema returns the PostgreSQL schema of the election.
func (e *Elector) Schema() string { return e.schema }

// ID returns the candidate's ID.
func (e *Elector) ID() string { return e.o.ID }

// Options returns the options the Elector was made with (election.Run
// reports its campaigns to their Events). Their Value is a copy.
func (e *Elector) Options() election.Options {
	o := e.o
	o.Value = append([]byte(nil), o.Value...)
	return o
}

// Stats counts what the Elector did since it was made.
type Stats struct {
	// Statements is the number of statements sent (each is one round
	// trip and one transaction).
	Statements int64
	// Notified is the number of times a waiting candidate was woken by a
	// notification; Timed, by the lapse of the leader's lease or of a
	// hand-over, which it had read; Polled, by its fallback timer, with
	// neither (a notification lost with the listening connection, a
	// candidate ahead of it gone without a word).
	Notified, Timed, Polled int64
	// ListenerDrops is the number of times the listening connection of the
	// Elector's pool failed or could not be opened.
	ListenerDrops int64
}

// Stats returns the Elector's counters.
func (e *Elector) Stats() Stats {
	return Stats{Statements: e.statements.Load(), Notified: e.notified.Load(), Timed: e.timed.Load(),
		Polled: e.polled.Load(), ListenerDrops: e.lst.drops.Load()}
}

// pollEvery is how often a waiting candidate beats its heartbeat and, at
// the same time, checks the election on its own; and how often a leader
// renews.
func (e *Elector) pollEvery() time.Duration { return e.o.Window() / 3 }

// ttlMS is the TTL in milliseconds, as the statements take it.
func (e *Elector) ttlMS() int64 { return e.o.TTL.Milliseconds() }

func (e *Elector) ensureSchema(ctx context.Context) error {
	if e.schemaOK.Load() {
		return nil
	}
	e.statements.Add(1)
	if err := ensureSchema(ctx, e.pool, e.schema); err != nil {
		return e.ctxErr(ctx, err)
	}
	e.schemaOK.Store(true)
	return nil
}

// ctxErr returns ctx.Err() as is when ctx has ended (err is then its
// consequence), else err.
func (e *Elector) ctxErr(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return err
}

// Campaign implements election.Elector: it queues the candidate (a row of
// candidates with its priority and arrival, kept alive by heartbeats) and
// attempts the claim, one statement each time, whenever it may succeed: at
// once, when a notification wakes it (the leader released, the candidate
// ahead of it withdrew), when the lease it read lapses, and on its
// heartbeat. The claim is a write that succeeds only while the election
// has no leader whose lease is current on the server's clock, only for
// the first in line (or the named successor of a hand-over), and that
// raises the election's token; the Term's deadline counts from that
// statement's send time. If the candidate already leads, Campaign returns
// the current Term. An error of the server that will not pass by waiting
// (a permission refused, the schema or a function missing) ends Campaign
// with it; a lost connection or a canceled statement is retried.
func (e *Elector) Campaign(ctx context.Context) (*election.Term, error) {
	if err := e.gate.Enter(ctx); err != nil {
		return nil, err
	}
	defer e.gate.Leave()
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, election.ErrClosed
	}
	old := e.cand
	if old != nil && old.lc != nil && old.lc.Term().Err() == nil {
		e.mu.Unlock()
		return old.lc.Term(), nil
	}
	e.cand = nil
	if old != nil {
		old.halted = true
		old.halt()
	}
	e.mu.Unlock()
	if old != nil {
		// A Term that ended on its own: its goroutine released it.
		ctx, cancel := context.WithTimeout(ctx, e.o.Window())
		_ = e.finish(ctx, old, election.ErrResigned)
		cancel()
	}
	if err := e.ensureSchema(ctx); err != nil {
		return nil, err
	}
	c := &candidacy{channel: e.prefix + randomHex(8), stop: make(chan struct{})}
	c.sub = e.lst.subscribe(c.channel)
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		e.lst.unsubscribe(c.sub)
		return nil, election.ErrClosed
	}
	e.cand = c
	e.mu.Unlock()
	t, err := e.campaign(ctx, c)
	if err != nil {
		e.mu.Lock()
		if e.cand == c {
			e.cand = nil
		}
		c.halted = true
		e.mu.Unlock()
		c.halt()
		// One short try now, so that the next in line does not wait for
		// this row's heartbeat to lapse; then in the background.
		wctx, cancel := context.WithTimeout(context.Background(), withdrawNow)
		_ = e.finish(wctx, c, election.ErrResigned)
		cancel()
		return nil, err
	}
	return t, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// campaign registers c and attempts its claim until it leads or must
// stop.
func (e *Elector) campaign(ctx context.Context, c *candidacy) (*election.Term, error) {
	w := skeleton.Waiting{Closing: e.closing, Stop: c.stop}
	c.sub.awaitReady(ctx, listenWait)
	var arrival int64
	for {
		if err := w.Interrupted(ctx); err != nil {
			return nil, err
		}
		if arrival == 0 {
			a, err := e.register(ctx, c.channel)
			if err != nil {
				if ierr := w.Interrupted(ctx); ierr != nil {
					return nil, ierr
				}
				if permanent(err) {
					return nil, err
				}
				e.logRetry("registering the candidate", err)
				if err := w.Pause(ctx, retryDelay); err != nil {
					return nil, err
				}
				continue
			}
			e.mu.Lock()
			c.arrival = a
			halted := c.halted
			e.mu.Unlock()
			if halted { // Resign or Close took c before its row was known
				return nil, w.Interrupted(ctx)
			}
			arrival = a
		}
		sent := clock.Now()
		r, err := e.attempt(ctx, arrival)
		if err != nil {
			if ierr := w.Interrupted(ctx); ierr != nil {
				return nil, ierr
			}
			if permanent(err) {
				return nil, err
			}
			e.logRetry("campaigning", err)
			if err := w.Pause(ctx, retryDelay); err != nil {
				return nil, err
			}
			continue
		}
		switch r.state {
		case "gone":
			e.log.Warn("postgres election: the candidate's row was removed by another client; queueing again", "election", e.name, "arrival", arrival)
			arrival = 0
			e.mu.Lock()
			c.arrival = 0
			e.mu.Unlock()
			continue
		case "leader":
			t, err := e.lead(c, r.token, sent)
			if err != nil || t != nil {
				return t, err
			}
			arrival = 0 // the claim's reply came too late: queue again
			continue
		}
		d, timed := e.pollEvery(), false
		if r.first && r.waitMS != nil {
			if until := time.Duration(*r.waitMS*float64(time.Millisecond)) + time.Millisecond; until < d {
				d, timed = until, true
			}
		}
		timer := time.NewTimer(d)
		select {
		case <-c.sub.C:
			e.notified.Add(1)
		case <-timer.C:
			if timed {
				e.timed.Add(1)
			} else {
				e.polled.Add(1)
			}
		case <-ctx.Done():
		case <-e.closing:
		case <-c.stop:
		}
		timer.Stop()
	}
}

// lead makes the Term of the leadership c claimed with token, by a
// statement sent at sent. It returns nil, nil if the Term would have
// lapsed already (the leadership is released: campaign again).
func (e *Elector) lead(c *candidacy, token int64, sent time.Time) (*election.Term, error) {
	l := election.Leader{ID: e.o.ID, Value: e.o.Value, Priority: e.o.Priority, Token: uint64(token)}
	term, lc := backend.NewTerm(e.o, l, sent)
	e.mu.Lock()
	halted := c.halted
	if term.Err() == nil && !halted {
		c.lc, c.token, c.leadDone = lc, token, make(chan struct{})
		e.terms.Add(lc)
		e.wg.Add(1)
		e.mu.Unlock()
		go e.keep(c)
		e.lst.unsubscribe(c.sub)
		return term, nil
	}
	c.arrival = 0
	e.mu.Unlock()
	ctx, cancel := context.WithTimeout(e.bg, e.o.Window())
	if err := e.release(ctx, token, ""); err != nil {
		e.retryLater("releasing a leadership claimed too late", func(ctx context.Context) error { return e.release(ctx, token, "") })
	}
	cancel()
	if halted {
		lc.End(election.ErrResigned)
		return nil, skeleton.Waiting{Closing: e.closing, Stop: c.stop}.Interrupted(context.Background())
	}
	return nil, nil
}

// Resign implements election.Elector: it ends the Term (if leading) before
// any statement, then releases the leadership in one statement that wakes
// the next in line, or withdraws the waiting candidate's row. If the
// statement fails, Resign returns its error and the Elector sends it again
// in the background for up to a TTL; the lease lapses by itself at the
// latest.
func (e *Elector) Resign(ctx context.Context) error {
	if err := skeleton.CheckContext(ctx); err != nil {
		return err
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return election.ErrClosed
	}
	c := e.cand
	e.cand = nil
	if c != nil {
		c.halted = true
	}
	e.mu.Unlock()
	if c == nil {
		return nil
	}
	c.halt()
	rctx, cancel := backend.ResignContext(ctx, e.o.Window())
	defer cancel()
	err := e.finish(rctx, c, election.ErrResigned)
	if cerr := ctx.Err(); err != nil && cerr != nil && context.Cause(rctx) == cerr {
		return cerr
	}
	return err
}

// finish ends c: its Term with cause, then its leadership released or its
// row withdrawn. A statement that fails is sent again in the background.
func (e *Elector) finish(ctx context.Context, c *candidacy, cause error) error {
	e.lst.unsubscribe(c.sub)
	e.mu.Lock()
	lc, token, arrival, done := c.lc, c.token, c.arrival, c.leadDone
	e.mu.Unlock()
	if lc != nil {
		lc.End(cause)
		<-done
		e.forget(lc)
		if err := e.release(ctx, token, ""); err != nil {
			e.retryLater("releasing the leadership", func(ctx context.Context) error { return e.release(ctx, token, "") })
			return fmt.Errorf("postgres election %q: releasing token %d (it lapses with its lease): %w", e.name, token, e.ctxErr(ctx, err))
		}
		return nil
	}
	if arrival != 0 {
		if err := e.withdraw(ctx, arrival); err != nil {
			e.retryLater("withdrawing the candidate", func(ctx context.Context) error { return e.withdraw(ctx, arrival) })
			return fmt.Errorf("postgres election %q: withdrawing the candidate (its row lapses with its heartbeat): %w", e.name, e.ctxErr(ctx, err))
		}
	}
	return nil
}

// forget drops lc from the Terms Close waits for, once its hooks are done;
// in the background, since a hook may be what called Resign.
func (e *Elector) forget(lc *backend.LeaseClock) {
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		e.terms.Forget(lc)
	}()
}

// retryLater sends a statement again in the background until it succeeds,
// fails for good, a TTL has passed, or the Elector is closed.
func (e *Elector) retryLater(what string, f func(ctx context.Context) error) {
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		until := time.Now().Add(e.o.TTL)
		for time.Now().Before(until) {
			ctx, cancel := context.WithTimeout(e.bg, time.Second)
			err := f(ctx)
			cancel()
			if err == nil || permanent(err) {
				return
			}
			if !clock.Sleep(e.bg, retryDelay) {
				return
			}
		}
		e.log.Warn("postgres election: gave up "+what+"; it lapses by itself", "election", e.name)
	}()
}

func (e *Elector) logRetry(what string, err error) {
	if left, ok := e.retries.Allow(time.Now(), 10*time.Second); ok {
		e.log.Warn("postgres election: "+what+" failed; retrying", "election", e.name, "err", err, "suppressed", left)
	}
}

// Close implements election.Elector: it resigns (waiting at most a lease
// window for the statement), stops every goroutine it started and waits
// for the renewal hooks. It closes the pool only if Open made it.
func (e *Elector) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	e.gate.Close()
	c := e.cand
	e.cand = nil
	if c != nil {
		c.halted = true
	}
	e.mu.Unlock()
	if c != nil {
		c.halt()
		ctx, cancel := context.WithTimeout(context.Background(), e.o.Window())
		if err := e.finish(ctx, c, election.ErrClosed); err != nil {
			e.log.Warn("postgres election: Close", "election", e.name, "err", err)
		}
		cancel()
	}
	e.gate.Drain()
	e.stopBg()
	e.wg.Wait()
	e.terms.EndAll(election.ErrClosed)
	e.lst.release(e.pool)
	if e.ownsPool {
		e.pool.Close()
	}
	return nil
}

// errLost is wrapped by the error of a Term whose row another client took
// away: deleted, truncated, or given another leadership.
var errLost = errors.New("the election's row no longer holds this leadership")
