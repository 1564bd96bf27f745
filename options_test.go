package election

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestNewOptionsRefusals checks that every refused option wraps
// ErrInvalidOption, is an *OptionError naming the field, and that the message
// names both the field and the refused value.
func TestNewOptionsRefusals(t *testing.T) {
	long := strings.Repeat("a", MaxIDLen+1)
	tests := []struct {
		name      string
		opts      []Option
		field     string
		msgParts  []string // each must appear in err.Error()
		valuePart string   // must appear in OptionError.Value
	}{
		{"empty ID", []Option{WithID("")}, "ID", []string{`ID = ""`, "empty"}, `""`},
		{"ID too long", []Option{WithID(long)}, "ID", []string{"ID = " + strconv.Quote(long[:16]), strconv.Itoa(MaxIDLen + 1), strconv.Itoa(MaxIDLen)}, strconv.Quote(long[:16])},
		{"ID with slash", []Option{WithID("a/b")}, "ID", []string{`ID = "a/b"`, `"/"`, "byte 1"}, `"a/b"`},
		{"ID with space", []Option{WithID("a b")}, "ID", []string{`ID = "a b"`, `" "`, "byte 1"}, `"a b"`},
		{"ID with unicode", []Option{WithID("caf\u00e9")}, "ID", []string{`ID = "café"`, `"é"`, "byte 3"}, `"café"`},
		{"ID all unicode", []Option{WithID("日本")}, "ID", []string{`ID = "日本"`, "start with a letter or a digit"}, `"日本"`},
		{"ID with NUL", []Option{WithID("a\x00b")}, "ID", []string{`ID = "a\x00b"`}, `"a\x00b"`},
		{"ID starting with dash", []Option{WithID("-a")}, "ID", []string{`ID = "-a"`, "start with a letter or a digit"}, `"-a"`},
		{"ID starting with dot", []Option{WithID(".a")}, "ID", []string{`ID = ".a"`, "start with a letter or a digit"}, `".a"`},
		{"ID starting with colon", []Option{WithID(":a")}, "ID", []string{`ID = ":a"`}, `":a"`},
		{"TTL zero", []Option{WithTTL(0)}, "TTL", []string{"TTL = 0s"}, "0s"},
		{"TTL negative", []Option{WithTTL(-time.Second)}, "TTL", []string{"TTL = -1s"}, "-1s"},
		{"TTL below MinTTL", []Option{WithTTL(MinTTL - time.Nanosecond)}, "TTL", []string{"TTL = " + (MinTTL - time.Nanosecond).String(), MinTTL.String(), MaxTTL.String()}, (MinTTL - time.Nanosecond).String()},
		{"TTL above MaxTTL", []Option{WithTTL(MaxTTL + time.Nanosecond)}, "TTL", []string{"TTL = " + (MaxTTL + time.Nanosecond).String()}, (MaxTTL + time.Nanosecond).String()},
		{"Drift negative", []Option{WithDrift(-0.01)}, "Drift", []string{"Drift = -0.01"}, "-0.01"},
		{"Drift NaN", []Option{WithDrift(math.NaN())}, "Drift", []string{"Drift = NaN"}, "NaN"},
		{"Drift +Inf", []Option{WithDrift(math.Inf(1))}, "Drift", []string{"Drift = +Inf"}, "+Inf"},
		{"Drift above MaxDrift", []Option{WithDrift(MaxDrift + 0.001)}, "Drift", []string{"Drift = " + strconv.FormatFloat(MaxDrift+0.001, 'g', -1, 64), strconv.FormatFloat(MaxDrift, 'g', -1, 64)}, strconv.FormatFloat(MaxDrift+0.001, 'g', -1, 64)},
		{"PreemptAfter negative", []Option{WithPreemption(-time.Second)}, "PreemptAfter", []string{"PreemptAfter = -1s", "0 (off)"}, "-1s"},
		{"PreemptAfter too long", []Option{WithPreemption(10*MaxTTL + 1)}, "PreemptAfter", []string{"PreemptAfter = " + (10*MaxTTL + 1).String()}, (10*MaxTTL + 1).String()},
		{"Margin negative", []Option{WithMargin(-time.Nanosecond)}, "Margin", []string{"Margin = -1ns", "negative"}, "-1ns"},
		// TTL 1s, drift 0: Window = 1s − Margin must be ≥ 500ms.
		{"Margin too large for TTL", []Option{WithTTL(time.Second), WithDrift(0), WithMargin(500*time.Millisecond + time.Nanosecond)}, "Margin", []string{"Margin = 500.000001ms", "499.999999ms", "500ms"}, "500.000001ms"},
		// Default TTL and drift: 10s/1.01 ≈ 9.90s, half is 5s, so 4.91s of margin is too much.
		{"Margin too large for default TTL", []Option{WithMargin(4910 * time.Millisecond)}, "Margin", []string{"Margin = 4.91s"}, "4.91s"},
		{"Margin larger than TTL", []Option{WithMargin(time.Hour)}, "Margin", []string{"Margin = 1h0m0s"}, "1h0m0s"},
		{"Value too big", []Option{WithValue(make([]byte, MaxValueSize+1))}, "Value", []string{"Value = " + strconv.Itoa(MaxValueSize+1) + " bytes", strconv.Itoa(MaxValueSize)}, strconv.Itoa(MaxValueSize+1) + " bytes"},
		{"nil Logger", []Option{WithLogger(nil)}, "Logger", []string{"Logger = nil"}, "nil"},
		{"nil Option first", []Option{nil}, "Option", []string{"Option = option #0 is nil"}, "#0"},
		{"nil Option later", []Option{WithID("ok"), WithTTL(time.Minute), nil, WithPriority(1)}, "Option", []string{"Option = option #2 is nil"}, "#2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, err := NewOptions(tc.opts...)
			if err == nil {
				t.Fatalf("NewOptions accepted %s: %+v", tc.name, o)
			}
			if !errors.Is(err, ErrInvalidOption) {
				t.Errorf("error %q does not wrap ErrInvalidOption", err)
			}
			var oe *OptionError
			if !errors.As(err, &oe) {
				t.Fatalf("error %q (%T) is not an *OptionError", err, err)
			}
			if oe.Field != tc.field {
				t.Errorf("Field = %q, want %q (error %q)", oe.Field, tc.field, err)
			}
			if !strings.Contains(oe.Value, tc.valuePart) {
				t.Errorf("Value = %q, want it to contain %q", oe.Value, tc.valuePart)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "election: invalid option "+tc.field+" = ") {
				t.Errorf("message %q does not start with %q", msg, "election: invalid option "+tc.field+" = ")
			}
			for _, p := range tc.msgParts {
				if !strings.Contains(msg, p) {
					t.Errorf("message %q does not contain %q", msg, p)
				}
			}
			if o.ID != "" || o.TTL != 0 || o.Logger != nil {
				t.Errorf("NewOptions returned non-zero Options with an error: %+v", o)
			}
		})
	}
}

