package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electkit/election"
	"github.com/electkit/election/internal/clock"
	"github.com/electkit/election/internal/lograte"
	"github.com/electkit/election/internal/skeleton"
)

// Session is one etcd lease, kept alive by one renewal loop, that carries
// any number of Electors of any elections: Chubby's session. A process
// with a leader per shard makes one Session and an Elector per shard on it
// (NewWithSession), and renews one lease instead of thousands.
//
// Every Term of every Elector on a Session counts its deadline from the
// Session's renewals, through its own lease clock and its own renewal
// hooks: at each tick the Session sends one keepalive, which every Term
// without a before-renewal hook takes; an Elector with one calls it in its
// own goroutine and sends, or joins while it waits to be sent, a keepalive
// after it returned (a slow hook delays only its own Term's renewal, and a
// failing one ends only its own Term, never the lease). The trade-off:
// when the Session is lost — its lease expired, was revoked, or the client
// is refused — every leadership on it ends at once, with
// election.ErrSessionLost, and its Electors can no longer campaign
// (Campaign returns an error that is both ErrSessionLost and
// election.ErrClosed): make a new Session and new Electors.
//
// An Elector made by New has no shared Session: each of its candidacies
// gets a lease of its own, as if on a Session of its own.
type Session struct {
	cli      *clientv3.Client
	o        election.Options
	log      *slog.Logger
	lease    clientv3.LeaseID
	ttlSec   int64
	interval time.Duration // between renewals
	gather   time.Duration // how long a renewal waits for others to join (claims, leaders whose before-renewal hook just returned; a tick's other leaders take its renewal even once sent)
	private  bool          // one candidacy's: its lease is revoked with the candidacy
	nonce    atomic.Uint32 // numbers the queue keys written under the lease
	retries  lograte.Limiter
	backoff  *backoff.ExponentialBackOff // the pauses before renewing again after a failed renewal (tickNow's alone)

	ctx    context.Context // canceled when the session ends, or its life does
	cancel context.CancelFunc
	unlife func() bool // stops lifeOver once the session has ended
	done   chan struct{}
	wg     *sync.WaitGroup // the session's goroutines (a private session's are its Elector's)

	mu      sync.Mutex
	err     error                   // why it ended; nil while it lasts
	renewed time.Time               // send time of the last renewal etcd confirmed (or of the grant)
	next    *renewal                // the renewal that has not been sent yet
	tick    *sessionTick            // the next renewal tick
	timer   *time.Timer             // the next renewal tick; nil once the ticks ended
	members map[*candidacy]*Elector // each candidacy and its Elector, which loses it if the session is lost
	// opts: the Options of the Elector made last on the session, which
	// the next one shares if it is made with the same (shared).
	opts *election.Options
}

// renewal is one keepalive, shared by everyone who asked for a renewal
// before it was sent.
type renewal struct {
	sent    time.Time
	replied time.Time // when its reply (or failure) came
	err     error
	done    chan struct{}
}

// A sessionTick is one renewal tick of a session: ch is closed when it
// comes, and r, set before, is the renewal it started, which the leaders
// it wakes wait for rather than each start one of their own; next, set
// with it, is the tick after, which a leader waits on next even if it came
// while the leader was busy (a tick comes soon after a failed renewal, and
// a leader that missed it would wait a whole interval for the one after,
// its Term running out meanwhile). A tick wakes every leader on the
// session at once: thousands of them take longer to run than the renewal
// waits for them to join (gather), and each that came late used to send a
// renewal of its own (three per tick per Session with 50,000 elections × 3
// on three Sessions).
type sessionTick struct {
	ch   chan struct{}
	r    *renewal
	next *sessionTick
}

// NewSession grants a lease and keeps it alive until Close or until etcd
// no longer knows it. Of opts, the TTL (the lease's, rounded up to whole
// seconds), Drift and Margin (how often it renews: every third of
// TTL/(1+Drift) − Margin) and the Logger count; every Elector on the
// Session takes its TTL. cli stays the caller's.
func NewSession(ctx context.Context, cli *clientv3.Client, opts ...election.Option) (*Session, error) {
	if err := skeleton.CheckContext(ctx); err != nil {
		return nil, err
	}
	if err := checkClient(cli); err != nil {
		return nil, err
	}
	o, err := election.NewOptions(opts...)
	if err != nil {
		return nil, err
	}
	s, _, err := grantSession(ctx, context.Background(), cli, o, false, new(sync.WaitGroup))
	return s, err
}

