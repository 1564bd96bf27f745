// Package curator measures Apache Curator's LeaderLatch (Debian's
// libcurator-recipes-java) on ZooKeeper. A small Java program, LatchHost,
// embedded here and compiled with javac on first use, hosts every candidate
// in one JVM and is driven over its stdin and stdout, one line per command
// or answer. Each candidate is a CuratorFramework of its own, with the
// candidate's TTL as its session timeout, connected through its own TCP
// proxies on 127.0.0.1 (one per server); Crash cuts them, so ZooKeeper must
// expire the session.
//
// The JVM reports the instants of isLeader and of LeaderLatch.close with
// System.nanoTime(), which on Linux reads CLOCK_MONOTONIC: the clock of
// peer.Mono. New warms the JVM up with a few hundred handovers, so that the
// figures measure Curator and ZooKeeper rather than the JIT compiler.
package curator

import (
	"bufio"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	gozk "github.com/go-zookeeper/zk"

	election "github.com/electkit/election"
	"github.com/electkit/election/bench/internal/peer"
	"github.com/electkit/election/internal/mono"
	"github.com/electkit/election/internal/rig/faultproxy"
	"github.com/electkit/election/internal/rig/zktest"
)

// Name is the library's name in reports.
const Name = "Curator LeaderLatch"

//go:embed LatchHost.java
var latchHostSource string

// JarDir is where Debian installs the jars.
var JarDir = "/usr/share/java"

// jars are the jars on LatchHost's class path, with the Debian package of
// each; their manifests name the rest.
var jars = []struct{ name, pkg string }{
	{"curator-recipes.jar", "libcurator-recipes-java"},
	{"curator-framework.jar", "libcurator-framework-java"},
	{"curator-client.jar", "libcurator-client-java"},
	{"zookeeper.jar", "libzookeeper-java"},
	{"zookeeper-jute.jar", "libzookeeper-java"},
	{"guava.jar", "libguava-java"},
	{"slf4j-api.jar", "libslf4j-java"},
}

// quietJar silences slf4j's warning about a missing binding, if present.
const quietJar = "slf4j-nop.jar"

// ErrUnavailable: javac, java or a Curator jar is missing.
var ErrUnavailable = errors.New("curator: not available")

// Available reports whether javac, java and the jars are installed, and
// names what is missing otherwise.
func Available() error {
	var missing []string
	for _, tool := range []string{"java", "javac"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool+" (a JDK, e.g. apt-get install default-jdk-headless)")
		}
	}
	for _, j := range jars {
		if _, err := os.Stat(filepath.Join(JarDir, j.name)); err != nil {
			missing = append(missing, filepath.Join(JarDir, j.name)+" (apt-get install "+j.pkg+")")
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: missing %s", ErrUnavailable, strings.Join(missing, ", "))
	}
	return nil
}

func classPath() string {
	var cp []string
	for _, j := range jars {
		cp = append(cp, filepath.Join(JarDir, j.name))
	}
	if _, err := os.Stat(filepath.Join(JarDir, quietJar)); err == nil {
		cp = append(cp, filepath.Join(JarDir, quietJar))
	}
	return strings.Join(cp, string(os.PathListSeparator))
}

// DefaultPrefix is the ZooKeeper path under which the latches live: the
// latch of election name is DefaultPrefix + "/" + name.
const DefaultPrefix = "/electkit-bench/curator"

// DefaultWarmup is how many handovers New runs to warm the JVM up.
const DefaultWarmup = 300

// Option configures New.
type Option func(*options)

type options struct {
	warmup   int
	connect  time.Duration // 0: the candidate's TTL
	prefix   string
	jvmArgs  []string
	cacheDir string
	err      error
}

func (o *options) fail(err error) {
	if o.err == nil {
		o.err = err
	}
}

// WithWarmup sets how many handovers New runs before returning
// (DefaultWarmup; 0 runs none).
func WithWarmup(n int) Option {
	return func(o *options) {
		if n < 0 {
			o.fail(fmt.Errorf("%w: curator: warmup %d is negative", election.ErrInvalidOption, n))
		}
		o.warmup = n
	}
}

