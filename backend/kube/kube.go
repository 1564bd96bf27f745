package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
	"github.com/electkit/election/internal/clock"
	"github.com/electkit/election/internal/lograte"
	"github.com/electkit/election/internal/skeleton"
	"github.com/electkit/election/internal/watch"
)

// MaxValueSize bounds WithValue on this backend: a Lease's annotations
// may hold 256 KiB in all, and the value goes there base64-encoded.
const MaxValueSize = 128 << 10

// Elector is one candidate of an election on a Kubernetes Lease. It
// implements election.Elector; see the package doc for the protocol.
type Elector struct {
	leases  coordinationv1client.LeasesGetter
	ns      string
	name    string
	o       election.Options
	seconds int32 // the TTL in whole seconds: the Lease's leaseDurationSeconds
	log     *slog.Logger

	gate    *skeleton.Gate
	closing <-chan struct{}
	bg      context.Context // canceled by Close
	stopBg  context.CancelFunc
	wg      sync.WaitGroup
	warned  lograte.Limiter

	mu      sync.Mutex
	closed  bool
	cur     *leadership
	resign  chan struct{} // closed by Resign: the waiting Campaign withdraws
	resigns sync.Once
	terms   skeleton.Terms
	obs     *watch.Feed
}

var _ election.Elector = (*Elector)(nil)

// New returns a candidate of the election held in the Lease called name in
// namespace, written through leases (a clientset's CoordinationV1(), the
// client client-go's resourcelock.LeaseLock takes). The Lease is the one
// LeaseLock reads and writes, so candidates of client-go's leaderelection
// and of this package can share it (see the package doc). Campaign creates
// it when it is missing.
//
// The TTL is the Lease's leaseDurationSeconds, so it must be a whole
// number of seconds. namespace must be a DNS label and name a DNS
// subdomain, as the API server requires. Bad arguments and options are
// refused with an *election.OptionError naming the value.
func New(leases coordinationv1client.LeasesGetter, namespace, name string, opts ...election.Option) (*Elector, error) {
	if leases == nil {
		return nil, &election.OptionError{Field: "leases", Value: "nil", Reason: "a client of coordination.k8s.io/v1 Leases is required (clientset.CoordinationV1())"}
	}
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return nil, &election.OptionError{Field: "namespace", Value: backend.QuoteValue(namespace), Reason: "must be a Kubernetes namespace name: " + errs[0]}
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return nil, &election.OptionError{Field: "name", Value: backend.QuoteValue(name), Reason: "must be a Lease name (a DNS subdomain): " + errs[0]}
	}
	if len(name) > MaxNameLen {
		return nil, &election.OptionError{Field: "name", Value: backend.QuoteValue(name), Reason: fmt.Sprintf("is %d bytes, more than kube.MaxNameLen (%d): the candidates' records are named after it", len(name), MaxNameLen)}
	}
	o, err := election.NewOptions(opts...)
	if err != nil {
		return nil, err
	}
	if o.TTL%time.Second != 0 {
		return nil, &election.OptionError{Field: "TTL", Value: o.TTL.String(), Reason: "must be a whole number of seconds: it is the Lease's leaseDurationSeconds"}
	}
	if len(o.Value) > MaxValueSize {
		return nil, &election.OptionError{Field: "Value", Value: strconv.Itoa(len(o.Value)) + " bytes", Reason: fmt.Sprintf("must be at most kube.MaxValueSize (%d bytes): it is kept in the Lease's annotations", MaxValueSize)}
	}
	bg, stop := context.WithCancel(context.Background())
	gate := skeleton.NewGate()
	return &Elector{
		leases: leases, ns: namespace, name: name, o: o, seconds: int32(o.TTL / time.Second), log: o.Logger,
		gate: gate, closing: gate.Closing(), bg: bg, stopBg: stop, obs: watch.NewFeed(),
	}, nil
}

// Name returns the Lease's name.
func (e *Elector) Name() string { return e.name }

// Namespace returns the Lease's namespace.
func (e *Elector) Namespace() string { return e.ns }

// ID returns the candidate's ID, the holderIdentity it writes.
func (e *Elector) ID() string { return e.o.ID }

// Options returns the options the Elector was made with. Their Value is a
// copy.
func (e *Elector) Options() election.Options {
	o := e.o
	o.Value = append([]byte(nil), o.Value...)
	return o
}

// lease names the Lease in errors and logs.
func (e *Elector) lease() string { return e.ns + "/" + e.name }

// renewEvery is the leader's renewal interval: a third of the lease
// window, so two renewals may fail before the Term ends.
func (e *Elector) renewEvery() time.Duration { return e.o.Window() / 3 }