// grantSession grants a new lease and starts its renewal loop, which
// lasts until the session ends or life does. It returns
// the store's revision when the lease was granted. If the grant failed in
// a way that may have left the lease granted (its reply lost), the lease
// is revoked for a short while, and otherwise left to expire: it holds no
// key.
func grantSession(ctx, life context.Context, cli *clientv3.Client, o election.Options, private bool, wg *sync.WaitGroup) (*Session, int64, error) {
	if cli.Ctx().Err() != nil {
		return nil, 0, sessionErr(cli, "granting a lease", cli.Ctx().Err())
	}
	s := &Session{cli: cli, o: o, log: o.Logger, ttlSec: int64(math.Ceil(o.TTL.Seconds())), private: private,
		interval: o.Window() / 3, done: make(chan struct{}), wg: wg, tick: &sessionTick{ch: make(chan struct{})}, members: map[*candidacy]*Elector{}}
	s.gather = min(s.interval/50, 10*time.Millisecond)
	s.backoff = retryBackoff(s.interval / 4)
	gctx, cancel := context.WithCancel(ctx)
	defer context.AfterFunc(cli.Ctx(), cancel)()
	defer cancel()
	for {
		s.lease = newLeaseID()
		s.renewed = clock.Now()
		var rev int64
		err := limitedOn(gctx, cli, false, func() (err error) {
			rev, err = grant(gctx, cli, s.lease, s.ttlSec)
			return err
		})
		if errors.Is(err, rpctypes.ErrLeaseExist) {
			continue // an ID drawn twice: draw again
		}
		if err != nil {
			if gctx.Err() != nil || !isFinal(cli, err) {
				rctx, cancel := context.WithTimeout(context.Background(), releaseWait)
				_, _ = cli.Revoke(rctx, s.lease) // the grant may have been applied; else it expires, holding nothing
				cancel()
			}
			if ctx.Err() != nil {
				return nil, 0, ctx.Err()
			}
			if isFinal(cli, err) {
				return nil, 0, sessionErr(cli, "granting a lease", err)
			}
			return nil, 0, err
		}
		s.ctx, s.cancel = context.WithCancel(context.Background())
		if life.Done() != nil {
			s.unlife = context.AfterFunc(life, s.lifeOver)
		}
		s.tickLater()
		return s, rev, nil
	}
}

// Lease returns the session's lease.
func (s *Session) Lease() clientv3.LeaseID { return s.lease }

// TTL returns the TTL the session's lease was granted with.
func (s *Session) TTL() time.Duration { return s.o.TTL }

// Done is closed when the session has ended (Close, or the lease lost).
func (s *Session) Done() <-chan struct{} { return s.done }

// Err returns why the session ended, or nil while it lasts.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close ends every Term on the session (with election.ErrClosed), revokes
// the lease — etcd deletes every key of every Elector on it at once, so
// each election's next candidate leads — and stops the renewals. Electors
// on a closed session can no longer campaign; Close them too. Safe to call
// twice.
func (s *Session) Close() error {
	if !s.end(fmt.Errorf("%w: etcd session %016x closed", election.ErrClosed, uint64(s.lease))) {
		return nil
	}
	var err error
	if s.cli.Ctx().Err() == nil {
		ctx, cancel := context.WithTimeout(context.Background(), s.o.Window())
		_, err = s.cli.Revoke(ctx, s.lease)
		cancel()
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			err = nil
		}
	}
	s.wg.Wait()
	if err != nil {
		return fmt.Errorf("etcd election: revoking session lease %016x: %w (it expires on its own within its TTL)", uint64(s.lease), err)
	}
	return nil
}