// WithConnectionTimeout sets Curator's connection timeout, also the wait
// for the first connection in NewCandidate (by default the candidate's TTL,
// its session timeout).
func WithConnectionTimeout(d time.Duration) Option {
	return func(o *options) {
		if d < time.Millisecond {
			o.fail(fmt.Errorf("%w: curator: connection timeout %v is under 1ms", election.ErrInvalidOption, d))
		}
		o.connect = d
	}
}

// WithPrefix sets the ZooKeeper path under which the latches live
// (DefaultPrefix by default).
func WithPrefix(prefix string) Option {
	return func(o *options) {
		if !strings.HasPrefix(prefix, "/") || strings.HasSuffix(prefix, "/") || strings.ContainsAny(prefix, " \t\r\n") {
			o.fail(fmt.Errorf("%w: curator: prefix %q is not an absolute ZooKeeper path without a trailing slash or blanks", election.ErrInvalidOption, prefix))
		}
		o.prefix = prefix
	}
}

// WithJVMArgs replaces the JVM's options (by default a 256 MiB heap and
// the serial collector, to stay light on a small machine).
func WithJVMArgs(args ...string) Option {
	return func(o *options) { o.jvmArgs = append([]string(nil), args...) }
}

// WithCacheDir sets where LatchHost is compiled to (by default a directory
// under os.UserCacheDir, or the temporary directory). The class files are
// kept there, keyed by a hash of the source and the class path.
func WithCacheDir(dir string) Option {
	return func(o *options) {
		if dir == "" {
			o.fail(fmt.Errorf("%w: curator: empty cache directory", election.ErrInvalidOption))
		}
		o.cacheDir = dir
	}
}

// New compiles LatchHost unless it is compiled already, starts the JVM,
// and warms it up against the ZooKeeper servers ("host:port", loopback).
// ctx bounds New only; the JVM runs until Close (or this process's end:
// it dies with it).
func New(ctx context.Context, servers []string, opts ...Option) (peer.Library, error) {
	o := options{warmup: DefaultWarmup, prefix: DefaultPrefix, jvmArgs: []string{"-Xmx256m", "-XX:+UseSerialGC"}}
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	if o.err != nil {
		return nil, o.err
	}
	if len(servers) == 0 {
		return nil, fmt.Errorf("%w: curator: no ZooKeeper servers", election.ErrInvalidOption)
	}
	for _, s := range servers {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return nil, fmt.Errorf("%w: curator: server %q is not host:port: %v", election.ErrInvalidOption, s, err)
		}
	}
	if err := Available(); err != nil {
		return nil, err
	}
	dir, err := compile(o.cacheDir)
	if err != nil {
		return nil, err
	}
	l, err := start(dir, o, servers)
	if err != nil {
		return nil, err
	}
	if _, err := l.call(ctx, "ping"); err != nil {
		l.Close()
		return nil, fmt.Errorf("curator: JVM does not answer: %w", err)
	}
	if err := l.warm(ctx, o.warmup); err != nil {
		l.Close()
		return nil, fmt.Errorf("curator: warming up: %w", err)
	}
	return l, nil
}

// compile returns a directory holding LatchHost's classes, compiling them
// into it first unless an earlier run did.
func compile(cacheDir string) (string, error) {
	cp := classPath()
	sum := sha256.Sum256([]byte(latchHostSource + "\x00" + cp))
	if cacheDir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		cacheDir = filepath.Join(base, "electkit-bench")
	}
	dir := filepath.Join(cacheDir, "latchhost-"+hex.EncodeToString(sum[:8]))
	if _, err := os.Stat(filepath.Join(dir, "LatchHost.class")); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("curator: cache directory: %w", err)
	}
	tmp, err := os.MkdirTemp(cacheDir, "build-")
	if err != nil {
		return "", fmt.Errorf("curator: cache directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	src := filepath.Join(tmp, "LatchHost.java")
	if err := os.WriteFile(src, []byte(latchHostSource), 0o644); err != nil {
		return "", fmt.Errorf("curator: writing LatchHost.java: %w", err)
	}
	out := filepath.Join(tmp, "classes")
	cmd := exec.Command("javac", "-nowarn", "-d", out, "-cp", cp, src)
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("curator: javac LatchHost.java against %s: %v\n%s", cp, err, msg)
	}
	if err := os.Rename(out, dir); err != nil {
		// Another process compiled it at the same time: use theirs.
		if _, serr := os.Stat(filepath.Join(dir, "LatchHost.class")); serr == nil {
			return dir, nil
		}
		return "", fmt.Errorf("curator: installing the classes: %w", err)
	}
	return dir, nil
}

