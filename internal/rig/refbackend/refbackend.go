// Package refbackend is the reference backend of the conformance suite: an
// in-process store of leased keys shaped like etcd's (leases with a TTL that
// keepalives renew, keys created in revision order, the oldest live key
// leads, the key's creation revision is the fencing token) and an Elector on
// it that keeps the contract of package election.
//
// It exists to prove the suite in electiontest: every subtest passes on it,
// and each of its Bugs makes some subtest fail. It is internal; applications
// that want an in-process election use backend/inmem.
package refbackend

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/electkit/election"
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
}

var (
	errLeaseNotFound = errors.New("refbackend: lease not found")
	errConnLost      = errors.New("refbackend: connection lost")
	errSilent        = errors.New("refbackend: the store did not answer")
)

// Store is the in-process store of one election.
type Store struct {
	bugs  Bugs
	board *watch.Board

	mu   sync.Mutex
	rev  uint64
	keys []*key // live keys, oldest first
}

type key struct {
	leader election.Leader
	lease  *lease
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
	return &Store{bugs: bugs, board: watch.NewBoard()}
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
	k := &key{lease: l, leader: election.Leader{ID: o.ID, Value: o.Value, Priority: o.Priority, Token: s.rev}}
	if s.bugs.ReuseToken {
		k.leader.Token = 1
	}
	l.key = k
	s.keys = append(s.keys, k)
	s.publishLocked()
	return k, nil
}

func (s *Store) publishLocked() {
	var l election.Leader
	if len(s.keys) > 0 {
		l = s.keys[0].leader
	}
	s.board.Set(l)
}

// confirm renews k's lease and reports whether k is the oldest live key:
// the check Campaign makes before it returns (P4).
func (s *Store) confirm(k *key) error {
	if err := s.keepAlive(k.lease); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.bugs.EveryoneLeads && (len(s.keys) == 0 || s.keys[0] != k) {
		return fmt.Errorf("refbackend: key %d is not the oldest", k.leader.Token)
	}
	return nil
}

func (s *Store) isHead(k *key) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bugs.EveryoneLeads || len(s.keys) > 0 && s.keys[0] == k
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
	lc      *election.LeaseClock
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
	for !e.s.isHead(c.key) {
		if err := e.answer(ctx); err != nil {
			if errors.Is(err, election.ErrClosed) {
				return nil, err
			}
			e.withdraw(c)
			return nil, err
		}
		_, changed := e.s.board.Get()
		if e.s.isHead(c.key) {
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
	// P4: the key exists under a live lease and is the oldest, confirmed by
	// a renewal whose send time starts the Term's deadline.
	if err := e.answer(ctx); err != nil {
		if errors.Is(err, election.ErrClosed) {
			return nil, err
		}
		e.withdraw(c)
		return nil, err
	}
	sent := clock.Now()
	if err := e.connErr(); err != nil {
		return nil, e.lost(c)
	}
	if err := e.s.confirm(c.key); err != nil {
		e.withdraw(c)
		return nil, fmt.Errorf("%w: confirming key %d of %s: %w", election.ErrSessionLost, c.key.leader.Token, e.o.ID, err)
	}
	o := e.o
	if e.s.bugs.LateExpiry {
		o.TTL *= 2
	}
	if e.s.bugs.NoHooks {
		o.BeforeRenew, o.AfterRenew = nil, nil
	}
	term, lc := election.NewTerm(o, c.key.leader, sent)
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
	var cause error = fmt.Errorf("%w: the lease of key %d was revoked", election.ErrSessionLost, c.key.leader.Token)
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
	return fmt.Errorf("%w: lease of key %d expired", election.ErrSessionLost, c.key.leader.Token)
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
	var lc *election.LeaseClock
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
	var lc *election.LeaseClock
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
				lc.End(fmt.Errorf("%w: lease of key %d", election.ErrSessionLost, c.key.leader.Token))
			}
		}
	}
}

// Resign implements election.Elector. It ends the Term at once and waits
// for the key's release while ctx lasts; a release the store has not
// answered goes on in the background.
func (e *Elector) Resign(ctx context.Context) error {
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
	released := e.end(c, election.ErrResigned)
	done := ctx.Done()
	if e.s.bugs.IgnoreCtxWhenSilent {
		done = nil
	}
	select {
	case <-released:
		return nil
	case <-done:
		return ctx.Err()
	case <-e.closing:
		return nil
	}
}

// Leader implements election.Elector.
func (e *Elector) Leader(ctx context.Context) (election.Leader, error) {
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
	if e.closed {
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
