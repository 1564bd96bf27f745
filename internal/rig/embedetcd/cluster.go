package embedetcd

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// startAttempts is how many times StartCluster picks fresh ports when another
// process grabbed one between picking and listening.
const startAttempts = 3

// Cluster is a multi-member etcd cluster whose members all run in this
// process and talk to each other over 127.0.0.1.
type Cluster struct {
	members   []*Member
	dir       string
	removeDir bool

	closeOnce sync.Once
	closeErr  error
}

// Member is one member of a Cluster. Its name, URLs and data directory stay
// the same across Stop and Restart.
type Member struct {
	// Name is the etcd member name ("m0", "m1", ...).
	Name string
	// ClientURL is the URL clients reach the member on, such as
	// "http://127.0.0.1:40123" ("https://..." with Config.TLS).
	ClientURL string
	// PeerURL is the URL other members reach this member on (Config's
	// PeerFront's, when set).
	PeerURL string
	// Dir is the member's data directory.
	Dir string

	cfg  Config
	spec memberSpec
	id   uint64

	lifeMu sync.Mutex // serializes Stop, Restart and the cluster's Close
	closed bool       // guarded by lifeMu: the cluster was closed

	mu sync.Mutex // guards e
	e  *embed.Etcd
}

// StartCluster starts an n-member etcd cluster in this process: it picks free
// 127.0.0.1 ports for every member's client and peer listeners, starts all
// members, and waits until every one is ready to serve clients (or
// cfg.ReadyTimeout passes). Stop it with Close.
//
// With cfg.Dir set, member i stores its data in cfg.Dir/m<i>, which must not
// exist yet or be empty: a cluster always starts fresh, because its ports are
// chosen anew each time.
func StartCluster(n int, cfg Config) (*Cluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("embedetcd: cluster size n=%d must be at least 1", n)
	}
	cfg, err := cfg.normalized()
	if err != nil {
		return nil, err
	}
	dir, removeDir, err := dataDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir, removeDir: removeDir}
	for attempt := 1; ; attempt++ {
		err = c.start(n, cfg)
		if err == nil {
			return c, nil
		}
		if attempt == startAttempts || !addrInUse(err) {
			break
		}
	}
	if removeDir {
		err = errors.Join(err, os.RemoveAll(dir))
	}
	return nil, err
}

// start makes one attempt at starting the members of c. On error it stops
// what it started and removes the member directories it created.
func (c *Cluster) start(n int, cfg Config) (err error) {
	// The members' ports stay reserved while cfg.PeerFront binds proxies,
	// which could otherwise be given one of them.
	ports, release, err := reservePorts(2 * n)
	defer release()
	if err != nil {
		return err
	}
	token, err := randomToken()
	if err != nil {
		return err
	}
	specs := make([]memberSpec, n)
	peers := make([]string, n)
	for i := range specs {
		name := "m" + strconv.Itoa(i)
		specs[i] = memberSpec{
			name:         name,
			dir:          filepath.Join(c.dir, name),
			clientURL:    url.URL{Scheme: cfg.clientScheme(), Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2*i]))},
			peerURL:      url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2*i+1]))},
			clusterToken: token,
		}
		if cfg.PeerFront != nil {
			front, err := cfg.PeerFront(i, specs[i].peerURL.Host)
			if err != nil {
				return fmt.Errorf("embedetcd: the peer front of member %s: %w", name, err)
			}
			specs[i].advertise = url.URL{Scheme: "http", Host: front}
		}
		peers[i] = name + "=" + specs[i].advertisePeer().String()
	}
	release()
	for i := range specs {
		specs[i].cluster = strings.Join(peers, ",")
		if err := checkFreshDir(specs[i].dir); err != nil {
			return err
		}
	}

	c.members = make([]*Member, 0, n)
	defer func() {
		if err != nil {
			for _, m := range c.members {
				m.stop()
			}
			c.members = nil
			for _, spec := range specs {
				err = errors.Join(err, os.RemoveAll(spec.dir))
			}
		}
	}()
	deadline := time.Now().Add(cfg.ReadyTimeout)
	for _, spec := range specs {
		m := &Member{
			Name:      spec.name,
			ClientURL: spec.clientURL.String(),
			PeerURL:   spec.advertisePeer().String(),
			Dir:       spec.dir,
			cfg:       cfg,
			spec:      spec,
		}
		// A member cannot become ready before a quorum has started, so
		// start them all before waiting on any.
		e, err := startMember(cfg.embedConfig(spec), deadline, false)
		if err != nil {
			return err
		}
		m.e = e
		m.id = uint64(e.Server.MemberID())
		c.members = append(c.members, m)
	}
	for _, m := range c.members {
		if err := waitReady(m.e, m.Name, deadline); err != nil {
			return err
		}
	}
	return nil
}