// tail keeps the last bytes written to it: the JVM's stderr, for errors.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - 4096; over > 0 {
		t.buf = append([]byte(nil), t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}

type reply struct {
	val string
	err error
}

type library struct {
	o       options
	servers []string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	stderr  *tail
	wmu     sync.Mutex // one line at a time to stdin
	dead    chan struct{}
	reader  sync.WaitGroup

	mu       sync.Mutex
	nextReq  int64
	nextCID  int64
	nextGen  int64
	nextProc int64
	cmds     chan struct{} // start and release commands in flight of shared candidates
	pending  map[int64]chan reply
	cands    map[string]*candidate
	closed   bool
	exitErr  error      // why the JVM's output ended, set before dead closes
	census   *gozk.Conn // Registered's own connection, made on first use
}

func start(dir string, o options, servers []string) (*library, error) {
	args := append(append([]string(nil), o.jvmArgs...), "-cp", dir+string(os.PathListSeparator)+classPath(), "LatchHost")
	cmd := exec.Command("java", args...)
	// The JVM dies with this process even if Close is never called.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	l := &library{
		o: o, servers: servers, cmd: cmd, stderr: &tail{}, dead: make(chan struct{}),
		pending: map[int64]chan reply{}, cands: map[string]*candidate{}, cmds: make(chan struct{}, maxSharedCmds),
	}
	cmd.Stderr = l.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	l.stdin = stdin
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("curator: starting java: %w", err)
	}
	l.reader.Add(1)
	go l.read(stdout)
	return l, nil
}

// read dispatches the JVM's lines until its stdout ends.
func (l *library) read(stdout io.Reader) {
	defer l.reader.Done()
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), " ", 5)
		switch {
		case len(f) >= 3 && f[0] == "r":
			req, _ := strconv.ParseInt(f[1], 10, 64)
			r := reply{}
			rest := strings.Join(f[3:], " ")
			if f[2] == "ok" {
				r.val = rest
			} else {
				r.err = fmt.Errorf("curator: JVM: %s", rest)
			}
			l.mu.Lock()
			ch := l.pending[req]
			delete(l.pending, req)
			l.mu.Unlock()
			if ch != nil {
				ch <- r
			}
		case len(f) == 5 && f[0] == "e":
			gen, _ := strconv.ParseInt(f[2], 10, 64)
			at, _ := strconv.ParseInt(f[4], 10, 64)
			l.mu.Lock()
			c := l.cands[f[1]]
			l.mu.Unlock()
			if c != nil {
				c.event(gen, f[3], at)
			}
		}
	}
	err := sc.Err()
	if err == nil {
		err = errors.New("its output ended")
	}
	l.mu.Lock()
	l.exitErr = err
	l.mu.Unlock()
	close(l.dead)
}

var errLibClosed = fmt.Errorf("curator: %w", election.ErrClosed)

// call sends one command and waits for its answer.
func (l *library) call(ctx context.Context, args ...string) (string, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return "", errLibClosed
	}
	l.nextReq++
	req := l.nextReq
	ch := make(chan reply, 1)
	l.pending[req] = ch
	l.mu.Unlock()
	line := strconv.FormatInt(req, 10) + " " + strings.Join(args, " ") + "\n"
	l.wmu.Lock()
	_, err := io.WriteString(l.stdin, line)
	l.wmu.Unlock()
	if err != nil {
		l.forget(req)
		return "", fmt.Errorf("curator: writing to the JVM: %w%s", err, l.stderrNote())
	}
	select {
	case r := <-ch:
		return r.val, r.err
	case <-ctx.Done():
		l.forget(req)
		return "", ctx.Err()
	case <-l.dead:
		l.mu.Lock()
		err := l.exitErr
		l.mu.Unlock()
		return "", fmt.Errorf("curator: the JVM is gone (%v)%s", err, l.stderrNote())
	}
}

