// Package embedetcd runs real etcd servers inside the current process, using
// go.etcd.io/etcd/server/v3/embed: a single member (Start) or a multi-member
// cluster on loopback (StartCluster). It optionally serves clients over TLS
// with client-certificate authentication (NewTLS) and offers helpers to turn
// on etcd's user/role authentication (EnableAuth, AddUser).
//
// Every listener binds 127.0.0.1. The package does not import "testing": it is
// used by tests (through internal/rig/etcdtest) and by command-line tools.
package embedetcd

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"sync"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// Default timing and start-up values used when the matching Config field is
// zero.
const (
	// DefaultTickMs is the raft heartbeat interval in milliseconds.
	DefaultTickMs = 50
	// DefaultElectionMs is the raft election timeout in milliseconds. Ten
	// heartbeats per election timeout keeps spurious leader changes rare on
	// a loaded 2-core machine while still electing a leader in well under a
	// second. It also sets etcd's minimum lease TTL: ceil(1.5 × ElectionMs).
	DefaultElectionMs = 500
	// DefaultReadyTimeout bounds how long Start, StartCluster and
	// Member.Restart wait for members to become ready.
	DefaultReadyTimeout = 30 * time.Second

	// maxElectionMs is etcd's upper bound on the election timeout.
	maxElectionMs = 50000
)

// Config describes the embedded etcd server(s) to start. The zero value is
// valid and gives a plain-HTTP member with fast raft timing, a temporary data
// directory and no logging.
type Config struct {
	// Dir is the data directory. When empty, a temporary directory is
	// created and Close removes it. When set, the directory is kept: starting
	// again with the same Dir restarts from the stored data. A cluster puts
	// each member in its own subdirectory named after the member.
	Dir string

	// TickMs is the raft heartbeat interval in milliseconds (0 =
	// DefaultTickMs, or ElectionMs/10 when ElectionMs is set and smaller
	// than ten default ticks).
	TickMs uint
	// ElectionMs is the raft election timeout in milliseconds (0 =
	// DefaultElectionMs, or 10 × TickMs when that is larger). It must be at
	// least 5 × TickMs and at most 50000.
	ElectionMs uint

	// TLS, when set, makes members serve clients over https and require a
	// client certificate signed by TLS's CA. Peer traffic stays plain http.
	TLS *TLS

	// AuthTokenTTL is the lifetime in seconds of the tokens of etcd's
	// "simple" token provider, used once auth is enabled (0 = etcd's
	// default, 300).
	AuthTokenTTL uint

	// BcryptCost is the cost of the bcrypt hash of users' passwords (0 =
	// etcd's default, 10). Each login checks one hash: a low cost (4, the
	// least) keeps logins cheap where many clients log in to a loaded
	// test cluster.
	BcryptCost uint

	// ReadyTimeout bounds the wait for members to become ready
	// (0 = DefaultReadyTimeout).
	ReadyTimeout time.Duration

	// Logger receives etcd's logs (nil = zap.NewNop()).
	Logger *zap.Logger

	// PeerFront, when set, is called once per member of a cluster before
	// any starts, with the member's index and the host:port it listens on
	// for peers; it returns the host:port the other members reach it on
	// instead (a proxy in front of it, which carries their traffic to
	// listen), advertised as the member's peer URL. Fault harnesses use it
	// to cut members off from each other. A start that retries on a port
	// taken meanwhile calls it again for the new ports.
	PeerFront func(member int, listen string) (front string, err error)
}