// end ends the session with cause: every member loses its candidacy, the
// renewals stop. It reports whether this call ended it.
func (s *Session) end(cause error) bool {
	members, ok := s.finish(cause)
	for c, e := range members {
		// A session's loss names no election (a Session carries many):
		// the candidacy's cause names its own.
		e.lose(c, fmt.Errorf("etcd election %s: %w", e.Name(), cause))
	}
	return ok
}

// stop ends a private session without touching its members: its
// candidacy is ending.
func (s *Session) stop() {
	s.finish(fmt.Errorf("%w: the candidacy ended", election.ErrClosed))
}

// finish ends the session with cause unless it has ended already, stops
// its renewals, and returns the members it had and whether this call
// ended it.
func (s *Session) finish(cause error) (map[*candidacy]*Elector, bool) {
	s.mu.Lock()
	members, ok := s.members, s.err == nil
	if ok {
		s.err = cause
		s.members = nil
		close(s.done)
		s.stopTicks()
	}
	s.mu.Unlock()
	s.cancel()
	if s.unlife != nil {
		s.unlife()
	}
	return members, ok // an ended session has no members left
}

// join makes c, a candidacy of e, a member: e loses it if the session is
// lost. It fails if the session has ended.
func (s *Session) join(c *candidacy, e *Elector) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.ended()
	}
	s.members[c] = e
	return nil
}

// leave forgets c.
func (s *Session) leave(c *candidacy) {
	s.mu.Lock()
	delete(s.members, c)
	s.mu.Unlock()
}

// ended is the error of a Campaign on an ended session; s.mu is held.
func (s *Session) ended() error {
	return fmt.Errorf("%w: %w: etcd session %016x has ended (%w); make a new session", election.ErrSessionLost, election.ErrClosed, uint64(s.lease), s.err)
}

// lastRenewed returns the send time of the last renewal etcd confirmed.
func (s *Session) lastRenewed() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.renewed
}

// fresh returns the send time of the last renewal etcd confirmed and
// whether it is recent enough for a Term to begin from it: at most half a
// lease window old.
func (s *Session) fresh(window time.Duration) (time.Time, bool) {
	sent := s.lastRenewed()
	return sent, clock.Since(sent) <= window/2
}

// ticks returns the next renewal tick.
func (s *Session) ticks() *sessionTick {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tick
}

// tickLater arms the first renewal tick. The ticks are a timer, not a
// goroutine of their own: an Elector without a shared Session has a
// session per candidacy, and a process may hold thousands of them. s.wg
// counts the ticks as one while the timer is armed or its tick runs.
func (s *Session) tickLater() {
	s.wg.Add(1)
	s.mu.Lock()
	s.timer = time.AfterFunc(s.interval, s.tickNow)
	s.mu.Unlock()
}

// tickNow wakes the leaders to renew with the session, renews the lease,
// and arms the next tick, every interval (sooner after a failed renewal,
// after a pause that grows from retryDelay, with jitter) until the
// session ends.
func (s *Session) tickNow() {
	s.mu.Lock()
	if s.err != nil || s.ctx.Err() != nil {
		s.ticksDone()
		return
	}
	r := s.pending()
	after := &sessionTick{ch: make(chan struct{})}
	s.tick.r, s.tick.next = r, after
	close(s.tick.ch)
	s.tick = after
	s.mu.Unlock()
	next := s.interval
	if _, _, err := s.await(s.ctx, r); err != nil && s.ctx.Err() == nil {
		n, ok := s.retries.Allow(time.Now(), retryLogEvery)
		if ok {
			s.log.Warn("etcd election: renewing the session lease failed; retrying", "lease", fmt.Sprintf("%016x", uint64(s.lease)), "err", err, "not_logged_since_last", n)
		}
		next = s.backoff.NextBackOff()
	} else {
		s.backoff.Reset()
	}
	s.mu.Lock()
	if s.err != nil || s.ctx.Err() != nil {
		s.ticksDone()
		return
	}
	s.timer.Reset(next)
	s.mu.Unlock()
}

// ticksDone ends the ticks from their own callback; s.mu is held, and
// released.
func (s *Session) ticksDone() {
	s.timer = nil
	s.mu.Unlock()
	s.wg.Done()
}

