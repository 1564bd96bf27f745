// Package zktest starts real Apache ZooKeeper servers — the Java server of
// Debian's zookeeper package — for tests and benchmarks: standalone servers
// and ensembles on loopback ports, each with its own temporary data
// directory (a proxy for faults in front of one: internal/rig/faultproxy).
//
// Servers are separate JVM processes that this package starts and signals
// by PID only. Start waits until a server answers the srvr four-letter word
// (standalone) or reports a mode of leader or follower (ensemble member).
//
// The package does not import "testing": helpers take a TB. Where the
// server's jar is missing, Require skips the test — unless the environment
// variable CI is set, where it fails it: in CI every real-server test runs.
package zktest

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Jar is the server jar of Debian's zookeeper package. Its manifest names
// the libraries it needs.
var Jar = "/usr/share/java/zookeeper.jar"

// TickTime is the tickTime the servers run with. Session timeouts are
// clamped by the server to 2–20 ticks: 1–10 s at 500 ms.
const TickTime = 500 * time.Millisecond

// StartTimeout bounds how long Start and StartEnsemble wait for servers to
// serve.
var StartTimeout = 30 * time.Second

// ErrNoServer: the ZooKeeper jar is not installed.
var ErrNoServer = errors.New("zktest: ZooKeeper server jar not found (apt-get install zookeeper)")

// Available reports whether the server jar is installed.
func Available() error {
	if _, err := os.Stat(Jar); err != nil {
		return fmt.Errorf("%w: %v", ErrNoServer, err)
	}
	if _, err := exec.LookPath("java"); err != nil {
		return fmt.Errorf("%w: no java on PATH", ErrNoServer)
	}
	return nil
}

// Server is one ZooKeeper server process.
type Server struct {
	ID   int    // myid (1 for a standalone server)
	Addr string // client address, 127.0.0.1:port
	Dir  string // its directory: zoo.cfg, data/, log

	cfgPath string
	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	// exitState is how the last process ended, set before exited closes.
	exitState string
}

// Ensemble is a set of servers forming one ZooKeeper ensemble.
type Ensemble struct {
	Servers []*Server
}

// Addrs returns every server's client address.
func (e *Ensemble) Addrs() []string {
	out := make([]string, len(e.Servers))
	for i, s := range e.Servers {
		out[i] = s.Addr
	}
	return out
}

// Start starts a standalone server with its files under dir and waits until
// it serves.
func Start(dir string) (*Server, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	s := &Server{ID: 1, Addr: fmt.Sprintf("127.0.0.1:%d", ports[0]), Dir: dir}
	if err := s.writeConfig(ports[0], nil); err != nil {
		return nil, err
	}
	if err := s.Start(); err != nil {
		return nil, err
	}
	if err := s.WaitServing(StartTimeout); err != nil {
		s.Kill()
		return nil, err
	}
	return s, nil
}

// StartEnsemble starts n servers forming one ensemble, their files under
// dir/1 … dir/n, and waits until every one serves as leader or follower.
func StartEnsemble(dir string, n int) (*Ensemble, error) {
	return StartEnsembleWith(dir, n, EnsembleConfig{})
}

// EnsembleConfig tunes StartEnsembleWith.
type EnsembleConfig struct {
	// Peer, when set, gives the address server from (an index, 0-based)
	// reaches server to's quorum port ("quorum") or election port
	// ("election") on, which really is addr: a proxy in front of it, so
	// that a fault harness can cut the servers off from each other. Each
	// server's zoo.cfg names the others by these addresses and itself by
	// its own.
	Peer func(from, to int, port, addr string) (string, error)
}

// The ports EnsembleConfig.Peer is asked about.
const (
	QuorumPort   = "quorum"
	ElectionPort = "election"
)

// StartEnsembleWith is StartEnsemble with cfg.
func StartEnsembleWith(dir string, n int, cfg EnsembleConfig) (*Ensemble, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, fmt.Errorf("zktest: ensemble of %d servers", n)
	}
	// The servers' ports stay reserved while cfg.Peer binds proxies, which
	// could otherwise be given one of them.
	ports, release, err := reservePorts(3 * n)
	if err != nil {
		return nil, err
	}
	quorum := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", ports[3*i+1]) }
	election := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", ports[3*i+2]) }
	e := &Ensemble{}
	peers := make([][]string, n)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			q, el := quorum(j), election(j)
			if j != i && cfg.Peer != nil {
				if q, err = cfg.Peer(i, j, QuorumPort, q); err == nil {
					el, err = cfg.Peer(i, j, ElectionPort, el)
				}
				if err != nil {
					release()
					return nil, fmt.Errorf("zktest: server %d's address of server %d: %w", i+1, j+1, err)
				}
			}
			peers[i] = append(peers[i], fmt.Sprintf("server.%d=%s:%s", j+1, q, portOf(el)))
		}
	}
	release()
	for i := 0; i < n; i++ {
		s := &Server{ID: i + 1, Addr: fmt.Sprintf("127.0.0.1:%d", ports[3*i]), Dir: filepath.Join(dir, strconv.Itoa(i+1))}
		if err := s.writeConfig(ports[3*i], peers[i]); err != nil {
			e.Stop()
			return nil, err
		}
		if err := s.Start(); err != nil {
			e.Stop()
			return nil, err
		}
		e.Servers = append(e.Servers, s)
	}
	for _, s := range e.Servers {
		if err := s.WaitServing(StartTimeout); err != nil {
			e.Stop()
			return nil, err
		}
	}
	return e, nil
}

