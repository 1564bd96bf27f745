package metrics

import (
	"bytes"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
)

var (
	_ prometheus.Collector = (*Collector)(nil)
	_ prometheus.Collector = (*Set)(nil)
)

// Collector exports the metrics of one election. Register it with a
// prometheus.Registerer, and give its Events to the Elector
// (election.WithEvents).
//
// The election is a constant label of a Collector's metrics, so Collectors
// of different elections can be registered with one registry. A Set
// cannot join them there under the same namespace (client_golang refuses a
// label that is constant in one collector and variable in another): a
// program with many elections uses one Set for all. Safe for concurrent
// use.
type Collector struct {
	v *vecs
	t *tracker
}

// New returns a Collector for the election named name: the value of the
// election label of its metrics. A refused name or option is an
// *election.OptionError wrapping election.ErrInvalidOption that names it.
func New(name string, opts ...Option) (*Collector, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	// The election is a constant label here: two Collectors of different
	// elections describe different metrics and can share a registry.
	cfg.sharedHistos = false
	v := newVecs(cfg, prometheus.Labels{"election": name}, nil)
	return &Collector{v: v, t: newTracker(v, nil)}, nil
}

// Events returns the Events that feed the Collector; every call returns
// the same one. Give it to the Elector (election.WithEvents): it reports
// the Elector's Terms and, under election.Run, its campaigns and leader
// changes.
func (c *Collector) Events() *election.Events { return c.t.obs }

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) { c.v.describe(ch) }

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) { c.v.collect(ch) }

// Set exports the metrics of any number of elections under one
// prometheus.Collector: register it once, and ask it for the Events of
// each election name. Safe for concurrent use.
type Set struct {
	v *vecs

	mu       sync.Mutex
	trackers map[string]*tracker
}

// NewSet returns an empty Set. A refused option is an
// *election.OptionError wrapping election.ErrInvalidOption that names it.
func NewSet(opts ...Option) (*Set, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	return &Set{v: newVecs(cfg, nil, []string{"election"}), trackers: make(map[string]*tracker)}, nil
}

// Events returns the Events of the election named name, the value of the
// election label of its metrics, and starts exporting its metrics (at 0).
// Give them to that election's Elector (election.WithEvents). Calls with
// the same name return the same Events, until Forget. A refused name is
// an *election.OptionError wrapping election.ErrInvalidOption.
func (s *Set) Events(name string) (*election.Events, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.trackers[name]
	if !ok {
		t = newTracker(s.v, []string{name})
		s.trackers[name] = t
	}
	return t.obs, nil
}

// Forget stops exporting the metrics of the election named name, say
// when this process no longer takes part in it (a shard moved away), and
// reports whether the Set had it. Its Events, if still in use, change
// nothing any more; a later Events call for the name starts its
// metrics afresh, from 0. The Set's shared histograms
// (WithSharedHistograms) keep what it observed.
func (s *Set) Forget(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.trackers[name]
	if !ok {
		return false
	}
	delete(s.trackers, name)
	t.forget()
	return true
}

// Describe implements prometheus.Collector.
func (s *Set) Describe(ch chan<- *prometheus.Desc) { s.v.describe(ch) }

// Collect implements prometheus.Collector.
func (s *Set) Collect(ch chan<- prometheus.Metric) { s.v.collect(ch) }

func checkName(name string) error {
	switch {
	case name == "":
		return &election.OptionError{Field: "metrics election name", Value: `""`, Reason: "must not be empty"}
	case !utf8.ValidString(name):
		return &election.OptionError{Field: "metrics election name", Value: backend.QuoteValue(name), Reason: "must be valid UTF-8 (it is a label value)"}
	}
	return nil
}

// vecs are the metric families of a Collector or a Set. The election label
// is constant (a Collector) or variable (a Set).
type vecs struct {
	leading, token, lastSlack, slackRatio, window *prometheus.GaugeVec
	gained, lost, renewals, changes               *prometheus.CounterVec
	latency, slack, campaign                      *prometheus.HistogramVec

	sharedHistos bool // the histograms have no election label (WithSharedHistograms)
}

