// Package clientgo measures client-go's leader election,
// k8s.io/client-go/tools/leaderelection, run against etcd instead of a
// Kubernetes API server: its resourcelock.Interface is implemented here on
// one etcd key per election (Get, Create if absent, Update on an unchanged
// mod revision), so what is measured is client-go's own algorithm — every
// candidate polls the record each RetryPeriod (with jitter), the holder
// renews it, a waiter takes over once the record has not changed for
// LeaseDuration or its holder is empty.
//
// Candidates run with ReleaseOnCancel: Release cancels the elector's context
// and client-go writes an empty holder, which the next candidate sees at its
// next poll. By default the timings are client-go's documented defaults
// (LeaseDuration 15 s, RenewDeadline 10 s, RetryPeriod 2 s), whatever TTL a
// candidate is given; WithTTLTimings derives them from the TTL instead.
//
// Every candidate has its own etcd client connected through its own TCP
// proxies (one per endpoint) on 127.0.0.1; Crash cuts them, so the other
// candidates see the record stop changing.
package clientgo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/klog/v2"

	election "github.com/electkit/election"
	"github.com/electkit/election/bench/internal/peer"
	"github.com/electkit/election/internal/mono"
	"github.com/electkit/election/internal/rig/faultproxy"
)

// Name is the library's name in reports.
const Name = "client-go leaderelection"

// DefaultPrefix is the etcd key prefix of the election records: the record
// of election name is DefaultPrefix + name.
const DefaultPrefix = "/electkit-bench/client-go/"

// Timings are a LeaderElectionConfig's three durations.
type Timings struct {
	// LeaseDuration: how long a waiter waits, from the last change of the
	// record it saw, before it takes the lease over. The record carries it
	// in whole seconds (truncated), as client-go writes it.
	LeaseDuration time.Duration
	// RenewDeadline: how long the holder keeps retrying a renewal before it
	// gives leadership up.
	RenewDeadline time.Duration
	// RetryPeriod: the interval between tries, jittered by up to
	// leaderelection.JitterFactor × RetryPeriod while waiting.
	RetryPeriod time.Duration
}

// DefaultTimings are client-go's documented defaults, used by core
// Kubernetes components: 15 s, 10 s, 2 s.
func DefaultTimings() Timings {
	return Timings{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}
}

// TimingsFor derives timings from a lease TTL in the proportions of the
// defaults (15 : 10 : 2): LeaseDuration = ttl, RenewDeadline = ⅔ ttl,
// RetryPeriod = 2⁄15 ttl. A 2 s TTL gives 2 s, 1.33 s, 267 ms.
func TimingsFor(ttl time.Duration) Timings {
	return Timings{LeaseDuration: ttl, RenewDeadline: ttl * 2 / 3, RetryPeriod: ttl * 2 / 15}
}

// Validate refuses what leaderelection.NewLeaderElector refuses, and a
// LeaseDuration under one second, which the record would carry as zero.
func (t Timings) Validate() error {
	switch {
	case t.RetryPeriod <= 0:
		return fmt.Errorf("%w: clientgo: RetryPeriod %v is not positive", election.ErrInvalidOption, t.RetryPeriod)
	case t.RenewDeadline <= time.Duration(leaderelection.JitterFactor*float64(t.RetryPeriod)):
		return fmt.Errorf("%w: clientgo: RenewDeadline %v is not above %v × RetryPeriod %v",
			election.ErrInvalidOption, t.RenewDeadline, leaderelection.JitterFactor, t.RetryPeriod)
	case t.LeaseDuration <= t.RenewDeadline:
		return fmt.Errorf("%w: clientgo: LeaseDuration %v is not above RenewDeadline %v",
			election.ErrInvalidOption, t.LeaseDuration, t.RenewDeadline)
	case t.LeaseDuration < time.Second:
		return fmt.Errorf("%w: clientgo: LeaseDuration %v is under 1s (the record carries whole seconds)",
			election.ErrInvalidOption, t.LeaseDuration)
	}
	return nil
}

// Option configures New.
type Option func(*options)

type options struct {
	timings Timings
	fromTTL bool
	prefix  string
	err     error
}

// WithDefaultTimings runs every candidate with DefaultTimings, whatever its
// TTL. It is the default.
func WithDefaultTimings() Option {
	return func(o *options) { o.timings, o.fromTTL = DefaultTimings(), false }
}

// WithTTLTimings runs every candidate with TimingsFor its TTL; the TTL must
// then be at least 1 s.
func WithTTLTimings() Option {
	return func(o *options) { o.fromTTL = true }
}

