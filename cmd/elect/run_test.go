//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/etcd"
	"github.com/electkit/election/internal/rig/embedetcd"
	"github.com/electkit/election/internal/rig/etcdtest"
)

// patience bounds every wait for an event in these tests.
const patience = 20 * time.Second

var (
	buildOnce sync.Once
	buildErr  error
)

// electBinary builds cmd/elect once per test run, into binDir.
func electBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(binDir, "elect")
	buildOnce.Do(func() {
		out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("%v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatalf("go build: %v", buildErr)
	}
	return bin
}

// syncBuffer is a bytes.Buffer safe for a process's output and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is an elect process a test started.
type proc struct {
	name   string
	cmd    *exec.Cmd
	stdout syncBuffer
	stderr syncBuffer
	done   chan struct{}
	err    error
}

// startElect starts the elect binary with args and env (on top of the
// test's environment); it is killed in Cleanup if still running.
func startElect(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, cmd: exec.Command(electBinary(t), args...), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	// The guard and the command share elect's output: if a test fails
	// while they run on, Wait must not wait for them.
	p.cmd.WaitDelay = 5 * time.Second
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s stderr:\n%s", p.name, p.stderr.String())
		}
	})
	return p
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(patience):
		t.Fatalf("%s did not exit; stderr:\n%s", p.name, p.stderr.String())
	}
	if p.err == nil {
		return 0
	}
	if ee, ok := p.err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	t.Fatalf("%s: %v", p.name, p.err)
	return -1
}

// waitFor polls cond until it holds, failing the test after patience.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(patience); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && len(b) > i+2 && b[i+2] != 'Z' && b[i+2] != 'X'
}

// entry is one line a leader's command wrote: its token and its PID.
type entry struct {
	token uint64
	pid   int
}

func readEntries(t *testing.T, path string) []entry {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var es []entry
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue // a line being written
		}
		tok, err1 := strconv.ParseUint(f[0], 10, 64)
		pid, err2 := strconv.Atoi(f[1])
		if err1 != nil || err2 != nil {
			t.Fatalf("bad line %q in %s", sc.Text(), path)
		}
		es = append(es, entry{tok, pid})
	}
	return es
}

// checkMonotonic fails if the file ever shows a smaller token after a
// larger one: a deposed leader's command wrote after its successor's.
func checkMonotonic(t *testing.T, es []entry) {
	t.Helper()
	for i := 1; i < len(es); i++ {
		if es[i].token < es[i-1].token {
			t.Fatalf("token %d (pid %d) written after token %d (pid %d): %v", es[i].token, es[i].pid, es[i-1].token, es[i-1].pid, es)
		}
	}
}

// writer is the command of the end-to-end tests: it appends its token and
// PID to $OUT every 20 ms until killed. With ignoreTerm it ignores SIGTERM,
// so that only the SIGKILL of the schedule stops it.
func writer(ignoreTerm bool) []string {
	s := `while :; do echo "$ELECTION_TOKEN $$" >> "$OUT"; sleep 0.02; done`
	if ignoreTerm {
		s = `trap '' TERM; ` + s
	}
	return []string{"sh", "-c", s}
}

// graceCmd is the leader's command of the grace tests: like writer, it
// appends its token and PID to $OUT every 20 ms. On SIGTERM it appends
// them to $MARK; then with exitOnTerm it exits 0, and without it writes
// on, to $OUT.late, until SIGKILL.
func graceCmd(exitOnTerm bool) []string {
	on := `echo "$ELECTION_TOKEN $$" >> "$MARK"; OUT="$OUT.late"`
	if exitOnTerm {
		on = `echo "$ELECTION_TOKEN $$" >> "$MARK"; exit 0`
	}
	return []string{"sh", "-c", `trap '` + on + `' TERM; while :; do echo "$ELECTION_TOKEN $$" >> "$OUT"; sleep 0.02; done`}
}

// graceGrace is the --grace of the grace tests: short, yet long enough
// for a command that handles SIGTERM and writes on to show it.
const graceGrace = "500ms"