// leadership is one Term and what drives it.
type leadership struct {
	lc     *backend.LeaseClock
	token  uint64
	v      *view
	stopV  func()
	ctx    context.Context // canceled by halt: the leader's requests end
	cancel context.CancelFunc
	done   chan struct{} // closed when the leader's goroutine has returned

	mu    sync.Mutex
	lease *coordinationv1.Lease // the latest version of the Lease that is ours
}

func (ld *leadership) halt() { ld.cancel() }

func (ld *leadership) current() *coordinationv1.Lease {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	return ld.lease
}

// adopt makes l the version the next write is conditional on, if it is
// newer.
func (ld *leadership) adopt(l *coordinationv1.Lease, version uint64) {
	ld.mu.Lock()
	defer ld.mu.Unlock()
	if r, err := readLease(ld.lease); err != nil || version > r.version {
		ld.lease = l
	}
}

// startView starts a view of the Lease on a goroutine of e's; stop ends it
// and waits for it.
func (e *Elector) startView() (*view, func()) {
	v := newView(e)
	ctx, cancel := context.WithCancel(e.bg)
	done := make(chan struct{})
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		defer close(done)
		v.run(ctx)
	}()
	return v, func() { cancel(); <-done }
}

// Campaign implements election.Elector. It follows the Lease with a watch
// and takes it, with an update conditional on the resourceVersion it read,
// once nobody holds it (holderIdentity empty: released) or the holder's
// lease has lapsed on this candidate's clock: leaseDurationSeconds after
// it last saw the record change, the rule client-go's candidates keep. The
// Term's token is that resourceVersion plus one. If the candidate already
// leads, Campaign returns the current Term.
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
	old := e.cur
	if old != nil && old.lc.Term().Err() == nil {
		e.mu.Unlock()
		return old.lc.Term(), nil
	}
	e.cur = nil
	stop := make(chan struct{})
	e.resign, e.resigns = stop, sync.Once{}
	e.mu.Unlock()
	if old != nil {
		old.halt()
		<-old.done
		e.terms.Forget(old.lc)
	}
	v, stopV := e.startView()
	reg, err := e.register(ctx)
	if err != nil {
		stopV()
		if ierr := (skeleton.Waiting{Closing: e.closing, Stop: stop}).Interrupted(ctx); ierr != nil {
			return nil, ierr
		}
		return nil, err
	}
	t, err := e.wait(ctx, v, stopV, stop)
	if err != nil {
		stopV()
		e.withdrawLater(reg)
		return nil, err
	}
	// A leader is no longer a waiting candidate: its record goes before
	// Campaign returns, so that the order never names it.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.o.Window())
	reg.withdraw(wctx)
	cancel()
	return t, nil
}

