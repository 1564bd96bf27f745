// Package servers starts the real stores the benchmarks run against: etcd
// (go.etcd.io/etcd/server/v3/embed, through internal/rig/embedetcd) in a child
// process of the running binary, one member or three, and ZooKeeper (the
// Debian package's Java server, through internal/rig/zktest), standalone or a
// 3-node ensemble. Every server listens on 127.0.0.1 only.
//
// etcd runs in a child process, not in the measuring one, so that its heap,
// goroutines and garbage collections are not counted against the clients
// (the scale scenario measures bytes and goroutines per candidate) and do
// not pause them. A binary that starts etcd must call ServeIfChild first
// thing in main (and in TestMain).
package servers

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	_ "net/http/pprof" // served by the etcd child when PprofEnv is set
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/electkit/election/internal/rig/embedetcd"
	"github.com/electkit/election/internal/rig/zktest"
)

// childEnv names the environment variable that makes ServeIfChild serve:
// its value is the number of etcd members.
const childEnv = "ELECTION_BENCH_ETCD_MEMBERS"

// PprofEnv, set to a loopback host:port in the bench's environment, makes
// the etcd child serve net/http/pprof there (go tool pprof
// http://ADDR/debug/pprof/profile), to see where a member spends its time.
const PprofEnv = "ELECTION_BENCH_ETCD_PPROF"

// ServeIfChild returns at once unless this process was started by
// StartEtcd as an etcd child; then it starts the members, prints their
// client endpoints on one line of stdout, serves until stdin is closed, and
// exits.
func ServeIfChild() {
	v := os.Getenv(childEnv)
	if v == "" {
		return
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		fmt.Fprintf(os.Stderr, "servers: %s=%q is not a member count\n", childEnv, v)
		os.Exit(2)
	}
	var eps []string
	var closeFn func() error
	if n == 1 {
		s, err := embedetcd.Start(embedetcd.Config{})
		if err != nil {
			fmt.Fprintln(os.Stderr, "servers:", err)
			os.Exit(1)
		}
		eps, closeFn = s.Endpoints(), s.Close
	} else {
		c, err := embedetcd.StartCluster(n, embedetcd.Config{})
		if err != nil {
			fmt.Fprintln(os.Stderr, "servers:", err)
			os.Exit(1)
		}
		eps, closeFn = c.Endpoints(), c.Close
	}
	if addr := os.Getenv(PprofEnv); addr != "" {
		// net/http/pprof on a loopback address, to profile the member.
		go func() { fmt.Fprintln(os.Stderr, "servers: pprof:", http.ListenAndServe(addr, nil)) }()
	}
	fmt.Printf("ENDPOINTS %s\n", strings.Join(eps, ","))
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes it (or dies)
	_ = closeFn()
	os.Exit(0)
}

// Etcd is an etcd cluster running in a child process.
type Etcd struct {
	Endpoints []string
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	exited    chan error
}

// StartEtcd starts an etcd cluster of members members (1 or 3) in a child
// process and waits until every member serves clients.
func StartEtcd(members int) (*Etcd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("servers: %w", err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", childEnv, members))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("servers: start etcd child: %w", err)
	}
	e := &Etcd{cmd: cmd, stdin: stdin, exited: make(chan error, 1)}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if t := sc.Text(); strings.HasPrefix(t, "ENDPOINTS ") {
				line <- strings.TrimPrefix(t, "ENDPOINTS ")
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() { e.exited <- cmd.Wait() }()
	select {
	case l := <-line:
		e.Endpoints = strings.Split(l, ",")
		return e, nil
	case err := <-e.exited:
		return nil, fmt.Errorf("servers: etcd child exited before serving: %v", err)
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-e.exited
		return nil, errors.New("servers: etcd child did not serve within 60 s")
	}
}

// Close stops the members and waits for the child to exit (killing it,
// by its PID, if it has not within 30 s).
func (e *Etcd) Close() error {
	_ = e.stdin.Close()
	select {
	case <-e.exited:
	case <-time.After(30 * time.Second):
		_ = e.cmd.Process.Kill()
		<-e.exited
	}
	return nil
}

// ZK is a ZooKeeper server or ensemble.
type ZK struct {
	Servers []string
	stop    func()
	pids    func() []int
	dir     string
}

// ZKAvailable reports whether the ZooKeeper server can be started here.
func ZKAvailable() error { return zktest.Available() }

// StartZK starts a standalone server (n = 1) or an ensemble of n.
func StartZK(n int) (*ZK, error) {
	dir, err := os.MkdirTemp("", "bench-zk-")
	if err != nil {
		return nil, err
	}
	z := &ZK{dir: dir}
	if n == 1 {
		s, err := zktest.Start(dir)
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		z.Servers, z.stop = []string{s.Addr}, s.Kill
		z.pids = func() []int { return []int{s.PID()} }
	} else {
		en, err := zktest.StartEnsemble(dir, n)
		if err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		z.Servers, z.stop = en.Addrs(), en.Stop
		z.pids = func() []int {
			var out []int
			for _, s := range en.Servers {
				out = append(out, s.PID())
			}
			return out
		}
	}
	return z, nil
}

// Close kills the servers and removes their files.
func (z *ZK) Close() error {
	z.stop()
	return os.RemoveAll(z.dir)
}

// RSS returns the resident memory of the servers' Java processes, in
// bytes, summed.
func (z *ZK) RSS() (int64, error) {
	var sum int64
	for _, pid := range z.pids() {
		if pid == 0 {
			return 0, errors.New("servers: a ZooKeeper server is not running")
		}
		v, err := rssOf(pid)
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}

// RSS returns the resident memory of the etcd child process, in bytes.
func (e *Etcd) RSS() (int64, error) { return rssOf(e.cmd.Process.Pid) }

// rssOf returns the VmRSS of process pid, in bytes.
func rssOf(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(l, "VmRSS:")), "%d kB", &kb); err != nil {
				return 0, err
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("servers: no VmRSS")
}
