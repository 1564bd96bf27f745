package metrics

import (
	"fmt"
	"math"
	"regexp"
	"strconv"

	"github.com/electkit/election"
	"github.com/electkit/election/backend"
)

// DefaultNamespace prefixes every metric name unless WithNamespace says
// otherwise.
const DefaultNamespace = "election"

// Default histogram buckets, in seconds. Each can be replaced with its
// option.
var (
	// DefaultLatencyBuckets cover a renewal's round trip from a local
	// store (a millisecond) to a slow one across regions (seconds).
	DefaultLatencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	// DefaultSlackBuckets start at 0, so that the renewals sent after the
	// deadline (a negative slack) are counted in le="0", and reach past
	// the window of the longest TTL (election.MaxTTL).
	DefaultSlackBuckets = []float64{0, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 600}
	// DefaultCampaignBuckets cover a Campaign won at once to one that
	// waited behind a leader for an hour.
	DefaultCampaignBuckets = []float64{.01, .1, 1, 10, 60, 600, 3600}
)

// An Option configures New or NewSet.
type Option func(*config)

type config struct {
	namespace    string
	latency      []float64
	slack        []float64
	campaign     []float64
	sharedHistos bool
}

func defaultConfig() config {
	return config{
		namespace: DefaultNamespace,
		latency:   DefaultLatencyBuckets,
		slack:     DefaultSlackBuckets,
		campaign:  DefaultCampaignBuckets,
	}
}

// WithNamespace sets the prefix of every metric name (the part before the
// first underscore: election_leading). Default DefaultNamespace; letters,
// digits and underscores, not starting with a digit. To add constant
// labels (a cluster, a service), register through
// prometheus.WrapRegistererWith.
func WithNamespace(ns string) Option { return func(c *config) { c.namespace = ns } }

// WithLatencyBuckets sets the upper bounds of the renewal round-trip
// histogram, in seconds: at least one, finite, strictly increasing.
// Default DefaultLatencyBuckets.
func WithLatencyBuckets(bounds ...float64) Option {
	return func(c *config) { c.latency = append([]float64(nil), bounds...) }
}

// WithSlackBuckets sets the upper bounds of the deadline-slack histogram,
// in seconds: at least one, finite, strictly increasing. Default
// DefaultSlackBuckets; choose bounds around the lease window of your TTL.
func WithSlackBuckets(bounds ...float64) Option {
	return func(c *config) { c.slack = append([]float64(nil), bounds...) }
}

// WithCampaignBuckets sets the upper bounds of the Campaign-wait
// histogram, in seconds: at least one, finite, strictly increasing.
// Default DefaultCampaignBuckets.
func WithCampaignBuckets(bounds ...float64) Option {
	return func(c *config) { c.campaign = append([]float64(nil), bounds...) }
}

// WithSharedHistograms makes a Set's histograms carry no election label:
// one histogram of each kind sums the observations of all the Set's
// elections, while the gauges and counters stay per election. With the
// default buckets the histograms are 52 of the 69 series an election
// exports; a service with thousands of elections will want this.
// New ignores it: its histograms are its one election's anyway.
func WithSharedHistograms() Option { return func(c *config) { c.sharedHistos = true } }

var namespaceRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

func newConfig(opts []Option) (config, error) {
	c := defaultConfig()
	for i, opt := range opts {
		if opt == nil {
			return config{}, &election.OptionError{Field: "metrics.Option", Value: "option #" + strconv.Itoa(i) + " is nil"}
		}
		opt(&c)
	}
	if !namespaceRE.MatchString(c.namespace) {
		return config{}, &election.OptionError{Field: "metrics.WithNamespace", Value: backend.QuoteValue(c.namespace),
			Reason: "must be letters, digits and underscores, not starting with a digit"}
	}
	for _, b := range []struct {
		option string
		bounds []float64
	}{{"metrics.WithLatencyBuckets", c.latency}, {"metrics.WithSlackBuckets", c.slack}, {"metrics.WithCampaignBuckets", c.campaign}} {
		if err := checkBuckets(b.option, b.bounds); err != nil {
			return config{}, err
		}
	}
	return c, nil
}

func checkBuckets(option string, bounds []float64) error {
	if len(bounds) == 0 {
		return &election.OptionError{Field: option, Value: "[]", Reason: "needs at least one bound"}
	}
	for i, b := range bounds {
		switch {
		case math.IsNaN(b) || math.IsInf(b, 0):
			return &election.OptionError{Field: option, Value: fmt.Sprint(bounds), Reason: fmt.Sprintf("bound #%d is %v; bounds must be finite (+Inf is implicit)", i, b)}
		case i > 0 && b <= bounds[i-1]:
			return &election.OptionError{Field: option, Value: fmt.Sprint(bounds), Reason: fmt.Sprintf("bound #%d (%v) is not above bound #%d (%v); bounds must increase strictly", i, b, i-1, bounds[i-1])}
		}
	}
	return nil
}