// checkLossGrace starts two elect run processes on election name of etcd
// at ep: a, whose command is graceCmd(exitOnTerm), with aFlags, then b,
// whose command is writer, with bFlags. Once a's command writes and b
// campaigns, lose ends a's Term without a's elect asking (a transfer, a
// preemption). a's command must then get SIGTERM and, when it does not
// exit, SIGKILL after the grace; b's command leads on; both elect
// processes stop on SIGTERM.
func checkLossGrace(t *testing.T, ep, name string, exitOnTerm bool, aFlags, bFlags []string, lose func()) {
	t.Helper()
	cli := etcdtest.Client(t, []string{ep})
	dir := t.TempDir()
	out, mark := filepath.Join(dir, "out"), filepath.Join(dir, "mark")
	env := []string{"OUT=" + out, "MARK=" + mark}
	args := func(id string, extra, cmd []string) []string {
		as := append([]string{"run", "--endpoints", ep, "--name", name, "--id", id, "--ttl", "2s", "--grace", graceGrace}, extra...)
		return append(append(as, "--"), cmd...)
	}
	a := startElect(t, "elect run a", env, args("a", aFlags, graceCmd(exitOnTerm))...)
	waitFor(t, "a's command to write", func() bool { return len(readEntries(t, out)) > 0 })
	first := readEntries(t, out)[0]
	b := startElect(t, "elect run b", env, args("b", bFlags, writer(false))...)
	waitFor(t, "b to campaign", func() bool { return keys(t, cli, name) == 2 })
	lose()
	waitFor(t, "b's command to write", func() bool {
		for _, e := range readEntries(t, out) {
			if e.token > first.token {
				return true
			}
		}
		return false
	})
	waitFor(t, "a's command to get SIGTERM", func() bool { return len(readEntries(t, mark)) > 0 })
	if es := readEntries(t, mark); len(es) != 1 || es[0] != first {
		t.Errorf("SIGTERMs received: %v, want one, by the command of token %d (pid %d)", es, first.token, first.pid)
	}
	waitFor(t, "a's command to be gone", func() bool { return !alive(first.pid) })
	waitFor(t, "a to say how its command ended", func() bool { return strings.Contains(a.stderr.String(), "stopped sh, which ") })
	late := readEntries(t, out+".late")
	if exitOnTerm {
		if !strings.Contains(a.stderr.String(), "which exited with status 0") || len(late) != 0 {
			t.Errorf("a command that exits on SIGTERM: %d lines after it; a said:\n%s", len(late), a.stderr.String())
		}
	} else {
		// It wrote on after SIGTERM: the SIGKILL came after a grace, not
		// at once.
		if !strings.Contains(a.stderr.String(), "which was killed by SIGKILL") || len(late) < 3 {
			t.Errorf("a command that ignores SIGTERM: %d lines after it, want at least 3 in the %s grace, then SIGKILL; a said:\n%s", len(late), graceGrace, a.stderr.String())
		}
		for _, e := range late {
			if e != first {
				t.Errorf("a line %v after SIGTERM that is not the old command's (%v)", e, first)
			}
		}
	}
	checkMonotonic(t, readEntries(t, out))
	for _, p := range []*proc{a, b} {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		if code := p.wait(t); code != 0 {
			t.Errorf("%s: exit %d after SIGTERM, want 0", p.name, code)
		}
	}
}

// A leader made --preempt steps down for a candidate of higher priority:
// its command gets SIGTERM, and SIGKILL after --grace if it is still
// there.
func TestRunPreemptedGrace(t *testing.T) {
	srv := etcdtest.New(t, embedetcd.Config{})
	for _, exitOnTerm := range []bool{true, false} {
		t.Run(fmt.Sprintf("exitOnTerm=%v", exitOnTerm), func(t *testing.T) {
			name := fmt.Sprintf("/test/preempt-%v", exitOnTerm)
			checkLossGrace(t, srv.Endpoints()[0], name, exitOnTerm,
				[]string{"--preempt", "100ms"}, []string{"--priority", "5"}, func() {})
		})
	}
}

// keys counts the candidates' keys of election name.
func keys(t *testing.T, cli *clientv3.Client, name string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, name+"/_c/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return int(resp.Count)
}

// runPair starts etcd and two elect run processes, a then b, with the
// writer command; it returns once a leads and b waits.
func runPair(t *testing.T, name string, ignoreTerm bool, extra ...string) (a, b *proc, out string, cli *clientv3.Client) {
	t.Helper()
	srv := etcdtest.New(t, embedetcd.Config{})
	cli = etcdtest.Client(t, srv.Endpoints())
	out = filepath.Join(t.TempDir(), "out")
	env := []string{"OUT=" + out}
	args := func(id string) []string {
		as := append([]string{"run", "--endpoints", srv.Endpoints()[0], "--name", name, "--id", id, "--ttl", "2s"}, extra...)
		return append(append(as, "--"), writer(ignoreTerm)...)
	}
	a = startElect(t, "elect run a", env, args("a")...)
	waitFor(t, "a's command to write", func() bool { return len(readEntries(t, out)) > 0 })
	b = startElect(t, "elect run b", env, args("b")...)
	waitFor(t, "b to campaign", func() bool { return keys(t, cli, name) == 2 })
	return a, b, out, cli
}

