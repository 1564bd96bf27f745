package election

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Defaults and bounds of the options shared by every backend. This block is
// the one place they are written down.
const (
	// DefaultTTL is the lease TTL (etcd lease, ZooKeeper session timeout,
	// failure-detector timeout of the in-process algorithms).
	DefaultTTL = 10 * time.Second
	// MinTTL and MaxTTL bound WithTTL. Below a second a loaded machine's
	// scheduling noise eats the lease; above ten minutes a crash leaves the
	// election leaderless for longer than anyone wants.
	MinTTL = time.Second
	MaxTTL = 10 * time.Minute

	// DefaultDrift is ρ, the assumed bound on how much faster the store's
	// clock may run than this process's monotonic clock: the store's lease
	// of TTL may end after TTL/(1+ρ) of local time, so a Term counts no
	// more than that (1%: far above real quartz and NTP slew, cheap at
	// 0.1 s of a 10 s lease).
	DefaultDrift = 0.01
	// MaxDrift bounds WithDrift.
	MaxDrift = 0.1

	// DefaultMargin is subtracted from every deadline, on top of the drift
	// bound: time for the application to stop acting once Done closes.
	DefaultMargin = 100 * time.Millisecond

	// MaxIDLen bounds the length of a candidate ID, in bytes.
	MaxIDLen = 128
	// MaxValueSize bounds WithValue: 256 KiB, well under ZooKeeper's 1 MiB
	// znode limit and etcd's 1.5 MiB request limit with room for the key
	// and the request's own overhead.
	MaxValueSize = 256 << 10
)

// IDChars is the alphabet of candidate IDs: letters, digits and ". _ - : @".
// Every backend can store it verbatim in a key or a znode name. An ID starts
// with a letter or a digit.
const IDChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-:@"

// BeforeRenewFunc is called before each lease renewal while leading, with the
// Term's context (canceled when the Term ends). A non-nil error (or a panic)
// makes the leader step down: the Term ends with ErrUnhealthy and the
// renewal is not sent. See Term for what happens when a hook blocks.
type BeforeRenewFunc func(ctx context.Context, t *Term) error

// AfterRenewFunc is called after each renewal attempt while leading, with its
// outcome and the Term's deadline after it. Calls arrive in the order of the
// attempts.
type AfterRenewFunc func(Renewal)

// Renewal is the outcome of one lease renewal attempt.
type Renewal struct {
	Leader   Leader        // the leadership being renewed
	Sent     time.Time     // when the request was sent (the deadline counts from here)
	Latency  time.Duration // from Sent until the reply or the failure
	Err      error         // nil if the store confirmed the lease
	Deadline time.Time     // the Term's deadline after this attempt
}

// Options are the settings shared by every backend. Build them with
// NewOptions; a zero Options is not valid.
type Options struct {
	// ID names the candidate. Default: "<host>-<pid>-<random>" reduced to
	// IDChars. Required, 1..MaxIDLen bytes of IDChars, starting with a letter
	// or digit.
	ID string
	// Value is application metadata published with the leadership (e.g. the
	// address to forward requests to). Default empty; at most MaxValueSize.
	Value []byte
	// Priority is the election attribute: higher is better. Default 0; any
	// value. Among waiting candidates the highest leads next, ties first
	// come, first served.
	Priority int64
	// PreemptAfter, when positive, makes a leader step down (its Term ends
	// with ErrPreempted) for a waiting candidate of strictly higher
	// Priority once that candidate has waited PreemptAfter without a break
	// (the hold-off, so that a flapping candidate cannot bounce the
	// leadership), and hands the leadership to it. It is the leader's
	// option: a candidate made with it can be preempted. Default 0: off, a
	// candidate of higher priority waits until the leader goes, then goes
	// first. 0..MaxTTL*10.
	PreemptAfter time.Duration
	// TTL of the lease or session. Default DefaultTTL; MinTTL..MaxTTL.
	TTL time.Duration
	// Drift is ρ, the clock-rate bound. Default DefaultDrift; 0..MaxDrift.
	Drift float64
	// Margin is subtracted from every deadline. Default DefaultMargin; at
	// least 0 and small enough that Window() is at least TTL/2.
	Margin time.Duration
	// Logger receives the library's diagnostics. Default: discards them.
	Logger *slog.Logger
	// BeforeRenew and AfterRenew are the lease-renewal hooks. Default none.
	BeforeRenew BeforeRenewFunc
	AfterRenew  AfterRenewFunc
	// Events receives the Terms' events and Run's (WithEvents). Default
	// none.
	Events *Events
}