// TestValidateDirect checks Validate on Options built by hand, bypassing
// NewOptions, including the zero Options.
func TestValidateDirect(t *testing.T) {
	valid := func() Options {
		return Options{ID: "node-1", TTL: DefaultTTL, Drift: DefaultDrift, Margin: DefaultMargin, Logger: slog.New(slog.DiscardHandler)}
	}
	if err := valid().Validate(); err != nil {
		t.Fatalf("valid Options refused: %v", err)
	}
	tests := []struct {
		name  string
		edit  func(*Options)
		field string
	}{
		{"zero Options", func(o *Options) { *o = Options{} }, "ID"},
		{"nil Logger", func(o *Options) { o.Logger = nil }, "Logger"},
		{"zero TTL", func(o *Options) { o.TTL = 0 }, "TTL"},
		{"NaN Drift", func(o *Options) { o.Drift = math.NaN() }, "Drift"},
		{"-Inf Drift", func(o *Options) { o.Drift = math.Inf(-1) }, "Drift"},
		{"min int64 Margin", func(o *Options) { o.Margin = math.MinInt64 }, "Margin"},
		{"max int64 Margin", func(o *Options) { o.Margin = math.MaxInt64 }, "Margin"},
		{"big Value", func(o *Options) { o.Value = make([]byte, MaxValueSize+1) }, "Value"},
		// The first invalid field is reported (ID is checked first).
		{"bad ID and bad TTL", func(o *Options) { o.ID = "-"; o.TTL = 0 }, "ID"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := valid()
			tc.edit(&o)
			err := o.Validate()
			if !errors.Is(err, ErrInvalidOption) {
				t.Fatalf("Validate = %v, want an error wrapping ErrInvalidOption", err)
			}
			var oe *OptionError
			if !errors.As(err, &oe) || oe.Field != tc.field {
				t.Fatalf("Validate = %v, want an *OptionError for field %q", err, tc.field)
			}
			if !strings.Contains(err.Error(), tc.field+" = ") {
				t.Errorf("message %q does not name %q", err, tc.field)
			}
		})
	}
}