// waitTakeover waits until a token larger than first's appears in the file,
// and fails if the first leader's command is still running then.
// It also returns when it first saw the first command gone.
func waitTakeover(t *testing.T, out string, first entry) (entry, time.Time) {
	t.Helper()
	var next entry
	var gone time.Time
	waitFor(t, "the next leader's command to write", func() bool {
		es := readEntries(t, out) // first the file, then the process: no false alarm
		stillAlive := alive(first.pid)
		if !stillAlive && gone.IsZero() {
			gone = time.Now()
		}
		for _, e := range es {
			if e.token > first.token {
				if stillAlive {
					t.Fatalf("token %d written while the command of token %d (pid %d) still ran", e.token, first.token, first.pid)
				}
				next = e
				return true
			}
		}
		return false
	})
	return next, gone
}

// kill -9 of the leader's elect: its guard stops the command at once, and
// it is gone before the next leader's command starts.
func TestRunKilledLeader(t *testing.T) {
	a, b, out, _ := runPair(t, "/test/kill", false)
	first := readEntries(t, out)[0]
	killed := time.Now()
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	next, gone := waitTakeover(t, out, first)
	t.Logf("a's command gone %v after kill -9 of a's elect", gone.Sub(killed).Round(time.Millisecond))
	t.Logf("b's command wrote %v after the kill (TTL 2s)", time.Since(killed).Round(time.Millisecond))
	if next.token <= first.token {
		t.Errorf("token %d after %d", next.token, first.token)
	}
	checkMonotonic(t, readEntries(t, out))

	// SIGTERM: b stops its command, resigns and exits 0.
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := b.wait(t); code != 0 {
		t.Errorf("elect run b after SIGTERM: exit %d, want 0; stderr:\n%s", code, b.stderr.String())
	}
	if alive(next.pid) {
		t.Errorf("b's command (pid %d) outlived elect", next.pid)
	}
}

// SIGSTOP of the leader's elect for longer than the TTL: its command (which
// ignores SIGTERM) is killed by the guard before the lease can lapse, the
// file never shows a smaller token after a larger one, and after SIGCONT
// the old leader campaigns again and leads after the new one resigns.
func TestRunPausedLeader(t *testing.T) {
	const name = "/test/pause"
	a, b, out, cli := runPair(t, name, true, "--grace", "500ms")
	first := readEntries(t, out)[0]
	stopped := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	next, gone := waitTakeover(t, out, first)
	t.Logf("a's command (ignoring SIGTERM) killed %v after SIGSTOP of a's elect", gone.Sub(stopped).Round(time.Millisecond))
	t.Logf("b's command wrote %v after the SIGSTOP (TTL 2s)", time.Since(stopped).Round(time.Millisecond))
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// On resume a finds its Term over and campaigns again, behind b.
	waitFor(t, "a to campaign again", func() bool { return keys(t, cli, name) == 2 })
	n := len(readEntries(t, out))
	waitFor(t, "b's command to write on", func() bool { return len(readEntries(t, out)) > n+3 })
	checkMonotonic(t, readEntries(t, out))

	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := b.wait(t); code != 0 {
		t.Errorf("elect run b after SIGTERM: exit %d, want 0", code)
	}
	third, _ := waitTakeover(t, out, next)
	if third.token <= next.token {
		t.Errorf("token %d after %d", third.token, next.token)
	}
	if err := a.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := a.wait(t); code != 0 {
		t.Errorf("elect run a after SIGINT: exit %d, want 0", code)
	}
	checkMonotonic(t, readEntries(t, out))
	if !strings.Contains(a.stderr.String(), "ended") {
		t.Errorf("a did not report the end of its leadership:\n%s", a.stderr.String())
	}
}