// WithTimings runs every candidate with t, whatever its TTL.
func WithTimings(t Timings) Option {
	return func(o *options) {
		if err := t.Validate(); err != nil && o.err == nil {
			o.err = err
		}
		o.timings, o.fromTTL = t, false
	}
}

// WithPrefix sets the etcd key prefix of the election records
// (DefaultPrefix by default).
func WithPrefix(prefix string) Option {
	return func(o *options) {
		if prefix == "" && o.err == nil {
			o.err = fmt.Errorf("%w: clientgo: empty key prefix", election.ErrInvalidOption)
		}
		o.prefix = prefix
	}
}

// New returns client-go's leader election against the etcd cluster at
// endpoints ("http://host:port" or "host:port", loopback). A bad option is
// reported by every NewCandidate.
func New(endpoints []string, opts ...Option) peer.Library {
	o := options{timings: DefaultTimings(), prefix: DefaultPrefix}
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	l := &library{o: o, cands: map[*candidate]bool{}}
	for _, ep := range endpoints {
		hp, err := hostPort(ep)
		if err != nil && l.o.err == nil {
			l.o.err = err
		}
		l.targets = append(l.targets, hp)
	}
	if len(endpoints) == 0 && l.o.err == nil {
		l.o.err = fmt.Errorf("%w: clientgo: no etcd endpoints", election.ErrInvalidOption)
	}
	return l
}

func hostPort(ep string) (string, error) {
	switch {
	case strings.HasPrefix(ep, "http://"):
		ep = strings.TrimPrefix(ep, "http://")
	case strings.Contains(ep, "://"):
		return "", fmt.Errorf("%w: clientgo: endpoint %q: only plain http is proxied", election.ErrInvalidOption, ep)
	}
	if ep == "" || strings.ContainsAny(ep, "/ ") {
		return "", fmt.Errorf("%w: clientgo: endpoint %q is not host:port", election.ErrInvalidOption, ep)
	}
	return ep, nil
}

type library struct {
	o       options
	targets []string

	mu     sync.Mutex
	cands  map[*candidate]bool
	closed bool
}

func (l *library) Name() string { return Name }

// NewCandidate connects a new etcd client through new proxies and reads the
// record once, so that the connection is up before Campaign.
func (l *library) NewCandidate(ctx context.Context, name, id string, ttl time.Duration) (peer.Candidate, error) {
	if l.o.err != nil {
		return nil, l.o.err
	}
	if name == "" {
		return nil, fmt.Errorf("%w: clientgo: empty election name", election.ErrInvalidOption)
	}
	if id == "" {
		return nil, fmt.Errorf("%w: clientgo: empty candidate id (client-go needs an identity)", election.ErrInvalidOption)
	}
	t := l.o.timings
	if l.o.fromTTL {
		t = TimingsFor(ttl)
		if err := t.Validate(); err != nil {
			return nil, fmt.Errorf("clientgo: ttl %v: %w", ttl, err)
		}
	}
	c := &candidate{lib: l, id: id, t: t}
	var eps []string
	for _, to := range l.targets {
		p, err := faultproxy.Start(to)
		if err != nil {
			c.closeProxies()
			return nil, fmt.Errorf("clientgo: proxy to %s: %w", to, err)
		}
		c.proxies = append(c.proxies, p)
		eps = append(eps, "http://"+p.Addr)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		c.closeProxies()
		return nil, fmt.Errorf("clientgo: etcd client for %v: %w", l.targets, err)
	}
	c.cli = cli
	c.lock = &etcdLock{cli: cli, key: l.o.prefix + name, identity: id, timeout: max(time.Second, t.RenewDeadline/2)}
	if _, err := cli.Get(ctx, c.lock.key); err != nil {
		c.Close()
		return nil, fmt.Errorf("clientgo: reading %q: %w", c.lock.key, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		go c.Close()
		return nil, fmt.Errorf("clientgo: %w", election.ErrClosed)
	}
	l.cands[c] = true
	return c, nil
}

// Close closes every candidate not closed yet.
func (l *library) Close() error {
	l.mu.Lock()
	l.closed = true
	var cs []*candidate
	for c := range l.cands {
		cs = append(cs, c)
	}
	l.mu.Unlock()
	var errs []error
	for _, c := range cs {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// candidate is one client-go LeaderElector at a time: Campaign starts one
// (Run in a goroutine) unless one is running, Release cancels it.
type candidate struct {
	lib     *library
	id      string
	t       Timings
	proxies []*faultproxy.Proxy
	cli     *clientv3.Client
	lock    *etcdLock

	mu      sync.Mutex
	run     *run
	crashed bool
	closed  bool
}

// run is one LeaderElector.Run.
type run struct {
	cancel  context.CancelFunc
	done    chan struct{} // closed when Run returned
	leading chan struct{} // closed by OnStartedLeading
	at      int64         // Mono in OnStartedLeading, set before leading closes
	stopped bool          // canceled by Release or a withdrawal (guarded by candidate.mu)
}

func (c *candidate) start() (*run, error) {
	r := &run{done: make(chan struct{}), leading: make(chan struct{})}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            c.lock,
		LeaseDuration:   c.t.LeaseDuration,
		RenewDeadline:   c.t.RenewDeadline,
		RetryPeriod:     c.t.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            c.lock.key,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {
				r.at = mono.Now()
				close(r.leading)
			},
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("%w: clientgo: %v", election.ErrInvalidOption, err)
	}
	// client-go logs through the context's logger: discard it.
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logr.Discard()))
	r.cancel = cancel
	go func() {
		defer close(r.done)
		le.Run(ctx)
	}()
	return r, nil
}