// lifeOver ends the renewals when the session's life ends (a private
// session's Elector closes) before the session does.
func (s *Session) lifeOver() {
	s.cancel()
	s.mu.Lock()
	s.stopTicks()
	s.mu.Unlock()
}

// stopTicks stops the ticks once the session has ended (s.err is set) or
// its context is canceled; s.mu is held. A tick that has fired already
// ends them itself.
func (s *Session) stopTicks() {
	if s.timer != nil && s.timer.Stop() {
		s.timer = nil
		s.wg.Done()
	}
}

// renew joins the renewal that has not been sent yet, or starts one, and
// returns its send time (never before the call) and outcome. A lease etcd
// no longer knows, or a final error, ends the session.
func (s *Session) renew(ctx context.Context) (sent, replied time.Time, err error) {
	s.mu.Lock()
	if s.err != nil {
		err := s.ended()
		s.mu.Unlock()
		return time.Time{}, time.Time{}, err
	}
	r := s.pending()
	s.mu.Unlock()
	return s.await(ctx, r)
}

// pending returns the renewal that has not been sent yet, started if
// there was none. Called with s.mu held, the session not ended.
func (s *Session) pending() *renewal {
	r := s.next
	if r == nil {
		r = &renewal{done: make(chan struct{})}
		s.next = r
		s.wg.Add(1)
		go s.send(r)
	}
	return r
}

// await waits for r and returns its send time, when its reply (or
// failure) came, and its outcome.
func (s *Session) await(ctx context.Context, r *renewal) (sent, replied time.Time, err error) {
	select {
	case <-r.done:
		return r.sent, r.replied, r.err
	case <-ctx.Done():
		return time.Time{}, time.Time{}, ctx.Err()
	}
}

// send sends r once the others of its tick had a moment to join.
func (s *Session) send(r *renewal) {
	defer s.wg.Done()
	defer close(r.done)
	clock.Sleep(s.ctx, s.gather)
	s.mu.Lock()
	if s.next == r {
		s.next = nil
	}
	r.sent = clock.Now()
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(s.ctx, max(s.interval, retryDelay))
	_, r.err = keeperOf(s.cli).keepAlive(ctx, s.lease)
	r.replied = clock.Now()
	cancel()
	switch {
	case r.err == nil:
		s.mu.Lock()
		if r.sent.After(s.renewed) {
			s.renewed = r.sent
		}
		s.mu.Unlock()
	case errors.Is(r.err, rpctypes.ErrLeaseNotFound):
		s.end(fmt.Errorf("%w: etcd session lease %016x expired or was revoked", election.ErrSessionLost, uint64(s.lease)))
	case isFinal(s.cli, r.err):
		s.end(sessionErr(s.cli, fmt.Sprintf("renewing session lease %016x", uint64(s.lease)), r.err))
	}
}

// shared returns o for an Elector of s to keep: the Options of the
// Elector made on s just before, if they are the same, else a copy of o.
// A sharded service makes its Electors on a Session with the same
// Options (its ID, TTL, hooks), and each would otherwise hold a copy of
// its own: 112 bytes of an Elector's 256. s is nil for an Elector with a
// lease of its own, which gets its own copy. The Options are never
// changed once an Elector holds them.
func (s *Session) shared(o election.Options) *election.Options {
	if s == nil {
		return &o
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opts != nil && sameOptions(s.opts, &o) {
		return s.opts
	}
	s.opts = &o
	return s.opts
}

// sameOptions reports whether a and b are the same Options: every field
// equal, a Value of the same bytes (nil and empty told apart), and no
// renewal hook (funcs cannot be compared).
func sameOptions(a, b *election.Options) bool {
	return a.ID == b.ID && string(a.Value) == string(b.Value) && (a.Value == nil) == (b.Value == nil) &&
		a.Priority == b.Priority && a.PreemptAfter == b.PreemptAfter && a.TTL == b.TTL &&
		a.Drift == b.Drift && a.Margin == b.Margin && a.Logger == b.Logger && a.Events == b.Events &&
		a.BeforeRenew == nil && b.BeforeRenew == nil && a.AfterRenew == nil && b.AfterRenew == nil
}