// When the command exits on its own, elect resigns at once (the next
// replica leads long before the 10 s TTL could run out) and exits with
// the command's status.
func TestRunCommandExitResigns(t *testing.T) {
	srv := etcdtest.New(t, embedetcd.Config{})
	cli := etcdtest.Client(t, srv.Endpoints())
	dir := t.TempDir()
	out, gate := filepath.Join(dir, "out"), filepath.Join(dir, "gate")
	env := []string{"OUT=" + out, "GATE=" + gate}
	args := []string{"run", "--endpoints", srv.Endpoints()[0], "--name", "/test/exit", "--ttl", "10s", "--"}
	start := time.Now()
	a := startElect(t, "elect run a", env, append(args, "sh", "-c",
		`echo "$ELECTION_TOKEN $$" >> "$OUT"; while [ ! -e "$GATE" ]; do sleep 0.02; done; exit 7`)...)
	waitFor(t, "a's command to write", func() bool { return len(readEntries(t, out)) > 0 })
	first := readEntries(t, out)[0]
	b := startElect(t, "elect run b", env, append(args, writer(false)...)...)
	waitFor(t, "b to campaign", func() bool { return keys(t, cli, "/test/exit") == 2 })
	opened := time.Now()
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := a.wait(t); code != 7 {
		t.Errorf("elect run a: exit %d, want the command's 7; stderr:\n%s", code, a.stderr.String())
	}
	next, _ := waitTakeover(t, out, first)
	t.Logf("b's command wrote %v after a's command was told to exit (TTL 10s)", time.Since(opened).Round(time.Millisecond))
	if took := time.Since(start); took >= 10*time.Second {
		t.Errorf("b took over after %v: a did not resign", took)
	}
	if next.token <= first.token {
		t.Errorf("token %d after %d", next.token, first.token)
	}
	b.cmd.Process.Signal(syscall.SIGTERM)
	b.wait(t)
}

// The command's environment: the leadership's token, ID and value, and
// none of elect's own settings or the password.
func TestRunEnvironment(t *testing.T) {
	t.Setenv("ELECTION_PASSWORD", "secret")
	t.Setenv("ELECTION_NAME", "/test/env")
	code, out, errOut := elect(t, "run", "--backend", "inmem", "--id", "me", "--value", "addr:1", "--",
		"sh", "-c", `echo "token=$ELECTION_TOKEN id=$ELECTION_ID value=$ELECTION_VALUE name=${ELECTION_NAME-unset} password=${ELECTION_PASSWORD-unset}"; exit 4`)
	if code != 4 {
		t.Fatalf("exit %d, want the command's 4; stderr:\n%s", code, errOut)
	}
	if !strings.Contains(out, "id=me value=addr:1 name=unset password=unset") || strings.Contains(out, "token= ") {
		t.Errorf("the command saw %q", out)
	}
}

// elect run --backend inmem: the command leads at once, and once it has
// exited elect says nothing of waiting to lead (it resigned to exit, not
// to campaign again).
func TestRunInmemSaysNoWaitAfterExit(t *testing.T) {
	for _, status := range []string{"0", "3"} {
		code, out, errOut := elect(t, "run", "--backend", "inmem", "--name", "/try", "--",
			"sh", "-c", `echo "leading with token $ELECTION_TOKEN"; exit `+status)
		if strconv.Itoa(code) != status || !strings.Contains(out, "leading with token ") {
			t.Fatalf("exit %d, stdout %q; want the command's %s; stderr:\n%s", code, out, status, errOut)
		}
		if strings.Contains(errOut, "waiting") {
			t.Errorf("exit %s: elect said it waits, with nobody else in the election:\n%s", status, errOut)
		}
		lines := strings.Split(strings.TrimSpace(errOut), "\n")
		if last := lines[len(lines)-1]; !strings.Contains(last, "sh exited with status "+status+": resigning") {
			t.Errorf("exit %s: a line after the command's exit:\n%s", status, errOut)
		}
	}
}

