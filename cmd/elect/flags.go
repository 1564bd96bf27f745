package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// envPrefix starts the environment variable that sets a flag: --nodes is
// ELECTION_NODES, --some-flag is ELECTION_SOME_FLAG.
const envPrefix = "ELECTION_"

// envName returns the environment variable of flag name.
func envName(name string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// usageError is a mistake in how the tool was called: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// flagSet is a flag.FlagSet whose flags report bad values by name and value
// ("--nodes=abc: not an integer"), take a default from ELECTION_<FLAG>, and
// remember where each value came from, so that later checks name it the way
// the user gave it.
type flagSet struct {
	fs     *flag.FlagSet
	bad    error             // the first value a flag refused while parsing
	source map[string]string // flag name → "--name" or "ELECTION_NAME"
	metas  map[string]string // flag name → placeholder of its value in the help
	order  []string          // flag names in the order they were defined

	// takesArgs lets arguments follow the flags (elect run -- CMD ARGS…);
	// Args returns them.
	takesArgs bool
	// stderr is where a running command writes its diagnostics.
	stderr io.Writer
}

func newFlagSet(name string) *flagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &flagSet{fs: fs, source: map[string]string{}, metas: map[string]string{}, stderr: io.Discard}
}

// value is a flag.Value made of a parse function and a formatter.
type value struct {
	set    func(string) error
	get    func() string
	isBool bool
}

func (v *value) Set(s string) error { return v.set(s) }
func (v *value) String() string {
	if v == nil || v.get == nil {
		return ""
	}
	return v.get()
}
func (v *value) IsBoolFlag() bool { return v != nil && v.isBool }

// define registers v as flag name. meta names its value in the help ("N",
// "D"); empty for a bool flag.
func (f *flagSet) define(name, meta, usage string, v *value) {
	inner := v.set
	v.set = func(s string) error {
		if err := inner(s); err != nil {
			if f.bad == nil {
				f.bad = usagef("%s: %v", f.label(name, s), err)
			}
			return err
		}
		return nil
	}
	f.metas[name] = meta
	f.order = append(f.order, name)
	f.fs.Var(v, name, usage)
}

// String defines a string flag.
func (f *flagSet) String(p *string, name, meta, def, usage string) {
	*p = def
	f.define(name, meta, usage, &value{
		set: func(s string) error { *p = s; return nil },
		get: func() string { return *p },
	})
}

// Int defines an integer flag.
func (f *flagSet) Int(p *int, name, meta string, def int, usage string) {
	*p = def
	f.define(name, meta, usage, &value{
		set: func(s string) error {
			n, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil {
				return errors.New("not an integer")
			}
			*p = n
			return nil
		},
		get: func() string { return strconv.Itoa(*p) },
	})
}

// Float defines a number flag ("1.5", "60").
func (f *flagSet) Float(p *float64, name, meta string, def float64, usage string) {
	*p = def
	f.define(name, meta, usage, &value{
		set: func(s string) error {
			n, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			if err != nil || math.IsNaN(n) || math.IsInf(n, 0) {
				return errors.New("not a number")
			}
			*p = n
			return nil
		},
		get: func() string { return strconv.FormatFloat(*p, 'g', -1, 64) },
	})
}

// Uint64 defines an unsigned integer flag.
func (f *flagSet) Uint64(p *uint64, name, meta string, def uint64, usage string) {
	*p = def
	f.define(name, meta, usage, &value{
		set: func(s string) error {
			n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
			if err != nil {
				return errors.New("not a non-negative integer below 2^64")
			}
			*p = n
			return nil
		},
		get: func() string { return strconv.FormatUint(*p, 10) },
	})
}

// Duration defines a duration flag ("1.5s", "800ms").
func (f *flagSet) Duration(p *time.Duration, name, meta string, def time.Duration, usage string) {
	*p = def
	f.define(name, meta, usage, &value{
		set: func(s string) error {
			d, err := time.ParseDuration(strings.TrimSpace(s))
			if err != nil {
				return errors.New("not a duration (examples: 2s, 1500ms)")
			}
			*p = d
			return nil
		},
		get: func() string { return p.String() },
	})
}