// wait waits until the Lease is free and takes it.
func (e *Elector) wait(ctx context.Context, v *view, stopV func(), stop <-chan struct{}) (*election.Term, error) {
	w := skeleton.Waiting{Closing: e.closing, Stop: stop}
	for {
		if err := w.Interrupted(ctx); err != nil {
			return nil, err
		}
		s, notify := v.get()
		var timer *time.Timer
		switch {
		case !s.known:
			if s.err != nil && fatal(s.err) {
				return nil, s.err
			}
			if s.err != nil {
				e.warn("kube election: cannot read the Lease yet; retrying", "lease", e.lease(), "err", s.err)
			}
		case s.bad != nil:
			e.warn("kube election: the Lease cannot be read; waiting for it to change", "lease", e.lease(), "err", s.bad)
		case s.lease == nil:
			if err := e.create(ctx); err != nil {
				if fatal(err) || ctx.Err() != nil {
					return nil, e.requestErr(ctx, "creating", err)
				}
				e.warn("kube election: creating the Lease failed; retrying", "lease", e.lease(), "err", err)
				if err := w.Pause(ctx, 100*time.Millisecond); err != nil {
					return nil, err
				}
				continue
			}
		default:
			if at, free := expiry(s); !free {
				timer = time.NewTimer(clock.Until(at))
				break
			}
			take, later, err := e.mayTake(ctx, s)
			if err != nil {
				if fatal(err) || ctx.Err() != nil {
					if ierr := w.Interrupted(ctx); ierr != nil {
						return nil, ierr
					}
					return nil, err
				}
				e.warn("kube election: listing the candidates failed; retrying", "lease", e.lease(), "err", err)
				later = 100 * time.Millisecond
			}
			if !take {
				timer = time.NewTimer(later)
				break
			}
			t, err := e.acquire(ctx, s, v, stopV, stop)
			switch {
			case err == nil:
				return t, nil
			case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
				// The view is behind: its next event says what happened.
				timer = time.NewTimer(time.Second)
			case errors.Is(err, errLapsed):
				e.warn("kube election: the Lease was taken too slowly to lead on it; trying again", "lease", e.lease())
			case ctx.Err() != nil || errors.Is(err, election.ErrClosed) || errors.Is(err, election.ErrResigned):
				if ierr := w.Interrupted(ctx); ierr != nil {
					return nil, ierr
				}
				return nil, err
			case fatal(err):
				return nil, e.requestErr(ctx, "taking", err)
			default:
				e.warn("kube election: taking the Lease failed; retrying", "lease", e.lease(), "err", err)
				if err := w.Pause(ctx, 100*time.Millisecond); err != nil {
					return nil, err
				}
				continue
			}
		}
		var until <-chan time.Time
		if timer != nil {
			until = timer.C
		}
		select {
		case <-notify:
		case <-until:
		case <-ctx.Done():
		case <-e.closing:
		case <-stop:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// expiry says when the holder's lease in s lapses on this candidate's
// clock, and whether it is free now: released (no holder), or
// leaseDurationSeconds past the moment the record was last seen to change.
// A holder with this candidate's own ID is waited out like any other: it
// may be an earlier process of the same ID that still leads.
func expiry(s state) (time.Time, bool) {
	if s.rec.holder == "" {
		return time.Time{}, true
	}
	at := s.observed.Add(s.rec.duration)
	return at, !clock.Now().Before(at)
}

// fatal reports whether err is one that retrying cannot mend: the
// candidate may not read or write the Lease (RBAC), the namespace is gone,
// the request is refused as invalid.
func fatal(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsInvalid(err) ||
		apierrors.IsBadRequest(err) || apierrors.IsMethodNotSupported(err)
}

// requestErr wraps a failed request, or returns ctx's own error as is.
func (e *Elector) requestErr(ctx context.Context, what string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return fmt.Errorf("kube election: %s Lease %s: %w", what, e.lease(), err)
}

func (e *Elector) warn(msg string, args ...any) {
	if _, ok := e.warned.Allow(clock.Now(), 5*time.Second); ok {
		e.log.Warn(msg, args...)
	}
}

// create makes the Lease, held by nobody, so that it can be taken with a
// conditional update like every other time: the token needs the
// resourceVersion read before the winning write. A Lease made meanwhile by
// another candidate is as good.
func (e *Elector) create(ctx context.Context) error {
	holder := ""
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: e.name, Namespace: e.ns},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &e.seconds},
	}
	_, err := e.leases.Leases(e.ns).Create(ctx, l, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// errLapsed: the update that took the Lease answered after the Term it
// would start had already ended.
var errLapsed = errors.New("kube election: the lease window passed before the Lease was taken")

// acquire takes the Lease of s with an update conditional on its
// resourceVersion and starts the Term.
func (e *Elector) acquire(ctx context.Context, s state, v *view, stopV func(), stop <-chan struct{}) (*election.Term, error) {
	token := s.rec.version + 1
	sent := clock.Now()
	now := microNow(sent)
	note := &termNote{Holder: e.o.ID, Acquired: now.UTC().Format(microFormat), Token: token, Priority: e.o.Priority, Value: e.o.Value}
	upd, err := withRecord(s.lease, e.o.ID, e.seconds, now, now, s.rec.transitions+1, note, "")
	if err != nil {
		return nil, err
	}
	got, err := e.leases.Leases(e.ns).Update(ctx, upd, metav1.UpdateOptions{})
	if err != nil {
		return nil, err
	}
	l := election.Leader{ID: e.o.ID, Value: append([]byte(nil), e.o.Value...), Priority: e.o.Priority, Token: token}
	term, lc := backend.NewTerm(e.o, l, sent)
	lctx, cancel := context.WithCancel(e.bg)
	ld := &leadership{lc: lc, token: token, v: v, stopV: stopV, ctx: lctx, cancel: cancel, done: make(chan struct{}), lease: got}
	var cause error
	e.mu.Lock()
	switch {
	case term.Err() != nil:
		cause = errLapsed
	case e.closed:
		cause = election.ErrClosed
	default:
		select {
		case <-stop:
			cause = election.ErrResigned
		default:
		}
	}
	if cause != nil {
		e.mu.Unlock()
		lc.End(cause)
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), e.o.Window())
		if err := e.release(rctx, ld, ""); err != nil {
			e.log.Warn("kube election: releasing the Lease failed; it lapses after its duration", "lease", e.lease(), "err", err)
		}
		rcancel()
		cancel()
		return nil, cause
	}
	e.cur = ld
	e.terms.Add(lc)
	e.wg.Add(1)
	e.mu.Unlock()
	go func() {
		defer e.wg.Done()
		e.lead(ld)
	}()
	return term, nil
}