// addrInUse reports whether err says a listen address was taken.
func addrInUse(err error) bool {
	return errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use")
}

// checkFreshDir returns an error if dir exists and is not an empty directory.
func checkFreshDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("embedetcd: checking member directory %q: %w", dir, err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("embedetcd: member directory %q is not empty; a cluster starts fresh, so give an empty Config.Dir", dir)
	}
	return nil
}

// reservePorts returns k distinct TCP ports on 127.0.0.1, held until
// release is called (release may be called more than once). Another
// process may take one after that, before it is used; StartCluster retries
// when that happens.
func reservePorts(k int) (ports []int, release func(), err error) {
	listeners := make([]net.Listener, 0, k)
	release = func() {
		for _, l := range listeners {
			l.Close()
		}
		listeners = nil
	}
	for range k {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			release()
			return nil, release, fmt.Errorf("embedetcd: picking a free port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, release, nil
}

// randomToken returns a cluster token unique to one start, so members of
// clusters started earlier on reused ports never join this one.
func randomToken() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("embedetcd: generating a cluster token: %w", err)
	}
	return "embedetcd-" + hex.EncodeToString(b[:]), nil
}

// Members returns the members, in start order.
func (c *Cluster) Members() []*Member {
	return append([]*Member(nil), c.members...)
}

// Endpoints returns every member's client URL, for clientv3.Config.Endpoints.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.members))
	for i, m := range c.members {
		eps[i] = m.ClientURL
	}
	return eps
}

// Leader returns the index of a running member that is currently the raft
// leader, or -1 if there is none at the moment.
func (c *Cluster) Leader() int {
	for i, m := range c.members {
		if m.IsLeader() {
			return i
		}
	}
	return -1
}

// Dir returns the directory holding the members' data directories.
func (c *Cluster) Dir() string { return c.dir }

// Close stops the members one after another, waits for them, and removes the
// data directory if StartCluster created it. Stopped members stay stopped
// and cannot be restarted. Calling Close again does nothing and returns the
// first call's result.
func (c *Cluster) Close() error {
	c.closeOnce.Do(func() {
		// One after another: stopping members in parallel is slower, as the
		// leader's attempt to hand over leadership then times out.
		for _, m := range c.members {
			m.lifeMu.Lock()
			m.closed = true
			m.stop()
			m.lifeMu.Unlock()
		}
		if c.removeDir {
			if err := os.RemoveAll(c.dir); err != nil {
				c.closeErr = fmt.Errorf("embedetcd: removing data directory: %w", err)
			}
		}
	})
	return c.closeErr
}

// etcd returns the member's running etcd, or nil when it is stopped.
func (m *Member) etcd() *embed.Etcd {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.e
}

// stop closes the member's etcd, if running, and waits for it.
func (m *Member) stop() {
	m.mu.Lock()
	e := m.e
	m.e = nil
	m.mu.Unlock()
	if e != nil {
		e.Close()
	}
}

// Stop stops this member only and waits for it to finish, keeping its data
// directory so that Restart can bring it back. Stopping a stopped member does
// nothing.
func (m *Member) Stop() {
	m.lifeMu.Lock()
	defer m.lifeMu.Unlock()
	m.stop()
}

// Restart starts the stopped member again with the same name, URLs and data
// directory, and waits until it is ready to serve clients. A member only
// becomes ready once a quorum of the cluster is running, so Restart fails
// after Config.ReadyTimeout if too few other members are up. It returns an
// error if the member is running or the cluster was closed.
func (m *Member) Restart() error {
	m.lifeMu.Lock()
	defer m.lifeMu.Unlock()
	if m.closed {
		return fmt.Errorf("embedetcd: member %q: cluster is closed", m.Name)
	}
	if m.etcd() != nil {
		return fmt.Errorf("embedetcd: member %q is already running", m.Name)
	}
	e, err := startMember(m.cfg.embedConfig(m.spec), time.Now().Add(m.cfg.ReadyTimeout), true)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.e = e
	m.mu.Unlock()
	return nil
}

// Running reports whether the member has been started and not stopped since.
func (m *Member) Running() bool { return m.etcd() != nil }

// ID returns the member's etcd member ID.
func (m *Member) ID() uint64 { return m.id }

// Lead returns the member ID of the raft leader as this member sees it, or 0
// when the member knows no leader or is stopped.
func (m *Member) Lead() uint64 {
	e := m.etcd()
	if e == nil {
		return 0
	}
	select {
	case <-e.Server.StoppingNotify():
		return 0
	default:
	}
	return e.Server.Lead()
}

// IsLeader reports whether this member is running and is the raft leader.
func (m *Member) IsLeader() bool {
	return m.Lead() == m.id
}

// Etcd returns the member's embedded etcd, or nil while it is stopped.
func (m *Member) Etcd() *embed.Etcd { return m.etcd() }
