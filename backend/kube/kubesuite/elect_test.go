package kubesuite_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/electkit/election"
	"github.com/electkit/election/backend/kube"
	"github.com/electkit/election/internal/rig/kubetest"
)

var (
	electOnce sync.Once
	electBin  string
	electErr  error
)

// electBinary builds cmd/elect from the clone (its workspace, go.work at
// the root) once per test binary.
func electBinary(t *testing.T) string {
	t.Helper()
	electOnce.Do(func() {
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..", "..")
		dir, err := os.MkdirTemp("", "kubesuite-elect-")
		if err != nil {
			electErr = err
			return
		}
		electBin = filepath.Join(dir, "elect")
		cmd := exec.Command("go", "build", "-o", electBin, "./elect")
		cmd.Dir = filepath.Join(root, "cmd")
		// This module runs with GOWORK=off; cmd builds in the clone's
		// workspace.
		cmd.Env = append(os.Environ(), "GOWORK="+filepath.Join(root, "go.work"))
		if out, err := cmd.CombinedOutput(); err != nil {
			electErr = fmt.Errorf("go build ./elect in %s: %v\n%s", cmd.Dir, err, out)
		}
	})
	if electErr != nil {
		t.Fatal(electErr)
	}
	return electBin
}

// lockedBuffer is a bytes.Buffer safe for a process's output and the test.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *lockedBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *lockedBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// electProc is an elect process a test started.
type electProc struct {
	name           string
	cmd            *exec.Cmd
	stdout, stderr lockedBuffer
	done           chan struct{}
	err            error
}

// startElect starts elect with args and env (on top of the test's); it is
// killed in t's cleanup if still running.
func startElect(t *testing.T, name string, env []string, args ...string) *electProc {
	t.Helper()
	p := &electProc{name: name, cmd: exec.Command(electBinary(t), args...), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.WaitDelay = 5 * time.Second
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s stdout:\n%s\nstderr:\n%s", p.name, p.stdout.String(), p.stderr.String())
		}
	})
	return p
}

// wait waits for the process to exit and returns its exit code.
func (p *electProc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(patience):
		t.Fatalf("%s did not exit within %v; stderr:\n%s", p.name, patience, p.stderr.String())
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

// stop sends the process SIGTERM and returns its exit code.
func (p *electProc) stop(t *testing.T) int {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM to %s (pid %d): %v", p.name, p.cmd.Process.Pid, err)
	}
	return p.wait(t)
}

// waitUntil polls cond until it holds, failing t after patience.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(patience); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out after %v waiting for %s", patience, what)
		}
	}
}

// line is one line a leader's command wrote: its token and its PID.
type line struct {
	token uint64
	pid   int
}

func readLines(t *testing.T, path string) []line {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var ls []line
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
		ls = append(ls, line{tok, pid})
	}
	return ls
}