// Campaign starts an elector unless one is running and waits until
// OnStartedLeading. If ctx ends first, the elector is stopped (withdrawing
// the candidacy) and ctx.Err() returned.
func (c *candidate) Campaign(ctx context.Context) (int64, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return 0, fmt.Errorf("clientgo: candidate %s: %w", c.id, election.ErrClosed)
	}
	if c.crashed {
		c.mu.Unlock()
		return 0, fmt.Errorf("clientgo: candidate %s crashed", c.id)
	}
	r := c.run
	if r != nil && r.stopped {
		// A Release that gave up waiting: let client-go finish it first.
		c.mu.Unlock()
		select {
		case <-r.done:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		c.mu.Lock()
		if c.run == r {
			c.run = nil
		}
		r = c.run
	}
	if r != nil {
		select {
		case <-r.done:
			r = nil // lost leadership earlier: start again
		default:
		}
	}
	if r == nil {
		var err error
		if r, err = c.start(); err != nil {
			c.mu.Unlock()
			return 0, err
		}
		c.run = r
	}
	c.mu.Unlock()

	select {
	case <-r.leading:
		return r.at, nil
	case <-r.done:
		select {
		case <-r.leading:
			return r.at, nil
		default:
		}
		return 0, fmt.Errorf("clientgo: candidate %s: elector stopped before leading", c.id)
	case <-ctx.Done():
		select {
		case <-r.leading:
			return r.at, nil
		default:
		}
		c.stop(r)
		return 0, ctx.Err()
	}
}

// stop cancels r, waits until Run returned (after client-go's release, if
// it led), and forgets r.
func (c *candidate) stop(r *run) {
	c.mu.Lock()
	r.stopped = true
	c.mu.Unlock()
	r.cancel()
	<-r.done
	c.mu.Lock()
	if c.run == r {
		c.run = nil
	}
	c.mu.Unlock()
}

// Release cancels the elector's context; with ReleaseOnCancel client-go
// then writes the record with an empty holder. It returns the Mono instant
// just before the cancel, after waiting until Run returned or ctx ended.
func (c *candidate) Release(ctx context.Context) (int64, error) {
	c.mu.Lock()
	r := c.run
	if r == nil || r.stopped {
		c.mu.Unlock()
		return 0, fmt.Errorf("clientgo: candidate %s: %w", c.id, election.ErrNotLeader)
	}
	r.stopped = true
	c.mu.Unlock()
	at := mono.Now()
	r.cancel()
	select {
	case <-r.done:
	case <-ctx.Done():
		return at, ctx.Err()
	}
	c.mu.Lock()
	if c.run == r {
		c.run = nil
	}
	c.mu.Unlock()
	return at, nil
}

// Crash cuts the candidate's proxies: its etcd client goes dark.
func (c *candidate) Crash() (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, fmt.Errorf("clientgo: candidate %s: %w", c.id, election.ErrClosed)
	}
	at := mono.Now()
	for _, p := range c.proxies {
		p.Cut()
	}
	c.crashed = true
	return at, nil
}

// Close stops the elector (releasing, if it leads and is not crashed),
// closes the client and the proxies. Safe to call twice.
func (c *candidate) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	r, crashed := c.run, c.crashed
	c.run = nil
	c.mu.Unlock()

	var err error
	if crashed && c.cli != nil {
		// Its calls would only time out: fail them now.
		err = c.cli.Close()
	}
	if r != nil {
		r.cancel()
		<-r.done
	}
	if !crashed && c.cli != nil {
		err = c.cli.Close()
	}
	c.closeProxies()
	c.lib.mu.Lock()
	delete(c.lib.cands, c)
	c.lib.mu.Unlock()
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

func (c *candidate) closeProxies() {
	for _, p := range c.proxies {
		p.Close()
	}
}
