// Package refbackend is the reference backend of the conformance suite: an
// in-process store of leased keys shaped like etcd's (leases with a TTL that
// keepalives renew, keys queued by priority and then by revision; the head
// of the queue claims the leadership when nobody holds it, or the target of
// a transfer does; the claim's revision is the fencing token) and an
// Elector on it that keeps the contract of package election, with
// priority, preemption and transfer.
//
// It exists to prove the suite in electiontest: every subtest passes on it,
// and each of its Bugs makes some subtest fail. It is internal; applications
// that want an in-process election use backend/inmem.
package refbackend

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
	"github.com/electkit/election/internal/clock"
	"github.com/electkit/election/internal/skeleton"
	"github.com/electkit/election/internal/watch"
)

// Bugs are deliberate faults, each breaking one promise of the contract.
type Bugs struct {
	EveryoneLeads   bool // Campaign returns at once: several leaders (P1)
	ReuseToken      bool // every key gets token 1 (P2)
	ResignKeepsTerm bool // Resign deletes the key but leaves the Term valid (P3, P5)
	LateExpiry      bool // Terms stay valid for twice the lease, past the store's expiry (P3)
	ResignNoRevoke  bool // Resign and Close leave the key to expire with its lease (P6)
	NoRenew         bool // keepalives never reach the lease clock: every Term dies after one window (P7)
	NoHooks         bool // the renewal hooks are never called (P7, ErrUnhealthy)
	// IgnoreCtxWhenSilent: while the store does not answer, Campaign and
	// Resign wait for it, whatever their ctx says.
	IgnoreCtxWhenSilent bool
	// EvictionUnnoticed: a leader whose lease another client revokes keeps
	// its Term until its next keepalive fails (P3).
	EvictionUnnoticed bool
	// NoSentinel: a Term ended by another client's revoke ends with
	// context.Canceled, none of package election's errors.
	NoSentinel bool
	// IgnorePriority: the queue is first come, first served whatever the
	// candidates' priorities.
	IgnorePriority bool
	// NoPreemption: WithPreemption is ignored; a leader never steps down
	// for a candidate of higher priority.
	NoPreemption bool
	// PreemptAtOnce: a leader made WithPreemption steps down as soon as a
	// candidate of higher priority queues, without the hold-off.
	PreemptAtOnce bool
	// TransferToHead: Transfer ends the Term and resigns, but the hand-over
	// names nobody: the head of the queue leads, not the target.
	TransferToHead bool
	// TransferEarly: Transfer hands over first and ends the old Term only
	// once the target leads (P3).
	TransferEarly bool
	// TermBoundToCampaignCtx: the end of the ctx given to Campaign ends
	// the Term and releases the key even after Campaign won, so that under
	// election.Run the next candidate leads before OnElected has stopped.
	TermBoundToCampaignCtx bool
	// ResignUsesTermCtx: Resign talks to the store with the caller's ctx
	// as it is, which the end of the Term cancels when it is OnElected's:
	// stepping down from inside OnElected returns context.Canceled.
	ResignUsesTermCtx bool
}

var (
	errLeaseNotFound = errors.New("refbackend: lease not found")
	errConnLost      = errors.New("refbackend: connection lost")
	errSilent        = errors.New("refbackend: the store did not answer")
	errNotTurn       = errors.New("refbackend: not this key's turn")
)

// Store is the in-process store of one election.
type Store struct {
	bugs  Bugs
	board *watch.Board

	mu      sync.Mutex
	rev     uint64
	keys    []*key        // live keys, oldest first
	leader  *key          // the key that leads, nil if none
	handoff *key          // a Transfer's target while it has not claimed
	changed chan struct{} // closed and replaced at every change
}

type key struct {
	leader election.Leader // Token set when it claims
	lease  *lease
	rev    uint64    // arrival
	since  time.Time // arrival, on the store's clock
}

type lease struct {
	ttl       time.Duration
	timer     *time.Timer
	expiresAt time.Time
	dead      chan struct{} // closed when the lease expired or was revoked
	key       *key
	// revoked, when set, is called under the store's lock when another
	// client revokes the lease: the owner's watch on its own key, which the
	// store notifies before anyone else (a model: a real store promises no
	// order; a real backend's successor needs one more round trip).
	revoked func()
}

