package inmem

import (
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/electkit/election"
)

// Defaults and bounds of the cluster's options.
const (
	// DefaultTick is the real (or synctest-fake) time of one tick.
	DefaultTick = 10 * time.Millisecond
	// DefaultHeartbeatTicks is how often failure detectors probe and leaders
	// renew their lease: every 10 ticks (100ms by default).
	DefaultHeartbeatTicks = 10
	// DefaultTimeoutTicks is the failure detector's timeout: a peer that
	// has not answered a probe for 120 ticks (1.2s by default) is taken for
	// dead. It makes the default lease TTL 1.18s (see Timing.LeaseTTL).
	DefaultTimeoutTicks = 120
	// MaxMembers bounds the members of one cluster: a member's number in
	// the algorithm fills the low 16 bits of the fencing token.
	MaxMembers = 1<<16 - 1
	// MaxTick bounds WithTick.
	MaxTick = time.Minute
)

// ClusterOption configures a Cluster.
type ClusterOption func(*config)

type config struct {
	timing Timing
	logger *slog.Logger
}

// WithTick sets the duration of one tick, the unit of the algorithms'
// timeouts. Default DefaultTick; more than 0, at most MaxTick.
func WithTick(d time.Duration) ClusterOption { return func(c *config) { c.timing.Tick = d } }

// WithHeartbeatTicks sets how many ticks apart failure detectors probe and
// leaders renew their lease. Default DefaultHeartbeatTicks; at least 1.
func WithHeartbeatTicks(n int) ClusterOption {
	return func(c *config) { c.timing.HeartbeatTicks = n }
}

// WithTimeoutTicks sets the failure detector's timeout in ticks. Default
// DefaultTimeoutTicks; more than HeartbeatTicks+2, and large enough that the
// lease TTL derived from it is at least election.MinTTL.
func WithTimeoutTicks(n int) ClusterOption {
	return func(c *config) { c.timing.TimeoutTicks = n }
}

// WithLatency sets the one-way delay of every message between members.
// Default 0 (delivered at once, in order); at least 0, and a round trip
// shorter than HeartbeatTicks ticks.
func WithLatency(d time.Duration) ClusterOption { return func(c *config) { c.timing.Latency = d } }

// WithLogger sets the logger of the cluster's diagnostics (messages it
// drops, nodes that misbehave). Default: discards them.
func WithLogger(l *slog.Logger) ClusterOption { return func(c *config) { c.logger = l } }

// Timing is a cluster's clockwork, as resolved from its options.
type Timing struct {
	Tick           time.Duration // real time of one tick
	HeartbeatTicks int           // failure-detector probes and lease renewals, in ticks
	TimeoutTicks   int           // failure-detector timeout, in ticks
	Latency        time.Duration // one-way delay of every message
	// LeaseTTL is derived: (TimeoutTicks − 2) ticks − 2 × Latency. A
	// failure detector takes a leader for dead only when a probe it sent
	// went unanswered for TimeoutTicks; the leader would have answered a
	// probe that reached it alive, so that probe left at most one Latency
	// before the crash, and no successor can lead before crash − Latency +
	// TimeoutTicks ticks. A Term's deadline is at most its last renewal's
	// send time (before the crash) + LeaseTTL/(1+Drift) − Margin: earlier,
	// with a tick and a latency to spare for scheduling. Every member's
	// Term uses it as its TTL.
	LeaseTTL time.Duration
}

// FailureTimeout is TimeoutTicks ticks.
func (t Timing) FailureTimeout() time.Duration { return time.Duration(t.TimeoutTicks) * t.Tick }

// RenewInterval is HeartbeatTicks ticks: how often a leader renews its lease.
func (t Timing) RenewInterval() time.Duration { return time.Duration(t.HeartbeatTicks) * t.Tick }

func (t *Timing) derive() {
	t.LeaseTTL = time.Duration(t.TimeoutTicks-2)*t.Tick - 2*t.Latency
}

func defaultConfig() config {
	return config{
		timing: Timing{Tick: DefaultTick, HeartbeatTicks: DefaultHeartbeatTicks, TimeoutTicks: DefaultTimeoutTicks},
		logger: slog.New(slog.DiscardHandler),
	}
}

func optErr(field, value, reason string) error {
	return &election.OptionError{Field: field, Value: value, Reason: reason}
}

// validate reports the first refused option, naming it and its value.
func (c *config) validate() error {
	t := &c.timing
	switch {
	case t.Tick <= 0 || t.Tick > MaxTick:
		return optErr("inmem.WithTick", t.Tick.String(), fmt.Sprintf("must be more than 0 and at most %v", MaxTick))
	case t.HeartbeatTicks < 1:
		return optErr("inmem.WithHeartbeatTicks", strconv.Itoa(t.HeartbeatTicks), "must be at least 1")
	case t.TimeoutTicks <= t.HeartbeatTicks+2:
		return optErr("inmem.WithTimeoutTicks", strconv.Itoa(t.TimeoutTicks), fmt.Sprintf("must be more than HeartbeatTicks+2 (%d)", t.HeartbeatTicks+2))
	case t.Latency < 0:
		return optErr("inmem.WithLatency", t.Latency.String(), "must not be negative")
	case c.logger == nil:
		return optErr("inmem.WithLogger", "nil", "must not be nil")
	}
	t.derive()
	if t.LeaseTTL < election.MinTTL || t.LeaseTTL > election.MaxTTL {
		return optErr("inmem.WithTimeoutTicks", strconv.Itoa(t.TimeoutTicks),
			fmt.Sprintf("gives a lease TTL of %v ((TimeoutTicks-2) x Tick %v - 2 x Latency %v), outside %v..%v",
				t.LeaseTTL, t.Tick, t.Latency, election.MinTTL, election.MaxTTL))
	}
	// A leader's renewal round is answered within a round trip, before
	// the next round starts (a round still unanswered then is reported
	// failed), and rounds must fit well inside the lease.
	if 2*t.Latency >= t.RenewInterval() {
		return optErr("inmem.WithLatency", t.Latency.String(),
			fmt.Sprintf("a round trip must be shorter than the renewal interval HeartbeatTicks x Tick = %v", t.RenewInterval()))
	}
	if r := t.RenewInterval() + 2*t.Latency; r > t.LeaseTTL/4 {
		return optErr("inmem.WithHeartbeatTicks", strconv.Itoa(t.HeartbeatTicks),
			fmt.Sprintf("renewal every %v plus a round trip of %v exceeds a quarter of the lease TTL %v", t.RenewInterval(), 2*t.Latency, t.LeaseTTL))
	}
	return nil
}