// writeKubeconfig writes a kubeconfig for the server at addr, user token,
// namespace ns.
func writeKubeconfig(t *testing.T, addr, token, ns string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: https://%s
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    token: %s
contexts:
- name: test
  context:
    cluster: test
    user: admin
    namespace: %s
current-context: test
`, addr, token, ns)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestElectCommand: the elect command on --backend kube against the API
// server: elect leader with no candidate exits 3; of two elect run
// processes one leads (its command runs with the token) and the other
// waits as a candidate record; elect leader and elect observe name the
// leader; elect transfer --to the waiter moves the leadership (its command
// runs with a higher token, observe sees it); SIGTERM stops each elect run
// and observe with exit 0.
func TestElectCommand(t *testing.T) {
	s := server(t)
	electBinary(t) // build before the clock of any wait starts
	lease := leaseName(t)
	name := "/" + lease // elect's name /x is the Lease x
	kc := writeKubeconfig(t, s.Addr, kubetest.AdminToken, ns)
	common := []string{"--backend", "kube", "--kubeconfig", kc, "--name", name}
	out := filepath.Join(t.TempDir(), "out")
	env := []string{"OUT=" + out}
	writer := []string{"sh", "-c", `while :; do echo "$ELECTION_TOKEN $$" >> "$OUT"; sleep 0.02; done`}
	run := func(id string) []string {
		return append(append(append([]string{"run"}, common...), "--id", id, "--ttl", "2s", "--"), writer...)
	}

	if p := startElect(t, "elect leader (none)", nil, append([]string{"leader"}, common...)...); p.wait(t) != 3 {
		t.Fatalf("elect leader with no candidate: exit %d, want 3; stderr:\n%s", p.wait(t), p.stderr.String())
	}
	a := startElect(t, "elect run a", env, run("a")...)
	waitUntil(t, "a's command to write", func() bool { return len(readLines(t, out)) > 0 })
	first := readLines(t, out)[0]
	obs := startElect(t, "elect observe", nil, append([]string{"observe", "--json"}, common...)...)
	waitUntil(t, "observe to print a", func() bool { return strings.Contains(obs.stdout.String(), `"id":"a"`) })
	p := startElect(t, "elect leader", nil, append([]string{"leader"}, common...)...)
	if code := p.wait(t); code != 0 || !strings.HasPrefix(p.stdout.String(), "a ") {
		t.Fatalf("elect leader: exit %d, stdout %q, stderr %q", code, p.stdout.String(), p.stderr.String())
	}

	b := startElect(t, "elect run b", env, run("b")...)
	ctx := context.Background()
	watcher, err := kube.New(admin.CoordinationV1(), ns, lease, election.WithID("watcher"), election.WithTTL(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	waitUntil(t, "b to wait as a candidate", func() bool {
		cs, err := election.Candidates(ctx, watcher)
		return err == nil && len(cs) == 1 && cs[0].ID == "b"
	})
	for _, l := range readLines(t, out) {
		if l.pid != first.pid {
			t.Fatalf("a second command wrote while a led: %v, a's is %v", l, first)
		}
	}

	p = startElect(t, "elect transfer", nil, append(append([]string{"transfer"}, common...), "--to", "b")...)
	if code := p.wait(t); code != 0 || !strings.HasPrefix(p.stdout.String(), "b  token=") {
		t.Fatalf("elect transfer --to b: exit %d, stdout %q, stderr %q", code, p.stdout.String(), p.stderr.String())
	}
	var second line
	waitUntil(t, "b's command to write with a higher token", func() bool {
		for _, l := range readLines(t, out) {
			if l.token > first.token {
				second = l
				return true
			}
		}
		return false
	})
	if second.pid == first.pid {
		t.Fatalf("the command of token %d is a's (pid %d)", second.token, first.pid)
	}
	if !strings.Contains(p.stdout.String(), "token="+strconv.FormatUint(second.token, 10)) {
		t.Errorf("elect transfer printed %q; b's command runs with token %d", p.stdout.String(), second.token)
	}
	ls := readLines(t, out)
	for i := 1; i < len(ls); i++ {
		if ls[i].token < ls[i-1].token {
			t.Fatalf("token %d written after token %d: %v", ls[i].token, ls[i-1].token, ls)
		}
	}
	waitUntil(t, "observe to print b", func() bool { return strings.Contains(obs.stdout.String(), `"id":"b"`) })
	p = startElect(t, "elect leader", nil, append([]string{"leader"}, common...)...)
	if code := p.wait(t); code != 0 || !strings.HasPrefix(p.stdout.String(), "b ") {
		t.Fatalf("elect leader after the transfer: exit %d, stdout %q, stderr %q", code, p.stdout.String(), p.stderr.String())
	}

	for _, p := range []*electProc{a, b, obs} {
		if code := p.stop(t); code != 0 {
			t.Errorf("%s: exit %d after SIGTERM, want 0; stderr:\n%s", p.name, code, p.stderr.String())
		}
	}
	if strings.Contains(b.stderr.String(), "panic") || strings.Contains(a.stderr.String(), "panic") {
		t.Errorf("a panic in elect run's output")
	}
}