// Bool defines a boolean flag: --name, --name=true, --name=false.
func (f *flagSet) Bool(p *bool, name string, def bool, usage string) {
	*p = def
	f.define(name, "", usage, &value{
		set: func(s string) error {
			b, err := strconv.ParseBool(strings.TrimSpace(s))
			if err != nil {
				return errors.New("not a boolean (true or false)")
			}
			*p = b
			return nil
		},
		get:    func() string { return strconv.FormatBool(*p) },
		isBool: true,
	})
}

// Args returns the arguments after the flags.
func (f *flagSet) Args() []string { return f.fs.Args() }

// Given reports whether flag name was given, on the command line or in the
// environment.
func (f *flagSet) Given(name string) bool { return f.source[name] != "" }

// label names a value the way the user gave it: "--nodes=0", or
// "ELECTION_NODES=0" when it came from the environment.
func (f *flagSet) label(name, val string) string {
	if src := f.source[name]; strings.HasPrefix(src, envPrefix) {
		return src + "=" + val
	}
	return "--" + name + "=" + val
}

// Bad is the usage error for flag name's current value.
func (f *flagSet) Bad(name, format string, args ...any) error {
	val := ""
	if fl := f.fs.Lookup(name); fl != nil {
		val = fl.Value.String()
	}
	return usagef("%s: %s", f.label(name, val), fmt.Sprintf(format, args...))
}

// Parse parses args, then takes every flag not given on the command line
// from its environment variable, if that is set. It returns flag.ErrHelp
// for -h and --help, and a *usageError for anything else wrong, naming the
// flag and the value.
func (f *flagSet) Parse(args []string, lookupEnv func(string) (string, bool)) error {
	// The command line first: a flag given there wins over its variable,
	// and f.label names its values as flags.
	if err := f.fs.Parse(args); err != nil {
		switch {
		case errors.Is(err, flag.ErrHelp):
			return err
		case f.bad != nil:
			return f.bad
		}
		return usagef("%s", rewordFlagError(err))
	}
	if f.fs.NArg() > 0 && !f.takesArgs {
		return usagef("unexpected argument %q (flags start with --)", f.fs.Arg(0))
	}
	f.fs.Visit(func(fl *flag.Flag) { f.source[fl.Name] = "--" + fl.Name })
	var err error
	f.fs.VisitAll(func(fl *flag.Flag) {
		if err != nil || f.source[fl.Name] != "" {
			return
		}
		v, ok := lookupEnv(envName(fl.Name))
		if !ok {
			return
		}
		f.source[fl.Name] = envName(fl.Name)
		if f.fs.Set(fl.Name, v) != nil {
			err = f.bad
		}
	})
	return err
}

// rewordFlagError turns the flag package's own errors (unknown flag, missing
// value) into the tool's wording.
func rewordFlagError(err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		return "unknown flag " + dashes(name)
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: "); ok {
		return dashes(name) + ": needs a value"
	}
	return msg
}

// dashes writes a flag the way the help does: "-x" and "--x" become "--x".
func dashes(name string) string { return "--" + strings.TrimLeft(name, "-") }

// writeFlags writes the flag list of the help: one flag a line, with its
// value placeholder, usage, default and environment variable, in the order
// the flags were defined.
func (f *flagSet) writeFlags(w io.Writer) {
	type row struct{ left, right string }
	var rows []row
	width := 0
	for _, name := range f.order {
		fl := f.fs.Lookup(name)
		left := "--" + fl.Name
		if m := f.metas[fl.Name]; m != "" {
			left += " " + m
		}
		right := fl.Usage
		if fl.DefValue != "" && fl.DefValue != "false" && fl.DefValue != "0s" {
			right += " (default " + fl.DefValue + ")"
		}
		right += " [" + envName(fl.Name) + "]"
		rows = append(rows, row{left, right})
		width = max(width, len(left))
	}
	for _, r := range rows {
		fmt.Fprintf(w, "  %-*s  %s\n", width, r.left, r.right)
	}
}

// osLookupEnv is os.LookupEnv; an empty variable counts as unset.
func osLookupEnv(name string) (string, bool) {
	v, ok := os.LookupEnv(name)
	return v, ok && v != ""
}