func newVecs(cfg config, constLabels prometheus.Labels, electionLabel []string) *vecs {
	ns := cfg.namespace
	labels := func(extra ...string) []string { return append(append([]string(nil), electionLabel...), extra...) }
	histLabels := labels
	if cfg.sharedHistos {
		histLabels = func(extra ...string) []string { return extra }
	}
	gauge := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: name, Help: help, ConstLabels: constLabels}, labels())
	}
	counter := func(name, help string, extra ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: name, Help: help, ConstLabels: constLabels}, labels(extra...))
	}
	histogram := func(name, help string, buckets []float64, extra ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: name, Help: help, ConstLabels: constLabels, Buckets: buckets}, histLabels(extra...))
	}
	return &vecs{
		leading:    gauge("leading", "1 while this process holds a valid Term of the election, else 0."),
		token:      gauge("token", "Fencing token of this process's latest Term of the election (0: none yet); it stays after the Term ends."),
		lastSlack:  gauge("renewal_last_slack_seconds", "Deadline slack at the latest renewal attempt of the current Term: how much of its validity was left when the attempt was sent. Only while leading."),
		slackRatio: gauge("renewal_slack_ratio", "Deadline slack at the latest renewal attempt of the current Term, as a fraction of the lease window. Only while leading, from the election's first successful renewal on."),
		window:     gauge("lease_window_seconds", "Lease window of the current Term: how long it stays valid after a successful renewal's send time, TTL/(1+Drift)-Margin. Only while leading, from the election's first successful renewal on."),
		gained:     counter("leaderships_gained_total", "Terms of the election this process began."),
		lost:       counter("leaderships_lost_total", "Terms of the election this process ended, by reason: the election sentinel the Term's error wraps.", "reason"),
		renewals:   counter("renewals_total", "Lease renewal attempts while leading, by outcome (ok, failed).", "outcome"),
		changes:    counter("leader_changes_total", "Leader changes that Observe reported to Run (a change to no leader included)."),
		latency:    histogram("renewal_latency_seconds", "Round trip of each lease renewal attempt, from its send time to the reply or the failure.", cfg.latency),
		slack:      histogram("renewal_slack_seconds", "Deadline slack at each renewal attempt: the Term's deadline before it minus its send time (negative: sent too late).", cfg.slack),
		campaign:   histogram("campaign_wait_seconds", "How long each Campaign of Run waited, by outcome (elected, failed).", cfg.campaign, "outcome"),

		sharedHistos: cfg.sharedHistos,
	}
}

func (v *vecs) collectors() []prometheus.Collector {
	return []prometheus.Collector{v.leading, v.token, v.lastSlack, v.slackRatio, v.window,
		v.gained, v.lost, v.renewals, v.changes, v.latency, v.slack, v.campaign}
}

func (v *vecs) describe(ch chan<- *prometheus.Desc) {
	for _, c := range v.collectors() {
		c.Describe(ch)
	}
}

func (v *vecs) collect(ch chan<- prometheus.Metric) {
	for _, c := range v.collectors() {
		c.Collect(ch)
	}
}

// forget deletes the series of the election named name.
func (v *vecs) forget(name string) {
	match := prometheus.Labels{"election": name}
	for _, c := range []interface{ DeletePartialMatch(prometheus.Labels) int }{
		v.leading, v.token, v.lastSlack, v.slackRatio, v.window, v.gained, v.lost, v.renewals, v.changes,
	} {
		c.DeletePartialMatch(match)
	}
	if !v.sharedHistos {
		v.latency.DeletePartialMatch(match)
		v.slack.DeletePartialMatch(match)
		v.campaign.DeletePartialMatch(match)
	}
}

// reasons are the values of the lost counter's reason label, in the order
// of reasonOf's index; "other" follows them.
var reasons = []struct {
	name string
	err  error
}{
	{"resigned", election.ErrResigned},
	{"transferred", election.ErrTransferred},
	{"preempted", election.ErrPreempted},
	{"unhealthy", election.ErrUnhealthy},
	{"session_lost", election.ErrSessionLost},
	{"lease_expired", election.ErrLeaseExpired},
	{"closed", election.ErrClosed},
}

const reasonOther = "other"

// reasonOf returns the index in reasons of the sentinel err wraps, or
// len(reasons) for none. When err wraps several (a ZooKeeper session lost
// because the lease may have expired), the outermost wins: the first met
// walking the tree as errors.Is does, depth first.
func reasonOf(err error) int {
	if i := findReason(err); i >= 0 {
		return i
	}
	return len(reasons)
}

func findReason(err error) int {
	if err == nil {
		return -1
	}
	for i, r := range reasons {
		if err == r.err {
			return i
		}
		if x, ok := err.(interface{ Is(error) bool }); ok && x.Is(r.err) {
			return i
		}
	}
	switch x := err.(type) {
	case interface{ Unwrap() error }:
		return findReason(x.Unwrap())
	case interface{ Unwrap() []error }:
		for _, e := range x.Unwrap() {
			if i := findReason(e); i >= 0 {
				return i
			}
		}
	}
	return -1
}

