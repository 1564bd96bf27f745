package electionhttp

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/internal/clock"
)

// DefaultTimeout bounds each Elector.Leader call of ReadyAny and LeaderJSON
// (see WithTimeout).
const DefaultTimeout = 2 * time.Second

// DefaultSlackDivisor sets Health's default slack: a leader whose Term's
// deadline is less than a DefaultSlackDivisor-th of the lease window away
// is unhealthy. The etcd and ZooKeeper backends renew every third of the
// window, so with less than a third left a whole renewal round was missed.
const DefaultSlackDivisor = 3

// An Option configures a Tracker.
type Option func(*config)

type config struct {
	slack    time.Duration
	slackSet bool
	timeout  time.Duration
}

// WithSlack makes Health fail when this process holds a Term whose deadline
// is less than d away: renewals are not getting through, and the lease is
// about to lapse. 0 fails only once the deadline has passed. Default: a
// DefaultSlackDivisor-th of the lease window as this process sees it: the
// time to the deadline when the Term was recorded, or the largest seen
// since (the window less a round trip, when recorded from OnElected). At
// least 0.
func WithSlack(d time.Duration) Option {
	return func(c *config) { c.slack, c.slackSet = d, true }
}

// WithTimeout bounds each Elector.Leader call that ReadyAny and LeaderJSON
// make (the request's own context bounds it too). Default DefaultTimeout;
// more than 0.
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// cacheState is what the Tracker knows of the election's leader.
type cacheState uint8

const (
	unknown  cacheState = iota // Observe has sent nothing yet
	observed                   // leader holds Observe's latest value
	stopped                    // Observe's channel closed: the Elector is closed
)

// Tracker is this process's view of one election for HTTP handlers: its
// own Term, recorded through Callbacks or SetTerm, and the election's
// leader, kept from the Elector's Observe. It hands out the handlers
// (Health, ReadyLeader, ReadyAny, LeaderJSON, Forward). All methods are
// safe for concurrent use.
type Tracker struct {
	e   election.Elector
	cfg config

	mu     sync.Mutex
	term   *election.Term  // the Term this process acts on; nil when not leading
	window time.Duration   // the largest time to term's deadline seen: the lease window, from below
	last   uint64          // token of the latest Term recorded, even after it ended
	leader election.Leader // Observe's latest value
	state  cacheState

	cancel context.CancelFunc
	done   chan struct{} // closed when the Observe goroutine has exited
}

// New returns a Tracker of e. It starts a goroutine that follows
// e.Observe until Close, or until e is closed. A refused argument is an
// *election.OptionError wrapping election.ErrInvalidOption.
func New(e election.Elector, opts ...Option) (*Tracker, error) {
	if e == nil {
		return nil, &election.OptionError{Field: "Elector", Value: "nil", Reason: "electionhttp.New needs an Elector"}
	}
	cfg := config{timeout: DefaultTimeout}
	for i, opt := range opts {
		if opt == nil {
			return nil, &election.OptionError{Field: "Option", Value: "option #" + strconv.Itoa(i) + " is nil"}
		}
		opt(&cfg)
	}
	if cfg.slack < 0 {
		return nil, &election.OptionError{Field: "electionhttp.WithSlack", Value: cfg.slack.String(), Reason: "must not be negative"}
	}
	if cfg.timeout <= 0 {
		return nil, &election.OptionError{Field: "electionhttp.WithTimeout", Value: cfg.timeout.String(), Reason: "must be more than 0"}
	}
	ctx, cancel := context.WithCancel(context.Background())
	tr := &Tracker{e: e, cfg: cfg, cancel: cancel, done: make(chan struct{})}
	ch := e.Observe(ctx)
	go tr.observe(ch)
	return tr, nil
}

func (tr *Tracker) observe(ch <-chan election.Leader) {
	defer close(tr.done)
	for l := range ch {
		tr.mu.Lock()
		tr.leader, tr.state = l, observed
		tr.mu.Unlock()
	}
	tr.mu.Lock()
	tr.leader, tr.state = election.Leader{}, stopped
	tr.mu.Unlock()
}

// Close stops following the Elector's Observe and waits for the goroutine
// that did. It does not close the Elector. After Close, Forward answers 503
// to requests that must go to the leader and this process does not lead.
// Safe to call twice.
func (tr *Tracker) Close() error {
	tr.cancel()
	<-tr.done
	return nil
}

// Callbacks returns cb with OnElected and OnDemoted wrapped: OnElected
// records the Term before it calls cb.OnElected, OnDemoted forgets it
// before it calls cb.OnDemoted. Pass the result to election.Run. Wrapping
// nests: several Trackers may wrap the same Callbacks.
func (tr *Tracker) Callbacks(cb election.Callbacks) election.Callbacks {
	out := cb
	out.OnElected = func(ctx context.Context, t *election.Term) {
		tr.SetTerm(t)
		if cb.OnElected != nil {
			cb.OnElected(ctx, t)
		}
	}
	out.OnDemoted = func(t *election.Term) {
		tr.forget(t)
		if cb.OnDemoted != nil {
			cb.OnDemoted(t)
		}
	}
	return out
}

// SetTerm records t as the Term this process acts on, for a program that
// calls Campaign itself: call SetTerm(t) when it starts acting as leader
// and SetTerm(nil) when it has stopped. A Term left recorded past its
// deadline is what a stuck leader looks like: Health fails.
func (tr *Tracker) SetTerm(t *election.Term) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.term = t
	if t != nil {
		// Campaign returns just after a confirmation, so this is the lease
		// window less a round trip; Health raises it when it sees more.
		tr.window, tr.last = clock.Until(t.Deadline()), t.Token()
	}
}

// forget clears the recorded Term if it is t.
func (tr *Tracker) forget(t *election.Term) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.term == t {
		tr.term = nil
	}
}

// Leading returns the recorded Term if it is valid now, else nil. It reads
// the clock: a Term whose deadline has passed is not leading, even before
// OnDemoted has run.
func (tr *Tracker) Leading() *election.Term {
	tr.mu.Lock()
	t := tr.term
	tr.mu.Unlock()
	if t == nil || t.Err() != nil {
		return nil
	}
	return t
}

// cached returns Observe's latest value and whether it is this process's
// own latest leadership (over or not).
func (tr *Tracker) cached() (l election.Leader, state cacheState, self bool) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	self = tr.last != 0 && tr.leader.Token == tr.last
	return tr.leader, tr.state, self
}