// NewStore returns an empty store with the given faults.
func NewStore(bugs Bugs) *Store {
	return &Store{bugs: bugs, board: watch.NewBoard(), changed: make(chan struct{})}
}

func (s *Store) grant(ttl time.Duration) *lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := &lease{ttl: ttl, dead: make(chan struct{}), expiresAt: clock.Now().Add(ttl)}
	l.timer = time.AfterFunc(ttl, func() { s.expire(l) })
	return l
}

// keepAlive renews l for another TTL from now (the store's receive time).
func (s *Store) keepAlive(l *lease) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := clock.Now()
	if !now.Before(l.expiresAt) {
		s.revokeLocked(l, false)
	}
	select {
	case <-l.dead:
		return errLeaseNotFound
	default:
	}
	l.expiresAt = now.Add(l.ttl)
	l.timer.Reset(l.ttl)
	return nil
}

func (s *Store) expire(l *lease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if clock.Now().Before(l.expiresAt) {
		return // renewed since the timer fired
	}
	s.revokeLocked(l, false)
}

func (s *Store) revoke(l *lease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revokeLocked(l, false)
}

// revokeByOther revokes l as another client of the store does: its owner
// is told.
func (s *Store) revokeByOther(l *lease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revokeLocked(l, true)
}

func (s *Store) revokeLocked(l *lease, byOther bool) {
	select {
	case <-l.dead:
		return
	default:
	}
	close(l.dead)
	l.timer.Stop()
	if l.revoked != nil && byOther {
		l.revoked()
	}
	for i, k := range s.keys {
		if k.lease == l {
			s.keys = append(s.keys[:i], s.keys[i+1:]...)
			if s.leader == k {
				s.leader = nil
			}
			if s.handoff == k {
				s.handoff = nil
			}
			break
		}
	}
	s.publishLocked()
}

// put creates the candidate's key under l at the next revision.
func (s *Store) put(l *lease, o election.Options) (*key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-l.dead:
		return nil, errLeaseNotFound
	default:
	}
	s.rev++
	k := &key{lease: l, rev: s.rev, since: clock.Now(), leader: election.Leader{ID: o.ID, Value: o.Value, Priority: o.Priority}}
	l.key = k
	s.keys = append(s.keys, k)
	s.publishLocked()
	return k, nil
}

func (s *Store) publishLocked() {
	var l election.Leader
	if s.leader != nil {
		l = s.leader.leader
	}
	s.board.Set(l)
	close(s.changed)
	s.changed = make(chan struct{})
}

// watch returns a channel closed at the store's next change.
func (s *Store) watch() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// aheadLocked reports whether a is served before b: higher priority
// first, then earlier arrival.
func (s *Store) aheadLocked(a, b *key) bool {
	if !s.bugs.IgnorePriority && a.leader.Priority != b.leader.Priority {
		return a.leader.Priority > b.leader.Priority
	}
	return a.rev < b.rev
}

// waitingLocked returns the waiting keys (all but the leader's) in the
// order they would lead.
func (s *Store) waitingLocked() []*key {
	var ks []*key
	for _, k := range s.keys {
		if k != s.leader {
			ks = append(ks, k)
		}
	}
	slices.SortStableFunc(ks, func(a, b *key) int {
		switch {
		case s.aheadLocked(a, b):
			return -1
		case s.aheadLocked(b, a):
			return 1
		}
		return 0
	})
	return ks
}

// canLeadLocked reports whether k may claim the leadership now: nobody
// holds it, and k is the target of a pending transfer or, without one,
// the head of the queue.
func (s *Store) canLeadLocked(k *key) bool {
	switch {
	case s.bugs.EveryoneLeads:
		return true
	case s.leader != nil:
		return false
	case s.handoff != nil:
		return s.handoff == k
	}
	w := s.waitingLocked()
	return len(w) > 0 && w[0] == k
}