// tracker is the state of one election: the children of its counters and
// histograms, fetched once so that an event costs no label lookup, and
// which of its Terms are live.
type tracker struct {
	v  *vecs
	lv []string // the election label's value, or nothing for a Collector

	leading, token          prometheus.Gauge
	gained, changes         prometheus.Counter
	lost                    []prometheus.Counter // by reasonOf
	renewOK, renewFailed    prometheus.Counter
	latency, slack          prometheus.Observer
	campElected, campFailed prometheus.Observer
	obs                     *election.Events

	mu        sync.Mutex
	forgotten bool                     // Set.Forget: the per-Term gauges stay deleted
	live      map[uint64]time.Duration // Terms begun and not ended, by token: their window (0: not known yet)
	window    time.Duration            // the latest window learned, for a Term that has not renewed yet
	maxToken  uint64
	leader    election.Leader // the latest leader LeaderChanged reported
}

func newTracker(v *vecs, lv []string) *tracker {
	with := func(extra ...string) []string { return append(append([]string(nil), lv...), extra...) }
	hist := with
	if v.sharedHistos {
		hist = func(extra ...string) []string { return extra }
	}
	t := &tracker{
		v:           v,
		lv:          lv,
		leading:     v.leading.WithLabelValues(with()...),
		token:       v.token.WithLabelValues(with()...),
		gained:      v.gained.WithLabelValues(with()...),
		changes:     v.changes.WithLabelValues(with()...),
		renewOK:     v.renewals.WithLabelValues(with("ok")...),
		renewFailed: v.renewals.WithLabelValues(with("failed")...),
		latency:     v.latency.WithLabelValues(hist()...),
		slack:       v.slack.WithLabelValues(hist()...),
		campElected: v.campaign.WithLabelValues(hist("elected")...),
		campFailed:  v.campaign.WithLabelValues(hist("failed")...),
		live:        make(map[uint64]time.Duration),
	}
	for _, r := range reasons {
		t.lost = append(t.lost, v.lost.WithLabelValues(with(r.name)...))
	}
	t.lost = append(t.lost, v.lost.WithLabelValues(with(reasonOther)...))
	t.obs = &election.Events{
		Elected:       t.elected,
		Renewed:       t.renewed,
		Ended:         t.ended,
		Campaigned:    t.campaigned,
		LeaderChanged: t.leaderChanged,
	}
	return t
}

func (t *tracker) elected(l election.Leader, _ time.Time) {
	t.gained.Inc()
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.live[l.Token]; !ok {
		t.live[l.Token] = 0
	}
	t.leading.Set(1)
	if l.Token > t.maxToken {
		t.maxToken = l.Token
		t.token.Set(float64(l.Token))
	}
}

func (t *tracker) renewed(r election.Renewal, slack time.Duration) {
	if r.Err == nil {
		t.renewOK.Inc()
	} else {
		t.renewFailed.Inc()
	}
	t.latency.Observe(r.Latency.Seconds())
	t.slack.Observe(slack.Seconds())

	t.mu.Lock()
	defer t.mu.Unlock()
	own, live := t.live[r.Leader.Token]
	if r.Err == nil {
		// A successful renewal moves the deadline to its send time + the
		// window, or leaves a later one (a reply that overtook an older
		// request's): the smallest Deadline − Sent is the window.
		if d := r.Deadline.Sub(r.Sent); d > 0 && (own == 0 || d < own) {
			own = d
		}
	}
	w := own
	if own > 0 {
		t.window = own
	} else {
		w = t.window // not learned from this Term yet: the election's latest
	}
	if !live || t.forgotten {
		return
	}
	t.live[r.Leader.Token] = own
	t.v.lastSlack.WithLabelValues(t.lv...).Set(slack.Seconds())
	if w > 0 {
		t.v.slackRatio.WithLabelValues(t.lv...).Set(slack.Seconds() / w.Seconds())
		t.v.window.WithLabelValues(t.lv...).Set(w.Seconds())
	}
}

func (t *tracker) ended(l election.Leader, cause error) {
	t.lost[reasonOf(cause)].Inc()
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.live, l.Token)
	if len(t.live) > 0 {
		return // another Term of the election, begun before this end was reported
	}
	t.leading.Set(0)
	if !t.forgotten {
		t.deleteTermGauges()
	}
}

// deleteTermGauges stops exporting the gauges of the current Term.
func (t *tracker) deleteTermGauges() {
	t.v.lastSlack.DeleteLabelValues(t.lv...)
	t.v.slackRatio.DeleteLabelValues(t.lv...)
	t.v.window.DeleteLabelValues(t.lv...)
}

func (t *tracker) campaigned(wait time.Duration, err error) {
	if err == nil {
		t.campElected.Observe(wait.Seconds())
	} else {
		t.campFailed.Observe(wait.Seconds())
	}
}

func (t *tracker) leaderChanged(l election.Leader) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if l.Equal(t.leader) {
		return // the same value twice (two Runs sharing the Events)
	}
	l.Value = bytes.Clone(l.Value)
	t.leader = l
	t.changes.Inc()
}

// forget marks the tracker forgotten and deletes its series (Set.Forget).
func (t *tracker) forget() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.forgotten = true
	t.v.forget(t.lv[0])
}
