// Command elect is the command-line tool of the election library
// (github.com/electkit/election).
//
//	elect <command> [flags]
//
// Commands:
//
//	demo     a narrated story in real time: candidates campaign, the leader
//	         hands over, then crashes, and another takes over after the lease
//	run      keep one copy of a command running: run it only while leading,
//	         and stop it before the lease can lapse
//	observe  print every change of leader, one line each (or JSON lines)
//	leader   print the current leader once (exit 3 when there is none)
//	transfer move the leadership to a chosen candidate, or to the best
//	         waiting one
//	sim      a classic algorithm (ring, lcr, bully, hs, tree, chubby, zab) in
//	         the seeded simulator, with its message counts next to the
//	         textbook formulas
//	nemesis  an election under injected faults (kills, pauses, cuts, store
//	         failures, expired sessions, garbage, another client's deletes
//	         and revocations), its history checked
//
// "elect --help" lists the commands, "elect <command> --help" shows a
// command's flags and an example, "elect --version" prints the version.
// Every flag can also be set with an environment variable ELECTION_<FLAG>
// (--nodes: ELECTION_NODES); a flag on the command line wins.
//
// Exit codes: 0 success, 1 the command failed, 2 the command line (or the
// environment) was wrong; leader exits 3 when there is no leader, and run
// has its own (the command's status, 125-127: see "elect run --help").
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
)

func main() {
	if isGuard(os.Args) {
		os.Exit(guardMain(os.Args))
	}
	if len(os.Args) > 1 && os.Args[1] == candidateCommand {
		os.Exit(runCandidate(os.Args[2:], os.Stderr))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1 // the command ran and failed
	exitUsage   = 2 // bad command line or environment
)

// command is one subcommand of elect.
type command struct {
	name     string
	summary  string // one line, for the command list
	synopsis string // what follows "elect <name>" in the usage line
	about    string // what the command does, for its help
	example  string // one or more example command lines
	// setup defines the command's flags on f and returns the function that
	// runs the command once they are parsed. That function returns a
	// *usageError for a value it refuses (exit 2), any other error for a
	// failure (exit 1).
	setup func(f *flagSet) func(ctx context.Context, stdout io.Writer) error
}

// commands lists elect's commands, in the order the help shows them.
func commands() []*command {
	return []*command{demoCommand(), runCommandDef(), observeCommand(), leaderCommand(), transferCommand(), simCommand(), nemesisCommand()}
}

func lookup(name string) *command {
	for _, c := range commands() {
		if c.name == name {
			return c
		}
	}
	return nil
}

// run is the whole tool: main passes it the arguments after the program
// name and exits with the code it returns.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "elect: no command given")
		writeMainUsage(stderr)
		return exitUsage
	}
	switch a := args[0]; a {
	case "-h", "-help", "--help", "help":
		if a == "help" && len(args) > 1 {
			c := lookup(args[1])
			if c == nil {
				fmt.Fprintf(stderr, "elect help: unknown command %q\n", args[1])
				writeCommandList(stderr)
				return exitUsage
			}
			writeCommandUsage(stdout, c)
			return exitOK
		}
		writeMainUsage(stdout)
		return exitOK
	case "-version", "--version", "version":
		fmt.Fprintf(stdout, "elect %s\n", version())
		return exitOK
	}
	if strings.HasPrefix(args[0], "-") {
		fmt.Fprintf(stderr, "elect: unknown flag %s (flags go after the command)\n", args[0])
		writeMainUsage(stderr)
		return exitUsage
	}
	c := lookup(args[0])
	if c == nil {
		fmt.Fprintf(stderr, "elect: unknown command %q\n", args[0])
		writeCommandList(stderr)
		return exitUsage
	}
	return runCommand(c, args[1:], stdout, stderr)
}

func runCommand(c *command, args []string, stdout, stderr io.Writer) int {
	f := newFlagSet(c.name)
	f.stderr = stderr
	exec := c.setup(f)
	if err := f.Parse(args, osLookupEnv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			writeCommandUsage(stdout, c)
			return exitOK
		}
		return report(c, err, stderr)
	}
	return report(c, exec(context.Background(), stdout), stderr)
}

// exitError makes a command exit with code, after writing err if it is
// not nil.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// report writes err, if any, and returns the exit code it calls for.
func report(c *command, err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintf(stderr, "elect %s: %v\n", c.name, ee.err)
		}
		return ee.code
	}
	fmt.Fprintf(stderr, "elect %s: %v\n", c.name, err)
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "Run 'elect %s --help' for its flags.\n", c.name)
		return exitUsage
	}
	return exitFailure
}

// version is the module version the binary was built from, or "devel".
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok || bi.Main.Version == "" || bi.Main.Version == "(devel)" {
		return "devel"
	}
	return bi.Main.Version
}

const envHelp = `Every flag can also be set in the environment as ELECTION_<FLAG>, the
flag's name in capitals with - as _ (--nodes: ELECTION_NODES=10); a flag
given on the command line wins over its variable.`

func writeMainUsage(w io.Writer) {
	fmt.Fprint(w, `elect: leader election from the command line (github.com/electkit/election)

Usage:
  elect <command> [flags]

`)
	writeCommandList(w)
	fmt.Fprintf(w, `
Run 'elect <command> --help' (or 'elect help <command>') for a command's
flags and an example; 'elect --version' prints the version.

%s
`, envHelp)
}

func writeCommandList(w io.Writer) {
	fmt.Fprintln(w, "Commands:")
	cs := commands()
	width := 0
	for _, c := range cs {
		width = max(width, len(c.name))
	}
	for _, c := range cs {
		fmt.Fprintf(w, "  %-*s  %s\n", width, c.name, c.summary)
	}
}

func writeCommandUsage(w io.Writer, c *command) {
	f := newFlagSet(c.name)
	c.setup(f)
	fmt.Fprintf(w, "Usage: elect %s %s\n\n%s\n\nFlags:\n", c.name, c.synopsis, strings.TrimSpace(c.about))
	f.writeFlags(w)
	fmt.Fprintf(w, "\n%s\n\nExample:\n", envHelp)
	for _, l := range strings.Split(strings.TrimSpace(c.example), "\n") {
		fmt.Fprintf(w, "  %s\n", l)
	}
}