// An Option sets one field of Options.
type Option func(*Options)

// WithID sets the candidate's ID.
func WithID(id string) Option { return func(o *Options) { o.ID = id } }

// WithValue sets the metadata published with the leadership. The slice is
// copied.
func WithValue(v []byte) Option {
	return func(o *Options) { o.Value = append([]byte(nil), v...) }
}

// WithPriority sets the election attribute; higher is better.
func WithPriority(p int64) Option { return func(o *Options) { o.Priority = p } }

// WithPreemption lets a waiting candidate of strictly higher Priority
// preempt this one's leadership once it has waited holdOff (see
// Options.PreemptAfter). 0 turns preemption off.
func WithPreemption(holdOff time.Duration) Option {
	return func(o *Options) { o.PreemptAfter = holdOff }
}

// WithTTL sets the lease or session TTL.
func WithTTL(d time.Duration) Option { return func(o *Options) { o.TTL = d } }

// WithDrift sets ρ, the assumed bound on how much faster the store's clock
// may run than this process's (0.01 = 1%). A Term counts TTL/(1+ρ) − Margin
// of local time from a renewal's send, so a local clock up to 1+ρ times
// slower than the store's still ends the Term before the store can expire
// the lease; a faster one ends it early. ρ covers a clock's rate, not a
// process whose clock stops while the store's runs (a pause, a suspended
// machine or VM): fence with Term.Token() for that. Wall-clock steps never
// matter: deadlines are monotonic readings.
func WithDrift(rho float64) Option { return func(o *Options) { o.Drift = rho } }

// WithMargin sets the safety margin subtracted from every deadline.
func WithMargin(d time.Duration) Option { return func(o *Options) { o.Margin = d } }

// WithLogger sets the logger for the library's diagnostics.
func WithLogger(l *slog.Logger) Option { return func(o *Options) { o.Logger = l } }

// WithBeforeRenew sets the hook called before each renewal while leading.
func WithBeforeRenew(f BeforeRenewFunc) Option { return func(o *Options) { o.BeforeRenew = f } }

// WithAfterRenew sets the hook called after each renewal attempt while leading.
func WithAfterRenew(f AfterRenewFunc) Option { return func(o *Options) { o.AfterRenew = f } }

// discardLogger is the default Logger: one for every Elector (a Logger
// is immutable), not one each.
var discardLogger = slog.New(slog.DiscardHandler)

// DefaultOptions returns the defaults, with a fresh generated ID.
func DefaultOptions() Options {
	return Options{
		ID:     defaultID(),
		TTL:    DefaultTTL,
		Drift:  DefaultDrift,
		Margin: DefaultMargin,
		Logger: discardLogger,
	}
}

// NewOptions applies opts to DefaultOptions and validates the result.
func NewOptions(opts ...Option) (Options, error) {
	o := DefaultOptions()
	for i, opt := range opts {
		if opt == nil {
			return Options{}, &OptionError{Field: "Option", Value: "option #" + strconv.Itoa(i) + " is nil"}
		}
		opt(&o)
	}
	if err := o.Validate(); err != nil {
		return Options{}, err
	}
	return o, nil
}

// Window is how long a Term stays valid after the send time of its latest
// successful renewal: TTL/(1+Drift) − Margin.
func (o Options) Window() time.Duration {
	return time.Duration(float64(o.TTL)/(1+o.Drift)) - o.Margin
}