// confirm renews k's lease and claims the leadership for it if it may:
// the check Campaign makes before it returns (P4). The claim's revision is
// the token.
func (s *Store) confirm(k *key) error {
	if err := s.keepAlive(k.lease); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.canLeadLocked(k) {
		return fmt.Errorf("%w: key %d of %s", errNotTurn, k.rev, k.leader.ID)
	}
	s.rev++
	k.leader.Token = s.rev
	if s.bugs.ReuseToken {
		k.leader.Token = 1
	}
	s.leader, s.handoff = k, nil
	s.publishLocked()
	return nil
}

func (s *Store) canLead(k *key) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.canLeadLocked(k)
}

// handOver revokes from's lease (deleting its key and the leadership it
// holds) and, in the same step, names to the next leader if to is live.
func (s *Store) handOver(from *lease, to *key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if slices.Contains(s.keys, to) && !s.bugs.TransferToHead {
		s.handoff = to
	}
	s.revokeLocked(from, false)
}

// lapse withdraws a hand-over to k that k has not taken.
func (s *Store) lapse(k *key) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.handoff == k {
		s.handoff = nil
		s.publishLocked()
	}
}

// led reports whether k has claimed the leadership, and whether a
// hand-over to it is still pending.
func (s *Store) led(k *key) (led, pending bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return k.leader.Token != 0, s.handoff == k
}

// target returns the waiting key a transfer from k goes to: the best one
// for "", else the best one whose ID is to.
func (s *Store) target(k *key, to string) *key {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.waitingLocked() {
		if w != k && (to == "" || w.leader.ID == to) {
			return w
		}
	}
	return nil
}

// challenger returns the best waiting key of strictly higher priority than
// k's, if any.
func (s *Store) challenger(k *key) *key {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w := s.waitingLocked(); len(w) > 0 && w[0].leader.Priority > k.leader.Priority {
		return w[0]
	}
	return nil
}

// Elector is one candidate on a Store.
type Elector struct {
	s       *Store
	o       election.Options
	gate    *skeleton.Gate  // one Campaign at a time; Close's signal
	closing <-chan struct{} // gate.Closing()
	cutCh   chan struct{}
	wg      sync.WaitGroup

	mu     sync.Mutex
	closed bool
	cut    bool
	silent chan struct{} // non-nil while the store does not answer; closed by heal
	cand   *candidacy
	terms  skeleton.Terms // Terms whose hooks may still run: Close waits for them
}

// candidacy is one key under one lease, from Campaign to its end.
type candidacy struct {
	lease   *lease
	key     *key
	stop    chan struct{} // ends the keepalive loop
	elected chan struct{} // closed when clock is set
	lc      *backend.LeaseClock
}

var _ election.Elector = (*Elector)(nil)

// NewElector returns a candidate of the store's election.
func (s *Store) NewElector(opts ...election.Option) (*Elector, error) {
	o, err := election.NewOptions(opts...)
	if err != nil {
		return nil, err
	}
	gate := skeleton.NewGate()
	return &Elector{s: s, o: o, gate: gate, closing: gate.Closing(), cutCh: make(chan struct{})}, nil
}

// Options returns the options the Elector was made with (election.Run
// reports its campaigns to their Events). Their Value is a copy.
func (e *Elector) Options() election.Options {
	o := e.o
	o.Value = append([]byte(nil), o.Value...)
	return o
}

// Crash cuts the Elector off from the store for good, as if its process
// died: it stops renewing and its later calls fail; its lease expires on
// the store after the TTL. Close still releases its local resources.
func (e *Elector) Crash() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.cut {
		e.cut = true
		close(e.cutCh)
	}
}

// Silence makes the store stop answering the Elector until heal is
// called: its requests wait (for their ctx, or for ever), its keepalives
// fail, its lease is no longer renewed.
func (e *Elector) Silence() (heal func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.silent == nil {
		e.silent = make(chan struct{})
	}
	ch := e.silent
	return func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.silent == ch {
			close(ch)
			e.silent = nil
		}
	}
}

// Evict revokes the lease of the Elector's current candidacy, as another
// client of the store can.
func (e *Elector) Evict() {
	e.mu.Lock()
	c := e.cand
	e.mu.Unlock()
	if c != nil {
		e.s.revokeByOther(c.lease)
	}
}