func (l *library) forget(req int64) {
	l.mu.Lock()
	delete(l.pending, req)
	l.mu.Unlock()
}

func (l *library) stderrNote() string {
	if s := l.stderr.String(); s != "" {
		return "; its stderr ends: " + s
	}
	return ""
}

func (l *library) Name() string { return Name }

// now returns the JVM's System.nanoTime().
func (l *library) now(ctx context.Context) (int64, error) {
	v, err := l.call(ctx, "now")
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(v, 10, 64)
}

func checkWord(what, s string) error {
	if s == "" || strings.ContainsAny(s, " \t\r\n") {
		return fmt.Errorf("%w: curator: %s %q is empty or has blanks", election.ErrInvalidOption, what, s)
	}
	return nil
}

// NewCandidate connects a new CuratorFramework, session timeout ttl,
// through new proxies, and waits until it is connected.
func (l *library) NewCandidate(ctx context.Context, name, id string, ttl time.Duration) (peer.Candidate, error) {
	if err := checkWord("election name", name); err != nil {
		return nil, err
	}
	if err := checkWord("candidate id", id); err != nil {
		return nil, err
	}
	if ttl < time.Millisecond || ttl > time.Duration(1<<31-1)*time.Millisecond {
		return nil, fmt.Errorf("%w: curator: ttl %v is not a session timeout in int milliseconds", election.ErrInvalidOption, ttl)
	}
	connect := l.o.connect
	if connect == 0 {
		connect = ttl
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, errLibClosed
	}
	l.nextCID++
	c := &candidate{lib: l, cid: "c" + strconv.FormatInt(l.nextCID, 10), id: id, path: l.o.prefix + "/" + name}
	l.mu.Unlock()
	var addrs []string
	for _, s := range l.servers {
		p, err := faultproxy.Start(s)
		if err != nil {
			c.closeProxies()
			return nil, fmt.Errorf("curator: proxy to %s: %w", s, err)
		}
		c.proxies = append(c.proxies, p)
		addrs = append(addrs, p.Addr)
	}
	l.mu.Lock()
	l.cands[c.cid] = c
	l.mu.Unlock()
	_, err := l.call(ctx, "new", c.cid, strconv.FormatInt(ttl.Milliseconds(), 10),
		strconv.FormatInt(connect.Milliseconds(), 10), strings.Join(addrs, ","))
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("curator: candidate %s: %w", id, err)
	}
	return c, nil
}

// warm runs n handovers between two candidates.
func (l *library) warm(ctx context.Context, n int) error {
	if n == 0 {
		return nil
	}
	name := fmt.Sprintf("warmup-%d", os.Getpid())
	var cs [2]peer.Candidate
	for i := range cs {
		c, err := l.NewCandidate(ctx, name, "warmup-"+strconv.Itoa(i), 4*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		cs[i] = c
	}
	if _, err := cs[0].Campaign(ctx); err != nil {
		return err
	}
	for i := range n {
		leader, next := cs[i%2], cs[(i+1)%2]
		done := make(chan error, 1)
		go func() {
			_, err := next.Campaign(ctx)
			done <- err
		}()
		if _, err := leader.Release(ctx); err != nil {
			return err
		}
		if err := <-done; err != nil {
			return err
		}
	}
	_, err := cs[n%2].Release(ctx)
	return err
}

// Registered counts the participants of the latch of election name (the
// children of its path), through a connection of its own to the servers.
func (l *library) Registered(ctx context.Context, name string) (int, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return 0, errLibClosed
	}
	if l.census == nil {
		c, err := zktest.Connect(l.servers, 10*time.Second)
		if err != nil {
			l.mu.Unlock()
			return 0, fmt.Errorf("curator: census connection: %w", err)
		}
		l.census = c
	}
	conn := l.census
	l.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	kids, _, err := conn.Children(l.o.prefix + "/" + name)
	if errors.Is(err, gozk.ErrNoNode) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("curator: children of %s: %w", l.o.prefix+"/"+name, err)
	}
	return len(kids), nil
}