// Validate reports the first invalid field as an *OptionError wrapping
// ErrInvalidOption.
func (o Options) Validate() error {
	if err := validateID(o.ID); err != nil {
		return err
	}
	if len(o.Value) > MaxValueSize {
		return &OptionError{Field: "Value", Value: fmt.Sprintf("%d bytes", len(o.Value)), Reason: fmt.Sprintf("exceeds MaxValueSize (%d bytes)", MaxValueSize)}
	}
	if o.TTL < MinTTL || o.TTL > MaxTTL {
		return &OptionError{Field: "TTL", Value: o.TTL.String(), Reason: fmt.Sprintf("must be between %v and %v", MinTTL, MaxTTL)}
	}
	if math.IsNaN(o.Drift) || o.Drift < 0 || o.Drift > MaxDrift {
		return &OptionError{Field: "Drift", Value: strconv.FormatFloat(o.Drift, 'g', -1, 64), Reason: fmt.Sprintf("must be between 0 and %g", MaxDrift)}
	}
	if o.Margin < 0 {
		return &OptionError{Field: "Margin", Value: o.Margin.String(), Reason: "must not be negative"}
	}
	if w := o.Window(); w < o.TTL/2 {
		return &OptionError{Field: "Margin", Value: o.Margin.String(), Reason: fmt.Sprintf("leaves a validity window TTL/(1+Drift)-Margin of %v, less than TTL/2 (%v)", w, o.TTL/2)}
	}
	if o.PreemptAfter < 0 || o.PreemptAfter > 10*MaxTTL {
		return &OptionError{Field: "PreemptAfter", Value: o.PreemptAfter.String(), Reason: fmt.Sprintf("must be between 0 (off) and %v", 10*MaxTTL)}
	}
	if o.Logger == nil {
		return &OptionError{Field: "Logger", Value: "nil", Reason: "must not be nil"}
	}
	return nil
}

// validateID reports whether id is a valid candidate ID (see IDChars);
// package backend exports it as ValidateID.
func validateID(id string) error {
	switch {
	case id == "":
		return &OptionError{Field: "ID", Value: `""`, Reason: "must not be empty"}
	case len(id) > MaxIDLen:
		cut := id[:16]
		for !utf8.ValidString(cut) {
			cut = cut[:len(cut)-1]
		}
		return &OptionError{Field: "ID", Value: strconv.Quote(cut) + "…", Reason: fmt.Sprintf("is %d bytes, more than MaxIDLen (%d)", len(id), MaxIDLen)}
	case !isAlnum(id[0]):
		return &OptionError{Field: "ID", Value: strconv.Quote(id), Reason: "must start with a letter or a digit"}
	}
	if i := strings.IndexFunc(id, func(r rune) bool { return r > 0x7f || !strings.ContainsRune(IDChars, r) }); i >= 0 {
		_, n := utf8.DecodeRuneInString(id[i:]) // the whole character, not its first byte
		return &OptionError{Field: "ID", Value: strconv.Quote(id), Reason: fmt.Sprintf("has %q at byte %d; allowed: letters, digits and . _ - : @", id[i:i+n], i)}
	}
	return nil
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// OptionError names a refused option or argument. It wraps ErrInvalidOption.
type OptionError struct {
	Field  string // the option or argument, e.g. "TTL"
	Value  string // the refused value, formatted
	Reason string
}

func (e *OptionError) Error() string {
	s := "election: invalid option " + e.Field + " = " + e.Value
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// Unwrap returns ErrInvalidOption.
func (e *OptionError) Unwrap() error { return ErrInvalidOption }

// defaultID is "<host>-<pid>-<6 hex>", reduced to IDChars and MaxIDLen.
func defaultID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "host"
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	suffix := "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
	host = strings.Map(func(r rune) rune {
		if r > 0x7f || !strings.ContainsRune(IDChars, r) {
			return '-'
		}
		return r
	}, host)
	if !isAlnum(host[0]) {
		host = "h" + host
	}
	if max := MaxIDLen - len(suffix); len(host) > max {
		host = host[:max]
	}
	return host + suffix
}