// answer waits while the store does not answer: until it does again, ctx
// ends or the Elector closes.
func (e *Elector) answer(ctx context.Context) error {
	e.mu.Lock()
	ch := e.silent
	e.mu.Unlock()
	if ch == nil {
		return nil
	}
	done := ctx.Done()
	if e.s.bugs.IgnoreCtxWhenSilent {
		done = nil
	}
	select {
	case <-ch:
		return nil
	case <-done:
		return ctx.Err()
	case <-e.closing:
		return election.ErrClosed
	}
}

func (e *Elector) connErr() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.closed:
		return election.ErrClosed
	case e.cut:
		return fmt.Errorf("%w: %w", election.ErrSessionLost, errConnLost)
	}
	return nil
}

// Campaign implements election.Elector.
func (e *Elector) Campaign(ctx context.Context) (*election.Term, error) {
	if err := e.gate.Enter(ctx); err != nil {
		return nil, err
	}
	defer e.gate.Leave()

	e.mu.Lock()
	if c := e.cand; c != nil && c.lc != nil && c.lc.Term().Err() == nil && !e.closed {
		e.mu.Unlock()
		return c.lc.Term(), nil // already leading
	}
	e.mu.Unlock()
	if err := e.connErr(); err != nil {
		return nil, err
	}
	if err := e.answer(ctx); err != nil {
		return nil, err
	}
	c, err := e.start()
	if err != nil {
		return nil, err
	}
	var sent time.Time
	for {
		for !e.s.canLead(c.key) {
			if err := e.answer(ctx); err != nil {
				if errors.Is(err, election.ErrClosed) {
					return nil, err
				}
				e.withdraw(c)
				return nil, err
			}
			changed := e.s.watch()
			if e.s.canLead(c.key) {
				break
			}
			select {
			case <-changed:
			case <-c.lease.dead:
				return nil, e.lost(c)
			case <-e.cutCh:
				return nil, e.lost(c)
			case <-e.closing:
				return nil, election.ErrClosed
			case <-ctx.Done():
				e.withdraw(c)
				return nil, ctx.Err()
			}
		}
		// P4: the key exists under a live lease and may lead, confirmed by
		// a renewal whose send time starts the Term's deadline.
		if err := e.answer(ctx); err != nil {
			if errors.Is(err, election.ErrClosed) {
				return nil, err
			}
			e.withdraw(c)
			return nil, err
		}
		sent = clock.Now()
		if err := e.connErr(); err != nil {
			return nil, e.lost(c)
		}
		err = e.s.confirm(c.key)
		if errors.Is(err, errNotTurn) {
			continue // someone else claimed first, or a better candidate queued
		}
		if err != nil {
			e.withdraw(c)
			return nil, fmt.Errorf("%w: confirming key %d of %s: %w", election.ErrSessionLost, c.key.rev, e.o.ID, err)
		}
		break
	}
	o := e.o
	if e.s.bugs.LateExpiry {
		o.TTL *= 2
	}
	if e.s.bugs.NoHooks {
		o.BeforeRenew, o.AfterRenew = nil, nil
	}
	term, lc := backend.NewTerm(o, c.key.leader, sent)
	e.mu.Lock()
	if e.cand != c || e.closed {
		e.mu.Unlock()
		lc.End(election.ErrResigned)
		if e.isClosed() {
			return nil, election.ErrClosed
		}
		return nil, election.ErrResigned
	}
	c.lc = lc
	e.terms.Add(lc)
	close(c.elected)
	if e.s.bugs.TermBoundToCampaignCtx {
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			select {
			case <-ctx.Done():
				e.withdraw(c)
			case <-term.Done():
			}
		}()
	}
	e.mu.Unlock()
	if err := term.Err(); err != nil {
		e.withdraw(c)
		return nil, err
	}
	return term, nil
}

// forget drops c's ended Term from e.terms once its hooks are done
// (skeleton.Terms.Forget; a Term still valid, left so by a bug, stays for
// Close to end).
func (e *Elector) forget(c *candidacy) {
	e.mu.Lock()
	lc := c.lc
	e.mu.Unlock()
	e.terms.Forget(lc)
}