// normalized returns a copy of cfg with defaults filled in, or an error naming
// the first invalid value.
func (cfg Config) normalized() (Config, error) {
	if cfg.ElectionMs > maxElectionMs {
		return cfg, fmt.Errorf("embedetcd: ElectionMs=%d is above etcd's maximum of %d", cfg.ElectionMs, maxElectionMs)
	}
	if cfg.TickMs > maxElectionMs/5 {
		return cfg, fmt.Errorf("embedetcd: TickMs=%d is above %d (ElectionMs must be at least 5 × TickMs and at most %d)", cfg.TickMs, maxElectionMs/5, maxElectionMs)
	}
	switch {
	case cfg.TickMs == 0 && cfg.ElectionMs == 0:
		cfg.TickMs, cfg.ElectionMs = DefaultTickMs, DefaultElectionMs
	case cfg.TickMs == 0:
		cfg.TickMs = min(DefaultTickMs, max(1, cfg.ElectionMs/10))
	case cfg.ElectionMs == 0:
		cfg.ElectionMs = min(maxElectionMs, max(DefaultElectionMs, 10*cfg.TickMs))
	}
	if cfg.ElectionMs < 5*cfg.TickMs {
		return cfg, fmt.Errorf("embedetcd: ElectionMs=%d must be at least 5 × TickMs=%d", cfg.ElectionMs, cfg.TickMs)
	}
	if cfg.ReadyTimeout < 0 {
		return cfg, fmt.Errorf("embedetcd: ReadyTimeout=%v is negative", cfg.ReadyTimeout)
	}
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = DefaultReadyTimeout
	}
	if cfg.TLS != nil {
		if err := cfg.TLS.check(); err != nil {
			return cfg, err
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return cfg, nil
}

// clientScheme is the URL scheme members serve clients on.
func (cfg Config) clientScheme() string {
	if cfg.TLS != nil {
		return "https"
	}
	return "http"
}

// memberSpec is everything needed to start (or restart) one member.
type memberSpec struct {
	name         string
	dir          string
	clientURL    url.URL
	peerURL      url.URL
	advertise    url.URL // the peer URL others reach it on: peerURL, or Config.PeerFront's
	cluster      string  // etcd's initial-cluster value: name=peerURL,...
	clusterToken string
}

// advertisePeer is the peer URL the member advertises.
func (spec memberSpec) advertisePeer() *url.URL {
	if spec.advertise.Host != "" {
		return &spec.advertise
	}
	return &spec.peerURL
}

// embedConfig builds the etcd configuration of one member.
func (cfg Config) embedConfig(spec memberSpec) *embed.Config {
	ec := embed.NewConfig()
	ec.Name = spec.name
	ec.Dir = spec.dir
	ec.TickMs = cfg.TickMs
	ec.ElectionMs = cfg.ElectionMs
	ec.ListenClientUrls = []url.URL{spec.clientURL}
	ec.AdvertiseClientUrls = []url.URL{spec.clientURL}
	ec.ListenPeerUrls = []url.URL{spec.peerURL}
	ec.AdvertisePeerUrls = []url.URL{*spec.advertisePeer()}
	ec.InitialCluster = spec.cluster
	ec.InitialClusterToken = spec.clusterToken
	ec.ClusterState = embed.ClusterStateFlagNew
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(cfg.Logger)
	// embed.NewConfig leaves this at 0 (only etcd's flags default it), and
	// at 0 every unary request counts as slow: the member formats each
	// one whole for a warning, a third of its CPU under a stream of
	// transactions, even with a logger that drops it. The etcd binary's
	// default.
	ec.WarningUnaryRequestDuration = embed.DefaultWarningUnaryRequestDuration
	if cfg.BcryptCost > 0 {
		ec.BcryptCost = cfg.BcryptCost
	}
	if cfg.AuthTokenTTL > 0 {
		ec.AuthTokenTTL = cfg.AuthTokenTTL
	}
	if cfg.TLS != nil {
		ec.ClientTLSInfo.CertFile = cfg.TLS.ServerCertFile
		ec.ClientTLSInfo.KeyFile = cfg.TLS.ServerKeyFile
		ec.ClientTLSInfo.TrustedCAFile = cfg.TLS.CAFile
		ec.ClientTLSInfo.ClientCertAuth = true
	}
	return ec
}

// startMember starts one member's etcd and, when wait is true, waits until it
// is ready to serve or the deadline passes. On error nothing is left running.
func startMember(ec *embed.Config, deadline time.Time, wait bool) (*embed.Etcd, error) {
	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("embedetcd: starting member %q: %w", ec.Name, err)
	}
	if wait {
		if err := waitReady(e, ec.Name, deadline); err != nil {
			e.Close()
			return nil, err
		}
	}
	return e, nil
}

