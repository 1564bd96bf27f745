package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// elect run starts the executable again as the guard of its command:
	// in tests that run the command in-process, that is this test binary.
	if isGuard(os.Args) {
		os.Exit(guardMain(os.Args))
	}
	// The tests set the environment they need; a developer's own
	// ELECTION_* variables must not leak into them.
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, envPrefix) {
			os.Unsetenv(name)
		}
	}
	dir, err := os.MkdirTemp("", "elect-test-")
	if err != nil {
		panic(err)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// elect runs the tool in-process and returns its exit code and output.
func elect(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestMainHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		code, out, errOut := elect(t, args...)
		if code != exitOK || errOut != "" {
			t.Fatalf("elect %v: exit %d, stderr %q", args, code, errOut)
		}
		for _, want := range []string{"Usage:", "elect <command> [flags]", "demo", "sim", "ELECTION_<FLAG>"} {
			if !strings.Contains(out, want) {
				t.Errorf("elect %v: help lacks %q:\n%s", args, want, out)
			}
		}
	}
}

func TestCommandHelp(t *testing.T) {
	for _, c := range commands() {
		for _, args := range [][]string{{c.name, "--help"}, {c.name, "-h"}, {"help", c.name}} {
			code, out, errOut := elect(t, args...)
			if code != exitOK || errOut != "" {
				t.Fatalf("elect %v: exit %d, stderr %q", args, code, errOut)
			}
			for _, want := range []string{"Usage: elect " + c.name, "Flags:", "Example:", "elect " + c.name, "ELECTION_<FLAG>"} {
				if !strings.Contains(out, want) {
					t.Errorf("elect %v: help lacks %q:\n%s", args, want, out)
				}
			}
			f := newFlagSet(c.name)
			c.setup(f)
			for _, name := range f.order {
				if !strings.Contains(out, "--"+name) || !strings.Contains(out, envName(name)) {
					t.Errorf("elect %v: help does not list --%s with %s", args, name, envName(name))
				}
			}
		}
	}
}

func TestVersion(t *testing.T) {
	for _, arg := range []string{"--version", "-version", "version"} {
		code, out, _ := elect(t, arg)
		if code != exitOK || !strings.HasPrefix(out, "elect ") || strings.TrimSpace(strings.TrimPrefix(out, "elect ")) == "" {
			t.Fatalf("elect %s: exit %d, %q", arg, code, out)
		}
	}
}