func (e *Elector) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// start grants a lease, creates the key and starts the keepalive loop. A
// candidacy left from a Term that ended on its own is ended first, so the
// new key does not queue behind the old one.
func (e *Elector) start() (*candidacy, error) {
	e.mu.Lock()
	old := e.cand
	e.mu.Unlock()
	if old != nil {
		e.withdraw(old)
	}
	l := e.s.grant(e.o.TTL)
	k, err := e.s.put(l, e.o)
	if err != nil {
		e.s.revoke(l)
		return nil, fmt.Errorf("%w: creating the key of %s: %w", election.ErrSessionLost, e.o.ID, err)
	}
	c := &candidacy{lease: l, key: k, stop: make(chan struct{}), elected: make(chan struct{})}
	if !e.s.bugs.EvictionUnnoticed {
		e.s.mu.Lock()
		l.revoked = func() { e.evicted(c) }
		e.s.mu.Unlock()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		e.s.revoke(l)
		return nil, election.ErrClosed
	}
	e.cand = c
	e.wg.Add(1)
	go e.keepAlive(c)
	return c, nil
}

// evicted ends c's Term, if it leads, when another client revokes its
// lease. It runs under the store's lock.
func (e *Elector) evicted(c *candidacy) {
	e.mu.Lock()
	lc := c.lc
	e.mu.Unlock()
	if lc == nil {
		return // a waiter: Campaign sees the lease die
	}
	var cause error = fmt.Errorf("%w: the lease of key %d was revoked", election.ErrSessionLost, c.key.rev)
	if e.s.bugs.NoSentinel {
		cause = context.Canceled
	}
	lc.End(cause)
}

// lost reports why a waiting candidacy ended: Resign, Close, or the lease.
func (e *Elector) lost(c *candidacy) error {
	e.mu.Lock()
	mine := e.cand == c
	closed, cut := e.closed, e.cut
	e.mu.Unlock()
	switch {
	case closed:
		return election.ErrClosed
	case !mine:
		return election.ErrResigned
	}
	e.withdraw(c)
	if cut {
		return fmt.Errorf("%w: %w", election.ErrSessionLost, errConnLost)
	}
	return fmt.Errorf("%w: lease of key %d expired", election.ErrSessionLost, c.key.rev)
}

// withdraw ends c if it is still the current candidacy.
func (e *Elector) withdraw(c *candidacy) {
	e.mu.Lock()
	if e.cand != c {
		e.mu.Unlock()
		return
	}
	e.cand = nil
	e.mu.Unlock()
	e.end(c, election.ErrResigned)
}

// end ends c's Term (if any) with cause, first, then stops its keepalives
// and deletes its key by revoking the lease. It does not wait for renewal
// hooks (a hook may be the caller, through Resign); Close does.
func (e *Elector) end(c *candidacy, cause error) (released <-chan struct{}) {
	var lc *backend.LeaseClock
	e.mu.Lock()
	lc = c.lc
	e.mu.Unlock()
	if lc != nil && !(e.s.bugs.ResignKeepsTerm && errors.Is(cause, election.ErrResigned)) {
		lc.End(cause)
	}
	close(c.stop)
	done := make(chan struct{})
	e.mu.Lock()
	cut, silent, closed := e.cut, e.silent, e.closed
	if silent != nil && !closed {
		e.wg.Add(1) // before Close's Wait: Close sets closed under mu first
	}
	e.mu.Unlock()
	switch {
	case cut || e.s.bugs.ResignNoRevoke: // a cut-off candidate's lease expires on the store
		close(done)
	case silent == nil:
		e.s.revoke(c.lease)
		close(done)
	case closed: // the store does not answer: the lease expires there
		close(done)
	default:
		// The revoke waits for the store to answer, in the background;
		// Close stops waiting and leaves the lease to expire.
		go func() {
			defer e.wg.Done()
			defer close(done)
			select {
			case <-silent:
				e.s.revoke(c.lease)
			case <-e.closing:
			}
		}()
	}
	return done
}