func TestNewOptionsDefaults(t *testing.T) {
	o, err := NewOptions()
	if err != nil {
		t.Fatalf("NewOptions() = %v", err)
	}
	if o.TTL != DefaultTTL {
		t.Errorf("TTL = %v, want %v", o.TTL, DefaultTTL)
	}
	if o.Drift != DefaultDrift {
		t.Errorf("Drift = %v, want %v", o.Drift, DefaultDrift)
	}
	if o.Margin != DefaultMargin {
		t.Errorf("Margin = %v, want %v", o.Margin, DefaultMargin)
	}
	if o.Priority != 0 {
		t.Errorf("Priority = %d, want 0", o.Priority)
	}
	if o.Value != nil {
		t.Errorf("Value = %q, want nil", o.Value)
	}
	if o.Logger == nil {
		t.Errorf("Logger is nil")
	} else if o.Logger.Enabled(context.Background(), slog.LevelError) {
		t.Errorf("default Logger is enabled; want one that discards")
	}
	if o.BeforeRenew != nil || o.AfterRenew != nil {
		t.Errorf("default hooks are set")
	}
	if err := validateID(o.ID); err != nil {
		t.Errorf("default ID %q fails ValidateID: %v", o.ID, err)
	}
	if len(o.ID) > MaxIDLen {
		t.Errorf("default ID is %d bytes, more than %d", len(o.ID), MaxIDLen)
	}
	// "<host>-<pid>-<6 hex>"
	suffix := regexp.MustCompile(`-` + strconv.Itoa(os.Getpid()) + `-[0-9a-f]{6}$`)
	if !suffix.MatchString(o.ID) {
		t.Errorf("default ID %q does not end in -<pid>-<6 hex>", o.ID)
	}
	if err := DefaultOptions().Validate(); err != nil {
		t.Errorf("DefaultOptions().Validate() = %v", err)
	}
	// Two defaults differ somewhere among 100 (a chance collision of all
	// of them is impossible in practice: 2^-2400).
	ids := map[string]bool{}
	for range 100 {
		ids[DefaultOptions().ID] = true
	}
	if len(ids) < 2 {
		t.Errorf("100 default IDs are all equal: %v", ids)
	}
	// Window of the defaults: 10s/1.01 − 100ms, truncated to the nanosecond.
	if got, want := o.Window(), 9800990099*time.Nanosecond; got != want {
		t.Errorf("default Window() = %v, want %v", got, want)
	}
}

func TestNewOptionsApplies(t *testing.T) {
	var before BeforeRenewFunc = func(context.Context, *Term) error { return nil }
	var after AfterRenewFunc = func(Renewal) {}
	log := slog.New(slog.NewTextHandler(&bytes.Buffer{}, nil))
	o, err := NewOptions(
		WithID("node-7"), WithValue([]byte("addr:1")), WithPriority(-3),
		WithTTL(30*time.Second), WithDrift(0.05), WithMargin(time.Second),
		WithLogger(log), WithBeforeRenew(before), WithAfterRenew(after),
	)
	if err != nil {
		t.Fatalf("NewOptions = %v", err)
	}
	if o.ID != "node-7" || string(o.Value) != "addr:1" || o.Priority != -3 || o.TTL != 30*time.Second ||
		o.Drift != 0.05 || o.Margin != time.Second || o.Logger != log || o.BeforeRenew == nil || o.AfterRenew == nil {
		t.Errorf("options not applied: %+v", o)
	}
	// Later options override earlier ones.
	o, err = NewOptions(WithID("first"), WithID("second"))
	if err != nil || o.ID != "second" {
		t.Errorf("NewOptions(WithID(first), WithID(second)) = %q, %v; want second", o.ID, err)
	}
}