// NewProcess connects one CuratorFramework, session timeout ttl, through
// its own proxies, on which the process's candidates — a LeaderLatch each,
// of any election — all run, as a service with a leader per shard runs
// them on one client.
func (l *library) NewProcess(ctx context.Context, ttl time.Duration) (peer.Process, error) {
	l.mu.Lock()
	l.nextProc++
	id := "process-" + strconv.FormatInt(l.nextProc, 10)
	l.mu.Unlock()
	c, err := l.NewCandidate(ctx, id, id, ttl)
	if err != nil {
		return nil, err
	}
	return &process{owner: c.(*candidate)}, nil
}

// process is a CuratorFramework shared by its candidates.
type process struct{ owner *candidate }

// NewCandidate makes a candidate of the election called name on the
// process's client; its Campaign starts a LeaderLatch there.
func (p *process) NewCandidate(ctx context.Context, name, id string) (peer.Candidate, error) {
	if err := checkWord("election name", name); err != nil {
		return nil, err
	}
	if err := checkWord("candidate id", id); err != nil {
		return nil, err
	}
	l := p.owner.lib
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, errLibClosed
	}
	l.nextCID++
	c := &candidate{lib: l, cid: "c" + strconv.FormatInt(l.nextCID, 10), id: id, path: l.o.prefix + "/" + name, shared: true}
	l.cands[c.cid] = c
	l.mu.Unlock()
	if _, err := l.call(ctx, "share", c.cid, p.owner.cid); err != nil {
		c.Close()
		return nil, fmt.Errorf("curator: candidate %s: %w", id, err)
	}
	return c, nil
}

// Counts: nothing is counted.
func (p *process) Counts() peer.Counts { return peer.Counts{} }

// Close closes the client (its candidates are closed first, by the caller).
func (p *process) Close() error { return p.owner.Close() }

// RSS returns the JVM's resident memory, in bytes.
func (l *library) RSS() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", l.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, ln := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(ln, "VmRSS:"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb); err != nil {
				return 0, err
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("curator: the JVM has no VmRSS")
}

// MaxCandidates is the largest election run in one JVM in the benchmarks:
// each candidate is a CuratorFramework with about four threads (500 took
// some 2,000 threads and 370 MB).
func (l *library) MaxCandidates() int { return 500 }

// Close kills the JVM by its PID and closes every candidate's proxies.
func (l *library) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	var cs []*candidate
	for _, c := range l.cands {
		cs = append(cs, c)
	}
	if l.census != nil {
		l.census.Close()
	}
	l.mu.Unlock()
	if l.cmd.Process != nil {
		l.cmd.Process.Kill()
	}
	l.stdin.Close()
	l.reader.Wait()
	l.cmd.Wait()
	for _, c := range cs {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		c.closeProxies()
	}
	return nil
}

// candidate is one CuratorFramework in the JVM and, while campaigning, one
// LeaderLatch on it; each Campaign after a Release starts a new latch (a
// LeaderLatch cannot be started twice).
type candidate struct {
	lib     *library
	cid     string
	id      string
	path    string
	proxies []*faultproxy.Proxy
	shared  bool // on its process's client (NewProcess): no proxies of its own

	mu      sync.Mutex
	gen     int64         // the current latch; 0 = none
	leading chan struct{} // closed at the current latch's isLeader
	at      int64         // its instant, set before leading closes
	led     bool
	crashed bool
	closed  bool
}

func (c *candidate) event(gen int64, kind string, at int64) {
	if kind != "leader" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen == c.gen && !c.led {
		c.at, c.led = at, true
		close(c.leading)
	}
}