// keepAlive renews c's lease every TTL/3 while the candidacy lasts, drives
// the Term's lease clock while leading, and deletes the key when the Term
// ends on its own (expiry, lost lease, unhealthy hook).
func (e *Elector) keepAlive(c *candidacy) {
	defer e.wg.Done()
	defer e.forget(c)
	tick := time.NewTicker(e.o.TTL / 3)
	defer tick.Stop()
	elected := c.elected
	var termDone <-chan struct{}
	var lc *backend.LeaseClock
	for {
		select {
		case <-c.stop:
			return
		case <-elected:
			elected = nil
			e.mu.Lock()
			lc = c.lc
			e.mu.Unlock()
			termDone = lc.Term().Done()
			if e.o.PreemptAfter > 0 && !e.s.bugs.NoPreemption {
				e.wg.Add(1)
				go e.preempt(c, termDone)
			}
			continue
		case <-termDone:
			e.withdraw(c)
			return
		case <-tick.C:
		}
		if lc != nil && !e.s.bugs.NoHooks && lc.BeforeRenew() != nil {
			continue // the Term ended; termDone fires next
		}
		sent := clock.Now()
		err := e.connErr()
		if err == nil {
			e.mu.Lock()
			if e.silent != nil {
				err = errSilent
			}
			e.mu.Unlock()
		}
		if err == nil {
			err = e.s.keepAlive(c.lease)
		}
		if lc != nil && !e.s.bugs.NoRenew {
			lc.Renewed(sent, err)
		}
		if lc != nil {
			if errors.Is(err, errLeaseNotFound) {
				lc.End(fmt.Errorf("%w: lease of key %d", election.ErrSessionLost, c.key.rev))
			}
		}
	}
}

// Resign implements election.Elector. It ends the Term at once and waits
// for the key's release while ctx lasts (and for a lease window after the
// Term's end, when that is what ends ctx: backend.ResignContext); a
// release the store has not answered goes on in the background.
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
	e.mu.Unlock()
	if c == nil {
		return nil
	}
	rctx, cancel := backend.ResignContext(ctx, e.o.Window())
	defer cancel()
	released := e.end(c, election.ErrResigned)
	if e.s.bugs.ResignUsesTermCtx && ctx.Err() != nil {
		return ctx.Err() // the release request, sent with ctx, fails at once
	}
	select {
	case <-released:
		return nil
	default:
	}
	done := rctx.Done()
	if e.s.bugs.IgnoreCtxWhenSilent {
		done = nil
	}
	select {
	case <-released:
		return nil
	case <-done:
		return context.Cause(rctx)
	case <-e.closing:
		return nil
	}
}

// Leader implements election.Elector.
func (e *Elector) Leader(ctx context.Context) (election.Leader, error) {
	if err := skeleton.CheckContext(ctx); err != nil {
		return election.Leader{}, err
	}
	if err := ctx.Err(); err != nil {
		return election.Leader{}, err
	}
	if err := e.connErr(); err != nil {
		return election.Leader{}, err
	}
	l, _ := e.s.board.Get()
	if l.IsZero() {
		return l, election.ErrNoLeader
	}
	l.Value = append([]byte(nil), l.Value...)
	return l, nil
}

// Observe implements election.Elector.
func (e *Elector) Observe(ctx context.Context) <-chan election.Leader {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || ctx == nil {
		ch := make(chan election.Leader)
		close(ch)
		return ch
	}
	return e.s.board.Stream(ctx, e.closing, &e.wg)
}

// Close implements election.Elector.
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
	e.mu.Unlock()
	if c != nil {
		e.end(c, election.ErrClosed)
	}
	e.wg.Wait()
	e.terms.EndAll(election.ErrClosed)
	return nil
}

// Candidates implements backend.Lister.
func (e *Elector) Candidates(ctx context.Context) ([]election.Candidate, error) {
	if err := skeleton.CheckContext(ctx); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := e.connErr(); err != nil {
		return nil, err
	}
	if err := e.answer(ctx); err != nil {
		return nil, err
	}
	e.s.mu.Lock()
	defer e.s.mu.Unlock()
	var out []election.Candidate
	for _, k := range e.s.waitingLocked() {
		l := k.leader
		out = append(out, election.Candidate{ID: l.ID, Value: append([]byte(nil), l.Value...), Priority: l.Priority})
	}
	return out, nil
}