func TestWithValueCopies(t *testing.T) {
	v := []byte("10.0.0.1:80")
	o, err := NewOptions(WithValue(v))
	if err != nil {
		t.Fatal(err)
	}
	v[0] = 'X'
	if string(o.Value) != "10.0.0.1:80" {
		t.Errorf("Value = %q after changing the caller's slice; want a copy", o.Value)
	}
	// The Option itself must copy at each application, not once.
	opt := WithValue(v)
	var a, b Options
	opt(&a)
	opt(&b)
	a.Value[0] = 'Y'
	if b.Value[0] != 'X' {
		t.Errorf("two applications of one WithValue share their slice")
	}
}

func TestNewOptionsBoundariesAccepted(t *testing.T) {
	idMax := strings.Repeat("b", MaxIDLen)
	tests := []struct {
		name string
		opts []Option
	}{
		{"TTL == MinTTL", []Option{WithTTL(MinTTL)}},
		{"TTL == MaxTTL", []Option{WithTTL(MaxTTL)}},
		{"Drift == MaxDrift", []Option{WithDrift(MaxDrift)}},
		{"Drift == 0", []Option{WithDrift(0)}},
		{"Margin == 0", []Option{WithMargin(0)}},
		{"Window == TTL/2", []Option{WithTTL(time.Second), WithDrift(0), WithMargin(500 * time.Millisecond)}},
		{"MinTTL with MaxDrift and default margin", []Option{WithTTL(MinTTL), WithDrift(MaxDrift)}},
		{"ID of MaxIDLen bytes", []Option{WithID(idMax)}},
		{"ID of one byte", []Option{WithID("7")}},
		{"ID with every allowed char", []Option{WithID(IDChars)}},
		{"ID like an address", []Option{WithID("node_1.example:2379@dc-2")}},
		{"Value of MaxValueSize", []Option{WithValue(make([]byte, MaxValueSize))}},
		{"negative Priority", []Option{WithPriority(math.MinInt64)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewOptions(tc.opts...); err != nil {
				t.Errorf("NewOptions refused a boundary value: %v", err)
			}
		})
	}
	if err := validateID(idMax); err != nil {
		t.Errorf("validateID(%d bytes) = %v", MaxIDLen, err)
	}
}

func TestWindow(t *testing.T) {
	tests := []struct {
		ttl    time.Duration
		drift  float64
		margin time.Duration
		want   time.Duration
	}{
		{time.Second, 0, 0, time.Second},
		{10 * time.Second, 0.01, 100 * time.Millisecond, 9800990099 * time.Nanosecond},
		{11 * time.Second, 0.1, 0, 10 * time.Second},
		{11 * time.Second, 0.1, time.Second, 9 * time.Second},
		{2 * time.Second, 0, 500 * time.Millisecond, 1500 * time.Millisecond},
	}
	for _, tc := range tests {
		o := Options{TTL: tc.ttl, Drift: tc.drift, Margin: tc.margin}
		if got := o.Window(); got != tc.want {
			t.Errorf("Window(TTL %v, drift %g, margin %v) = %v, want %v", tc.ttl, tc.drift, tc.margin, got, tc.want)
		}
	}
}

func TestOptionErrorFormat(t *testing.T) {
	e := &OptionError{Field: "TTL", Value: "1ns", Reason: "too short"}
	if got, want := e.Error(), "election: invalid option TTL = 1ns: too short"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	e.Reason = ""
	if got, want := e.Error(), "election: invalid option TTL = 1ns"; got != want {
		t.Errorf("Error() without reason = %q, want %q", got, want)
	}
	if e.Unwrap() != ErrInvalidOption {
		t.Errorf("Unwrap() = %v, want ErrInvalidOption", e.Unwrap())
	}
}