// waitReady waits until e is ready to serve clients, fails, or deadline
// passes.
func waitReady(e *embed.Etcd, name string, deadline time.Time) error {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-e.Server.ReadyNotify():
		return nil
	case err := <-e.Err():
		if err == nil {
			err = errors.New("a serving goroutine exited")
		}
		return fmt.Errorf("embedetcd: member %q failed before becoming ready: %w", name, err)
	case <-e.Server.StopNotify():
		return fmt.Errorf("embedetcd: member %q stopped before becoming ready", name)
	case <-timer.C:
		return fmt.Errorf("embedetcd: member %q not ready before the deadline %s", name, deadline.Format(time.RFC3339Nano))
	}
}

// dataDir returns the directory to store data in and whether it is a
// temporary directory this package created (and so must remove).
func dataDir(dir string) (string, bool, error) {
	if dir != "" {
		return dir, false, nil
	}
	tmp, err := os.MkdirTemp("", "embedetcd-")
	if err != nil {
		return "", false, fmt.Errorf("embedetcd: creating a temporary data directory: %w", err)
	}
	return tmp, true, nil
}

// Server is a single-member etcd cluster running in this process.
type Server struct {
	e         *embed.Etcd
	endpoints []string
	dir       string
	removeDir bool

	closeOnce sync.Once
	closeErr  error
}

// Start starts a single-member etcd cluster whose client and peer listeners
// bind free ports on 127.0.0.1, and waits until it is ready to serve clients
// (or cfg.ReadyTimeout passes). Stop it with Close.
//
// The ports are chosen by the kernel, so the member advertises port 0 in its
// cluster membership: give clients Endpoints, and do not let them replace
// their endpoints with the advertised ones (clientv3's AutoSyncInterval).
func Start(cfg Config) (*Server, error) {
	cfg, err := cfg.normalized()
	if err != nil {
		return nil, err
	}
	dir, removeDir, err := dataDir(cfg.Dir)
	if err != nil {
		return nil, err
	}
	const name = "embedetcd"
	peerURL := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	spec := memberSpec{
		name:         name,
		dir:          dir,
		clientURL:    url.URL{Scheme: cfg.clientScheme(), Host: "127.0.0.1:0"},
		peerURL:      peerURL,
		cluster:      name + "=" + peerURL.String(),
		clusterToken: name,
	}
	e, err := startMember(cfg.embedConfig(spec), time.Now().Add(cfg.ReadyTimeout), true)
	if err != nil {
		if removeDir {
			err = errors.Join(err, os.RemoveAll(dir))
		}
		return nil, err
	}
	s := &Server{e: e, dir: dir, removeDir: removeDir}
	for _, l := range e.Clients {
		s.endpoints = append(s.endpoints, cfg.clientScheme()+"://"+l.Addr().String())
	}
	return s, nil
}

// Endpoints returns the client URLs of the server, such as
// "http://127.0.0.1:40123", for clientv3.Config.Endpoints.
func (s *Server) Endpoints() []string {
	return append([]string(nil), s.endpoints...)
}

// Dir returns the server's data directory.
func (s *Server) Dir() string { return s.dir }

// Etcd returns the underlying embedded etcd.
func (s *Server) Etcd() *embed.Etcd { return s.e }

// Close stops the server, waits for it to finish, and removes its data
// directory if Start created it. Calling Close again does nothing and returns
// the first call's result.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.e.Close()
		if s.removeDir {
			if err := os.RemoveAll(s.dir); err != nil {
				s.closeErr = fmt.Errorf("embedetcd: removing data directory: %w", err)
			}
		}
	})
	return s.closeErr
}
