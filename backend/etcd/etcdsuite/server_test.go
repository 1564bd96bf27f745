package etcdsuite_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/electkit/election/internal/rig/embedetcd"
	"github.com/electkit/election/internal/rig/etcdtest"
)

// The suite pairs each etcd release line's client with the other line's
// server too. A test binary of this package built on one line serves an
// etcd member of that line when serveEnv is set (TestMain); a binary of
// the other line, given its path in serverBinEnv, runs its single-member
// tests against such a member in a child process instead of one embedded
// in process: make test runs the v3.7 client against a v3.6 server and
// the v3.6 client against a v3.7 server that way.
//
// serverLineEnv, when set (e.g. "3.6."), is the version prefix the member
// must report: a run meant for the other line's server fails if it got
// another.
const (
	serveEnv      = "ELECTION_ETCDSUITE_SERVE"
	serverBinEnv  = "ELECTION_ETCDSUITE_SERVER_BIN"
	serverLineEnv = "ELECTION_ETCDSUITE_SERVER_LINE"
)

func TestMain(m *testing.M) {
	if os.Getenv(serveEnv) != "" {
		serve()
	}
	os.Exit(m.Run())
}

// serve runs one embedded member, prints its client endpoints on a line
// of stdout, serves until stdin is closed (or the parent dies) and exits.
func serve() {
	s, err := embedetcd.Start(embedetcd.Config{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdsuite: serving etcd:", err)
		os.Exit(1)
	}
	fmt.Printf("ENDPOINTS %s\n", strings.Join(s.Endpoints(), ","))
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = s.Close()
	os.Exit(0)
}

// startEtcd starts a single etcd member for t, stopped in t's cleanup:
// embedded in process, or, with serverBinEnv set, in a child process of
// that binary.
func startEtcd(t testing.TB) []string {
	t.Helper()
	eps := startMember(t)
	if line := os.Getenv(serverLineEnv); line != "" {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		st, err := newClient(t, eps).Status(ctx, eps[0])
		if err != nil {
			t.Fatalf("the member's status: %v", err)
		}
		if !strings.HasPrefix(st.Version, line) {
			t.Fatalf("the member runs etcd %s; %s=%q wants %s*", st.Version, serverLineEnv, line, line)
		}
	}
	return eps
}

func startMember(t testing.TB) []string {
	t.Helper()
	bin := os.Getenv(serverBinEnv)
	if bin == "" {
		return etcdtest.New(t, embedetcd.Config{}).Endpoints()
	}
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), serveEnv+"=1", serverBinEnv+"=", serverLineEnv+"=")
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the etcd server of %s: %v", bin, err)
	}
	exited := make(chan error, 1)
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if l, ok := strings.CutPrefix(sc.Text(), "ENDPOINTS "); ok {
				line <- l
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = stdin.Close() // the child stops its member and exits
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill() // by the PID this test started
			<-exited
		}
	})
	select {
	case l := <-line:
		return strings.Split(l, ",")
	case err := <-exited:
		t.Fatalf("the etcd server of %s exited before serving: %v", bin, err)
	case <-time.After(60 * time.Second):
		t.Fatalf("the etcd server of %s did not serve within 60 s", bin)
	}
	return nil
}
