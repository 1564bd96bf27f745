// Package pgtest runs Debian's PostgreSQL 15 server for tests: a cluster
// of its own (initdb) in a directory the test owns, listening on
// 127.0.0.1 at a free port and on a socket in that directory, stopped
// (fast or immediate) and started again on demand, and removed at the end.
// When the server is not installed, Require skips the test, unless the
// environment variable CI is set, where it fails it: in CI every
// real-server test runs. A test rig: shipped code never imports it, and it
// imports no driver.
package pgtest

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// BinDir holds Debian's postgresql-15 binaries.
var BinDir = "/usr/lib/postgresql/15/bin"

// TB is the part of testing.TB the helpers use.
type TB interface {
	Helper()
	Cleanup(func())
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
	Logf(format string, args ...any)
}

// Available reports why the server cannot run here, or nil.
func Available() error {
	for _, b := range []string{"initdb", "pg_ctl", "postgres"} {
		if _, err := os.Stat(filepath.Join(BinDir, b)); err != nil {
			return fmt.Errorf("pgtest: %s missing (apt-get install postgresql-15; make deps does): %w", b, err)
		}
	}
	if _, err := exec.LookPath("psql"); err != nil {
		return fmt.Errorf("pgtest: psql missing (apt-get install postgresql-client-15): %w", err)
	}
	return nil
}

// Require skips tb when the server is not installed, and fails it instead
// when CI is set.
func Require(tb TB) {
	tb.Helper()
	if err := Available(); err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("%v (CI is set: real-server tests must run)", err)
			return
		}
		tb.Skipf("%v", err)
	}
}

// Server is one PostgreSQL cluster of a test.
type Server struct {
	Dir  string // the cluster's directory: data, log, socket
	Port int
	// Addr is "127.0.0.1:Port".
	Addr string

	mu      sync.Mutex
	running bool
}

// Start makes and starts a cluster for tb, removed in tb's Cleanup. It
// fails tb (or skips it, see Require) if it cannot.
func Start(tb TB) *Server {
	tb.Helper()
	Require(tb)
	s, err := New()
	if err != nil {
		tb.Fatalf("%v", err)
		return nil
	}
	tb.Cleanup(s.Remove)
	if err := s.Start(); err != nil {
		tb.Fatalf("%v", err)
		return nil
	}
	return s
}

// asRoot: the server refuses to run as root; then its tools run as the
// postgres user, on a directory it owns.
func asRoot() bool { return os.Geteuid() == 0 }

// New makes a cluster (initdb, ~1 s) in a new directory, not started.
func New() (*Server, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	if asRoot() {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("pgtest: running as root needs the postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
	}
	s := &Server{Dir: dir}
	if out, err := s.tool("initdb", "-D", s.data(), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8", "--locale=C"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: initdb: %v\n%s", err, out)
	}
	return s, nil
}

func (s *Server) data() string { return filepath.Join(s.Dir, "data") }

// tool runs one of the server's programs (as the postgres user when root).
func (s *Server) tool(name string, args ...string) ([]byte, error) {
	bin := filepath.Join(BinDir, name)
	var cmd *exec.Cmd
	if asRoot() {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", bin}, args...)...)
	} else {
		cmd = exec.Command(bin, args...)
	}
	cmd.Dir = s.Dir
	return cmd.CombinedOutput()
}

// Start starts the server (again) and waits until it accepts connections;
// the first start picks a free port, which later starts keep.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running {
		return nil
	}
	var last error
	for range 5 {
		if s.Port == 0 || last != nil {
			p, err := freePort()
			if err != nil {
				return err
			}
			s.Port, s.Addr = p, "127.0.0.1:"+strconv.Itoa(p)
		}
		opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off -c max_connections=300 "+
			"-c full_page_writes=off -c synchronous_commit=on", s.Port, s.Dir)
		out, err := s.tool("pg_ctl", "-D", s.data(), "-o", opts, "-l", filepath.Join(s.Dir, "log"), "-w", "-t", "30", "start")
		if err == nil {
			s.running = true
			return nil
		}
		log, _ := os.ReadFile(filepath.Join(s.Dir, "log"))
		last = fmt.Errorf("pgtest: pg_ctl start: %v\n%s\n%s", err, out, tail(log))
		if !bytes.Contains(log, []byte("could not bind")) && !bytes.Contains(log, []byte("already in use")) {
			return last
		}
	}
	return last
}

// Stop stops the server with mode "fast" (connections are closed, a
// checkpoint is written) or "immediate" (the processes quit at once, as
// after a crash: the next start recovers from the WAL).
func (s *Server) Stop(mode string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running {
		return nil
	}
	if out, err := s.tool("pg_ctl", "-D", s.data(), "-m", mode, "-w", "-t", "30", "stop"); err != nil {
		return fmt.Errorf("pgtest: pg_ctl stop -m %s: %v\n%s", mode, err, out)
	}
	s.running = false
	return nil
}

// NewStandby makes a streaming-replication standby of primary (which must
// be running): a base backup (pg_basebackup -R) in a new directory, not
// started; Start starts it as a hot standby of primary, and Promote makes
// it a primary.
func NewStandby(primary *Server) (*Server, error) {
	dir, err := os.MkdirTemp("", "pgtest-standby-")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	if asRoot() {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, err
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
	}
	s := &Server{Dir: dir}
	if out, err := s.tool("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(primary.Port), "-U", "postgres",
		"-D", s.data(), "-R", "-X", "stream", "--no-sync"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: pg_basebackup: %v\n%s", err, out)
	}
	return s, nil
}

// Promote ends recovery on a standby: it becomes a primary.
func (s *Server) Promote() error {
	if out, err := s.tool("pg_ctl", "-D", s.data(), "-w", "-t", "30", "promote"); err != nil {
		return fmt.Errorf("pgtest: pg_ctl promote: %v\n%s", err, out)
	}
	return nil
}

// Running reports whether the server was started and not stopped since.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running
}

// Restart stops the server with mode and starts it again.
func (s *Server) Restart(mode string) error {
	if err := s.Stop(mode); err != nil {
		return err
	}
	return s.Start()
}

// Remove stops the server (immediate) and deletes its directory.
func (s *Server) Remove() {
	_ = s.Stop("immediate")
	os.RemoveAll(s.Dir)
}

// DSN is a connection string to database postgres as user (the superuser
// "postgres" if ""), on 127.0.0.1, or through addr if given (a proxy).
func (s *Server) DSN(user, addr string) string {
	if user == "" {
		user = "postgres"
	}
	if addr == "" {
		addr = s.Addr
	}
	host, port, _ := net.SplitHostPort(addr)
	return fmt.Sprintf("host=%s port=%s user=%s dbname=postgres sslmode=disable connect_timeout=5", host, port, user)
}

// PSQL runs sql as the superuser with psql over the socket and returns its
// output (unaligned, tuples only); an error of the server is an error.
func (s *Server) PSQL(sql string) (string, error) {
	cmd := exec.Command("psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", s.Dir, "-p", strconv.Itoa(s.Port), "-U", "postgres", "-d", "postgres", "-c", sql)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("pgtest: psql %q: %v: %s", sql, err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

// Log returns the server's log.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "log"))
	return string(b)
}

func tail(b []byte) string {
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// WaitFor polls cond every 10 ms until it holds or timeout passes: for
// the server's own state (a backend's end), which sends no event.
func WaitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}