// A command that cannot be found exits 127 before campaigning.
func TestRunCommandNotFound(t *testing.T) {
	code, _, errOut := elect(t, "run", "--backend", "inmem", "--name", "/x", "--", "/nonexistent/command")
	if code != exitNotFound || !strings.Contains(errOut, `"/nonexistent/command"`) {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

// The kill schedule: SIGKILL never after the Term's deadline minus the
// margin, whatever the grace and whenever the stop is asked for.
func TestStopSchedule(t *testing.T) {
	now := time.Now()
	d := now.Add(2 * time.Second)
	for _, tc := range []struct {
		grace        time.Duration
		stopAt       time.Time
		term, killAt time.Duration // from now
	}{
		{400 * time.Millisecond, time.Time{}, 1500 * time.Millisecond, 1900 * time.Millisecond},
		{400 * time.Millisecond, now, 0, 400 * time.Millisecond},
		{400 * time.Millisecond, now.Add(1700 * time.Millisecond), 1500 * time.Millisecond, 1900 * time.Millisecond},
		{time.Second, now.Add(1200 * time.Millisecond), 900 * time.Millisecond, 1900 * time.Millisecond},
		{0, now, 0, 0},
	} {
		term, kill := stopSchedule(d, tc.grace, tc.stopAt)
		if got, want := term.Sub(now), tc.term; got != want {
			t.Errorf("grace %v stop %v: SIGTERM at %v, want %v", tc.grace, tc.stopAt.Sub(now), got, want)
		}
		if got, want := kill.Sub(now), tc.killAt; got != want {
			t.Errorf("grace %v stop %v: SIGKILL at %v, want %v", tc.grace, tc.stopAt.Sub(now), got, want)
		}
		if kill.After(d.Add(-killMargin)) {
			t.Errorf("SIGKILL after the deadline minus the margin")
		}
	}
	if g := maxGrace(2 * time.Second); g <= 0 || g >= time.Second {
		t.Errorf("maxGrace(2s) = %v", g)
	}
}

// observe prints each change of leader, leader prints the current one and
// exits 3 when there is none.
func TestObserveAndLeader(t *testing.T) {
	srv := etcdtest.New(t, embedetcd.Config{})
	ep := srv.Endpoints()[0]
	const name = "/test/observe"
	if code, out, errOut := elect(t, "leader", "--endpoints", ep, "--name", name); code != exitNoLeader || out != "" {
		t.Fatalf("leader with none: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	text := startElect(t, "elect observe", nil, "observe", "--endpoints", ep, "--name", name)
	js := startElect(t, "elect observe --json", []string{"ELECTION_JSON=true"}, "observe", "--endpoints", ep, "--name", name)
	waitFor(t, "observe's first line", func() bool {
		return strings.Contains(text.stdout.String(), "(no leader)") && strings.Contains(js.stdout.String(), `"leader":false`)
	})

	cli := etcdtest.Client(t, srv.Endpoints())
	e, err := etcd.New(cli, name, election.WithID("x"), election.WithValue([]byte("10.0.0.7:8080")), election.WithTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	term, err := e.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tok := strconv.FormatUint(term.Token(), 10)
	wantText := "x  token=" + tok + `  priority=0  value="10.0.0.7:8080"`
	waitFor(t, "observe to print the leader", func() bool {
		return strings.Contains(text.stdout.String(), wantText) && strings.Contains(js.stdout.String(), `"token":`+tok)
	})
	code, out, errOut := elect(t, "leader", "--endpoints", ep, "--name", name)
	if code != 0 || out != wantText+"  waiting=0\n" {
		t.Errorf("leader: exit %d, stdout %q, stderr %q; want %q", code, out, errOut, wantText)
	}
	code, out, _ = elect(t, "leader", "--endpoints", ep, "--name", name, "--json")
	var j map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &j) != nil || j["id"] != "x" || j["value"] != "10.0.0.7:8080" || j["token"] != float64(term.Token()) || j["waiting"] != float64(0) {
		t.Errorf("leader --json: exit %d, %q", code, out)
	}

	if err := e.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "observe to print no leader again", func() bool {
		return strings.Count(text.stdout.String(), "(no leader)") == 2 && strings.Count(js.stdout.String(), `"leader":false`) == 2
	})
	for _, p := range []*proc{text, js} {
		p.cmd.Process.Signal(syscall.SIGTERM)
		if code := p.wait(t); code != 0 {
			t.Errorf("%s after SIGTERM: exit %d", p.name, code)
		}
	}
	lines := strings.Split(strings.TrimSpace(js.stdout.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("observe --json printed %d lines, want 3:\n%s", len(lines), js.stdout.String())
	}
	for i, l := range lines {
		var j leaderJSON
		if err := json.Unmarshal([]byte(l), &j); err != nil || j.Time == "" || j.Leader == nil || j.Changes == nil || *j.Changes != i || (i > 0) != (j.After != nil) {
			t.Errorf("bad JSON line %d %q: %v (want changes=%d, after_seconds from the second line on)", i, l, err, i)
		}
	}
	if !strings.Contains(text.stdout.String(), "changes=2  after=") {
		t.Errorf("observe's third line does not say changes=2 and after=:\n%s", text.stdout.String())
	}
	for _, l := range strings.Split(strings.TrimSpace(text.stdout.String()), "\n") {
		at, _, _ := strings.Cut(l, "  ")
		if _, err := time.Parse(timeLayout, at); err != nil {
			t.Errorf("line %q does not start with a time: %v", l, err)
		}
	}
}

// Mistakes on the command lines of run, observe and leader exit 2 and
// name the flag (or variable) and the value.
func TestRunUsageErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"run", "--", "true"}, "--name: required"},
		{nil, []string{"run", "--name", "/x"}, "no command given"},
		{nil, []string{"run", "--name", "/x", "--ttl", "2s", "--grace", "5s", "--", "true"}, "--grace=5s: must be at most 840ms with a lease TTL of 2s"},
		{nil, []string{"run", "--name", "/x", "--grace", "-1s", "--", "true"}, "--grace=-1s: must not be negative"},
		{nil, []string{"run", "--name", "/x", "--listen", "9090", "--", "true"}, "--listen=9090: must be HOST:PORT"},
		{nil, []string{"run", "--name", "/x", "--listen", "127.0.0.1:http", "--", "true"}, `--listen=127.0.0.1:http: port "http" must be a number`},
		{nil, []string{"run", "--name", "/x", "--progress", "-1s", "--", "true"}, "--progress=-1s: must not be negative"},
		{nil, []string{"run", "--name", "/x", "--timeout", "-1s", "--", "true"}, "--timeout=-1s: must not be negative"},
		{nil, []string{"run", "--name", "/x", "--ttl", "500ms", "--", "true"}, "--ttl=500ms: must be between 1s and 10m0s"},
		{nil, []string{"run", "--name", "/x", "--id", "bad id", "--", "true"}, `--id=bad id: has " " at byte 3`},
		{nil, []string{"run", "--name", "/x", "--endpoints", "foo", "--", "true"}, `--endpoints=foo: "foo" is not host:port`},
		{nil, []string{"run", "--name", "/x", "--endpoints", "ftp://h:1", "--", "true"}, `--endpoints=ftp://h:1: "ftp://h:1" is neither host:port nor an http:// or https:// URL`},
		{nil, []string{"run", "--name", "/x", "--endpoints", "http://a:1,https://b:2", "--", "true"}, "mixes http:// and https://"},
		{nil, []string{"run", "--name", "/x", "--cacert", "/nonexistent.pem", "--", "true"}, "--cacert=/nonexistent.pem: no such file or directory"},
		{nil, []string{"run", "--name", "/x", "--cacert", empty, "--", "true"}, "--cacert=" + empty + ": holds no PEM certificate"},
		{nil, []string{"run", "--name", "/x", "--cert", "c.pem", "--", "true"}, "--cert=c.pem: needs --key too"},
		{nil, []string{"run", "--name", "/x", "--user", "bob", "--", "true"}, "--user=bob: needs a password: set ELECTION_PASSWORD or --password-file"},
		{nil, []string{"run", "--name", "/x", "--user", "bob:pw", "--", "true"}, "--user=bob:pw: has a colon"},
		{nil, []string{"run", "--name", "/x", "--password-file", empty, "--", "true"}, "--password-file=" + empty + ": is for --user, which is not set"},
		{nil, []string{"run", "--name", "/x", "--user", "bob", "--password-file", empty, "--", "true"}, "--password-file=" + empty + ": is empty"},
		{[]string{"ELECTION_PASSWORD=pw"}, []string{"run", "--name", "/x", "--", "true"}, "ELECTION_PASSWORD is set but --user is not"},
		{[]string{"ELECTION_ENDPOINTS=nope"}, []string{"run", "--name", "/x", "--", "true"}, `ELECTION_ENDPOINTS=nope: "nope" is not host:port`},
		{nil, []string{"run", "--backend", "inmem", "--name", "/x", "--endpoints", "h:1", "--", "true"}, "--endpoints=h:1: only for --backend etcd (the backend is inmem)"},
		{nil, []string{"run", "--name", "x", "--", "true"}, `--name=x: must be an absolute path such as "/x"`},
		{nil, []string{"run", "--backend", "zk", "--name", "/a//b", "--", "true"}, `--name=/a//b: has an empty segment ("//") at byte 2; use "/a/b"`},
		{nil, []string{"leader", "--name", "/svc/"}, `--name=/svc/: must not end with "/"; use "/svc"`},
		{nil, []string{"run", "--backend", "zk", "--name", "/x", "--servers", "nohost", "--", "true"}, "--servers=nohost: \"nohost\" is not host:port"},
		{nil, []string{"run", "--backend", "zk", "--name", "/x", "--zk-user", "u", "--", "true"}, "--zk-user=u: needs a password"},
		{nil, []string{"run", "--backend", "etcd", "--name", "/x", "--servers", "h:1", "--", "true"}, "--servers=h:1: only for --backend zk"},
		{nil, []string{"observe", "--backend", "inmem", "--name", "/x"}, "--backend=inmem: its election lives inside one elect process"},
		{nil, []string{"observe", "--name", "/x", "--json=maybe"}, "--json=maybe: not a boolean"},
		{nil, []string{"observe", "--name", "/x", "extra"}, `unexpected argument "extra"`},
		{nil, []string{"leader"}, "--name: required"},
		{nil, []string{"leader", "--name", "/x", "--dial-timeout", "0s"}, "--dial-timeout=0s: must be positive"},
		{nil, []string{"leader", "--name", "/x", "--id", "a"}, "unknown flag --id"},
		{nil, []string{"leader", "--backend", "zk", "--name", "/x", "--zk-hold"}, "unknown flag --zk-hold"},
		{nil, []string{"observe", "--backend", "zk", "--name", "/x", "--zk-hold"}, "unknown flag --zk-hold"},
		{nil, []string{"transfer", "--backend", "zk", "--name", "/x", "--zk-hold"}, "unknown flag --zk-hold"},
		{nil, []string{"run", "--backend", "etcd", "--name", "/x", "--zk-hold", "--", "true"}, "--zk-hold=true: only for --backend zk"},
	} {
		for _, kv := range tc.env {
			k, v, _ := strings.Cut(kv, "=")
			t.Setenv(k, v)
		}
		code, out, errOut := elect(t, tc.args...)
		for _, kv := range tc.env {
			k, _, _ := strings.Cut(kv, "=")
			os.Unsetenv(k)
		}
		if code != exitUsage || !strings.Contains(errOut, tc.want) || out != "" {
			t.Errorf("elect %q: exit %d, stderr %q; want exit %d and %q", tc.args, code, errOut, exitUsage, tc.want)
		}
	}
	// A store that does not answer is a failure (1), not a usage error.
	code, _, errOut := elect(t, "leader", "--name", "/x", "--endpoints", "127.0.0.1:1", "--dial-timeout", "200ms")
	if code != exitFailure || !strings.Contains(errOut, "etcd at 127.0.0.1:1: no answer within --dial-timeout=200ms") {
		t.Errorf("unreachable etcd: exit %d, stderr %q", code, errOut)
	}
}