// TestUsageErrors: every mistake on the command line or in the environment
// exits with 2 and names the flag (or variable) and the value.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "no command given"},
		{[]string{"frob"}, `unknown command "frob"`},
		{[]string{"--frob"}, "unknown flag --frob"},
		{[]string{"help", "frob"}, `unknown command "frob"`},
		{[]string{"sim", "--nodes=0"}, "--nodes=0: must be between 2 and 1000000"},
		{[]string{"sim", "--nodes", "abc"}, "--nodes=abc: not an integer"},
		{[]string{"sim", "--nodes"}, "--nodes: needs a value"},
		{[]string{"sim", "--frob=1"}, "unknown flag --frob"},
		{[]string{"sim", "extra"}, `unexpected argument "extra"`},
		{[]string{"sim", "--algorithm", "paxos"}, "--algorithm=paxos: must be one of ring, bully, lcr, hs, tree, chubby, zab"},
		{[]string{"sim", "--algorithm", "bully", "--nodes", "5000"}, "--nodes=5000: the bully sends about N² messages"},
		{[]string{"sim", "--nodes", "5", "--crash", "N6"}, "--crash=N6: no node N6: the nodes are N1..N5"},
		{[]string{"sim", "--nodes", "5", "--crash", "N2,N2"}, "--crash=N2,N2: node N2 is listed twice"},
		{[]string{"sim", "--nodes", "5", "--crash", "5"}, "--crash=5: must leave at least one node up"},
		{[]string{"sim", "--crash", "all"}, "--crash=all: at least one node must stay up"},
		{[]string{"sim", "--crash", "x7"}, `--crash=x7: "x7" is neither a count`},
		{[]string{"sim", "--crash", "N2", "--initiators", "N2"}, "--initiators=N2: N2 is down"},
		{[]string{"sim", "--initiators", "0"}, "--initiators=0: at least one node must initiate"},
		{[]string{"sim", "--nodes", "4", "--initiators", "5"}, "--initiators=5: only 4 nodes are up"},
		{[]string{"sim", "--seed", "-1"}, "--seed=-1: not a non-negative integer"},
		{[]string{"sim", "--delay", "5-2"}, "--delay=5-2: the range goes from 5 down to 2"},
		{[]string{"sim", "--delay", "1000"}, "--delay=1000: must be between 0 and 100 ticks"},
		{[]string{"sim", "--trace=maybe"}, "--trace=maybe: not a boolean"},
		{[]string{"sim", "--trace", "--nodes", "5000"}, "--nodes=5000: --trace prints every message"},
		{[]string{"sim", "--nodes", "5000", "--crash", "1"}, "--nodes=5000: with --crash the nodes must tick"},
		{[]string{"demo", "--backend", "zookeeper"}, "--backend=zookeeper: unknown backend; choose etcd or zk or inmem"},
		{[]string{"demo", "--backend", "inmem", "--algorithm", "paxos"}, "--algorithm=paxos: must be one of ring, bully, lcr, hs, zab"},
		{[]string{"demo", "--algorithm", "ring"}, "--algorithm=ring: the etcd backend has no choice of algorithm"},
		{[]string{"demo", "--candidates", "1"}, "--candidates=1: must be between 2 and 20"},
		{[]string{"demo", "--candidates", "21"}, "--candidates=21: must be between 2 and 20"},
		{[]string{"demo", "--ttl", "500ms"}, "--ttl=500ms: must be between 1s and 10s"},
		{[]string{"demo", "--ttl", "soon"}, "--ttl=soon: not a duration"},
		{[]string{"demo", "--short=perhaps"}, "--short=perhaps: not a boolean"},
	} {
		code, out, errOut := elect(t, tc.args...)
		if code != exitUsage {
			t.Errorf("elect %q: exit %d, want %d; stderr %q", tc.args, code, exitUsage, errOut)
			continue
		}
		if !strings.Contains(errOut, tc.want) {
			t.Errorf("elect %q: stderr %q, want it to contain %q", tc.args, errOut, tc.want)
		}
		if out != "" {
			t.Errorf("elect %q: wrote to stdout on a usage error: %q", tc.args, out)
		}
	}
}

// TestEnvironment: ELECTION_<FLAG> sets a flag, the command line wins, and
// a bad value is reported under the variable's name.
func TestEnvironment(t *testing.T) {
	t.Setenv("ELECTION_NODES", "6")
	t.Setenv("ELECTION_ALGORITHM", "bully")
	t.Setenv("ELECTION_INITIATORS", "N1")
	code, out, errOut := elect(t, "sim")
	if code != exitOK || !strings.Contains(out, "bully election (Garcia-Molina) among 6 nodes") {
		t.Fatalf("environment not applied: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = elect(t, "sim", "--nodes", "7", "--algorithm=ring")
	if code != exitOK || !strings.Contains(out, "ring election (Chang and Roberts) among 7 nodes") {
		t.Fatalf("the command line should win over the environment: exit %d\n%s%s", code, out, errOut)
	}

	t.Setenv("ELECTION_NODES", "abc")
	code, _, errOut = elect(t, "sim")
	if code != exitUsage || !strings.Contains(errOut, "ELECTION_NODES=abc: not an integer") {
		t.Fatalf("bad variable: exit %d, stderr %q", code, errOut)
	}
	t.Setenv("ELECTION_NODES", "1")
	code, _, errOut = elect(t, "sim")
	if code != exitUsage || !strings.Contains(errOut, "ELECTION_NODES=1: must be between 2 and 1000000") {
		t.Fatalf("out-of-range variable: exit %d, stderr %q", code, errOut)
	}
	// An empty variable counts as unset.
	t.Setenv("ELECTION_NODES", "")
	if code, out, _ = elect(t, "sim"); code != exitOK || !strings.Contains(out, "among 10 nodes") {
		t.Fatalf("empty variable: exit %d\n%s", code, out)
	}
	t.Setenv("ELECTION_CANDIDATES", "30")
	t.Setenv("ELECTION_BACKEND", "inmem")
	code, _, errOut = elect(t, "demo")
	if code != exitUsage || !strings.Contains(errOut, "ELECTION_CANDIDATES=30: must be between 2 and 20") {
		t.Fatalf("demo variable: exit %d, stderr %q", code, errOut)
	}
}

// binDir is a temporary directory for the elect binary the end-to-end
// tests build once (electBinary).
var binDir string