// Resign implements election.Elector: it ends the Term (if leading) before
// any request, then releases the Lease as client-go's ReleaseOnCancel
// does (holderIdentity empty, leaseDurationSeconds 1), with an update
// conditional on the version it last wrote, so that a waiting candidate,
// ours or client-go's, takes it over at once. A waiting Campaign returns
// ErrResigned. If the release fails, Resign returns the error and the
// Lease lapses after its duration.
func (e *Elector) Resign(ctx context.Context) error {
	if err := skeleton.CheckContext(ctx); err != nil {
		return err
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return election.ErrClosed
	}
	ld := e.cur
	e.cur = nil
	if e.resign != nil {
		stop := e.resign
		e.resigns.Do(func() { close(stop) })
	}
	e.mu.Unlock()
	if ld == nil {
		return nil
	}
	rctx, cancel := backend.ResignContext(ctx, e.o.Window())
	defer cancel()
	ld.lc.End(election.ErrResigned)
	ld.halt()
	<-ld.done
	err := e.release(rctx, ld, e.successor(rctx))
	e.terms.Forget(ld.lc)
	if cerr := ctx.Err(); cerr != nil && context.Cause(rctx) == cerr {
		return cerr
	}
	return err
}

// Close implements election.Elector: it resigns (releasing the Lease within
// one lease window), stops every goroutine it started and waits for the
// renewal hooks. The client stays the caller's.
func (e *Elector) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	e.gate.Close()
	ld := e.cur
	e.cur = nil
	e.mu.Unlock()
	if ld != nil {
		ld.lc.End(election.ErrClosed)
		ld.halt()
		<-ld.done
		ctx, cancel := context.WithTimeout(context.Background(), e.o.Window())
		if err := e.release(ctx, ld, e.successor(ctx)); err != nil {
			e.log.Warn("kube election: Close: releasing the Lease failed; it lapses after its duration", "lease", e.lease(), "err", err)
		}
		cancel()
	}
	e.gate.Drain()
	e.stopBg()
	e.wg.Wait()
	e.terms.EndAll(election.ErrClosed)
	return nil
}

// Leader implements election.Elector: it reads the Lease once. A holder of
// this backend's comes with its token, priority and value; one of
// client-go's with its holderIdentity and Token 0. A single read cannot
// tell a lapsed lease from a live one: the holder is reported until
// another candidate takes the Lease (Observe judges expiry).
func (e *Elector) Leader(ctx context.Context) (election.Leader, error) {
	if err := skeleton.CheckContext(ctx); err != nil {
		return election.Leader{}, err
	}
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return election.Leader{}, election.ErrClosed
	}
	l, err := e.leases.Leases(e.ns).Get(ctx, e.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return election.Leader{}, election.ErrNoLeader
	}
	if err != nil {
		return election.Leader{}, e.requestErr(ctx, "reading", err)
	}
	r, err := readLease(l)
	if err != nil {
		return election.Leader{}, fmt.Errorf("%w: %w", election.ErrNoLeader, err)
	}
	who, err := r.leader()
	if err != nil {
		return election.Leader{}, fmt.Errorf("%w: Lease %s: %w", election.ErrNoLeader, e.lease(), err)
	}
	if who.IsZero() {
		return election.Leader{}, election.ErrNoLeader
	}
	return who, nil
}

// Observe implements election.Elector. One watch per Elector feeds every
// stream; a holder whose lease lapses on this candidate's clock (as
// Campaign judges it) is reported as no leader.
func (e *Elector) Observe(ctx context.Context) <-chan election.Leader {
	if ctx == nil {
		return watch.Closed()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return watch.Closed()
	}
	return e.obs.Stream(ctx, e.closing, &e.wg, e.observe)
}

// observe feeds e.obs until Close.
func (e *Elector) observe() {
	v, stop := e.startView()
	defer stop()
	for {
		s, notify := v.get()
		var timer *time.Timer
		var until <-chan time.Time
		if s.known {
			var l election.Leader
			switch {
			case s.lease == nil || s.bad != nil:
			default:
				var err error
				if l, err = s.rec.leader(); err != nil {
					e.warn("kube election: the Lease's holder is not a candidate ID", "lease", e.lease(), "err", err)
				}
				if at, free := expiry(s); free {
					l = election.Leader{}
				} else if !l.IsZero() {
					timer = time.NewTimer(clock.Until(at))
					until = timer.C
				}
			}
			e.obs.Set(l)
		}
		select {
		case <-notify:
		case <-until:
		case <-e.bg.Done():
		}
		if timer != nil {
			timer.Stop()
		}
		if e.bg.Err() != nil {
			return
		}
	}
}