// leader and observe reach an etcd that wants TLS client certificates and
// a password, given by file or by ELECTION_PASSWORD; a wrong password is
// a failure that says so.
func TestLeaderTLSAndAuth(t *testing.T) {
	files, err := embedetcd.NewTLS(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv := etcdtest.New(t, embedetcd.Config{TLS: files})
	tc, err := files.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	root := etcdtest.Client(t, srv.Endpoints(), func(c *clientv3.Config) { c.TLS = tc })
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := embedetcd.EnableAuth(ctx, root, "rootpw"); err != nil {
		t.Fatal(err)
	}
	admin := etcdtest.Client(t, srv.Endpoints(), func(c *clientv3.Config) { c.TLS, c.Username, c.Password = tc.Clone(), "root", "rootpw" })
	if err := embedetcd.AddUser(ctx, admin, "sched", "pw1", "/app/"); err != nil {
		t.Fatal(err)
	}
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("pw1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"leader", "--name", "/app/leader", "--endpoints", srv.Endpoints()[0],
		"--cacert", files.CAFile, "--cert", files.ClientCertFile, "--key", files.ClientKeyFile, "--user", "sched"}
	if code, _, errOut := elect(t, append(base, "--password-file", pwFile)...); code != exitNoLeader {
		t.Errorf("leader with --password-file: exit %d, stderr %q", code, errOut)
	}
	t.Setenv("ELECTION_PASSWORD", "pw1")
	if code, _, errOut := elect(t, base...); code != exitNoLeader {
		t.Errorf("leader with ELECTION_PASSWORD: exit %d, stderr %q", code, errOut)
	}
	t.Setenv("ELECTION_PASSWORD", "wrong")
	if code, _, errOut := elect(t, base...); code != exitFailure || !strings.Contains(errOut, "authentication failed") {
		t.Errorf("leader with a wrong password: exit %d, stderr %q", code, errOut)
	}
	os.Unsetenv("ELECTION_PASSWORD")
	if code, _, errOut := elect(t, "leader", "--name", "/app/leader", "--endpoints", srv.Endpoints()[0], "--dial-timeout", "1s"); code != exitFailure {
		t.Errorf("leader without TLS against a TLS server: exit %d, stderr %q", code, errOut)
	}
}

// elect run --listen serves the metrics and health endpoints while it
// runs: the leader is healthy and ready, its metrics say it leads; the
// waiter is not ready (/readyz) but is for /readyz/any, and its progress
// lines say what it waits for.
func TestRunListenAndProgress(t *testing.T) {
	srv := etcdtest.New(t, embedetcd.Config{})
	args := func(id string) []string {
		return []string{"run", "--endpoints", srv.Endpoints()[0], "--name", "/test/listen", "--id", id, "--ttl", "2s",
			"--listen", "127.0.0.1:0", "--progress", "100ms", "--", "sleep", "60"}
	}
	addrOf := func(p *proc) string {
		var addr string
		waitFor(t, p.name+" to listen", func() bool {
			for _, line := range strings.Split(p.stderr.String(), "\n") {
				if _, rest, ok := strings.Cut(line, " on http://"); ok {
					addr = strings.TrimSpace(rest)
					return true
				}
			}
			return false
		})
		return addr
	}
	get := func(addr, path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	a := startElect(t, "elect run a", nil, args("a")...)
	aAddr := addrOf(a)
	waitFor(t, "a to lead", func() bool { return strings.Contains(a.stderr.String(), "leader with token") })
	waitFor(t, "a's metrics to say it leads", func() bool {
		_, m := get(aAddr, "/metrics")
		return strings.Contains(m, `election_leading{election="/test/listen"} 1`)
	})
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200, "/readyz/any": 200} {
		if code, body := get(aAddr, path); code != want {
			t.Errorf("leader: GET %s = %d %q; want %d", path, code, body, want)
		}
	}
	if code, body := get(aAddr, "/leader"); code != 200 || !strings.Contains(body, `"id":"a"`) || !strings.Contains(body, `"self":true`) {
		t.Errorf("leader: GET /leader = %d %s; want a, self", code, body)
	}
	b := startElect(t, "elect run b", nil, args("b")...)
	bAddr := addrOf(b)
	waitFor(t, "b's progress lines", func() bool {
		e := b.stderr.String()
		return strings.Contains(e, "waiting to lead /test/listen; a leads (token ") &&
			strings.Contains(e, "still waiting to lead /test/listen, since ")
	})
	waitFor(t, "b to follow the election", func() bool {
		code, _ := get(bAddr, "/readyz/any")
		return code == 200
	})
	if code, body := get(bAddr, "/readyz"); code != http.StatusServiceUnavailable {
		t.Errorf("waiter: GET /readyz = %d %q; want 503", code, body)
	}
	if code, body := get(bAddr, "/leader"); code != 200 || !strings.Contains(body, `"id":"a"`) || !strings.Contains(body, `"self":false`) {
		t.Errorf("waiter: GET /leader = %d %s; want a, not self", code, body)
	}
	if _, m := get(bAddr, "/metrics"); !strings.Contains(m, `election_leading{election="/test/listen"} 0`) {
		t.Errorf("waiter's metrics do not say it does not lead:\n%s", m)
	}
	// A third candidate that gives up: exit 124, and a stays the leader.
	c := startElect(t, "elect run c", nil, append(args("c")[:len(args("c"))-3], "--timeout", "300ms", "--", "sleep", "60")...)
	if code := c.wait(t); code != exitTimedOut || !strings.Contains(c.stderr.String(), "did not lead /test/listen within --timeout 300ms") {
		t.Errorf("elect run --timeout 300ms behind a leader: exit %d; want %d\n%s", code, exitTimedOut, c.stderr.String())
	}
	if code, body := get(aAddr, "/readyz"); code != 200 {
		t.Errorf("leader after c gave up: GET /readyz = %d %q", code, body)
	}
	for _, p := range []*proc{b, a} {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		if code := p.wait(t); code != 0 {
			t.Errorf("%s: exit %d after SIGTERM; want 0", p.name, code)
		}
	}
}