// Campaign starts a LeaderLatch unless one is running and waits until its
// listener's isLeader. If ctx ends first, the latch is closed (withdrawing
// the candidacy) and ctx.Err() returned.
func (c *candidate) Campaign(ctx context.Context) (int64, error) {
	c.mu.Lock()
	switch {
	case c.closed:
		c.mu.Unlock()
		return 0, fmt.Errorf("curator: candidate %s: %w", c.id, election.ErrClosed)
	case c.crashed:
		c.mu.Unlock()
		return 0, fmt.Errorf("curator: candidate %s crashed", c.id)
	}
	begin := c.gen == 0
	if begin {
		c.lib.mu.Lock()
		c.lib.nextGen++
		c.gen = c.lib.nextGen
		c.lib.mu.Unlock()
		c.leading, c.led = make(chan struct{}), false
	}
	gen, leading := c.gen, c.leading
	c.mu.Unlock()
	if begin {
		if err := c.start(ctx, gen); err != nil {
			c.mu.Lock()
			if c.gen == gen {
				c.gen = 0
			}
			c.mu.Unlock()
			return 0, fmt.Errorf("curator: candidate %s: starting the latch: %w", c.id, err)
		}
	}
	select {
	case <-leading:
		return c.instant(), nil
	case <-ctx.Done():
		select {
		case <-leading:
			return c.instant(), nil
		default:
		}
		wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.Release(wctx)
		return 0, ctx.Err()
	case <-c.lib.dead:
		return 0, fmt.Errorf("curator: candidate %s: the JVM is gone%s", c.id, c.lib.stderrNote())
	}
}

// start starts latch gen in the JVM. Candidates on a process's client
// have at most maxSharedCmds start and release commands in flight among
// them: a
// service with a leader per shard starts thousands at once, and the JVM
// runs each command in flight on a thread of its own.
func (c *candidate) start(ctx context.Context, gen int64) error {
	_, err := c.sharedCall(ctx, "start", c.cid, strconv.FormatInt(gen, 10), c.path, c.id)
	return err
}

// sharedCall is lib.call, within maxSharedCmds for a shared candidate.
func (c *candidate) sharedCall(ctx context.Context, args ...string) (string, error) {
	if c.shared {
		select {
		case c.lib.cmds <- struct{}{}:
			defer func() { <-c.lib.cmds }()
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	return c.lib.call(ctx, args...)
}

// maxSharedCmds bounds the start and release commands in flight of the
// candidates on processes' clients.
const maxSharedCmds = 64

func (c *candidate) instant() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.at
}

// Release closes the latch; Curator deletes its node. It returns the
// JVM's instant just before LeaderLatch.close.
func (c *candidate) Release(ctx context.Context) (int64, error) {
	c.mu.Lock()
	gen := c.gen
	c.mu.Unlock()
	if gen == 0 {
		return 0, fmt.Errorf("curator: candidate %s: %w", c.id, election.ErrNotLeader)
	}
	v, err := c.sharedCall(ctx, "release", c.cid)
	c.mu.Lock()
	if c.gen == gen {
		c.gen = 0
	}
	c.mu.Unlock()
	if err != nil {
		return 0, fmt.Errorf("curator: candidate %s: release: %w", c.id, err)
	}
	return strconv.ParseInt(v, 10, 64)
}

// Crash cuts the candidate's proxies.
func (c *candidate) Crash() (int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, fmt.Errorf("curator: candidate %s: %w", c.id, election.ErrClosed)
	}
	if c.shared {
		return 0, fmt.Errorf("curator: candidate %s shares its process's client: nothing of its own to cut", c.id)
	}
	at := mono.Now()
	for _, p := range c.proxies {
		p.Cut()
	}
	c.crashed = true
	return at, nil
}

// Close closes the latch and the client in the JVM, then the proxies. A
// crashed candidate's proxies close first, so that its client fails fast
// instead of timing out.
func (c *candidate) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	crashed := c.crashed
	c.mu.Unlock()
	if crashed {
		c.closeProxies()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_, err := c.lib.call(ctx, "close", c.cid)
	if errors.Is(err, election.ErrClosed) {
		err = nil
	}
	c.closeProxies()
	c.lib.mu.Lock()
	delete(c.lib.cands, c.cid)
	c.lib.mu.Unlock()
	return err
}

func (c *candidate) closeProxies() {
	for _, p := range c.proxies {
		p.Close()
	}
}