// Transfer implements backend.Transferer.
func (e *Elector) Transfer(ctx context.Context, t *election.Term, to string, fallback election.Fallback) error {
	if err := skeleton.CheckContext(ctx); err != nil {
		return err
	}
	e.mu.Lock()
	c, closed := e.cand, e.closed
	e.mu.Unlock()
	if closed {
		return election.ErrClosed
	}
	if c == nil || c.lc == nil || c.lc.Term() != t || t.Err() != nil {
		return fmt.Errorf("%w: %s does not lead with %v", election.ErrNotLeader, e.o.ID, t)
	}
	if err := e.connErr(); err != nil {
		return err
	}
	if err := e.answer(ctx); err != nil {
		return err
	}
	target := e.s.target(c.key, to)
	if target == nil {
		what := skeleton.NotWaiting(to)
		err := fmt.Errorf("%w: transfer from %s: %s", election.ErrNoCandidate, e.o.ID, what)
		if fallback == election.StepDown {
			return errors.Join(err, e.Resign(ctx))
		}
		return err
	}
	return e.handOver(ctx, c, target, fmt.Errorf("%w to %s", election.ErrTransferred, target.leader.ID))
}

// handOver ends c's Term with cause, deletes its key and names target the
// next leader in one step of the store, then waits until target leads, for
// at most a lease window.
func (e *Elector) handOver(ctx context.Context, c *candidacy, target *key, cause error) error {
	e.mu.Lock()
	if e.cand != c {
		e.mu.Unlock()
		return fmt.Errorf("%w: %s's Term ended before the transfer", election.ErrNotLeader, e.o.ID)
	}
	e.cand = nil
	lc := c.lc
	e.mu.Unlock()
	early := e.s.bugs.TransferEarly
	if !early {
		lc.End(cause)
	}
	close(c.stop)
	e.s.handOver(c.lease, target)
	bound := time.NewTimer(e.o.Window())
	defer bound.Stop()
	fail := func(why error) error {
		e.s.lapse(target)
		if early {
			lc.End(cause)
		}
		return why
	}
	for {
		changed := e.s.watch()
		led, pending := e.s.led(target)
		if led {
			if early {
				// Late: after the target's Campaign has returned (in a
				// bubble, once everything else blocks).
				time.Sleep(time.Millisecond)
				lc.End(cause)
			}
			return nil
		}
		if !pending {
			return fail(fmt.Errorf("%w: %s left before leading", election.ErrTransferFailed, target.leader.ID))
		}
		select {
		case <-changed:
		case <-bound.C:
			return fail(fmt.Errorf("%w: %s did not lead within %v", election.ErrTransferFailed, target.leader.ID, e.o.Window()))
		case <-ctx.Done():
			return fail(ctx.Err())
		case <-e.closing:
			return fail(election.ErrClosed)
		}
	}
}

// preempt runs while c leads with WithPreemption: once a waiting candidate
// of strictly higher priority has waited the hold-off, it hands the
// leadership to it, ending the Term with ErrPreempted.
func (e *Elector) preempt(c *candidacy, done <-chan struct{}) {
	defer e.wg.Done()
	hold := e.o.PreemptAfter
	if e.s.bugs.PreemptAtOnce {
		hold = 0
	}
	var tm *time.Timer
	defer func() {
		if tm != nil {
			tm.Stop()
		}
	}()
	for {
		changed := e.s.watch()
		var fire <-chan time.Time
		if ch := e.s.challenger(c.key); ch != nil {
			d := ch.since.Add(hold).Sub(clock.Now())
			if d <= 0 {
				cause := fmt.Errorf("%w: %s (priority %d) waited %v", election.ErrPreempted, ch.leader.ID, ch.leader.Priority, hold)
				_ = e.handOver(context.Background(), c, ch, cause) // its outcome is the next leader's
				return
			}
			tm = time.NewTimer(d)
			fire = tm.C
		}
		select {
		case <-changed:
		case <-fire:
		case <-done:
			return
		case <-c.stop:
			return
		}
		if tm != nil {
			tm.Stop()
		}
	}
}