// portOf is the port of host:port.
func portOf(addr string) string {
	if i := strings.LastIndexByte(addr, ':'); i >= 0 {
		return addr[i+1:]
	}
	return addr
}

// Stop kills every server of the ensemble and waits for them to exit.
func (e *Ensemble) Stop() {
	for _, s := range e.Servers {
		s.Kill()
	}
}

// Leader returns the server that is the ensemble's leader now, or nil.
func (e *Ensemble) Leader() *Server {
	for _, s := range e.Servers {
		if m, err := s.Mode(); err == nil && m == "leader" {
			return s
		}
	}
	return nil
}

func (s *Server) writeConfig(clientPort int, peers []string) error {
	data := filepath.Join(s.Dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return err
	}
	lines := []string{
		fmt.Sprintf("tickTime=%d", TickTime.Milliseconds()),
		"dataDir=" + data,
		fmt.Sprintf("clientPort=%d", clientPort),
		"clientPortAddress=127.0.0.1",
		"admin.enableServer=false",
		"4lw.commands.whitelist=*",
		"maxClientCnxns=0",
		"preAllocSize=1024",
		"snapCount=100000",
		"forceSync=no",
	}
	if len(peers) > 0 {
		lines = append(lines, "initLimit=10", "syncLimit=5", "standaloneEnabled=false",
			"reconfigEnabled=false", "quorumListenOnAllIPs=false")
		lines = append(lines, peers...)
		if err := os.WriteFile(filepath.Join(data, "myid"), []byte(strconv.Itoa(s.ID)+"\n"), 0o644); err != nil {
			return err
		}
	}
	s.cfgPath = filepath.Join(s.Dir, "zoo.cfg")
	return os.WriteFile(s.cfgPath, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

// Start starts the server's process (again, after Kill) on its existing
// configuration and data; it does not wait until it serves.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return fmt.Errorf("zktest: server %d is running", s.ID)
	}
	logf, err := os.OpenFile(filepath.Join(s.Dir, "server.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cp := Jar
	if _, err := os.Stat("/usr/share/java/slf4j-nop.jar"); err == nil {
		cp += ":/usr/share/java/slf4j-nop.jar"
	}
	cmd := exec.Command("java", "-Xms32m", "-Xmx192m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Xshare:auto", "-Dzookeeper.jmx.log4j.disable=true", "-Dzookeeper.admin.enableServer=false",
		"-cp", cp, "org.apache.zookeeper.server.quorum.QuorumPeerMain", s.cfgPath)
	cmd.Dir = s.Dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// The server dies with the test process, however that ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("zktest: starting server %d: %w", s.ID, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		s.exitState = cmd.ProcessState.String() // read after exited is closed
		close(exited)
	}()
	s.cmd, s.exited = cmd, exited
	return nil
}

// PID returns the server's process ID, or 0 when it is not running.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Kill sends SIGKILL to the server's process (the one this package started)
// and waits for it to exit. Killing a stopped server does nothing.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
}

// Running reports whether the server's process is running.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// WaitServing waits until the server answers srvr with a mode of
// standalone, leader or follower.
func (s *Server) WaitServing(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if !s.Running() {
			state := "is not running"
			s.mu.Lock()
			if s.cmd != nil {
				<-s.exited
				state = "exited: " + s.exitState
			}
			s.mu.Unlock()
			return fmt.Errorf("zktest: server %d %s (a port taken?); see %s", s.ID, state, filepath.Join(s.Dir, "server.log"))
		}
		m, err := s.Mode()
		if err == nil && (m == "standalone" || m == "leader" || m == "follower") {
			return nil
		}
		last = err
		if err == nil {
			last = fmt.Errorf("mode %q", m)
		}
		time.Sleep(20 * time.Millisecond) // polling a process that gives no event
	}
	return fmt.Errorf("zktest: server %d at %s not serving after %v: %v; see %s", s.ID, s.Addr, timeout, last, filepath.Join(s.Dir, "server.log"))
}

// Mode asks the server for its mode with the srvr four-letter word:
// "standalone", "leader", "follower", or an error while it does not serve.
func (s *Server) Mode() (string, error) {
	out, err := FourLetter(s.Addr, "srvr")
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if m, ok := strings.CutPrefix(sc.Text(), "Mode: "); ok {
			return strings.TrimSpace(m), nil
		}
	}
	return "", fmt.Errorf("zktest: srvr answered without a mode: %q", out)
}

// FourLetter sends a four-letter word to the server at addr and returns its
// answer.
func FourLetter(addr, word string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte(word)); err != nil {
		return "", err
	}
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return b.String(), nil
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	ports, release, err := reservePorts(n)
	release()
	return ports, err
}

// reservePorts returns n distinct loopback ports held until release is
// called, so that nothing else of this process's (a peer proxy) is given
// one of them meanwhile.
func reservePorts(n int) (ports []int, release func(), err error) {
	var ls []net.Listener
	release = func() {
		for _, l := range ls {
			l.Close()
		}
		ls = nil
	}
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			release()
			return nil, release, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, release, nil
}
